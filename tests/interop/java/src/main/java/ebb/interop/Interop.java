package ebb.interop;

import java.util.Arrays;
import java.util.List;
import java.util.Properties;

/**
 * Kafka's own Java clients against a running broker, for tests/interop.
 *
 *     java -cp target/classes:target/lib/* ebb.interop.Interop BOOTSTRAP PREFIX SUITE...
 *
 * Each suite (admin, groups, producer, transactions, consumer, streams, streams_topology, restore_count, restore_again,
 * streams_worker) runs its steps in order and prints one JSON line
 * per step with what the client saw ({"step": ..., ...}), or {"step": ..., "error": ...} when the
 * client threw; pytest judges the lines. Names start with PREFIX so runs never share a topic.
 * The last line is {"step": "done"}.
 *
 *     ... Interop BOOTSTRAP - fill TOPIC PARTITIONS PER_PARTITION BASE_TIMESTAMP_MS
 *     ... Interop BOOTSTRAP - commit GROUP TOPIC PARTITION=OFFSET...
 *
 * set up data for the tool tests: records "v<i>" with timestamps BASE + i*1000 in every partition,
 * and a group's committed offsets.
 */
public final class Interop {
    private Interop() {}

    /** A step that may throw whatever the client throws. */
    interface Step {
        void run() throws Exception;
    }

    /** Runs a step; if the client throws, the step's line carries the error instead. */
    static void step(String name, Step body) {
        try {
            body.run();
        } catch (Exception e) {
            Json.emit(name, "error", Json.error(e));
        }
    }

    /** The replication factor of the topics the suites create (-Debb.interop.replication; 1 on one broker). */
    static short replication() {
        return Short.parseShort(System.getProperty("ebb.interop.replication", "1"));
    }

    static Properties props(String bootstrap, String... keysAndValues) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        for (int i = 0; i < keysAndValues.length; i += 2) {
            props.put(keysAndValues[i], keysAndValues[i + 1]);
        }
        return props;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: Interop BOOTSTRAP PREFIX SUITE... | Interop BOOTSTRAP - fill|commit ARGS...");
            System.exit(2);
        }
        String bootstrap = args[0];
        String prefix = args[1];
        List<String> rest = Arrays.asList(args).subList(2, args.length);
        switch (rest.get(0)) {
            case "fill" -> Data.fill(bootstrap, rest.get(1), Integer.parseInt(rest.get(2)),
                    Integer.parseInt(rest.get(3)), Long.parseLong(rest.get(4)));
            case "commit" -> Data.commit(bootstrap, rest.get(1), rest.get(2), rest.subList(3, rest.size()));
            default -> {
                for (String suite : rest) {
                    switch (suite) {
                        case "admin" -> AdminChecks.run(bootstrap, prefix);
                        case "groups" -> GroupChecks.run(bootstrap, prefix);
                        case "membership" -> MembershipChecks.run(bootstrap, prefix);
                        case "share" -> ShareChecks.run(bootstrap, prefix);
                        case "producer" -> ProducerChecks.run(bootstrap, prefix);
                        case "transactions" -> TransactionChecks.run(bootstrap, prefix);
                        case "consumer" -> ConsumerChecks.run(bootstrap, prefix);
                        case "streams" -> StreamsChecks.run(bootstrap, prefix);
                        case "streams_eos" -> StreamsChecks.run(bootstrap, prefix, "exactly_once_v2");
                        case "streams_topology" -> StreamsTopologyChecks.run(bootstrap, prefix);
                        case "restore_count" -> RestoreChecks.count(bootstrap, prefix);
                        case "restore_again" -> RestoreChecks.again(bootstrap, prefix);
                        case "streams_worker" -> StreamsWorker.run(bootstrap);
                        default -> throw new IllegalArgumentException("unknown suite " + suite);
                    }
                }
            }
        }
        Json.emit("done");
    }
}
