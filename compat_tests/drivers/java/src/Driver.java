import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.store.OffsetStore;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.RequestCallback;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * The compat-test driver for the official RocketMQ Java client: one source compiled against
 * rocketmq-client 4.9.8 and against the 5.x Remoting client (setup.sh), so both flavours run the
 * same cases.  It speaks the JSON-case protocol of drivers/cpp_client.py (a case file in, JSON
 * lines out, "stop" on stdin ends a push consumer, a hard deadline exits with code 3) with the
 * additions the Go driver documents (transactions, credentials, SQL92, consume_from,
 * max_reconsume_times), a "query" role (queryMessage by key, viewMessage by offsetMsgId and by
 * unique id) that only the Java client's API has, and request-reply: a "request" role
 * (DefaultMQProducer.request) and push's "reply" (MessageUtil.createReplyMessage + send).
 */
public final class Driver {
    private static final PrintStream OUT = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
    private static final Gson GSON = new Gson();
    // Properties the client or broker set on their own (MessageConst.STRING_HASH_SET's user-visible part).
    private static final Set<String> SYSTEM = new HashSet<>(List.of(
        "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP",
        "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG",
        "MQ2_FLAG", "RECONSUME_TIME", "MSG_REGION", "TRACE_ON", "UNIQ_KEY", "MAX_RECONSUME_TIMES",
        "CONSUME_START_TIME", "CLUSTER", "TRAN_PREPARED_QUEUE_OFFSET", "TRANSACTION_CHECK_TIMES",
        "CHECK_IMMUNITY_TIME_IN_SECONDS", "INSTANCE_ID", "SHARDING_KEY"));

    private static JsonObject caseObj;
    /** A "stop" line or stdin's end: ends a push consumer. */
    private static final CountDownLatch STOP = new CountDownLatch(1);
    /** Only a "stop" line: ends a transactional producer still waiting for check-backs. */
    private static final CountDownLatch STOP_LINE = new CountDownLatch(1);

    private Driver() {
    }

    // ---------------------------------------------------------------------------------------
    // output

    static synchronized void emit(String event, JsonObject fields) {
        JsonObject o = fields == null ? new JsonObject() : fields;
        o.addProperty("event", event);
        o.addProperty("t", System.currentTimeMillis() / 1000.0);
        OUT.println(GSON.toJson(o));
        OUT.flush();
    }

    static JsonObject obj(Object... kv) {
        JsonObject o = new JsonObject();
        for (int i = 0; i + 1 < kv.length; i += 2) {
            Object v = kv[i + 1];
            String k = (String) kv[i];
            if (v == null) {
                o.add(k, com.google.gson.JsonNull.INSTANCE);
            } else if (v instanceof Number) {
                o.addProperty(k, (Number) v);
            } else if (v instanceof Boolean) {
                o.addProperty(k, (Boolean) v);
            } else if (v instanceof JsonElement) {
                o.add(k, (JsonElement) v);
            } else {
                o.addProperty(k, v.toString());
            }
        }
        return o;
    }

    static String err(Throwable e) {
        return e.getClass().getSimpleName() + ": " + e.getMessage();
    }

    // ---------------------------------------------------------------------------------------
    // case fields

    static String str(String k, String dflt) {
        JsonElement e = caseObj.get(k);
        return e == null || e.isJsonNull() ? dflt : e.getAsString();
    }

    static double num(String k, double dflt) {
        JsonElement e = caseObj.get(k);
        return e == null || e.isJsonNull() ? dflt : e.getAsDouble();
    }

    static boolean bool(String k) {
        JsonElement e = caseObj.get(k);
        return e != null && !e.isJsonNull() && e.getAsBoolean();
    }

    static RPCHook hook() {
        String ak = str("accessKey", null);
        return ak == null ? null : new AclClientRPCHook(new SessionCredentials(ak, str("secretKey", "")));
    }

