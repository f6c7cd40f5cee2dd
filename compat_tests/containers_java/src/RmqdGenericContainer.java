// docs/containers.md's Testcontainers-for-Java example, run by compat_tests/test_containers.py:
// the rmqd image as a GenericContainer (host networking, the broker on 127.0.0.1), one message
// sent and pulled back with the RocketMQ 4.9.8 Java client.  args: IMAGE NAMESRV_PORT BROKER_PORT
import java.nio.charset.StandardCharsets;
import java.util.List;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.utility.DockerImageName;

public class RmqdGenericContainer {
    public static void main(String[] args) throws Exception {
        String image = args[0], namesrvPort = args[1], brokerPort = args[2];
        // -- the snippet in docs/containers.md starts here
        try (GenericContainer<?> rmqd = new GenericContainer<>(DockerImageName.parse(image))
                .withNetworkMode("host")                      // clients reach it on 127.0.0.1
                .withEnv("RMQD_NAMESRV_PORT", namesrvPort)    // free ports of the host
                .withEnv("RMQD_BROKER_PORT", brokerPort)
                .withCommand("serve", "--host", "127.0.0.1")
                .waitingFor(Wait.forLogMessage("rmqd ready.*\\n", 1))) {
            rmqd.start();
            String namesrv = "127.0.0.1:" + namesrvPort;

            DefaultMQProducer producer = new DefaultMQProducer("demo-producer");
            producer.setNamesrvAddr(namesrv);
            producer.start();
            SendResult sent = producer.send(new Message("DemoTopic", "TagA", "hello rmqd".getBytes(StandardCharsets.UTF_8)));
            producer.shutdown();

            DefaultLitePullConsumer consumer = new DefaultLitePullConsumer("demo-consumer");
            consumer.setNamesrvAddr(namesrv);
            consumer.subscribe("DemoTopic", "*");
            consumer.start();
            List<MessageExt> got = List.of();
            for (int i = 0; i < 60 && got.isEmpty(); i++) {
                got = consumer.poll(1000);
            }
            consumer.shutdown();
            // close() would SIGKILL the broker: stop it first (SIGTERM: the store is flushed, exit 0)
            rmqd.getDockerClient().stopContainerCmd(rmqd.getContainerId()).withTimeout(20).exec();
            // -- the snippet ends here
            System.out.println("sent " + sent.getSendStatus());
            System.out.println("received " + (got.isEmpty() ? "nothing" : new String(got.get(0).getBody(), StandardCharsets.UTF_8)));
        }
    }
}
