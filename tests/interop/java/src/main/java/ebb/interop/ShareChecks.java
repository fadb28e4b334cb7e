package ebb.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * KIP-932's share consumer (KafkaShareConsumer) against a share group: records read from the start
 * (share.auto.offset.reset=earliest set as a group config), half accepted and half released in
 * explicit acknowledgement mode, the released half delivered again with delivery count 2, and the
 * group as the Admin client describes it while the consumer is in.
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
