import java.util.HashMap;
import java.util.Map;
import java.util.Set;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * What `mqadmin updateTopic -a +message.type=X` and `mqadmin updateSubGroup` do, for many topics
 * and groups in one JVM (a JVM per mqadmin call costs seconds on the 2-core box). Uses
 * rocketmq-tools 5.3.3's DefaultMQAdminExt against every master of the name server's cluster.
 * Arguments: NAMESRV then items "topic:NAME:TYPE:QUEUES" (TYPE NORMAL/FIFO/DELAY/TRANSACTION) and
 * "group:NAME:ORDERLY:RETRY_MAX_TIMES", or "count:TOPIC" (prints "count TOPIC N": the messages its
 * queues hold, max - min offset summed over the route's queues). Prints one line per item and exits 0, or 1 on a failure.
 * With TOPIC_ADMIN_AK / TOPIC_ADMIN_SK in the environment its requests are signed (plain ACL).
 */
public final class TopicAdmin {
    private TopicAdmin() {
    }

    public static void main(String[] args) throws Exception {
        String ak = System.getenv("TOPIC_ADMIN_AK");
        DefaultMQAdminExt admin = ak == null ? new DefaultMQAdminExt()
            : new DefaultMQAdminExt(new AclClientRPCHook(new SessionCredentials(ak, System.getenv("TOPIC_ADMIN_SK"))));
        admin.setNamesrvAddr(args[0]);
        admin.setInstanceName("grpc5-topic-admin-" + System.nanoTime());
        admin.start();
        int failed = 0;
        try {
            ClusterInfo cluster = admin.examineBrokerClusterInfo();
            Set<String> masters = new java.util.TreeSet<>();
            for (BrokerData b : cluster.getBrokerAddrTable().values()) {
                masters.add(b.getBrokerAddrs().get(0L));
            }
            for (int i = 1; i < args.length; i++) {
                String[] p = args[i].split(":");
                if ("count".equals(p[0])) {
                    long n = 0;
                    try {  // the route and GET_MAX_OFFSET / GET_MIN_OFFSET per queue (4.x codes both brokers have)
                        TopicRouteData route = admin.examineTopicRouteInfo(p[1]);
                        for (QueueData q : route.getQueueDatas()) {
                            for (int id = 0; id < q.getReadQueueNums(); id++) {
                                MessageQueue mq = new MessageQueue(p[1], q.getBrokerName(), id);
                                n += admin.maxOffset(mq) - admin.minOffset(mq);
                            }
                        }
                    } catch (Exception e) {
                        n = -1;
                        System.out.println("no stats for " + p[1] + ": " + e);
                    }
                    System.out.println("count " + p[1] + " " + n);
                    continue;
                }
                for (String addr : masters) {
                    try {
                        if ("topic".equals(p[0])) {
                            int queues = Integer.parseInt(p[3]);
                            TopicConfig tc = new TopicConfig(p[1], queues, queues, 6);
                            Map<String, String> attributes = new HashMap<>();
                            attributes.put("+message.type", p[2]);
                            tc.setAttributes(attributes);
                            admin.createAndUpdateTopicConfig(addr, tc);
                        } else {
                            SubscriptionGroupConfig g = new SubscriptionGroupConfig();
                            g.setGroupName(p[1]);
                            g.setConsumeMessageOrderly(Boolean.parseBoolean(p[2]));
                            g.setRetryMaxTimes(Integer.parseInt(p[3]));
                            admin.createAndUpdateSubscriptionGroupConfig(addr, g);
                        }
                        System.out.println("ok " + args[i] + " " + addr);
                    } catch (Exception e) {
                        failed++;
                        System.out.println("failed " + args[i] + " " + addr + ": " + e);
                    }
                }
            }
        } finally {
            admin.shutdown();
        }
        System.exit(failed == 0 ? 0 : 1);
    }
}