    static String sstr(JsonObject spec, String k) {
        JsonElement e = spec.get(k);
        return e == null || e.isJsonNull() ? null : e.getAsString();
    }

    static Message build(String topic, JsonObject spec) {
        String b64 = sstr(spec, "body_b64");
        Message m = new Message(topic, b64 == null ? new byte[0] : Base64.getDecoder().decode(b64));
        if (sstr(spec, "tags") != null && !sstr(spec, "tags").isEmpty()) {
            m.setTags(sstr(spec, "tags"));
        }
        if (sstr(spec, "keys") != null && !sstr(spec, "keys").isEmpty()) {
            m.setKeys(sstr(spec, "keys"));
        }
        if (spec.has("props")) {
            for (Map.Entry<String, JsonElement> p : spec.getAsJsonObject("props").entrySet()) {
                m.putUserProperty(p.getKey(), p.getValue().getAsString());
            }
        }
        if (spec.has("delay_level")) {
            m.setDelayTimeLevel(spec.get("delay_level").getAsInt());
        }
        if (spec.has("flag")) {
            m.setFlag(spec.get("flag").getAsInt());
        }
        return m;
    }

    static String hostOf(SocketAddress a) {
        if (a instanceof InetSocketAddress) {
            InetSocketAddress i = (InetSocketAddress) a;
            return i.getAddress().getHostAddress() + ":" + i.getPort();
        }
        return String.valueOf(a);
    }

    /** storeHost (ip, port) + commitLogOffset as MessageDecoder.createMessageId writes it. */
    static String offsetMsgId(MessageExt m) {
        if (!(m.getStoreHost() instanceof InetSocketAddress)) {
            return null;
        }
        InetSocketAddress a = (InetSocketAddress) m.getStoreHost();
        byte[] ip = a.getAddress().getAddress();
        ByteBuffer b = ByteBuffer.allocate(ip.length + 12);
        b.put(ip).putInt(a.getPort()).putLong(m.getCommitLogOffset());
        StringBuilder sb = new StringBuilder();
        for (byte x : b.array()) {
            sb.append(String.format("%02X", x));
        }
        return sb.toString();
    }

    static JsonObject describe(MessageExt m) {
        JsonObject props = new JsonObject();
        JsonObject user = new JsonObject();
        Map<String, String> p = m.getProperties() == null ? new HashMap<>() : m.getProperties();
        for (Map.Entry<String, String> e : p.entrySet()) {
            props.addProperty(e.getKey(), e.getValue());
            if (!SYSTEM.contains(e.getKey())) {
                user.addProperty(e.getKey(), e.getValue());
            }
        }
        return obj("topic", m.getTopic(), "tags", m.getTags() == null ? "" : m.getTags(),
            "keys", m.getKeys() == null ? "" : m.getKeys(),
            "body_b64", Base64.getEncoder().encodeToString(m.getBody() == null ? new byte[0] : m.getBody()),
            "msgId", m.getMsgId(), "offsetMsgId", offsetMsgId(m), "uniqKey", p.get("UNIQ_KEY"),
            "queueId", m.getQueueId(), "queueOffset", m.getQueueOffset(), "commitLogOffset", m.getCommitLogOffset(),
            "reconsumeTimes", m.getReconsumeTimes(), "storeSize", m.getStoreSize(),
            "bornTimestamp", m.getBornTimestamp(), "storeTimestamp", m.getStoreTimestamp(),
            "bornHost", hostOf(m.getBornHost()), "storeHost", hostOf(m.getStoreHost()),
            "flag", m.getFlag(), "sysFlag", m.getSysFlag(), "properties", props, "userProperties", user);
    }

    static JsonObject sent(int index, SendResult r) {
        return obj("index", index, "status", r.getSendStatus().name(), "msgId", r.getMsgId(),
            "offsetMsgId", r.getOffsetMsgId(), "queueId", r.getMessageQueue().getQueueId(),
            "brokerName", r.getMessageQueue().getBrokerName(), "queueOffset", r.getQueueOffset());
    }

