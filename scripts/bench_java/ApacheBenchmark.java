// The load of Apache RocketMQ's own benchmark tools (org.apache.rocketmq.example.benchmark.Producer
// and Consumer of rocketmq-example 4.9.x), for `scripts/bench --compare`: rocketmq-example is not
// published on Maven Central for 4.9.7/4.9.8, so this re-states what those two programs do with
// the 4.9.8 Java client, and measures a little more (latency percentiles, a warm-up cut).
//
// producer NAMESRV TOPIC THREADS SIZE SECONDS WARMUP_SECONDS [HEADERS]
//   as benchmark.Producer -w THREADS -s SIZE: ROCKETMQ header serialization (HEADERS=JSON: the
//   client's default instead), group
//   "benchmark_producer", instance name = start millis, compression off, one random alphanumeric
//   body of SIZE bytes, THREADS threads each sending synchronously in a loop (no keys, tags,
//   properties, delay); a failed send is counted and its thread sleeps 3 s, as there. Every 10 s
//   it prints benchmark.Producer's status line; at the end one JSON line with the counts, the
//   send TPS and RT (avg, p50, p99, p999, max) over the sends after WARMUP_SECONDS.
// consumer NAMESRV TOPIC THREADS EXPECTED TIMEOUT_SECONDS [HEADERS]
//   as benchmark.Consumer -w THREADS (JSON headers, the client's default; HEADERS=ROCKETMQ binary): push consumer, group "benchmark_consumer_<millis % 100>",
//   subscription "*", concurrently consumed, CONSUME_SUCCESS; it starts from the first offset (a
//   new group on a backlog) and ends when EXPECTED messages arrived or at the timeout, printing
//   one JSON line: messages, seconds from the first to the last arrival, consume TPS.
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.SerializeType;

public class ApacheBenchmark {
    /** Latency buckets of 10 us up to 2 s, then one overflow bucket (per thread, merged at the end). */
    static final int BUCKET_NS = 10_000;
    static final int BUCKETS = 200_000;

    public static void main(String[] a) throws Exception {
        String headers = a.length > 7 && a[0].equals("producer") ? a[7] : a.length > 6 && a[0].equals("consumer") ? a[6] : null;
        if (headers == null) headers = a[0].equals("producer") ? "ROCKETMQ" : "JSON";
        // read once, when RemotingCommand is first loaded: set before any client class
        System.setProperty(RemotingCommand.SERIALIZE_TYPE_PROPERTY, SerializeType.valueOf(headers).name());
        if (a[0].equals("producer")) {
            producer(a[1], a[2], Integer.parseInt(a[3]), Integer.parseInt(a[4]), Double.parseDouble(a[5]),
                Double.parseDouble(a[6]));
        } else {
            consumer(a[1], a[2], Integer.parseInt(a[3]), Long.parseLong(a[4]), Double.parseDouble(a[5]));
        }
        System.exit(0);
    }

    static void producer(String ns, String topic, int threads, int size, double seconds, double warmup)
            throws Exception {
        String alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        Random rnd = new Random();
        StringBuilder sb = new StringBuilder(size);
        for (int i = 0; i < size; i++) sb.append(alphabet.charAt(rnd.nextInt(alphabet.length())));
        final byte[] body = sb.toString().getBytes(StandardCharsets.UTF_8);

        DefaultMQProducer producer = new DefaultMQProducer("benchmark_producer");
        producer.setNamesrvAddr(ns);
        producer.setInstanceName(Long.toString(System.currentTimeMillis()));
        producer.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        producer.start();

        final LongAdder ok = new LongAdder(), sendFailed = new LongAdder(), responseFailed = new LongAdder();
        final LongAdder rtMillisTotal = new LongAdder();
        final AtomicLong maxRtMillis = new AtomicLong();
        final long t0 = System.nanoTime();
        final long measureFrom = t0 + (long) (warmup * 1e9);
        final long end = t0 + (long) ((warmup + seconds) * 1e9);
        final long[][] hist = new long[threads][BUCKETS + 1];
        final long[] measuredOk = new long[threads];
        final long[] measuredNs = new long[threads];
        final long[] measureEnd = new long[threads];
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int me = t;
            Thread th = new Thread(() -> {
                while (true) {
                    long begin = System.nanoTime();
                    if (begin >= end) break;
                    long beginMs = System.currentTimeMillis();
                    try {
                        producer.send(new Message(topic, body));
                        long now = System.nanoTime();
                        long rtMs = System.currentTimeMillis() - beginMs;
                        ok.increment();
                        rtMillisTotal.add(rtMs);
                        maxRtMillis.accumulateAndGet(rtMs, Math::max);
                        if (begin >= measureFrom && now <= end) {
                            long rtNs = now - begin;
                            hist[me][(int) Math.min(BUCKETS, rtNs / BUCKET_NS)]++;
                            measuredOk[me]++;
                            measuredNs[me] += rtNs;
                            measureEnd[me] = now;
                        }
                    } catch (MQBrokerException e) {
                        responseFailed.increment();
                        sleep(3000);
                    } catch (Exception e) {
                        sendFailed.increment();
                        sleep(3000);
                    }
                }
            }, "benchmark-sender-" + t);
            th.start();
            workers.add(th);
        }
        long lastOk = 0, lastPrint = t0;
        boolean announced = false;
        while (System.nanoTime() < end) {
            long wakeAt = announced ? end : Math.min(end, measureFrom);
            Thread.sleep(Math.min(10_000, Math.max(1, (wakeAt - System.nanoTime()) / 1_000_000)));
            long now = System.nanoTime(), cur = ok.sum();
            if (!announced && now >= measureFrom) {
                // the harness reads the broker's CPU here, so the warm-up (Apache's JIT) is left out
                System.out.println("{\"event\":\"measuring\"}");
                System.out.flush();
                announced = true;
            }
            if (now - lastPrint >= 9_000_000_000L) {
                System.out.printf(Locale.ROOT, "Send TPS: %d Max RT(ms): %d Average RT(ms): %7.3f Send Failed: %d "
                        + "Response Failed: %d%n", (long) ((cur - lastOk) / ((now - lastPrint) / 1e9)),
                    maxRtMillis.get(), cur == 0 ? 0.0 : rtMillisTotal.sum() / (double) cur, sendFailed.sum(),
                    responseFailed.sum());
                lastOk = cur;
                lastPrint = now;
            }
        }
        for (Thread th : workers) th.join(30_000);
        producer.shutdown();

