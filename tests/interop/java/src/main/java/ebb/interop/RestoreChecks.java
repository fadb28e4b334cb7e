package ebb.interop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

/**
 * Kafka Streams restoring a persistent (RocksDB) store from its compacted changelog. The topology
 * counts records per key (groupByKey, count) into the store PREFIX-counts, whose changelog
 * PREFIX-app-PREFIX-counts-changelog Streams creates with cleanup.policy=compact and the small
 * segments asked for with the `topic.` prefix. Two suites, each its own JVM (a stopped and restarted
 * application), sharing -Debb.streams.state.dir:
 * - restore_count: the first WAVES waves of input, counted, then a clean close;
 * - restore_again: started on an emptied state dir, it restores the store from the changelog
 *   (a restore listener counts what it read), then the same keys are updated for CHURN more waves;
 *   after each wave it reports the changelog partition's bytes on disk (-Debb.streams.changelog.dir)
 *   and its cleaner-offset-checkpoint entry (-Debb.streams.checkpoint).
 * Every wait is for the store's counts to equal the input's, with a deadline.
 */
final class RestoreChecks {
    private RestoreChecks() {}

    static final int KEYS = 40;
    static final int WAVES = 25;
    static final long WAIT_MS = 30_000;

    static String store(String prefix) {
        return prefix + "-counts";
    }

    static String changelog(String prefix) {
        return prefix + "-app-" + store(prefix) + "-changelog";
    }

    /** What WAVES waves send: key-k gets 1 + k % 3 records a wave. */
    static Map<String, Long> expected(int waves) {
        Map<String, Long> expected = new TreeMap<>();
        for (int k = 0; k < KEYS; k++) {
            expected.put("key-" + k, (long) waves * (1 + k % 3));
        }
        return expected;
    }

    static void send(KafkaProducer<String, String> producer, String topic, int wave) throws Exception {
        for (int k = 0; k < KEYS; k++) {
            for (int i = 0; i <= k % 3; i++) {
                producer.send(new ProducerRecord<>(topic, "key-" + k, "wave-" + wave));
            }
        }
        producer.flush();
    }

