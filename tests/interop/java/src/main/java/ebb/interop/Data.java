package ebb.interop;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.ArrayList;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Records and commits that the checks and the tool tests start from. */
final class Data {
    private Data() {}

    static KafkaProducer<String, String> producer(String bootstrap, String... keysAndValues) {
        return new KafkaProducer<>(Interop.props(bootstrap, keysAndValues), new StringSerializer(), new StringSerializer());
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String... keysAndValues) {
        return new KafkaConsumer<>(Interop.props(bootstrap, keysAndValues), new StringDeserializer(), new StringDeserializer());
    }

    /** Sends value "v<i>" with timestamp timestamps[i] to one partition; returns the offsets the broker gave. */
    static List<Long> send(KafkaProducer<String, String> producer, String topic, int partition, long[] timestamps) throws Exception {
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (int i = 0; i < timestamps.length; i++) {
            sent.add(producer.send(new ProducerRecord<>(topic, partition, timestamps[i], null, "v" + i)));
        }
        producer.flush();
        List<Long> offsets = new ArrayList<>();
        for (Future<RecordMetadata> f : sent) {
            offsets.add(f.get().offset());
        }
        return offsets;
    }

    static long[] timestamps(long base, int count) {
        long[] out = new long[count];
        for (int i = 0; i < count; i++) {
            out[i] = base + i * 1000L;
        }
        return out;
    }

    static void fill(String bootstrap, String topic, int partitions, int perPartition, long base) throws Exception {
        try (KafkaProducer<String, String> producer = producer(bootstrap)) {
            for (int p = 0; p < partitions; p++) {
                Json.emit("fill", "partition", p, "offsets", send(producer, topic, p, timestamps(base, perPartition)));
            }
        }
    }

    /** Commits PARTITION=OFFSET pairs for a group that has no live members (a simple commit). */
    static void commit(String bootstrap, String group, String topic, List<String> pairs) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (String pair : pairs) {
            String[] parts = pair.split("=");
            offsets.put(new TopicPartition(topic, Integer.parseInt(parts[0])), new OffsetAndMetadata(Long.parseLong(parts[1])));
        }
        try (KafkaConsumer<String, String> consumer = consumer(bootstrap, "group.id", group, "enable.auto.commit", "false")) {
            consumer.commitSync(offsets, Duration.ofSeconds(30));
        }
        Json.emit("commit", "group", group, "count", offsets.size());
    }
}
