package ebb.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/**
 * Two ways a classic group keeps its members' partitions: the cooperative-sticky assignor (a new
 * member takes partitions without the others giving all of theirs up) and static membership (a
 * member that comes back under its group.instance.id within the session timeout gets its
 * partitions back without a rebalance).
 */
final class MembershipChecks {
    private MembershipChecks() {}

    static void run(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-members";
        try (Admin admin = Admin.create(Interop.props(bootstrap, "client.id", "interop-admin"))) {
            admin.createTopics(List.of(new NewTopic(topic, 4, (short) 1))).all().get();
            Interop.step("cooperative", () -> cooperative(bootstrap, topic, prefix + "-cooperative"));
            Interop.step("static", () -> staticMember(bootstrap, admin, topic, prefix + "-static"));
        }
    }

    /** What a rebalance listener hears: every revocation and loss, in order. */
    static final class Heard implements ConsumerRebalanceListener {
        final List<List<String>> revoked = new CopyOnWriteArrayList<>();
        final List<List<String>> lost = new CopyOnWriteArrayList<>();

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            if (!partitions.isEmpty()) {
                revoked.add(GroupChecks.names(partitions));
            }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            lost.add(GroupChecks.names(partitions));
        }
    }

    static KafkaConsumer<String, String> member(String bootstrap, String group, String clientId, String... more) {
        List<String> settings = new ArrayList<>(List.of("group.id", group, "client.id", clientId,
                "enable.auto.commit", "false", "auto.offset.reset", "earliest"));
        settings.addAll(List.of(more));
        return Data.consumer(bootstrap, settings.toArray(String[]::new));
    }

    /** Polls every consumer in turn until `done` holds (or 60 s pass). */
    static void pollUntil(List<KafkaConsumer<String, String>> consumers, java.util.function.BooleanSupplier done) {
        long deadline = System.currentTimeMillis() + 60_000;
        while (!done.getAsBoolean() && System.currentTimeMillis() < deadline) {
            for (KafkaConsumer<String, String> consumer : consumers) {
                consumer.poll(Duration.ofMillis(100));
            }
        }
    }

    static void cooperative(String bootstrap, String topic, String group) {
        String assignor = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
        Heard first = new Heard();
        Heard second = new Heard();
        try (KafkaConsumer<String, String> a = member(bootstrap, group, "coop-a", "partition.assignment.strategy", assignor);
             KafkaConsumer<String, String> b = member(bootstrap, group, "coop-b", "partition.assignment.strategy", assignor)) {
            a.subscribe(List.of(topic), first);
            pollUntil(List.of(a), () -> a.assignment().size() == 4);
            List<String> alone = GroupChecks.names(a.assignment());
            b.subscribe(List.of(topic), second);
            pollUntil(List.of(a, b), () -> a.assignment().size() == 2 && b.assignment().size() == 2);
            Json.emit("cooperative", "alone", alone, "a", GroupChecks.names(a.assignment()),
                    "b", GroupChecks.names(b.assignment()), "a_revoked", first.revoked, "a_lost", first.lost,
                    "b_revoked", second.revoked);
        }
    }

    static void staticMember(String bootstrap, Admin admin, String topic, String group) throws Exception {
        String[] identity = {"group.instance.id", "instance-1", "session.timeout.ms", "30000"};
        int generation;
        String memberId;
        List<String> assigned;
        try (KafkaConsumer<String, String> first = member(bootstrap, group, "static-a", identity)) {
            first.subscribe(List.of(topic));
            pollUntil(List.of(first), () -> first.assignment().size() == 4);
            generation = first.groupMetadata().generationId();
            memberId = first.groupMetadata().memberId();
            assigned = GroupChecks.names(first.assignment());
        }  // a static member's close sends no LeaveGroup: the member stays until its session times out
        Map<String, Object> whileAway = members(admin, group);
        try (KafkaConsumer<String, String> back = member(bootstrap, group, "static-b", identity)) {
            back.subscribe(List.of(topic));
            pollUntil(List.of(back), () -> back.assignment().size() == 4);
            Json.emit("static", "generation_before", generation, "generation_after", back.groupMetadata().generationId(),
                    "same_member_id", memberId.equals(back.groupMetadata().memberId()),
                    "assigned_before", assigned, "assigned_after", GroupChecks.names(back.assignment()),
                    "while_away", whileAway, "after", members(admin, group));
        }
    }

    /** The group's state and, per member, its instance id and client id. */
    static Map<String, Object> members(Admin admin, String group) throws Exception {
        ConsumerGroupDescription description = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        Map<String, Object> found = new TreeMap<>();
        found.put("state", description.groupState().toString());
        List<String> members = new ArrayList<>();
        for (MemberDescription member : description.members()) {
            members.add(member.groupInstanceId().orElse("-") + "/" + member.clientId());
        }
        found.put("members", members);
        return found;
    }
}
