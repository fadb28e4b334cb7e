package ebb.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * KafkaProducer with its defaults (idempotent, acks=all) in batches, uncompressed and with each
 * compression type; a KafkaConsumer reads every record back.
 */
final class ProducerChecks {
    private ProducerChecks() {}

    static final int COUNT = 500;

    static void run(String bootstrap, String prefix) throws Exception {
        try (Admin admin = Admin.create(Interop.props(bootstrap))) {
            for (String compression : List.of("none", "gzip", "snappy", "lz4", "zstd")) {
                String topic = prefix + "-produce-" + compression;
                TopicPartition tp = new TopicPartition(topic, 0);
                String step = "produce_" + compression;
                Interop.step(step, () -> {
                    admin.createTopics(List.of(new NewTopic(topic, 1, Interop.replication()))).all().get();
                    List<String> values = new ArrayList<>();
                    for (int i = 0; i < COUNT; i++) {
                        // compressible and not: a repeated text, then a number
                        values.add("record " + i + " " + "abcdefgh".repeat(i % 50) + " " + Long.toHexString(i * 0x9E3779B97F4A7C15L));
                    }
                    List<Long> offsets = new ArrayList<>();
                    try (KafkaProducer<String, String> producer = Data.producer(bootstrap, "compression.type", compression,
                            "linger.ms", "20", "client.id", "interop-producer")) {
                        List<Future<RecordMetadata>> sent = new ArrayList<>();
                        for (int i = 0; i < COUNT; i++) {
                            sent.add(producer.send(new ProducerRecord<>(topic, 0, "k" + i, values.get(i))));
                        }
                        for (Future<RecordMetadata> f : sent) {
                            offsets.add(f.get().offset());
                        }
                    }
                    List<String> read = new ArrayList<>();
                    List<Long> readOffsets = new ArrayList<>();
                    int keysMatching = 0;
                    try (KafkaConsumer<String, String> consumer = Data.consumer(bootstrap)) {
                        consumer.assign(List.of(tp));
                        consumer.seekToBeginning(List.of(tp));
                        long deadline = System.currentTimeMillis() + 30_000;
                        while (read.size() < COUNT && System.currentTimeMillis() < deadline) {
                            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                                if (r.key().equals("k" + read.size())) {
                                    keysMatching++;
                                }
                                read.add(r.value());
                                readOffsets.add(r.offset());
                            }
                        }
                    }
                    boolean inOrder = true;
                    for (int i = 0; i < offsets.size(); i++) {
                        inOrder &= offsets.get(i) == i && (i >= readOffsets.size() || readOffsets.get(i) == i);
                    }
                    Json.emit(step, "sent", offsets.size(), "offsets_in_order", inOrder, "read", read.size(),
                            "values_match", read.equals(values), "keys_match", keysMatching);
                });
            }
        }
    }
}