    static List<JsonObject> specs() {
        List<JsonObject> out = new ArrayList<>();
        JsonArray a = caseObj.has("messages") ? caseObj.getAsJsonArray("messages") : new JsonArray();
        for (JsonElement e : a) {
            out.add(e.getAsJsonObject());
        }
        return out;
    }

    static void configure(org.apache.rocketmq.client.ClientConfig c) {
        c.setNamesrvAddr(str("namesrv", null));
        if (str("instance", null) != null) {
            c.setInstanceName(str("instance", null));
        }
    }

    // ---------------------------------------------------------------------------------------
    // produce

    static void produce() throws Exception {
        String mode = str("mode", "sync");
        if ("transaction".equals(mode)) {
            transaction();
            return;
        }
        DefaultMQProducer p = new DefaultMQProducer(str("group", "compat_pg"), hook());
        configure(p);
        p.setSendMsgTimeout((int) num("send_timeout_ms", 3000));
        if (caseObj.has("retries")) {
            p.setRetryTimesWhenSendFailed((int) num("retries", 2));
        }
        p.start();
        emit("started", null);
        String topic = str("topic", null);
        List<JsonObject> specs = specs();
        if ("batch".equals(mode)) {
            List<Message> msgs = new ArrayList<>();
            for (JsonObject s : specs) {
                msgs.add(build(topic, s));
            }
            try {
                SendResult r = p.send(msgs);
                JsonObject o = sent(0, r);
                o.addProperty("count", msgs.size());
                o.addProperty("msgIds", r.getMsgId());
                emit("sent", o);
            } catch (Exception e) {
                emit("send_error", obj("index", 0, "error", err(e)));
            }
        } else {
            List<CountDownLatch> pending = new ArrayList<>();
            for (int i = 0; i < specs.size(); i++) {
                JsonObject spec = specs.get(i);
                Message m = build(topic, spec);
                final int idx = i;
                try {
                    switch (mode) {
                        case "sync": {
                            JsonObject o = sent(i, p.send(m));
                            o.addProperty("uniqKey", m.getProperty("UNIQ_KEY"));
                            emit("sent", o);
                            break;
                        }
                        case "async": {
                            CountDownLatch done = new CountDownLatch(1);
                            pending.add(done);
                            p.send(m, new SendCallback() {
                                @Override
                                public void onSuccess(SendResult r) {
                                    emit("sent", sent(idx, r));
                                    done.countDown();
                                }

                                @Override
                                public void onException(Throwable e) {
                                    emit("send_error", obj("index", idx, "error", err(e)));
                                    done.countDown();
                                }
                            });
                            break;
                        }
                        case "orderly": {
                            int shard = spec.has("shard") ? spec.get("shard").getAsInt() : 0;
                            // queue = shard % number of queues, as Java's SelectMessageQueueByHash for a non-negative arg
                            SendResult r = p.send(m, (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size()), shard);
                            JsonObject o = sent(i, r);
                            o.addProperty("shard", shard);
                            emit("sent", o);
                            break;
                        }
                        case "oneway":
                            p.sendOneway(m);
                            emit("sent", obj("index", i, "status", "ONEWAY", "msgId", m.getProperty("UNIQ_KEY")));
                            break;
                        default:
                            throw new IllegalArgumentException("unknown produce mode " + mode);
                    }
                } catch (Exception e) {
                    emit("send_error", obj("index", i, "error", err(e)));
                }
            }
            for (CountDownLatch d : pending) {
                d.await((long) Math.max(1000, num("send_timeout_ms", 3000) * 3), TimeUnit.MILLISECONDS);
            }
            if ("oneway".equals(mode)) {
                Thread.sleep((long) (num("oneway_linger_s", 1.0) * 1000));
            }
        }
        p.shutdown();
        emit("done", null);
    }

