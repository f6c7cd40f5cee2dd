import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientException;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.ProducerBuilder;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * The gRPC compat driver for the official RocketMQ 5.x Java client (rocketmq-client-java 5.0.8).
 * Protocol (shared with the Python and Node 5.x drivers, see compat_tests/grpc5_harness.py): a
 * JSON case file in, JSON lines out ({"event": ...}), "stop" on stdin ends a consumer, a hard
 * deadline exits with code 3. Roles: produce (sync / async / transaction, message groups, delivery
 * timestamps, several producers at once), simple (SimpleConsumer receive / ack / change of
 * invisible duration), push (PushConsumer with failures).
 */
public final class GrpcDriver {
    private static final PrintStream OUT =
        new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
    private static final Gson GSON = new Gson();
    private static final Pattern CODE = Pattern.compile("response-code=(\\d+)");
    /** A "stop" line or stdin's end: ends a push consumer. */
    private static final CountDownLatch STOP = new CountDownLatch(1);
    /** Only a "stop" line: ends a producer waiting for check-backs, a simple consumer still receiving. */
    private static final CountDownLatch STOP_LINE = new CountDownLatch(1);
    private static JsonObject c;

    private GrpcDriver() {
    }

    static synchronized void emit(String event, Map<String, Object> fields) {
        Map<String, Object> m = new HashMap<>(fields);
        m.put("event", event);
        m.put("t", System.currentTimeMillis() / 1000.0);
        OUT.println(GSON.toJson(m));
    }

    /** Bodies above this are reported by length and SHA-256 (a multi-MiB JSON line helps nobody). */
    static final int BIG_BODY = 64 * 1024;

