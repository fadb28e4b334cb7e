package ebb.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.TopicPartition;

/** The Java Admin on consumer groups: list, describe, offsets (list, alter, delete), delete. */
final class GroupChecks {
    private GroupChecks() {}

    static void run(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-groups";
        String group = prefix + "-group";
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        try (Admin admin = Admin.create(Interop.props(bootstrap, "client.id", "interop-admin"))) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
            try (KafkaProducer<String, String> producer = Data.producer(bootstrap)) {
                long[] timestamps = Data.timestamps(System.currentTimeMillis(), 10);
                Data.send(producer, topic, 0, timestamps);
                Data.send(producer, topic, 1, timestamps);
            }

            try (KafkaConsumer<String, String> consumer = Data.consumer(bootstrap, "group.id", group,
                    "client.id", "interop-member", "enable.auto.commit", "false", "auto.offset.reset", "earliest")) {
                Interop.step("join_and_commit", () -> {
                    consumer.subscribe(List.of(topic));
                    int read = 0;
                    long deadline = System.currentTimeMillis() + 30_000;
                    while (read < 20 && System.currentTimeMillis() < deadline) {
                        read += consumer.poll(Duration.ofMillis(200)).count();
                    }
                    consumer.commitSync(Map.of(p0, new OffsetAndMetadata(6, "six"), p1, new OffsetAndMetadata(3)));
                    Json.emit("join_and_commit", "read", read, "assignment", names(consumer.assignment()));
                });
                Interop.step("list_groups_active", () -> Json.emit("list_groups_active", "listing", listing(admin, group)));
                Interop.step("describe_group_active", () -> Json.emit("describe_group_active", "group", describe(admin, group)));
                Interop.step("delete_group_active", () -> Json.emit("delete_group_active",
                        "raised", AdminChecks.error(() -> admin.deleteConsumerGroups(List.of(group)).all().get())));
            }

            Interop.step("describe_group_empty", () -> Json.emit("describe_group_empty", "group", describe(admin, group),
                    "listing", listing(admin, group)));
            Interop.step("list_group_offsets", () -> Json.emit("list_group_offsets", "offsets", offsets(admin, group)));
            Interop.step("alter_group_offsets", () -> {
                admin.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(2))).all().get();
                Json.emit("alter_group_offsets", "offsets", offsets(admin, group));
            });
            Interop.step("delete_group_offsets", () -> {
                admin.deleteConsumerGroupOffsets(group, Set.of(p1)).all().get();
                Json.emit("delete_group_offsets", "offsets", offsets(admin, group));
            });
            Interop.step("delete_group", () -> {
                admin.deleteConsumerGroups(List.of(group)).all().get();
                String again = AdminChecks.error(() -> admin.deleteConsumerGroups(List.of(group)).all().get());
                Json.emit("delete_group", "listing", listing(admin, group), "again", again,
                        "offsets", offsets(admin, group));
            });
        }
    }

    static List<String> names(Collection<TopicPartition> partitions) {
        return partitions.stream().map(TopicPartition::toString).sorted().toList();
    }

    /** The group's entry in listGroups for consumer groups, or null when it is not listed. */
    static Map<String, Object> listing(Admin admin, String group) throws Exception {
        for (GroupListing g : admin.listGroups(ListGroupsOptions.forConsumerGroups()).all().get()) {
            if (g.groupId().equals(group)) {
                Map<String, Object> out = new LinkedHashMap<>();
                out.put("state", g.groupState().map(Enum::name).orElse(null));
                out.put("type", g.type().map(Enum::name).orElse(null));
                out.put("protocol", g.protocol());
                out.put("simple", g.isSimpleConsumerGroup());
                return out;
            }
        }
        return null;
    }

    static Map<String, Object> describe(Admin admin, String group) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        List<Object> members = new ArrayList<>();
        for (MemberDescription m : d.members()) {
            members.add(Map.of("client_id", m.clientId(), "host", m.host(),
                    "assignment", names(m.assignment().topicPartitions())));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("state", d.groupState().name());
        out.put("type", d.type().name());
        out.put("assignor", d.partitionAssignor());
        out.put("simple", d.isSimpleConsumerGroup());
        out.put("coordinator", d.coordinator().id());
        out.put("members", members);
        return out;
    }

    static Map<String, Object> offsets(Admin admin, String group) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        Map<String, Object> out = new TreeMap<>();
        committed.forEach((tp, o) -> out.put(tp.toString(), o == null ? null : Map.of("offset", o.offset(), "metadata", o.metadata())));
        return out;
    }
}
