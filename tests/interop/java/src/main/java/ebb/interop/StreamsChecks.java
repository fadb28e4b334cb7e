package ebb.interop;

import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka Streams, at-least-once: words (keyed by sentence number) are grouped by the word itself,
 * which repartitions them through PREFIX-app-by-word-repartition, and counted into PREFIX-counts.
 * Streams purges the repartition topic with DeleteRecords up to what it has committed, every
 * repartition.purge.interval.ms. The input comes in two waves; after each the check waits for the
 * counts and for the repartition topic's earliest offsets to move past the previous ones wherever
 * records went (wave 1: above 0).
 */
final class StreamsChecks {
    private StreamsChecks() {}

    /** Each wave sends ROUNDS sentences of these words. */
    static final String[] WORDS = {"alpha", "beta", "beta", "gamma", "gamma", "gamma", "delta", "epsilon", "zeta", "eta"};
    static final int ROUNDS = 20;
    static final long WAIT_MS = 60_000;

    static void run(String bootstrap, String prefix) throws Exception {
        run(bootstrap, prefix, StreamsConfig.AT_LEAST_ONCE);
    }

    /** The same topology under `guarantee` (exactly_once_v2: transactions, read_committed readers). */
    static void run(String bootstrap, String prefix, String guarantee) throws Exception {
        String input = prefix + "-words";
        String output = prefix + "-counts";
        String app = prefix + "-app";
        String repartition = app + "-by-word-repartition";
        try (Admin admin = Admin.create(Interop.props(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(input, 2, Interop.replication()), new NewTopic(output, 2, Interop.replication()))).all().get();
            StreamsBuilder builder = new StreamsBuilder();
            builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                    .groupBy((key, word) -> word, Grouped.with("by-word", Serdes.String(), Serdes.String()))
                    .count(Materialized.as("word-counts"))
                    .toStream()
                    .to(output, Produced.with(Serdes.String(), Serdes.Long()));

            List<String> states = new CopyOnWriteArrayList<>();
            List<String> errors = new CopyOnWriteArrayList<>();
            try (KafkaStreams streams = new KafkaStreams(builder.build(), config(bootstrap, app, guarantee));
                 KafkaConsumer<String, Long> counts = new KafkaConsumer<>(Interop.props(bootstrap,
                         "auto.offset.reset", "earliest", "isolation.level", "read_committed"),
                         new StringDeserializer(), new LongDeserializer())) {
                streams.setStateListener((now, before) -> states.add(now.name()));
                streams.setUncaughtExceptionHandler(e -> {
                    errors.add(Json.error(e));
                    return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
                });
                streams.start();
                counts.assign(List.of(new TopicPartition(output, 0), new TopicPartition(output, 1)));
                Map<String, Long> seen = new TreeMap<>();
                List<Long> before = List.of(0L, 0L);
                for (int wave = 1; wave <= 2; wave++) {
                    String name = "streams_wave" + wave;
                    List<Long> previous = before;
                    int waves = wave;
                    before = List.of();
                    try {
                        send(bootstrap, input, wave);
                        Map<String, Long> counted = counts(counts, seen, expected(waves), errors);
                        Map<String, List<Long>> offsets = purge(admin, repartition, previous, errors);
                        before = offsets.get("earliest");
                        Json.emit(name, "counts", counted, "repartition", offsets, "errors", errors);
                    } catch (Exception e) {
                        Json.emit(name, "error", Json.error(e));
                    }
                }
                Interop.step("streams_topics", () -> Json.emit("streams_topics",
                        "internal", admin.listTopics().names().get().stream().filter(t -> t.startsWith(app)).sorted().toList()));
                // the state listener runs after close() has seen NOT_RUNNING, so ask the instance itself
                boolean closed = streams.close(Duration.ofSeconds(30));
                Json.emit("streams_closed", "closed", closed, "final", streams.state().name(),
                        "states", states, "errors", errors);
            }
        }
    }

    static void send(String bootstrap, String input, int wave) throws Exception {
        try (KafkaProducer<String, String> producer = Data.producer(bootstrap)) {
            for (int i = 0; i < ROUNDS * WORDS.length; i++) {
                producer.send(new ProducerRecord<>(input, "wave" + wave + "-sentence-" + i / WORDS.length, WORDS[i % WORDS.length]));
            }
            producer.flush();
        }
    }

    static Map<String, Long> expected(int waves) {
        Map<String, Long> expected = new TreeMap<>();
        for (String word : WORDS) {
            expected.merge(word, (long) ROUNDS * waves, Long::sum);
        }
        return expected;
    }

    static Properties config(String bootstrap, String app, String guarantee) throws Exception {
        Properties props = Interop.props(bootstrap,
                StreamsConfig.APPLICATION_ID_CONFIG, app,
                StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee,
                StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200",
                StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, "500",
                StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0",
                StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1",
                StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("ebb-streams").toString(),
                StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName(),
                StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        return props;
    }

    /** The last count per word on the output topic, once they are the expected ones (or the wait ends). */
    static Map<String, Long> counts(KafkaConsumer<String, Long> consumer, Map<String, Long> seen,
                                    Map<String, Long> expected, List<String> errors) {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (!seen.equals(expected) && errors.isEmpty() && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, Long> record : consumer.poll(Duration.ofMillis(200))) {
                seen.put(record.key(), record.value());
            }
        }
        return new TreeMap<>(seen);
    }

    /**
     * The repartition topic's earliest and latest offsets per partition, once every partition that
     * has records beyond PREVIOUS (earliest offsets before) has an earliest offset past PREVIOUS.
     */
    static Map<String, List<Long>> purge(Admin admin, String topic, List<Long> previous, List<String> errors) throws Exception {
        List<Long> earliest;
        List<Long> latest;
        long deadline = System.currentTimeMillis() + WAIT_MS;
        do {
            Thread.sleep(200);
            earliest = offsets(admin, topic, previous.size(), OffsetSpec.earliest());
            latest = offsets(admin, topic, previous.size(), OffsetSpec.latest());
        } while (!moved(previous, earliest, latest) && errors.isEmpty() && System.currentTimeMillis() < deadline);
        return Map.of("earliest", earliest, "latest", latest);
    }

    static boolean moved(List<Long> previous, List<Long> earliest, List<Long> latest) {
        for (int p = 0; p < previous.size(); p++) {
            if (latest.get(p) > previous.get(p) && earliest.get(p) <= previous.get(p)) {
                return false;
            }
        }
        return true;
    }

    static List<Long> offsets(Admin admin, String topic, int partitions, OffsetSpec spec) throws Exception {
        Map<TopicPartition, OffsetSpec> request = new TreeMap<>((a, b) -> Integer.compare(a.partition(), b.partition()));
        for (int p = 0; p < partitions; p++) {
            request.put(new TopicPartition(topic, p), spec);
        }
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> result = admin.listOffsets(request).all().get();
        List<Long> out = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            out.add(result.get(new TopicPartition(topic, p)).offset());
        }
        return out;
    }
}
