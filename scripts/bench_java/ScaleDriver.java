// Topic creation at scale, for `scripts/bench_scale.py topics` (the same load against Apache
// RocketMQ and rmqd), with the 4.9.8 Java client and admin tools.
//
// send NAMESRV PREFIX COUNT QUEUES
//   one DefaultMQProducer (defaultTopicQueueNums = QUEUES, compression off) sends one 100-byte
//   message to each of the topics PREFIX0 .. PREFIX<COUNT-1> in turn, synchronously: each send
//   to a topic the name server does not know yet goes through TBW102 and auto-creates it.
// admin NAMESRV PREFIX COUNT QUEUES BROKER_ADDR
//   DefaultMQAdminExt.createAndUpdateTopicConfig (UPDATE_AND_CREATE_TOPIC, QUEUES read and write
//   queues, perm 6) for each topic in turn, as `mqadmin updateTopic` sends it.
// Prints one JSON line: the seconds each block of 1,000 topics took, failures, the total.
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class ScaleDriver {
    /** After topic i: every 1,000 topics, the block's seconds; returns the block's start. */
    static long tick(int i, List<Double> blocks, long blockStart) {
        if ((i + 1) % 1000 != 0) return blockStart;
        long now = System.nanoTime();
        blocks.add((now - blockStart) / 1e9);
        System.err.printf(Locale.ROOT, "%d topics, last 1000 in %.2f s%n", i + 1, blocks.get(blocks.size() - 1));
        return now;
    }

    public static void main(String[] a) throws Exception {
        String mode = a[0], ns = a[1], prefix = a[2];
        int count = Integer.parseInt(a[3]), queues = Integer.parseInt(a[4]);
        List<Double> blocks = new ArrayList<>();
        long failed = 0;
        long t0 = System.nanoTime(), blockStart = t0;
        if (mode.equals("send")) {
            DefaultMQProducer producer = new DefaultMQProducer("scale_producer");
            producer.setNamesrvAddr(ns);
            producer.setInstanceName(Long.toString(System.currentTimeMillis()));
            producer.setDefaultTopicQueueNums(queues);
            producer.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
            producer.setSendMsgTimeout(30000);
            producer.start();
            byte[] body = new byte[100];
            for (int i = 0; i < count; i++) {
                try {
                    if (producer.send(new Message(prefix + i, body)).getSendStatus() != SendStatus.SEND_OK) failed++;
                } catch (Exception e) {
                    failed++;
                    if (failed <= 5) System.err.println("send " + prefix + i + ": " + e);
                }
                blockStart = tick(i, blocks, blockStart);
            }
            producer.shutdown();
        } else {
            String broker = a[5];
            DefaultMQAdminExt admin = new DefaultMQAdminExt();
            admin.setNamesrvAddr(ns);
            admin.setInstanceName(Long.toString(System.currentTimeMillis()));
            admin.start();
            for (int i = 0; i < count; i++) {
                TopicConfig tc = new TopicConfig(prefix + i, queues, queues, 6);
                try {
                    admin.createAndUpdateTopicConfig(broker, tc);
                } catch (Exception e) {
                    failed++;
                    if (failed <= 5) System.err.println("create " + prefix + i + ": " + e);
                }
                blockStart = tick(i, blocks, blockStart);
            }
            admin.shutdown();
        }
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < blocks.size(); i++) sb.append(i == 0 ? "" : ",").append(String.format(Locale.ROOT, "%.3f", blocks.get(i)));
        System.out.printf(Locale.ROOT, "{\"event\":\"%s\",\"count\":%d,\"failed\":%d,\"seconds\":%.3f,\"blocks\":[%s]}%n",
            mode, count, failed, (System.nanoTime() - t0) / 1e9, sb);
        System.exit(0);
    }
}