    static String sha256(byte[] data) {
        try {
            byte[] d = java.security.MessageDigest.getInstance("SHA-256").digest(data);
            StringBuilder sb = new StringBuilder();
            for (byte b : d) {
                sb.append(String.format("%02x", b));
            }
            return sb.toString();
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    static void emit(String event) {
        emit(event, Collections.emptyMap());
    }

    static Map<String, Object> error(Throwable t) {
        Throwable e = t;
        while (e.getCause() != null && !(e instanceof ClientException)) {
            e = e.getCause();
        }
        Map<String, Object> m = new HashMap<>();
        m.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
        Matcher matcher = CODE.matcher(String.valueOf(e.getMessage()));
        if (matcher.find()) {
            m.put("code", Integer.parseInt(matcher.group(1)));
        }
        return m;
    }

    static String str(String key, String dflt) {
        JsonElement e = c.get(key);
        return e == null || e.isJsonNull() ? dflt : e.getAsString();
    }

    static double num(String key, double dflt) {
        JsonElement e = c.get(key);
        return e == null || e.isJsonNull() ? dflt : e.getAsDouble();
    }

    static ClientConfiguration configuration() {
        ClientConfigurationBuilder b = ClientConfiguration.newBuilder()
            .setEndpoints(str("endpoints", "127.0.0.1:8081"))
            .enableSsl(c.has("tls") && c.get("tls").getAsBoolean())
            .setRequestTimeout(Duration.ofMillis((long) (num("request_timeout_s", 3) * 1000)));
        if (c.has("access_key")) {
            b.setCredentialProvider(new StaticSessionCredentialsProvider(str("access_key", ""), str("secret_key", "")));
        }
        return b.build();
    }

    static FilterExpression filter() {
        String type = str("expression_type", "TAG");
        return new FilterExpression(str("expression", "*"),
            "SQL92".equals(type) ? FilterExpressionType.SQL92 : FilterExpressionType.TAG);
    }

    static Map<String, Object> view(MessageView m) {
        Map<String, Object> v = new HashMap<>();
        ByteBuffer buf = m.getBody();
        byte[] body = new byte[buf.remaining()];
        buf.get(body);
        v.put("body_len", body.length);
        if (body.length <= BIG_BODY) {
            v.put("body_b64", Base64.getEncoder().encodeToString(body));
        } else {
            v.put("body_sha256", sha256(body));
        }
        v.put("msgId", m.getMessageId().toString());
        v.put("topic", m.getTopic());
        m.getTag().ifPresent(tag -> v.put("tag", tag));
        v.put("keys", new ArrayList<>(m.getKeys()));
        v.put("props", new HashMap<>(m.getProperties()));
        m.getMessageGroup().ifPresent(g -> v.put("messageGroup", g));
        m.getDeliveryTimestamp().ifPresent(d -> v.put("deliveryTimestamp", d));
        v.put("deliveryAttempt", m.getDeliveryAttempt());
        v.put("bornTimestamp", m.getBornTimestamp());
        v.put("bornHost", m.getBornHost());
        return v;
    }

    // -- produce --------------------------------------------------------------------------------
    static Message build(ClientServiceProvider p, String topic, JsonObject spec) {
        MessageBuilder b = p.newMessageBuilder().setTopic(topic)
            .setBody(Base64.getDecoder().decode(spec.get("body_b64").getAsString()));
        if (spec.has("tag")) {
            b.setTag(spec.get("tag").getAsString());
        }
        if (spec.has("keys")) {
            JsonArray keys = spec.getAsJsonArray("keys");
            String[] k = new String[keys.size()];
            for (int i = 0; i < k.length; i++) {
                k[i] = keys.get(i).getAsString();
            }
            b.setKeys(k);
        }
        if (spec.has("group")) {
            b.setMessageGroup(spec.get("group").getAsString());
        }
        if (spec.has("delay_ms")) {
            b.setDeliveryTimestamp(System.currentTimeMillis() + spec.get("delay_ms").getAsLong());
        }
        if (spec.has("props")) {
            for (Map.Entry<String, JsonElement> e : spec.getAsJsonObject("props").entrySet()) {
                b.addProperty(e.getKey(), e.getValue().getAsString());
            }
        }
        return b.build();
    }

    static void produce() throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        String topic = str("topic", "");
        String mode = str("mode", "sync");
        String checkAnswer = str("check", "commit");
        JsonArray specs = c.getAsJsonArray("messages");
        int threads = (int) num("threads", 1);
        Map<String, String> checkAnswers = new HashMap<>();  // a message's own answer to check-backs
        for (JsonElement e : specs) {
            if (e.getAsJsonObject().has("check")) {
                checkAnswers.put(e.getAsJsonObject().get("body_b64").getAsString(),
                    e.getAsJsonObject().get("check").getAsString());
            }
        }
        List<Producer> producers = new ArrayList<>();
        try {
            for (int t = 0; t < threads; t++) {
                ProducerBuilder b = provider.newProducerBuilder().setClientConfiguration(configuration()).setTopics(topic);
                if ("transaction".equals(mode)) {
                    b.setTransactionChecker(mv -> {
                        Map<String, Object> ev = view(mv);
                        String answer = checkAnswers.getOrDefault((String) ev.get("body_b64"), checkAnswer);
                        ev.put("answer", answer);
                        emit("check", ev);
                        return "commit".equals(answer) ? TransactionResolution.COMMIT
                            : "rollback".equals(answer) ? TransactionResolution.ROLLBACK : TransactionResolution.UNKNOWN;
                    });
                }
                producers.add(b.build());
            }
        } catch (Exception e) {
            emit("start_error", error(e));
            emit("done");
            return;
        }
        emit("started");
        List<Thread> workers = new ArrayList<>();
        List<CompletableFuture<Void>> pending = Collections.synchronizedList(new ArrayList<>());
        for (int t = 0; t < threads; t++) {
            final int thread = t;
            final Producer producer = producers.get(t);
            Thread w = new Thread(() -> {
                for (int i = 0; i < specs.size(); i++) {
                    JsonObject spec = specs.get(i).getAsJsonObject();
                    int owner = spec.has("thread") ? spec.get("thread").getAsInt() : i % threads;
                    if (owner != thread) {
                        continue;
                    }
                    final int index = i;
                    Message message = build(provider, topic, spec);
                    try {
                        if ("async".equals(mode)) {
                            pending.add(producer.sendAsync(message).handle((r, e) -> {
                                sent(index, thread, r, e);
                                return null;
                            }));
                        } else if ("transaction".equals(mode)) {
                            Transaction tx = producer.beginTransaction();
                            SendReceipt r = producer.send(message, tx);
                            sent(index, thread, r, null);
                            String what = spec.has("tx") ? spec.get("tx").getAsString() : "commit";
                            if ("commit".equals(what)) {
                                tx.commit();
                            } else if ("rollback".equals(what)) {
                                tx.rollback();
                            }
                        } else {
                            sent(index, thread, producer.send(message), null);
                        }
                    } catch (Throwable e) {
                        sent(index, thread, null, e);
                    }
                }
            });
            workers.add(w);
            w.start();
        }
        for (Thread w : workers) {
            w.join();
        }
        for (CompletableFuture<Void> f : new ArrayList<>(pending)) {
            f.join();
        }
        double wait = num("check_wait_s", 0);
        if (wait > 0) {
            STOP_LINE.await((long) (wait * 1000), TimeUnit.MILLISECONDS);
        }
        for (Producer p : producers) {
            p.close();
        }
        emit("done");
    }

    static void sent(int index, int thread, SendReceipt r, Throwable e) {
        if (e != null) {
            Map<String, Object> ev = error(e);
            ev.put("index", index);
            emit("send_error", ev);
            return;
        }
        Map<String, Object> ev = new HashMap<>();
        ev.put("index", index);
        ev.put("thread", thread);
        ev.put("msgId", r.getMessageId().toString());
        emit("sent", ev);
    }

    // -- consume --------------------------------------------------------------------------------
    static void simple() throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        SimpleConsumer consumer;
        try {
            consumer = provider.newSimpleConsumerBuilder().setClientConfiguration(configuration())
                .setConsumerGroup(str("group", "")).setAwaitDuration(Duration.ofMillis((long) (num("await_s", 5) * 1000)))
                .setSubscriptionExpressions(Collections.singletonMap(str("topic", ""), filter())).build();
        } catch (Exception e) {
            emit("start_error", error(e));
            emit("done");
            return;
        }
        emit("started");
        String ack = str("ack", "all");
        int expect = (int) num("expect", Integer.MAX_VALUE);
        Duration invisible = Duration.ofMillis((long) (num("invisible_s", 15) * 1000));
        int got = 0;
        long started = System.currentTimeMillis();
        long minMs = (long) (num("min_s", 0) * 1000);
        long runMs = (long) (num("run_s", num("deadline_s", 60) - 5) * 1000);
        while ((got < expect || System.currentTimeMillis() - started < minMs) && STOP_LINE.getCount() > 0
            && System.currentTimeMillis() - started < runMs) {
            List<MessageView> views;
            if (got == 0) {
                emit("polling");
            }
            try {
                views = consumer.receive((int) num("max_count", 16), invisible);
            } catch (ClientException e) {
                Map<String, Object> ev = error(e);
                emit("receive_error", ev);
                if (!ev.containsKey("code") || ((Integer) ev.get("code")) != 40401) {
                    Thread.sleep(200);
                }
                continue;
            }
            for (MessageView m : views) {
                got++;
                emit("message", view(m));
                Map<String, Object> id = new HashMap<>();
                id.put("msgId", m.getMessageId().toString());
                try {
                    if (ack.startsWith("change:") && m.getDeliveryAttempt() == 1) {
                        Duration d = Duration.ofMillis((long) (Double.parseDouble(ack.substring(7)) * 1000));
                        consumer.changeInvisibleDuration(m, d);
                        emit("changed", id);
                    } else if ("half".equals(ack) ? got % 2 == 1 : "all".equals(ack) || ack.startsWith("change:")
                        || (ack.startsWith("after:") && m.getDeliveryAttempt() >= Integer.parseInt(ack.substring(6)))) {
                        consumer.ack(m);
                        emit("ack", id);
                    }
                } catch (ClientException e) {
                    Map<String, Object> ev = error(e);
                    ev.putAll(id);
                    emit("ack_error", ev);
                }
            }
        }
        consumer.close();
        emit("done");
    }

