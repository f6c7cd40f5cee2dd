// A long-lived 4.9.8 Java producer and push consumer for the mqadmin comparison
// (compat_tests/test_mqadmin.py): producerConnection / consumerConnection / consumerProgress need
// clients that are connected while mqadmin asks. Sends COUNT messages with keys, prints one line
// per send ("sent <uniqKey> <offsetMsgId> <queueId> <queueOffset>"), consumes them, prints
// "consumed <n>" once all arrived, then stays connected until stdin closes.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;

public class Clients {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1], producerGroup = args[2], consumerGroup = args[3];
        int count = Integer.parseInt(args[4]);
        DefaultMQProducer producer = new DefaultMQProducer(producerGroup);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("mqadmin-compat-producer");
        producer.start();
        for (int i = 0; i < count; i++) {
            Message msg = new Message(topic, "TagA", "key-" + i, ("body-" + i).getBytes(StandardCharsets.UTF_8));
            SendResult r = producer.send(msg);
            System.out.println("sent " + r.getMsgId() + " " + r.getOffsetMsgId() + " "
                + r.getMessageQueue().getQueueId() + " " + r.getQueueOffset());
        }
        AtomicInteger consumed = new AtomicInteger();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(consumerGroup);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("mqadmin-compat-consumer");
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            if (consumed.addAndGet(msgs.size()) == count) {
                System.out.println("consumed " + count);
                System.out.flush();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        System.out.println("started");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (in.readLine() != null) { }
        consumer.shutdown();
        producer.shutdown();
    }
}
