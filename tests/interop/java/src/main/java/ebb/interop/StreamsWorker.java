package ebb.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * One Kafka Streams instance of the exactly_once_v2 word count (StreamsChecks' topology) for as long
 * as its standard input stays open, so that a test can run several and kill one with SIGKILL:
 * tests/cluster/test_streams_failover_cluster.py. Properties: ebb.streams.input, ebb.streams.output
 * (the topics), ebb.streams.app (application.id), ebb.streams.victim=true for the instance to kill,
 * ebb.streams.pause=true for an instance that pauses once in the middle of a transaction.
 *
 * It prints "worker_running" with its transactional id (Streams names it application id, process
 * id, thread index; the thread's name carries the first two) when it reaches RUNNING. A victim that
 * reads the word "poison" stops its stream thread at the next record, so the transaction holding
 * the poison's repartition record stays open: it prints "victim_blocked" and waits to be killed.
 * A pausing instance stops its stream thread the same way the first time only, prints "worker_paused"
 * and goes on once a line "resume" arrives on standard input (the test kills a broker meanwhile).
 * Others count "poison" as any word. Every state change is printed ("worker_state", from and to), and
 * every stream thread that dies ("worker_thread_died"; it is replaced); a line "tasks" prints
 * "worker_tasks", how many tasks were made and closed so far. On EOF of standard input it closes and
 * prints "worker_closed".
 */
final class StreamsWorker {
    private StreamsWorker() {}

    static final String POISON = "poison";

    static void run(String bootstrap) throws Exception {
        String input = System.getProperty("ebb.streams.input");
        String output = System.getProperty("ebb.streams.output");
        String app = System.getProperty("ebb.streams.app");
        boolean victim = Boolean.getBoolean("ebb.streams.victim");
        boolean pausing = Boolean.getBoolean("ebb.streams.pause");
        // a replaced stream thread runs the same peek: the flags are shared, the pause happens once
        AtomicBoolean armed = new AtomicBoolean(false);
        AtomicBoolean paused = new AtomicBoolean(false);
        CountDownLatch resume = new CountDownLatch(1);
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .peek((key, word) -> {
                    if (victim && armed.get()) {
                        Json.emit("victim_blocked", "key", key);
                        sleepForever();
                    }
                    if (pausing && armed.get() && paused.compareAndSet(false, true)) {
                        Json.emit("worker_paused", "key", key);
                        awaitQuietly(resume);
                    }
                    if (POISON.equals(word)) {
                        armed.set(true);
                    }
                })
                .groupBy((key, word) -> word, Grouped.with("by-word", Serdes.String(), Serdes.String()))
                .count(Materialized.as("word-counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        java.util.Properties config = StreamsChecks.config(bootstrap, app, StreamsConfig.EXACTLY_ONCE_V2);
        // a dead instance leaves the group within seconds; its open transaction is aborted by the
        // coordinator at transaction.timeout.ms (what Streams sets under exactly_once_v2, made explicit)
        config.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "6000");
        config.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), "1000");
        config.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), "10000");
        List<String> errors = new CopyOnWriteArrayList<>();
        CountDownLatch running = new CountDownLatch(1);
        try (KafkaStreams streams = new KafkaStreams(builder.build(), config)) {
            streams.setStateListener((now, before) -> {
                Json.emit("worker_state", "from", before.name(), "to", now.name());
                if (now == KafkaStreams.State.RUNNING) {
                    running.countDown();
                }
            });
            streams.setUncaughtExceptionHandler(e -> {
                errors.add(Json.error(e));
                Json.emit("worker_thread_died", "error", Json.error(e));
                return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
            });
            streams.start();
            if (!running.await(120, TimeUnit.SECONDS)) {
                Json.emit("worker_running", "error", "not RUNNING after 120 s: " + streams.state());
                return;
            }
            ThreadMetadata thread = streams.metadataForLocalThreads().iterator().next();
            String name = thread.threadName();  // <application id>-<process id>-StreamThread-<index>
            String transactionalId = name.replace("-StreamThread-", "-");
            Json.emit("worker_running", "transactional_id", transactionalId, "thread", name);
            BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = stdin.readLine()) != null; ) {
                switch (line.trim()) {
                    case "resume" -> resume.countDown();
                    case "tasks" -> Json.emit("worker_tasks", "tasks", taskCounts(streams));
                    default -> { }
                }
            }
            resume.countDown();  // the test closes standard input to stop an instance; never left paused
            boolean closed = streams.close(Duration.ofSeconds(30));
            Json.emit("worker_closed", "closed", closed, "final", streams.state().name(), "errors", errors);
        }
    }

    /**
     * How many tasks its threads have made and closed so far: a thread fenced (its tasks migrated)
     * closes them all and makes them again; so does the start-up's second rebalance, at times.
     */
    private static Map<String, Double> taskCounts(KafkaStreams streams) {
        Map<String, Double> tasks = new TreeMap<>();
        streams.metrics().forEach((id, metric) -> {
            if (id.group().equals("stream-thread-metrics") && id.name().matches("task-(created|closed)-total")) {
                tasks.merge(id.name(), (Double) metric.metricValue(), Double::sum);
            }
        });
        return tasks;
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void sleepForever() {
        while (true) {
            try {
                Thread.sleep(60_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }
}
