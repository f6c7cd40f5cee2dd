import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.consumer.AckCallback;
import org.apache.rocketmq.client.consumer.AckResult;
import org.apache.rocketmq.client.consumer.PopCallback;
import org.apache.rocketmq.client.consumer.PopResult;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.impl.MQClientManager;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.header.AckMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.ChangeInvisibleTimeRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.ConsumerSendMsgBackRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.ExtraInfoUtil;
import org.apache.rocketmq.remoting.protocol.header.PopMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;

/**
 * The POP role of the Java compat driver, 5.x Remoting client only (compiled into driver-5.jar;
 * Driver.main reaches it by reflection so the 4.9.8 flavour compiles without it).
 *
 * It drives the 5.x client's own POP calls (MQClientAPIImpl.popMessageAsync, ackMessageAsync,
 * batchAckMessageAsync, changeInvisibleTimeAsync, the CONSUMER_SEND_MSG_BACK the 5.x proxy uses
 * to dead-letter) one command at a time: each stdin line is a JSON command, each answer a JSON
 * event line with the command's "id". Commands: pop, ack, batch_ack, change, dlq, query_assignment,
 * set_mode, stop. The broker is the master of the topic's first broker in the name server's route.
 */
final class Pop5 {
    private static final Gson GSON = new Gson();

    private Pop5() {
    }

    static String s(JsonObject o, String k, String d) {
        JsonElement e = o.get(k);
        return e == null || e.isJsonNull() ? d : e.getAsString();
    }

    static long n(JsonObject o, String k, long d) {
        JsonElement e = o.get(k);
        return e == null || e.isJsonNull() ? d : e.getAsLong();
    }

    static boolean b(JsonObject o, String k) {
        JsonElement e = o.get(k);
        return e != null && !e.isJsonNull() && e.getAsBoolean();
    }

