package ebb.interop;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DeleteRecordsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;

/** The Java Admin: topics, configs, records, offsets, the cluster. */
final class AdminChecks {
    private AdminChecks() {}

    /** Record i of the offsets topic has timestamp BASE + i*1000, except record 6, the newest of all. */
    static final long BASE = System.currentTimeMillis() - 3_600_000L;
    static final long NEWEST = BASE + 100_000L;

    static void run(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-admin";
        TopicPartition p0 = new TopicPartition(topic, 0);
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        try (Admin admin = Admin.create(Interop.props(bootstrap, "client.id", "interop-admin"))) {
            Interop.step("create_topics", () -> {
                admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1).configs(Map.of("retention.ms", "3600000"))))
                        .all().get(30, TimeUnit.SECONDS);
                String again = error(() -> admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get());
                String badName = error(() -> admin.createTopics(List.of(new NewTopic("bad/name", 1, (short) 1))).all().get());
                String tooManyReplicas = error(() -> admin.createTopics(List.of(new NewTopic(prefix + "-rf", 1, (short) 3))).all().get());
                Json.emit("create_topics", "listed", admin.listTopics().names().get().contains(topic),
                        "again", again, "bad_name", badName, "too_many_replicas", tooManyReplicas);
            });

            Interop.step("describe_topics", () -> {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                List<Object> partitions = new ArrayList<>();
                for (TopicPartitionInfo p : d.partitions()) {
                    partitions.add(Map.of("partition", p.partition(), "leader", p.leader().id(),
                            "replicas", p.replicas().stream().map(Node::id).toList(),
                            "isr", p.isr().stream().map(Node::id).toList()));
                }
                String unknown = error(() -> admin.describeTopics(List.of(prefix + "-missing")).allTopicNames().get());
                Json.emit("describe_topics", "name", d.name(), "internal", d.isInternal(),
                        "topic_id", d.topicId().toString(), "partitions", partitions, "unknown", unknown);
            });

            Interop.step("describe_configs", () -> Json.emit("describe_configs", "entries", configs(admin, resource)));

            Interop.step("incremental_alter_configs", () -> {
                admin.incrementalAlterConfigs(Map.of(resource, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND))))
                        .all().get();
                Map<String, Object> set = configs(admin, resource);
                admin.incrementalAlterConfigs(Map.of(resource, List.of(
                        new AlterConfigOp(new ConfigEntry("max.message.bytes", ""), AlterConfigOp.OpType.DELETE),
                        new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.SUBTRACT))))
                        .all().get();
                Map<String, Object> deleted = configs(admin, resource);
                String invalid = error(() -> admin.incrementalAlterConfigs(Map.of(resource, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all().get());
                Json.emit("incremental_alter_configs", "after_set", pick(set, "retention.ms", "max.message.bytes", "cleanup.policy"),
                        "after_delete", pick(deleted, "retention.ms", "max.message.bytes", "cleanup.policy"), "invalid", invalid);
            });

            Interop.step("produce", () -> {
                long[] timestamps = Data.timestamps(BASE, 10);
                timestamps[6] = NEWEST;
                try (KafkaProducer<String, String> producer = Data.producer(bootstrap)) {
                    Json.emit("produce", "offsets", Data.send(producer, topic, 0, timestamps), "base", BASE);
                }
            });

            Interop.step("list_offsets", () -> Json.emit("list_offsets",
                    "earliest", offset(admin, p0, OffsetSpec.earliest()),
                    "latest", offset(admin, p0, OffsetSpec.latest()),
                    "for_timestamp", offset(admin, p0, OffsetSpec.forTimestamp(BASE + 3500)),
                    "for_timestamp_past_all", offset(admin, p0, OffsetSpec.forTimestamp(NEWEST + 1)),
                    "max_timestamp", offset(admin, p0, OffsetSpec.maxTimestamp()),
                    "empty_partition_latest", offset(admin, new TopicPartition(topic, 1), OffsetSpec.latest())));

            Interop.step("delete_records", () -> {
                DeleteRecordsResult result = admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(4)));
                long lowWatermark = result.lowWatermarks().get(p0).get().lowWatermark();
                Map<String, Object> earliest = offset(admin, p0, OffsetSpec.earliest());
                // -1 means "up to the high watermark"
                long toEnd = admin.deleteRecords(Map.of(new TopicPartition(topic, 2), RecordsToDelete.beforeOffset(-1)))
                        .lowWatermarks().get(new TopicPartition(topic, 2)).get().lowWatermark();
                String pastEnd = error(() -> admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(11))).all().get());
                Json.emit("delete_records", "low_watermark", lowWatermark, "earliest_after", earliest,
                        "to_end_empty_partition", toEnd, "past_end", pastEnd,
                        "for_timestamp_below_start", offset(admin, p0, OffsetSpec.forTimestamp(BASE)));
            });

            Interop.step("describe_cluster", () -> {
                DescribeClusterResult cluster = admin.describeCluster();
                List<Object> nodes = new ArrayList<>();
                for (Node n : cluster.nodes().get()) {
                    nodes.add(Map.of("id", n.id(), "host", n.host(), "port", n.port()));
                }
                Json.emit("describe_cluster", "cluster_id", cluster.clusterId().get(), "nodes", nodes,
                        "controller", cluster.controller().get().id());
            });

            Interop.step("delete_topics", () -> {
                admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
                String again = error(() -> admin.deleteTopics(List.of(topic)).all().get());
                Json.emit("delete_topics", "listed", admin.listTopics().names().get().contains(topic), "again", again);
            });
        }
    }

    /** The client's exception for a call expected to fail ("none" if it did not). */
    static String error(Interop.Step call) {
        try {
            call.run();
            return "none";
        } catch (Exception e) {
            return Json.error(e);
        }
    }

    static Map<String, Object> configs(Admin admin, ConfigResource resource) throws Exception {
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        Map<String, Object> out = new LinkedHashMap<>();
        for (ConfigEntry e : config.entries()) {
            out.put(e.name(), Map.of("value", String.valueOf(e.value()), "source", e.source().name(),
                    "default", e.isDefault(), "read_only", e.isReadOnly(), "type", e.type().name()));
        }
        return out;
    }

    static Map<String, Object> pick(Map<String, Object> entries, String... names) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (String name : names) {
            out.put(name, entries.get(name));
        }
        return out;
    }

    static Map<String, Object> offset(Admin admin, TopicPartition tp, OffsetSpec spec) throws Exception {
        ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get();
        return Map.of("offset", info.offset(), "timestamp", info.timestamp());
    }
}