    static LocalTransactionState txState(String s) {
        if (s == null || s.equals("commit")) {
            return LocalTransactionState.COMMIT_MESSAGE;
        }
        if (s.equals("rollback")) {
            return LocalTransactionState.ROLLBACK_MESSAGE;
        }
        return LocalTransactionState.UNKNOW;
    }

    static void transaction() throws Exception {
        String topic = str("topic", null);
        List<JsonObject> specs = specs();
        int unknownTimes = (int) num("check_unknown_times", 0);
        Map<String, Integer> indexOf = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> checks = new ConcurrentHashMap<>();
        Set<String> unsettled = ConcurrentHashMap.newKeySet();
        TransactionMQProducer p = new TransactionMQProducer(str("group", "compat_tpg"), hook());
        configure(p);
        p.setSendMsgTimeout((int) num("send_timeout_ms", 3000));
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                int i = (Integer) arg;
                String uniq = msg.getProperty("UNIQ_KEY");
                indexOf.put(uniq, i);
                LocalTransactionState st = txState(sstr(specs.get(i), "tx"));
                if (st == LocalTransactionState.UNKNOW) {
                    unsettled.add(uniq);
                }
                emit("local_tx", obj("index", i, "uniqKey", uniq, "state", st.name()));
                return st;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                String uniq = msg.getProperty("UNIQ_KEY");
                int n = checks.computeIfAbsent(uniq, k -> new AtomicInteger()).incrementAndGet();
                Integer i = indexOf.get(uniq);
                // check_unknown_times per message (as the Go driver has it), else the case's
                int unknown = i != null && specs.get(i).has("check_unknown_times")
                    ? specs.get(i).get("check_unknown_times").getAsInt() : unknownTimes;
                LocalTransactionState st = n <= unknown || i == null
                    ? LocalTransactionState.UNKNOW : txState(sstr(specs.get(i), "check"));
                JsonObject o = describe(msg);
                o.addProperty("index", i);
                o.addProperty("answer", st.name());
                o.addProperty("checkNumber", n);
                emit("check", o);
                if (st != LocalTransactionState.UNKNOW) {
                    unsettled.remove(uniq);
                }
                return st;
            }
        });
        p.start();
        emit("started", null);
        for (int i = 0; i < specs.size(); i++) {
            try {
                TransactionSendResult r = p.sendMessageInTransaction(build(topic, specs.get(i)), i);
                JsonObject o = sent(i, r);
                o.addProperty("localState", r.getLocalTransactionState().name());
                emit("sent", o);
            } catch (Exception e) {
                emit("send_error", obj("index", i, "error", err(e)));
            }
        }
        long until = System.currentTimeMillis() + (long) (num("check_wait_s", 60) * 1000);
        while (!unsettled.isEmpty() && System.currentTimeMillis() < until && STOP_LINE.getCount() > 0) {
            STOP_LINE.await(200, TimeUnit.MILLISECONDS);
        }
        if (!unsettled.isEmpty()) {
            emit("check_timeout", obj("unsettled", unsettled.size()));
        }
        Thread.sleep((long) (num("linger_s", 0.5) * 1000));
        p.shutdown();
        emit("done", null);
    }

    // ---------------------------------------------------------------------------------------
    // consumers

    static void setModel(DefaultMQPushConsumer c, String name) throws Exception {
        // MessageModel moved package between 4.9 (common.protocol.heartbeat) and 5.x (remoting.protocol.heartbeat)
        for (Method m : c.getClass().getMethods()) {
            if (m.getName().equals("setMessageModel")) {
                @SuppressWarnings({"unchecked", "rawtypes"})
                Object v = Enum.valueOf((Class<Enum>) m.getParameterTypes()[0], name);
                m.invoke(c, v);
                return;
            }
        }
        throw new IllegalStateException("no setMessageModel");
    }

    static void push() throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(str("group", null), hook(), new AllocateMessageQueueAveragely());
        configure(c);
        if ("broadcasting".equals(str("model", "clustering"))) {
            setModel(c, "BROADCASTING");
        }
        if (str("consume_from", null) != null) {
            c.setConsumeFromWhere(ConsumeFromWhere.valueOf(str("consume_from", null)));
        }
        if (caseObj.has("max_reconsume_times")) {
            c.setMaxReconsumeTimes((int) num("max_reconsume_times", -1));
        }
        if (caseObj.has("client_rebalance")) {
            // 5.x: false lets the broker assign the queues (QUERY_ASSIGNMENT), which is what makes a
            // group switched to POP (SET_MESSAGE_REQUEST_MODE) pop instead of pull
            c.getClass().getMethod("setClientRebalance", boolean.class).invoke(c, bool("client_rebalance"));
        }
        if (caseObj.has("thread_count")) {
            int n = (int) num("thread_count", 20);
            c.setConsumeThreadMin(n);
            c.setConsumeThreadMax(n);
        }
        String topic = str("topic", null);
        String expr = str("expression", "*");
        if ("SQL92".equalsIgnoreCase(str("expression_type", "TAG"))) {
            c.subscribe(topic, MessageSelector.bySql(expr));
        } else {
            c.subscribe(topic, expr);
        }
        byte[] failPrefix = str("fail_prefix_b64", null) == null ? null : Base64.getDecoder().decode(str("fail_prefix_b64", null));
        int failTimes = (int) num("fail_times", 1);
        Map<String, Integer> failures = new ConcurrentHashMap<>();
        AtomicInteger received = new AtomicInteger();
        int stopAfter = (int) num("stop_after", 0);
        long lingerMs = (long) (num("linger_s", 0) * 1000);
        // "reply": answer every request message (one with REPLY_TO_CLIENT) as a RocketMQReplyListener
        // does: createReplyMessage(request, "reply:" + body) sent to <CLUSTER>_REPLY_TOPIC
        DefaultMQProducer replier = null;
        if (bool("reply")) {
            replier = new DefaultMQProducer(str("reply_group", str("group", null) + "_replier"), hook());
            configure(replier);
            replier.start();
        }
        final DefaultMQProducer replyProducer = replier;
        java.util.function.Function<MessageExt, Boolean> handle = m -> {
            boolean ok = true;
            byte[] body = m.getBody() == null ? new byte[0] : m.getBody();
            if (failPrefix != null && body.length >= failPrefix.length
                && java.util.Arrays.equals(java.util.Arrays.copyOf(body, failPrefix.length), failPrefix)) {
                String k = Base64.getEncoder().encodeToString(body);
                synchronized (failures) {
                    int n = failures.getOrDefault(k, 0);
                    if (n < failTimes) {
                        failures.put(k, n + 1);
                        ok = false;
                    }
                }
            }
            JsonObject o = describe(m);
            o.addProperty("acked", ok);
            emit("message", o);
            if (replyProducer != null && m.getProperty("REPLY_TO_CLIENT") != null) {
                reply(replyProducer, m, body);
            }
            if (stopAfter > 0 && received.incrementAndGet() >= stopAfter) {
                new Thread(() -> {
                    try {
                        Thread.sleep(lingerMs);
                    } catch (InterruptedException ignored) {
                        // stop anyway
                    }
                    STOP.countDown();
                }).start();
            } else if (stopAfter <= 0) {
                received.incrementAndGet();
            }
            return ok;
        };
        if (bool("orderly")) {
            c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    if (!handle.apply(m)) {
                        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                    }
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                boolean ok = true;
                for (MessageExt m : msgs) {
                    ok &= handle.apply(m);
                }
                return ok ? ConsumeConcurrentlyStatus.CONSUME_SUCCESS : ConsumeConcurrentlyStatus.RECONSUME_LATER;
            });
        }
        c.start();
        emit("started", null);
        STOP.await();
        emit("stopping", obj("received", received.get()));
        c.shutdown();
        if (replier != null) {
            replier.shutdown();
        }
        emit("done", obj("received", received.get()));
    }

    static void reply(DefaultMQProducer replier, MessageExt request, byte[] body) {
        String correlationId = request.getProperty("CORRELATION_ID");
        try {
            byte[] prefix = "reply:".getBytes(StandardCharsets.UTF_8);
            byte[] answer = java.util.Arrays.copyOf(prefix, prefix.length + body.length);
            System.arraycopy(body, 0, answer, prefix.length, body.length);
            Message reply = MessageUtil.createReplyMessage(request, answer);
            SendResult r = replier.send(reply, (long) num("send_timeout_ms", 3000));
            JsonObject o = sent(0, r);
            o.addProperty("topic", reply.getTopic());
            o.addProperty("correlationId", correlationId);
            emit("replied", o);
        } catch (Exception e) {
            emit("reply_error", obj("correlationId", correlationId, "error", err(e)));
        }
    }

    /** DefaultMQProducer.request per message: request(msg, timeout), or with "async": true
     * request(msg, RequestCallback, timeout); the reply pushed back by the broker. */
    static void request() throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(str("group", "compat_rqg"), hook());
        configure(p);
        p.setSendMsgTimeout((int) num("send_timeout_ms", 3000));
        p.start();
        emit("started", null);
        String topic = str("topic", null);
        long timeout = (long) num("request_timeout_ms", 5000);
        List<JsonObject> specs = specs();
        for (int i = 0; i < specs.size(); i++) {
            Message m = build(topic, specs.get(i));
            boolean async = specs.get(i).has("async") && specs.get(i).get("async").getAsBoolean();
            long start = System.currentTimeMillis();
            Message[] got = new Message[1];
            Throwable[] failed = new Throwable[1];
            AtomicInteger sentCallbacks = new AtomicInteger();
            try {
                if (async) {
                    CountDownLatch done = new CountDownLatch(1);
                    p.request(m, new RequestCallback() {
                        @Override
                        public void onSuccess(Message reply) {
                            // 4.9.x calls onSuccess(null) once the request is sent (executeRequestCallback
                            // in the send callback), then onSuccess(reply) when the reply arrives
                            if (reply == null) {
                                sentCallbacks.incrementAndGet();
                                return;
                            }
                            got[0] = reply;
                            done.countDown();
                        }

                        @Override
                        public void onException(Throwable e) {
                            failed[0] = e;
                            done.countDown();
                        }
                    }, timeout);
                    if (!done.await(timeout + 5000, TimeUnit.MILLISECONDS)) {
                        failed[0] = new IllegalStateException("no callback within " + (timeout + 5000) + " ms");
                    }
                } else {
                    got[0] = p.request(m, timeout);
                }
            } catch (Exception e) {
                failed[0] = e;
            }
            long elapsed = System.currentTimeMillis() - start;
            if (failed[0] != null || got[0] == null) {
                emit("request_error", obj("index", i, "async", async, "elapsedMs", elapsed,
                    "error", failed[0] == null ? "null reply" : err(failed[0])));
                continue;
            }
            Message r = got[0];
            JsonObject o = r instanceof MessageExt ? describe((MessageExt) r)
                : obj("topic", r.getTopic(), "body_b64", Base64.getEncoder().encodeToString(r.getBody()));
            o.addProperty("index", i);
            o.addProperty("async", async);
            o.addProperty("nullCallbacks", sentCallbacks.get());
            o.addProperty("requestCorrelationId", m.getProperty("CORRELATION_ID"));
            o.addProperty("requestReplyTo", m.getProperty("REPLY_TO_CLIENT"));
            o.addProperty("elapsedMs", elapsed);
            emit("reply", o);
        }
        p.shutdown();
        emit("done", null);
    }

    static void pull() throws Exception {
        DefaultMQPullConsumer c = new DefaultMQPullConsumer(str("group", null), hook());
        configure(c);
        c.start();
        emit("started", null);
        String topic = str("topic", null);
        String expr = str("expression", "*");
        Integer limit = caseObj.has("limit") && !caseObj.get("limit").isJsonNull() ? caseObj.get("limit").getAsInt() : null;
        int maxNum = (int) num("max_num", 32);
        Set<MessageQueue> found = null;
        long deadline = System.currentTimeMillis() + (long) (num("queue_wait_s", 10) * 1000);
        while (true) {
            try {
                found = c.fetchSubscribeMessageQueues(topic);
            } catch (Exception e) {
                if (System.currentTimeMillis() > deadline) {
                    emit("pull_error", obj("error", err(e)));
                    c.shutdown();
                    emit("done", obj("received", 0));
                    return;
                }
            }
            if (found != null && !found.isEmpty()) {
                break;
            }
            Thread.sleep(300);
        }
        List<MessageQueue> queues = new ArrayList<>(found);
        queues.sort((a, b) -> a.getBrokerName().equals(b.getBrokerName())
            ? Integer.compare(a.getQueueId(), b.getQueueId()) : a.getBrokerName().compareTo(b.getBrokerName()));
        JsonArray qa = new JsonArray();
        for (MessageQueue q : queues) {
            qa.add(obj("brokerName", q.getBrokerName(), "queueId", q.getQueueId()));
        }
        emit("queues", obj("queues", qa));
        OffsetStore store = c.getOffsetStore();
        int received = 0;
        boolean commit = !caseObj.has("commit") || bool("commit");
        for (MessageQueue q : queues) {
            long offset;
            Long stored = null;
            if ("stored".equals(str("start", "stored"))) {
                stored = store.readOffset(q, ReadOffsetType.READ_FROM_STORE);
                offset = Math.max(0, stored);
            } else {
                offset = 0;
            }
            emit("queue_start", obj("queueId", q.getQueueId(), "storedOffset", stored, "offset", offset));
            while (limit == null || received < limit) {
                int n = limit == null ? maxNum : Math.min(maxNum, limit - received);
                PullResult r = c.pull(q, expr, offset, n);
                if (r.getPullStatus() == PullStatus.FOUND) {
                    for (MessageExt m : r.getMsgFoundList()) {
                        emit("message", describe(m));
                    }
                    received += r.getMsgFoundList().size();
                    offset = r.getNextBeginOffset();
                    continue;
                }
                emit("pull_status", obj("queueId", q.getQueueId(), "status", r.getPullStatus().name(),
                    "nextBeginOffset", r.getNextBeginOffset(), "minOffset", r.getMinOffset(), "maxOffset", r.getMaxOffset()));
                if ((r.getPullStatus() == PullStatus.NO_MATCHED_MSG || r.getPullStatus() == PullStatus.OFFSET_ILLEGAL)
                    && r.getNextBeginOffset() > offset) {
                    offset = r.getNextBeginOffset();
                    continue;
                }
                break;
            }
            if (commit) {
                // UPDATE_CONSUMER_OFFSET, waiting for the broker's answer (persist() would send it oneway)
                store.updateOffset(q, offset, false);
                store.updateConsumeOffsetToBroker(q, offset, false);
                emit("committed", obj("queueId", q.getQueueId(), "offset", offset));
            }
        }
        c.shutdown();
        emit("done", obj("received", received));
    }

    /** 4.9's viewMessage(offsetMsgId); the 5.x client has only viewMessage(topic, msgId), which
     * tries the id as an offsetMsgId first and then as a unique key. */
    static MessageExt viewByOffsetId(DefaultMQProducer p, String topic, String id) throws Exception {
        try {
            Method one = p.getClass().getMethod("viewMessage", String.class);
            try {
                return (MessageExt) one.invoke(p, id);
            } catch (java.lang.reflect.InvocationTargetException e) {
                throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
            }
        } catch (NoSuchMethodException e) {
            return p.viewMessage(topic, id);
        }
    }

    /** queryMessage by key and viewMessage by offsetMsgId and by unique id (the client's MQAdmin API). */
    static void query() throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(str("group", "compat_qg"), hook());
        configure(p);
        p.start();
        emit("started", null);
        String topic = str("topic", null);
        JsonArray keys = caseObj.has("keys") ? caseObj.getAsJsonArray("keys") : new JsonArray();
        for (JsonElement k : keys) {
            try {
                QueryResult r = p.queryMessage(topic, k.getAsString(), (int) num("max_num", 32), 0, Long.MAX_VALUE);
                JsonArray ms = new JsonArray();
                for (MessageExt m : r.getMessageList()) {
                    ms.add(describe(m));
                }
                emit("query_result", obj("key", k.getAsString(), "messages", ms));
            } catch (Exception e) {
                emit("query_error", obj("key", k.getAsString(), "error", err(e)));
            }
        }
        JsonArray ids = caseObj.has("offsetMsgIds") ? caseObj.getAsJsonArray("offsetMsgIds") : new JsonArray();
        for (JsonElement id : ids) {
            try {
                emit("view_result", obj("id", id.getAsString(), "by", "offsetMsgId", "message", describe(viewByOffsetId(p, topic, id.getAsString()))));
            } catch (Exception e) {
                emit("view_error", obj("id", id.getAsString(), "by", "offsetMsgId", "error", err(e)));
            }
        }
        JsonArray uniq = caseObj.has("uniqIds") ? caseObj.getAsJsonArray("uniqIds") : new JsonArray();
        for (JsonElement id : uniq) {
            try {
                emit("view_result", obj("id", id.getAsString(), "by", "uniqId", "message", describe(p.viewMessage(topic, id.getAsString()))));
            } catch (Exception e) {
                emit("view_error", obj("id", id.getAsString(), "by", "uniqId", "error", err(e)));
            }
        }
        p.shutdown();
        emit("done", null);
    }

    // ---------------------------------------------------------------------------------------

    public static void main(String[] args) throws Exception {
        String text = args.length > 0 && !args[0].equals("-")
            ? new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8)
            : new String(System.in.readAllBytes(), StandardCharsets.UTF_8);
        caseObj = GSON.fromJson(text, JsonObject.class);
        double deadline = num("deadline_s", 60);
        Thread timer = new Thread(() -> {
            try {
                Thread.sleep((long) (deadline * 1000));
            } catch (InterruptedException e) {
                return;
            }
            emit("timeout", obj("after_s", deadline));
            Runtime.getRuntime().halt(3);
        });
        timer.setDaemon(true);
        timer.start();
        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    if (line.trim().equals("stop")) {
                        STOP_LINE.countDown();
                        break;
                    }
                }
            } catch (Exception ignored) {
                // EOF or a closed pipe ends the driver like "stop"
            }
            STOP.countDown();
        });
        stdin.setDaemon(true);
        String role = str("role", "");
        // the "pop" role reads its commands from stdin itself
        if (args.length > 0 && !args[0].equals("-") && !role.equals("pop")) {
            stdin.start();
        }
        try {
            switch (role) {
                case "produce":
                    produce();
                    break;
                case "push":
                    push();
                    break;
                case "pull":
                    pull();
                    break;
                case "query":
                    query();
                    break;
                case "request":
                    request();
                    break;
                case "pop":
                    // 5.x only (src/Pop5.java is compiled into driver-5.jar alone)
                    try {
                        Class.forName("Pop5").getMethod("run", JsonObject.class).invoke(null, caseObj);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                    break;
                default:
                    throw new IllegalArgumentException("unknown role " + role);
            }
        } catch (Throwable e) {
            java.io.StringWriter sw = new java.io.StringWriter();
            e.printStackTrace(new java.io.PrintWriter(sw));
            emit("driver_error", obj("error", err(e), "tb", sw.toString()));
            OUT.flush();
            Runtime.getRuntime().halt(2);
        }
        OUT.flush();
        Runtime.getRuntime().halt(0);
    }
}
