// The gRPC load of `scripts/bench --grpc`: the RocketMQ 5.x Java client (rocketmq-client-java 5.0.8)
// against a gRPC endpoint (Apache RocketMQ's proxy or rmqd), the same program for both.
//
// prime ENDPOINTS TOPIC GROUP
//   one SimpleConsumer receive (1 s), so the group's POP offsets exist before the backlog is sent
//   (a new POP group starts at the queue's end).
// producer ENDPOINTS TOPIC THREADS SIZE SECONDS WARMUP_SECONDS
//   THREADS threads, each with its own Producer, sending SIZE-byte bodies synchronously in a loop
//   (a random alphanumeric body, no tag, no keys); one JSON line at the end: counts, send TPS and
//   RT (avg, p50, p99, p999, max) over the sends after WARMUP_SECONDS.
// consumer ENDPOINTS TOPIC GROUP THREADS EXPECTED TIMEOUT_SECONDS
//   THREADS threads sharing one SimpleConsumer, each receiving up to 32 messages (invisible 30 s)
//   and acknowledging each, until EXPECTED arrived or the timeout; one JSON line: messages,
//   seconds from the first to the last arrival, consume TPS.
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;

public class GrpcBenchmark {
    static final int BUCKET_NS = 10_000;
    static final int BUCKETS = 200_000;

    public static void main(String[] a) throws Exception {
        switch (a[0]) {
            case "prime":
                prime(a[1], a[2], a[3]);
                break;
            case "producer":
                producer(a[1], a[2], Integer.parseInt(a[3]), Integer.parseInt(a[4]), Double.parseDouble(a[5]),
                    Double.parseDouble(a[6]));
                break;
            default:
                consumer(a[1], a[2], a[3], Integer.parseInt(a[4]), Long.parseLong(a[5]), Double.parseDouble(a[6]));
        }
        System.exit(0);
    }