    static Properties config(String bootstrap, String prefix) {
        Properties props = Interop.props(bootstrap,
                StreamsConfig.APPLICATION_ID_CONFIG, prefix + "-app",
                StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200",
                StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0",  // every update reaches the changelog
                StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1",
                StreamsConfig.STATE_DIR_CONFIG, System.getProperty("ebb.streams.state.dir"),
                StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName(),
                StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        // the changelog's own configs (Streams adds cleanup.policy=compact): small segments, so the
        // cleaner has closed segments to clean, removed at once once cleaned
        props.put(StreamsConfig.topicPrefix("segment.bytes"), System.getProperty("ebb.streams.segment.bytes"));
        props.put(StreamsConfig.topicPrefix("min.cleanable.dirty.ratio"), "0.01");
        props.put(StreamsConfig.topicPrefix("file.delete.delay.ms"), "0");
        // a segment must hold the largest batch: the changelog's producer batches stay below a quarter of one
        props.put(StreamsConfig.producerPrefix("batch.size"), String.valueOf(Integer.parseInt(
                System.getProperty("ebb.streams.segment.bytes")) / 4));
        return props;
    }

    static KafkaStreams app(String bootstrap, String prefix, List<String> errors) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(prefix + "-keys", Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .count(Materialized.as(store(prefix)));  // a persistent store: RocksDB
        KafkaStreams streams = new KafkaStreams(builder.build(), config(bootstrap, prefix));
        streams.setUncaughtExceptionHandler(e -> {
            errors.add(Json.error(e));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        return streams;
    }

    /** The store's counts once they equal `expected` (or the deadline passes, or the app failed). */
    static Map<String, Long> counts(KafkaStreams streams, String prefix, Map<String, Long> expected,
                                    List<String> errors) throws InterruptedException {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        Map<String, Long> seen = new TreeMap<>();
        while (errors.isEmpty() && System.currentTimeMillis() < deadline) {
            seen = new TreeMap<>();
            try {
                ReadOnlyKeyValueStore<String, Long> view = streams.store(
                        StoreQueryParameters.fromNameAndType(store(prefix), QueryableStoreTypes.keyValueStore()));
                try (KeyValueIterator<String, Long> all = view.all()) {
                    while (all.hasNext()) {
                        var kv = all.next();
                        seen.put(kv.key, kv.value);
                    }
                }
            } catch (org.apache.kafka.streams.errors.InvalidStateStoreException e) {
                // not queryable yet: still restoring or rebalancing
            }
            if (seen.equals(expected)) {
                break;
            }
            Thread.sleep(100);
        }
        return seen;
    }

    static void count(String bootstrap, String prefix) throws Exception {
        try (Admin admin = Admin.create(Interop.props(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(prefix + "-keys", 1, Interop.replication()))).all().get();
        }
        List<String> errors = new CopyOnWriteArrayList<>();
        try (KafkaProducer<String, String> producer = Data.producer(bootstrap);
             KafkaStreams streams = app(bootstrap, prefix, errors)) {
            streams.start();
            for (int wave = 1; wave <= WAVES; wave++) {
                send(producer, prefix + "-keys", wave);
            }
            Map<String, Long> counted = counts(streams, prefix, expected(WAVES), errors);
            // leave the group: else the restarted member waits out this one's session timeout
            boolean closed = streams.close(CloseOptions.groupMembershipOperation(
                    CloseOptions.GroupMembershipOperation.LEAVE_GROUP).withTimeout(Duration.ofSeconds(30)));
            Json.emit("restore_counted", "counts", counted, "closed", closed, "errors", errors);
        }
    }

    static void again(String bootstrap, String prefix) throws Exception {
        int churn = Integer.parseInt(System.getProperty("ebb.streams.churn.waves"));
        List<String> errors = new CopyOnWriteArrayList<>();
        AtomicLong restored = new AtomicLong();
        List<Long> range = new CopyOnWriteArrayList<>();
        try (Admin admin = Admin.create(Interop.props(bootstrap));
             KafkaProducer<String, String> producer = Data.producer(bootstrap);
             KafkaStreams streams = app(bootstrap, prefix, errors)) {
            streams.setGlobalStateRestoreListener(new StateRestoreListener() {
                @Override
                public void onRestoreStart(TopicPartition tp, String name, long start, long end) {
                    range.add(start);
                    range.add(end);
                }

                @Override
                public void onBatchRestored(TopicPartition tp, String name, long batchEnd, long records) {
                    restored.addAndGet(records);
                }

                @Override
                public void onRestoreEnd(TopicPartition tp, String name, long total) { }
            });
            streams.start();
            Map<String, Long> counted = counts(streams, prefix, expected(WAVES), errors);
            Json.emit("restore_restored", "counts", counted, "restored", restored.get(), "range", range, "errors", errors);

            List<Map<String, Object>> samples = new ArrayList<>();
            TopicPartition tp = new TopicPartition(changelog(prefix), 0);
            for (int wave = WAVES + 1; wave <= WAVES + churn; wave++) {
                send(producer, prefix + "-keys", wave);
                Map<String, Long> now = counts(streams, prefix, expected(wave), errors);
                Map<String, Object> sample = new TreeMap<>();
                sample.put("wave", wave);
                sample.put("right", now.equals(expected(wave)));
                sample.put("bytes", bytes(Path.of(System.getProperty("ebb.streams.changelog.dir"))));
                sample.put("checkpoint", checkpoint(Path.of(System.getProperty("ebb.streams.checkpoint")), changelog(prefix)));
                sample.put("end", admin.listOffsets(Map.of(tp, OffsetSpec.latest())).all().get().get(tp).offset());
                samples.add(sample);
            }
            Map<String, Long> last = counts(streams, prefix, expected(WAVES + churn), errors);
            boolean closed = streams.close(Duration.ofSeconds(30));
            Json.emit("restore_churn", "samples", samples, "counts", last, "closed", closed, "errors", errors);
        }
    }

    /** The bytes of the regular files in a partition directory, as `du --apparent-size` counts them. */
    static long bytes(Path dir) throws IOException {
        long total = 0;
        try (Stream<Path> files = Files.list(dir)) {
            for (Path file : (Iterable<Path>) files::iterator) {
                try {
                    total += Files.isRegularFile(file) ? Files.size(file) : 0;
                } catch (java.nio.file.NoSuchFileException e) {
                    // removed by the cleaner's swap while listed
                }
            }
        }
        return total;
    }

    /** The changelog's offset in cleaner-offset-checkpoint (version, count, then `topic partition offset`), or -1. */
    static long checkpoint(Path file, String topic) throws IOException {
        if (!Files.exists(file)) {
            return -1;
        }
        for (String line : Files.readAllLines(file)) {
            String[] parts = line.trim().split(" ");
            if (parts.length == 3 && parts[0].equals(topic) && parts[1].equals("0")) {
                return Long.parseLong(parts[2]);
            }
        }
        return -1;
    }
}