    public static void run(JsonObject caseObj) throws Exception {
        String namesrv = s(caseObj, "namesrv", null);
        String topic = s(caseObj, "topic", null);
        String group = s(caseObj, "group", null);
        ClientConfig cc = new ClientConfig();
        cc.setNamesrvAddr(namesrv);
        cc.setInstanceName("pop-" + System.nanoTime());
        MQClientInstance instance = MQClientManager.getInstance().getOrCreateMQClientInstance(cc);
        instance.start();
        MQClientAPIImpl api = instance.getMQClientAPIImpl();
        String[] broker = brokerOf(api, topic, 30_000);
        String brokerName = broker[0];
        String addr = broker[1];
        Driver.emit("started", Driver.obj("broker", brokerName, "addr", addr));
        try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                line = line.trim();
                if (line.isEmpty()) {
                    continue;
                }
                if (line.equals("stop")) {
                    break;
                }
                JsonObject cmd = GSON.fromJson(line, JsonObject.class);
                String id = s(cmd, "id", "");
                String op = s(cmd, "cmd", "");
                if (op.equals("stop")) {
                    break;
                }
                try {
                    switch (op) {
                        case "pop":
                            pop(api, brokerName, addr, topic, group, cmd, id);
                            break;
                        case "ack":
                            ack(api, addr, topic, group, cmd, id);
                            break;
                        case "batch_ack":
                            batchAck(api, addr, topic, group, cmd, id);
                            break;
                        case "change":
                            change(api, brokerName, addr, topic, group, cmd, id);
                            break;
                        case "dlq":
                            dlq(api, addr, topic, group, cmd, id);
                            break;
                        case "set_mode":
                            api.setMessageRequestMode(addr, topic, group,
                                org.apache.rocketmq.common.message.MessageRequestMode.valueOf(s(cmd, "mode", "POP")),
                                (int) n(cmd, "pop_share_queue_num", 0), 10_000);
                            Driver.emit("mode_set", Driver.obj("id", id));
                            break;
                        case "query_assignment":
                            JsonArray arr = new JsonArray();
                            for (Object a : api.queryAssignment(addr, topic, group, instance.getClientId(),
                                "AVG", MessageModel.CLUSTERING, 10_000)) {
                                arr.add(a.toString());
                            }
                            Driver.emit("assignment", Driver.obj("id", id, "assignments", arr));
                            break;
                        default:
                            Driver.emit("cmd_error", Driver.obj("id", id, "error", "unknown cmd " + op));
                    }
                } catch (MQBrokerException e) {
                    Driver.emit("cmd_error", Driver.obj("id", id, "code", e.getResponseCode(), "error", e.getErrorMessage()));
                } catch (Throwable e) {
                    Throwable c = e.getCause() != null && e instanceof java.util.concurrent.ExecutionException ? e.getCause() : e;
                    if (c instanceof MQBrokerException) {
                        MQBrokerException be = (MQBrokerException) c;
                        Driver.emit("cmd_error", Driver.obj("id", id, "code", be.getResponseCode(), "error", be.getErrorMessage()));
                    } else {
                        Driver.emit("cmd_error", Driver.obj("id", id, "error", Driver.err(c)));
                    }
                }
            }
        }
        instance.shutdown();
        Driver.emit("done", null);
    }

    static String[] brokerOf(MQClientAPIImpl api, String topic, long waitMs) throws Exception {
        long deadline = System.currentTimeMillis() + waitMs;
        Exception last = null;
        while (System.currentTimeMillis() < deadline) {
            try {
                TopicRouteData route = api.getTopicRouteInfoFromNameServer(topic, 3000);
                for (BrokerData bd : route.getBrokerDatas()) {
                    String a = bd.getBrokerAddrs().get(MixAll.MASTER_ID);
                    if (a != null) {
                        return new String[] {bd.getBrokerName(), a};
                    }
                }
            } catch (Exception e) {
                last = e;
            }
            Thread.sleep(300);
        }
        throw new IllegalStateException("no route for " + topic + (last == null ? "" : ": " + Driver.err(last)));
    }

    static JsonObject message(MessageExt m) {
        JsonObject props = new JsonObject();
        for (Map.Entry<String, String> e : m.getProperties().entrySet()) {
            props.addProperty(e.getKey(), e.getValue());
        }
        return Driver.obj(
            "body_b64", Base64.getEncoder().encodeToString(m.getBody() == null ? new byte[0] : m.getBody()),
            "topic", m.getTopic(), "queueId", m.getQueueId(), "queueOffset", m.getQueueOffset(),
            "commitLogOffset", m.getCommitLogOffset(), "reconsumeTimes", m.getReconsumeTimes(),
            "msgId", m.getMsgId(), "uniqKey", m.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            "tags", m.getTags() == null ? "" : m.getTags(), "keys", m.getKeys() == null ? "" : m.getKeys(),
            "extraInfo", m.getProperty(MessageConst.PROPERTY_POP_CK), "bornTimestamp", m.getBornTimestamp(),
            "props", props);
    }

    static void pop(MQClientAPIImpl api, String brokerName, String addr, String topic, String group, JsonObject cmd,
        String id) throws Exception {
        PopMessageRequestHeader h = new PopMessageRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(topic);
        h.setQueueId((int) n(cmd, "queue_id", -1));
        h.setMaxMsgNums((int) n(cmd, "max", 32));
        h.setInvisibleTime(n(cmd, "invisible_ms", 60_000));
        h.setPollTime(n(cmd, "poll_ms", 0));
        h.setBornTime(System.currentTimeMillis());
        h.setInitMode((int) n(cmd, "init_mode", 0));
        h.setExpType(s(cmd, "exp_type", "TAG"));
        h.setExp(s(cmd, "exp", "*"));
        h.setOrder(b(cmd, "order"));
        if (s(cmd, "attempt_id", null) != null) {
            h.setAttemptId(s(cmd, "attempt_id", null));
        }
        h.setBrokerName(brokerName);
        long timeout = n(cmd, "timeout_ms", n(cmd, "poll_ms", 0) + 10_000);
        CompletableFuture<PopResult> f = new CompletableFuture<>();
        long t0 = System.currentTimeMillis();
        api.popMessageAsync(brokerName, addr, h, timeout, new PopCallback() {
            @Override
            public void onSuccess(PopResult popResult) {
                f.complete(popResult);
            }

            @Override
            public void onException(Throwable e) {
                f.completeExceptionally(e);
            }
        });
        PopResult res = f.get(timeout + 5000, TimeUnit.MILLISECONDS);
        JsonArray msgs = new JsonArray();
        if (res.getMsgFoundList() != null) {
            for (MessageExt m : res.getMsgFoundList()) {
                msgs.add(message(m));
            }
        }
        Driver.emit("popped", Driver.obj("id", id, "status", res.getPopStatus().name(), "popTime", res.getPopTime(),
            "invisibleTime", res.getInvisibleTime(), "restNum", res.getRestNum(), "messages", msgs,
            "elapsed_ms", System.currentTimeMillis() - t0));
    }

    static AckResult await(CompletableFuture<AckResult> f) throws Exception {
        return f.get(15, TimeUnit.SECONDS);
    }

    static AckCallback into(CompletableFuture<AckResult> f) {
        return new AckCallback() {
            @Override
            public void onSuccess(AckResult ackResult) {
                f.complete(ackResult);
            }

            @Override
            public void onException(Throwable e) {
                f.completeExceptionally(e);
            }
        };
    }

    /** As DefaultMQPushConsumerImpl.ackAsync: the header names the topic the message was popped from. */
    static void ack(MQClientAPIImpl api, String addr, String topic, String group, JsonObject cmd, String id)
        throws Exception {
        String extraInfo = s(cmd, "extra_info", null);
        String[] x = ExtraInfoUtil.split(extraInfo);
        AckMessageRequestHeader h = new AckMessageRequestHeader();
        h.setTopic(ExtraInfoUtil.getRealTopic(x, topic, group));
        h.setQueueId(ExtraInfoUtil.getQueueId(x));
        h.setOffset(ExtraInfoUtil.getQueueOffset(x));
        h.setConsumerGroup(group);
        h.setExtraInfo(extraInfo);
        h.setBrokerName(ExtraInfoUtil.getBrokerName(x));
        CompletableFuture<AckResult> f = new CompletableFuture<>();
        api.ackMessageAsync(addr, 10_000, into(f), h);
        AckResult r = await(f);
        Driver.emit("acked", Driver.obj("id", id, "status", r.getStatus().name()));
    }

    static void batchAck(MQClientAPIImpl api, String addr, String topic, String group, JsonObject cmd, String id)
        throws Exception {
        List<String> infos = new ArrayList<>();
        for (JsonElement e : cmd.getAsJsonArray("extra_infos")) {
            infos.add(e.getAsString());
        }
        CompletableFuture<AckResult> f = new CompletableFuture<>();
        api.batchAckMessageAsync(addr, 10_000, into(f), topic, group, infos);
        AckResult r = await(f);
        Driver.emit("acked", Driver.obj("id", id, "status", r.getStatus().name()));
    }

    /** As DefaultMQPushConsumerImpl.changePopInvisibleTimeAsync. */
    static void change(MQClientAPIImpl api, String brokerName, String addr, String topic, String group,
        JsonObject cmd, String id) throws Exception {
        String extraInfo = s(cmd, "extra_info", null);
        String[] x = ExtraInfoUtil.split(extraInfo);
        ChangeInvisibleTimeRequestHeader h = new ChangeInvisibleTimeRequestHeader();
        h.setTopic(ExtraInfoUtil.getRealTopic(x, topic, group));
        h.setQueueId(ExtraInfoUtil.getQueueId(x));
        h.setOffset(ExtraInfoUtil.getQueueOffset(x));
        h.setConsumerGroup(group);
        h.setExtraInfo(extraInfo);
        h.setInvisibleTime(n(cmd, "invisible_ms", 60_000));
        h.setBrokerName(brokerName);
        CompletableFuture<AckResult> f = new CompletableFuture<>();
        api.changeInvisibleTimeAsync(brokerName, addr, h, 10_000, into(f));
        AckResult r = await(f);
        Driver.emit("changed", Driver.obj("id", id, "status", r.getStatus().name(), "extraInfo", r.getExtraInfo(),
            "popTime", r.getPopTime()));
    }

    /** As the 5.x proxy's forwardMessageToDeadLetterQueue: CONSUMER_SEND_MSG_BACK with delay level -1, then an ack. */
    static void dlq(MQClientAPIImpl api, String addr, String topic, String group, JsonObject cmd, String id)
        throws Exception {
        String extraInfo = s(cmd, "extra_info", null);
        String[] x = ExtraInfoUtil.split(extraInfo);
        ConsumerSendMsgBackRequestHeader h = new ConsumerSendMsgBackRequestHeader();
        h.setOffset(n(cmd, "commit_log_offset", -1));
        h.setGroup(group);
        h.setDelayLevel(-1);
        h.setOriginMsgId(s(cmd, "msg_id", null));
        h.setOriginTopic(ExtraInfoUtil.getRealTopic(x, topic, group));
        h.setMaxReconsumeTimes(0);
        RemotingCommand request = RemotingCommand.createRequestCommand(RequestCode.CONSUMER_SEND_MSG_BACK, h);
        RemotingCommand response = api.getRemotingClient().invokeSync(addr, request, 10_000);
        if (response.getCode() != 0) {
            Driver.emit("cmd_error", Driver.obj("id", id, "code", response.getCode(), "error", response.getRemark()));
            return;
        }
        ack(api, addr, topic, group, cmd, id + "-ack");
        Driver.emit("dlq_done", Driver.obj("id", id));
    }
}