    static void push() throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        int failTimes = (int) num("fail_times", 0);
        PushConsumer consumer;
        try {
            consumer = provider.newPushConsumerBuilder().setClientConfiguration(configuration())
                .setConsumerGroup(str("group", ""))
                .setSubscriptionExpressions(Collections.singletonMap(str("topic", ""), filter()))
                .setMessageListener(m -> {
                    Map<String, Object> ev = view(m);
                    boolean fail = m.getDeliveryAttempt() <= failTimes;
                    ev.put("result", fail ? "FAILURE" : "SUCCESS");
                    emit("message", ev);
                    return fail ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
                }).build();
        } catch (Exception e) {
            emit("start_error", error(e));
            emit("done");
            return;
        }
        emit("started");
        STOP.await();
        consumer.close();
        emit("done");
    }

    public static void main(String[] args) throws Exception {
        c = GSON.fromJson(new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8), JsonObject.class);
        double deadline = num("deadline_s", 60);
        Thread killer = new Thread(() -> {
            try {
                Thread.sleep((long) (deadline * 1000));
            } catch (InterruptedException ignored) {
                return;
            }
            Map<String, Object> ev = new HashMap<>();
            ev.put("after_s", deadline);
            emit("timeout", ev);
            OUT.flush();
            Runtime.getRuntime().halt(3);
        });
        killer.setDaemon(true);
        killer.start();
        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    if ("stop".equals(line.trim())) {
                        STOP_LINE.countDown();
                        break;
                    }
                }
            } catch (Exception ignored) {
                // stdin closed
            }
            STOP.countDown();
        });
        stdin.setDaemon(true);
        stdin.start();
        try {
            switch (str("role", "")) {
                case "produce":
                    produce();
                    break;
                case "simple":
                    simple();
                    break;
                case "push":
                    push();
                    break;
                default:
                    throw new IllegalArgumentException("unknown role " + str("role", ""));
            }
        } catch (Throwable t) {
            emit("driver_error", error(t));
        }
        OUT.flush();
        Runtime.getRuntime().halt(0);
    }
}