        long[] merged = new long[BUCKETS + 1];
        long n = 0, totalNs = 0;
        for (int t = 0; t < threads; t++) {
            for (int b = 0; b <= BUCKETS; b++) merged[b] += hist[t][b];
            n += measuredOk[t];
            totalNs += measuredNs[t];
        }
        double window = Math.max(1e-9, (end - measureFrom) / 1e9);
        System.out.printf(Locale.ROOT, "{\"event\":\"producer\",\"sent\":%d,\"sendFailed\":%d,\"responseFailed\":%d,"
                + "\"measuredSent\":%d,\"measuredSeconds\":%.3f,\"tps\":%.1f,\"avgMs\":%.4f,\"p50Ms\":%.3f,"
                + "\"p99Ms\":%.3f,\"p999Ms\":%.3f,\"maxMs\":%d,\"apacheAvgRtMs\":%.3f}%n",
            ok.sum(), sendFailed.sum(), responseFailed.sum(), n, window, n / window,
            n == 0 ? 0.0 : totalNs / (double) n / 1e6, pct(merged, n, 50), pct(merged, n, 99), pct(merged, n, 99.9),
            maxRtMillis.get(), ok.sum() == 0 ? 0.0 : rtMillisTotal.sum() / (double) ok.sum());
    }

    static double pct(long[] hist, long n, double p) {
        if (n == 0) return Double.NaN;
        long rank = (long) Math.ceil(p / 100.0 * n);
        long seen = 0;
        for (int b = 0; b < hist.length; b++) {
            seen += hist[b];
            if (seen >= rank) return (b + 1) * (BUCKET_NS / 1e6);  // the bucket's upper edge
        }
        return Double.NaN;
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException ignored) {
            Thread.currentThread().interrupt();
        }
    }

    static void consumer(String ns, String topic, int threads, long expected, double timeout) throws Exception {
        final AtomicLong received = new AtomicLong();
        final AtomicLong first = new AtomicLong(), last = new AtomicLong();
        final CountDownLatch done = new CountDownLatch(1);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("benchmark_consumer_" + (System.currentTimeMillis() % 100));
        consumer.setNamesrvAddr(ns);
        consumer.setConsumeThreadMin(threads);
        consumer.setConsumeThreadMax(threads);
        consumer.setInstanceName(Long.toString(System.currentTimeMillis()));
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            first.compareAndSet(0, now);
            long n = received.addAndGet(msgs.size());
            last.accumulateAndGet(now, Math::max);
            if (n >= expected) done.countDown();
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long started = System.nanoTime();
        consumer.start();
        boolean all = done.await((long) (timeout * 1000), TimeUnit.MILLISECONDS);
        long n = received.get();
        double secs = Math.max(1e-9, (last.get() - first.get()) / 1e9);
        System.out.printf(Locale.ROOT, "{\"event\":\"consumer\",\"received\":%d,\"expected\":%d,\"complete\":%s,"
                + "\"seconds\":%.3f,\"startToFirstSeconds\":%.3f,\"tps\":%.1f}%n", n, expected, all, secs,
            first.get() == 0 ? -1.0 : (first.get() - started) / 1e9, n <= 1 ? 0.0 : (n - 1) / secs);
        consumer.shutdown();
    }
}