    static ClientConfiguration config(String endpoints) {
        return ClientConfiguration.newBuilder().setEndpoints(endpoints).enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(10)).build();
    }

    static SimpleConsumer simple(String endpoints, String topic, String group, Duration await) throws Exception {
        return ClientServiceProvider.loadService().newSimpleConsumerBuilder().setClientConfiguration(config(endpoints))
            .setConsumerGroup(group).setAwaitDuration(await)
            .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL)).build();
    }

    static void prime(String endpoints, String topic, String group) throws Exception {
        try (SimpleConsumer c = simple(endpoints, topic, group, Duration.ofSeconds(1))) {
            try {
                c.receive(1, Duration.ofSeconds(30));
            } catch (Exception ignored) {
                // nothing there yet: what priming expects
            }
        }
        System.out.println("{\"primed\": true}");
    }

    static void producer(String endpoints, String topic, int threads, int size, double seconds, double warmup)
            throws Exception {
        String alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        Random rnd = new Random();
        StringBuilder sb = new StringBuilder(size);
        for (int i = 0; i < size; i++) {
            sb.append(alphabet.charAt(rnd.nextInt(alphabet.length())));
        }
        final byte[] body = sb.toString().getBytes(StandardCharsets.UTF_8);
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        List<Producer> producers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            producers.add(provider.newProducerBuilder().setClientConfiguration(config(endpoints)).setTopics(topic).build());
        }
        final long start = System.nanoTime();
        final long warmEnd = start + (long) (warmup * 1e9);
        final long end = warmEnd + (long) (seconds * 1e9);
        final LongAdder sent = new LongAdder();
        final LongAdder failed = new LongAdder();
        final LongAdder measured = new LongAdder();
        final long[][] hist = new long[threads][BUCKETS + 1];
        final AtomicLong maxNs = new AtomicLong();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int id = t;
            final Producer producer = producers.get(t);
            Thread w = new Thread(() -> {
                Message m = provider.newMessageBuilder().setTopic(topic).setBody(body).build();
                while (true) {
                    long t0 = System.nanoTime();
                    if (t0 >= end) {
                        break;
                    }
                    try {
                        producer.send(m);
                        long dt = System.nanoTime() - t0;
                        sent.increment();
                        if (t0 >= warmEnd) {
                            measured.increment();
                            hist[id][(int) Math.min(dt / BUCKET_NS, BUCKETS)]++;
                            maxNs.accumulateAndGet(dt, Math::max);
                        }
                    } catch (Exception e) {
                        failed.increment();
                        try {
                            Thread.sleep(1000);
                        } catch (InterruptedException ie) {
                            return;
                        }
                    }
                }
            });
            workers.add(w);
            w.start();
        }
        for (Thread w : workers) {
            w.join();
        }
        for (Producer p : producers) {
            p.close();
        }
        long[] merged = new long[BUCKETS + 1];
        long total = 0;
        double sumMs = 0;
        for (long[] h : hist) {
            for (int i = 0; i <= BUCKETS; i++) {
                merged[i] += h[i];
                total += h[i];
                sumMs += h[i] * (i + 0.5) * BUCKET_NS / 1e6;
            }
        }
        System.out.println(String.format(Locale.ROOT,
            "{\"sent\": %d, \"sendFailed\": %d, \"responseFailed\": 0, \"measured\": %d, \"measuredSeconds\": %.3f, "
                + "\"tps\": %.1f, \"avgMs\": %.3f, \"p50Ms\": %.3f, \"p99Ms\": %.3f, \"p999Ms\": %.3f, \"maxMs\": %.3f}",
            sent.sum(), failed.sum(), measured.sum(), seconds, measured.sum() / seconds,
            total == 0 ? 0 : sumMs / total, pct(merged, total, 0.5), pct(merged, total, 0.99),
            pct(merged, total, 0.999), maxNs.get() / 1e6));
    }

    static double pct(long[] hist, long total, double p) {
        if (total == 0) {
            return 0;
        }
        long want = (long) Math.ceil(total * p);
        long seen = 0;
        for (int i = 0; i < hist.length; i++) {
            seen += hist[i];
            if (seen >= want) {
                return (i + 0.5) * BUCKET_NS / 1e6;
            }
        }
        return hist.length * BUCKET_NS / 1e6;
    }

    static void consumer(String endpoints, String topic, String group, int threads, long expected, double timeout)
            throws Exception {
        final SimpleConsumer consumer = simple(endpoints, topic, group, Duration.ofSeconds(5));
        final LongAdder received = new LongAdder();
        final LongAdder ackFailed = new LongAdder();
        final AtomicLong first = new AtomicLong();
        final AtomicLong last = new AtomicLong();
        final long deadline = System.nanoTime() + (long) (timeout * 1e9);
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread w = new Thread(() -> {
                while (received.sum() < expected && System.nanoTime() < deadline) {
                    List<MessageView> views;
                    try {
                        views = consumer.receive(32, Duration.ofSeconds(30));
                    } catch (Exception e) {
                        continue;
                    }
                    long now = System.nanoTime();
                    first.compareAndSet(0, now);
                    for (MessageView v : views) {
                        try {
                            consumer.ack(v);
                        } catch (Exception e) {
                            ackFailed.increment();
                        }
                        received.increment();
                    }
                    if (!views.isEmpty()) {
                        last.set(System.nanoTime());
                    }
                }
            });
            workers.add(w);
            w.start();
        }
        for (Thread w : workers) {
            w.join();
        }
        consumer.close();
        double secs = first.get() == 0 ? 0 : (last.get() - first.get()) / 1e9;
        System.out.println(String.format(Locale.ROOT,
            "{\"received\": %d, \"expected\": %d, \"ackFailed\": %d, \"seconds\": %.3f, \"tps\": %.1f, \"complete\": %s}",
            received.sum(), expected, ackFailed.sum(), secs, secs > 0 ? received.sum() / secs : 0,
            received.sum() >= expected ? "true" : "false"));
    }
}
