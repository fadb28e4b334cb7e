package ebb.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * KIP-932's share consumer (KafkaShareConsumer) against a share group: records read from the start
 * (share.auto.offset.reset=earliest set as a group config), half accepted and half released in
 * explicit acknowledgement mode, the released half delivered again with delivery count 2, and the
 * group as the Admin client describes it while the consumer is in; and a read_committed share group over
 * a transactional producer's commits and abort.
 */
final class ShareChecks {
    private ShareChecks() {}

    static void run(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-shared";
        String group = prefix + "-share-group";
        try (Admin admin = Admin.create(Interop.props(bootstrap, "client.id", "interop-admin"))) {
            admin.createTopics(List.of(new NewTopic(topic, 2, Interop.replication()))).all().get();
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET)))).all().get();
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(Interop.props(bootstrap, "acks", "all"),
                    new StringSerializer(), new StringSerializer())) {
                for (int i = 0; i < 10; i++) {
                    producer.send(new ProducerRecord<>(topic, i % 2, null, "v" + i)).get();
                }
            }
            Interop.step("share_consume", () -> consume(bootstrap, admin, topic, group));
            Interop.step("share_read_committed", () -> readCommitted(bootstrap, admin, prefix));
        }
    }

    /**
     * A transactional producer commits three records, aborts four and commits three more; a share consumer
     * of a group with share.isolation.level=read_committed, in implicit acknowledgement mode, gets the six
     * committed ones, and once its acknowledgements (the markers' offsets as gaps) are in, the group's lag
     * on the partition is 0: the aborted records were archived, never delivered.
     */
    private static void readCommitted(String bootstrap, Admin admin, String prefix) throws Exception {
        String topic = prefix + "-txn-shared";
        String group = prefix + "-share-rc";
        admin.createTopics(List.of(new NewTopic(topic, 1, Interop.replication()))).all().get();
        ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        admin.incrementalAlterConfigs(Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("share.isolation.level", "read_committed"),
                        AlterConfigOp.OpType.SET)))).all().get();
        try (KafkaProducer<String, String> producer = Data.producer(bootstrap, "transactional.id",
                prefix + "-share-txn-id")) {
            producer.initTransactions();
            TransactionChecks.send(producer, topic, "first", 3, true);
            TransactionChecks.send(producer, topic, "aborted", 4, false);
            TransactionChecks.send(producer, topic, "second", 3, true);
        }
        TopicPartition partition = new TopicPartition(topic, 0);
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(
                Interop.props(bootstrap, "group.id", group, "client.id", "share-rc"),
                new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            List<String> received = new ArrayList<>();
            SharePartitionOffsetInfo offsets = null;
            long deadline = System.currentTimeMillis() + 30_000;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                    received.add(record.value());
                }
                consumer.commitSync();
                offsets = admin.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                        .partitionsToOffsetInfo(group).get().get(partition);
                if (received.size() >= 6 && offsets != null && offsets.lag().orElse(-1L) == 0) {
                    break;
                }
            }
            received.sort(null);
            Json.emit("share_read_committed", "received", received,
                    "lag", offsets == null ? null : offsets.lag().orElse(-1L));
        }
    }

    private static void consume(String bootstrap, Admin admin, String topic, String group) throws Exception {
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(
                Interop.props(bootstrap, "group.id", group, "client.id", "share-1",
                        "share.acknowledgement.mode", "explicit"),
                new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            List<String> accepted = new ArrayList<>();
            List<String> released = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (accepted.size() + released.size() < 10 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                    boolean keep = Integer.parseInt(record.value().substring(1)) < 5;
                    consumer.acknowledge(record, keep ? AcknowledgeType.ACCEPT : AcknowledgeType.RELEASE);
                    (keep ? accepted : released).add(record.value());
                }
                consumer.commitSync();
            }
            Map<String, Integer> again = new TreeMap<>();
            while (again.size() < released.size() && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                    again.put(record.value(), (int) record.deliveryCount().orElse((short) -1));
                }
                consumer.commitSync();
            }
            ShareGroupDescription described = admin.describeShareGroups(List.of(group)).all().get().get(group);
            accepted.sort(null);
            released.sort(null);
            Json.emit("share_consume", "accepted", accepted, "released", released, "again", again,
                    "state", described.groupState().toString(), "members", described.members().size());
        }
    }
}
