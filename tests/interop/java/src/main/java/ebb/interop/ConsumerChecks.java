package ebb.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.TopicPartition;

/** KafkaConsumer in a group: commits, seek, beginningOffsets after a delete, reading below the log start. */
final class ConsumerChecks {
    private ConsumerChecks() {}

    static final int COUNT = 30;

    static void run(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-consume";
        String group = prefix + "-consumers";
        TopicPartition tp = new TopicPartition(topic, 0);
        List<TopicPartition> tps = List.of(tp);
        try (Admin admin = Admin.create(Interop.props(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            try (KafkaProducer<String, String> producer = Data.producer(bootstrap)) {
                Data.send(producer, topic, 0, Data.timestamps(System.currentTimeMillis(), COUNT));
            }

            Interop.step("commit", () -> {
                try (KafkaConsumer<String, String> consumer = groupConsumer(bootstrap, group, "earliest")) {
                    consumer.subscribe(List.of(topic));
                    List<Long> offsets = pollOffsets(consumer, COUNT);
                    consumer.commitSync(Map.of(tp, new OffsetAndMetadata(10)));
                    long afterSync = consumer.committed(java.util.Set.of(tp)).get(tp).offset();
                    CountDownLatch done = new CountDownLatch(1);
                    AtomicReference<String> asyncError = new AtomicReference<>("none");
                    consumer.commitAsync(Map.of(tp, new OffsetAndMetadata(12)), (committed, e) -> {
                        if (e != null) {
                            asyncError.set(Json.error(e));
                        }
                        done.countDown();
                    });
                    long deadline = System.currentTimeMillis() + 30_000;
                    while (done.getCount() > 0 && System.currentTimeMillis() < deadline) {
                        consumer.poll(Duration.ofMillis(50));
                    }
                    long afterAsync = consumer.committed(java.util.Set.of(tp)).get(tp).offset();
                    consumer.commitSync(Map.of(tp, new OffsetAndMetadata(10)));
                    Json.emit("commit", "read_first", offsets.get(0), "read", offsets.size(), "after_sync", afterSync,
                            "async_completed", done.getCount() == 0, "async_error", asyncError.get(), "after_async", afterAsync);
                }
            });

            Interop.step("resume_and_seek", () -> {
                try (KafkaConsumer<String, String> consumer = groupConsumer(bootstrap, group, "earliest")) {
                    consumer.subscribe(List.of(topic));
                    List<Long> resumed = pollOffsets(consumer, COUNT - 10);
                    consumer.seek(tp, 20);
                    List<Long> afterSeek = pollOffsets(consumer, COUNT - 20);
                    Json.emit("resume_and_seek", "resumed_first", resumed.get(0), "resumed_count", resumed.size(),
                            "after_seek_first", afterSeek.get(0), "after_seek_count", afterSeek.size(),
                            "position", consumer.position(tp));
                }
            });

            Interop.step("delete_records", () -> {
                long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(15))).lowWatermarks().get(tp).get().lowWatermark();
                try (KafkaConsumer<String, String> consumer = Data.consumer(bootstrap)) {
                    Json.emit("delete_records", "low_watermark", low,
                            "beginning", consumer.beginningOffsets(tps).get(tp), "end", consumer.endOffsets(tps).get(tp));
                }
            });

            Interop.step("seek_below_start_earliest", () -> {
                try (KafkaConsumer<String, String> consumer = Data.consumer(bootstrap, "auto.offset.reset", "earliest")) {
                    consumer.assign(tps);
                    consumer.seek(tp, 3);
                    List<Long> offsets = pollOffsets(consumer, COUNT - 15);
                    Json.emit("seek_below_start_earliest", "first", offsets.get(0), "count", offsets.size());
                }
            });

            Interop.step("seek_below_start_latest", () -> {
                try (KafkaConsumer<String, String> consumer = Data.consumer(bootstrap, "auto.offset.reset", "latest")) {
                    consumer.assign(tps);
                    consumer.seek(tp, 3);
                    int read = consumer.poll(Duration.ofSeconds(2)).count();
                    Json.emit("seek_below_start_latest", "read", read, "position", consumer.position(tp));
                }
            });

            // the group committed 10, now below the log start offset 15
            Interop.step("committed_below_start_earliest", () -> {
                try (KafkaConsumer<String, String> consumer = groupConsumer(bootstrap, group, "earliest")) {
                    consumer.subscribe(List.of(topic));
                    List<Long> offsets = pollOffsets(consumer, COUNT - 15);
                    Json.emit("committed_below_start_earliest", "first", offsets.get(0), "count", offsets.size());
                }
            });

            Interop.step("committed_below_start_none", () -> {
                try (KafkaConsumer<String, String> consumer = groupConsumer(bootstrap, group, "none")) {
                    consumer.assign(tps);
                    String error = "none";
                    long deadline = System.currentTimeMillis() + 10_000;
                    while (error.equals("none") && System.currentTimeMillis() < deadline) {
                        try {
                            consumer.poll(Duration.ofMillis(200));
                        } catch (Exception e) {
                            error = Json.error(e);
                        }
                    }
                    Json.emit("committed_below_start_none", "raised", error);
                }
            });
        }
    }

    static KafkaConsumer<String, String> groupConsumer(String bootstrap, String group, String reset) {
        return Data.consumer(bootstrap, "group.id", group, "enable.auto.commit", "false", "auto.offset.reset", reset,
                "client.id", "interop-consumer");
    }

    /** Offsets of the next `count` records (or fewer after 30 s). */
    static List<Long> pollOffsets(KafkaConsumer<String, String> consumer, int count) {
        List<Long> offsets = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 30_000;
        while (offsets.size() < count && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                offsets.add(r.offset());
            }
        }
        return offsets;
    }
}
