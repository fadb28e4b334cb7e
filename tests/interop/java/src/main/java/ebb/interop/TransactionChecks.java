package ebb.interop;

import java.lang.reflect.Field;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * KafkaProducer's transactional API: commits and aborts read back at both isolation levels, and a
 * second instance with the same transactional.id fencing the first mid-transaction.
 */
final class TransactionChecks {
    private TransactionChecks() {}

    static void run(String bootstrap, String prefix) throws Exception {
        try (Admin admin = Admin.create(Interop.props(bootstrap))) {
            String topic = prefix + "-txn";
            Interop.step("txn_commit_abort", () -> {
                admin.createTopics(List.of(new NewTopic(topic, 1, Interop.replication()))).all().get();
                boolean v2;
                try (KafkaProducer<String, String> producer = Data.producer(bootstrap,
                        "transactional.id", prefix + "-txn-id", "client.id", "interop-txn")) {
                    producer.initTransactions();
                    send(producer, topic, "committed", 10, true);
                    send(producer, topic, "aborted", 10, false);
                    send(producer, topic, "last", 5, true);
                    v2 = transactionV2(producer);
                }
                List<String> committed = read(bootstrap, topic, "read_committed", 15);
                List<String> everything = read(bootstrap, topic, "read_uncommitted", 25);
                Json.emit("txn_commit_abort", "transaction_v2", v2, "read_committed", committed.size(),
                        "aborted_seen", committed.stream().filter(v -> v.startsWith("aborted")).count(),
                        "read_uncommitted", everything.size());
            });
            String fencedTopic = prefix + "-txn-fenced";
            Interop.step("txn_fencing", () -> {
                admin.createTopics(List.of(new NewTopic(fencedTopic, 1, Interop.replication()))).all().get();
                String id = prefix + "-fenced-id";
                String outcome = "committed";
                try (KafkaProducer<String, String> zombie = Data.producer(bootstrap, "transactional.id", id);
                     KafkaProducer<String, String> survivor = Data.producer(bootstrap, "transactional.id", id)) {
                    zombie.initTransactions();
                    zombie.beginTransaction();
                    zombie.send(new ProducerRecord<>(fencedTopic, 0, "k", "zombie")).get();
                    survivor.initTransactions();
                    try {
                        zombie.commitTransaction();
                    } catch (Exception e) {
                        outcome = e.getClass().getSimpleName();
                    }
                    send(survivor, fencedTopic, "survivor", 1, true);
                }
                Json.emit("txn_fencing", "zombie_commit", outcome,
                        "read_committed", read(bootstrap, fencedTopic, "read_committed", 1));
            });
            String offsetsTopic = prefix + "-txn-offsets";
            Interop.step("txn_offsets", () -> {
                admin.createTopics(List.of(new NewTopic(offsetsTopic, 1, Interop.replication()))).all().get();
                String group = prefix + "-txn-group";
                TopicPartition tp = new TopicPartition(offsetsTopic, 0);
                long afterCommit;
                long afterAbort;
                try (KafkaProducer<String, String> producer = Data.producer(bootstrap,
                        "transactional.id", prefix + "-offsets-id")) {
                    producer.initTransactions();
                    producer.beginTransaction();
                    producer.send(new ProducerRecord<>(offsetsTopic, 0, "k", "v"));
                    producer.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(7)),
                            new ConsumerGroupMetadata(group));
                    producer.commitTransaction();
                    afterCommit = committedOffset(admin, group, tp);
                    producer.beginTransaction();
                    producer.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(9)),
                            new ConsumerGroupMetadata(group));
                    producer.abortTransaction();
                    afterAbort = committedOffset(admin, group, tp);
                }
                Json.emit("txn_offsets", "after_commit", afterCommit, "after_abort", afterAbort);
            });
        }
    }

    /** Whether the producer runs transactions version 2 (KIP-890 part 2): the broker's ApiVersions decides. */
    private static boolean transactionV2(KafkaProducer<?, ?> producer) throws Exception {
        Field field = KafkaProducer.class.getDeclaredField("transactionManager");
        field.setAccessible(true);
        Object manager = field.get(producer);
        return (Boolean) manager.getClass().getMethod("isTransactionV2Enabled").invoke(manager);
    }

    private static long committedOffset(Admin admin, String group, TopicPartition tp) throws Exception {
        OffsetAndMetadata found = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().get(tp);
        return found == null ? -1 : found.offset();
    }

    /** One transaction of `count` records "value-i" to partition 0, committed or aborted (ShareChecks too). */
    static void send(KafkaProducer<String, String> producer, String topic, String value, int count,
                     boolean commit) throws Exception {
        producer.beginTransaction();
        for (int i = 0; i < count; i++) {
            producer.send(new ProducerRecord<>(topic, 0, "k" + i, value + "-" + i));
        }
        producer.flush();
        if (commit) {
            producer.commitTransaction();
        } else {
            producer.abortTransaction();
        }
    }

    private static List<String> read(String bootstrap, String topic, String isolation, int expected) {
        List<String> values = new ArrayList<>();
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> consumer = Data.consumer(bootstrap, "isolation.level", isolation)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 20_000;
            while (values.size() < expected && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    values.add(r.value());
                }
            }
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                values.add(r.value());  // nothing more may turn up
            }
        }
        return values;
    }
}
