package ebb.interop;

import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * Kafka Streams with the operators whose internal topics ask the most of a broker, at-least-once:
 * a tumbling-window sum (a windowed store, its changelog compact,delete with a retention), a
 * stream-table join after a re-key (a repartition topic), a foreign-key table-table join (its
 * subscription registration and response topics) aggregated with a subtractor, and a windowed
 * stream-stream join (two windowed join stores). Orders arrive in three phases: the tables first
 * (the app is waited on until it has committed their ends, so every join finds them), then orders
 * and clicks, then changed orders (another product) and deleted orders (tombstones). After each
 * phase the four outputs' latest value per key must equal what this class computes from the same
 * data; the internal topics and the configs Streams gave them are printed for the test to compare
 * with Kafka's.
 */
final class StreamsTopologyChecks {
    private StreamsTopologyChecks() {}

    static final int CUSTOMERS = 6;
    static final int PRODUCTS = 4;
    static final int ORDERS = 60;
    static final int CHANGED = 10;  // orders 0..9 move to another product
    static final int DELETED = 5;  // orders 10..14 are deleted
    static final long WINDOW_MS = 10_000;
    static final long JOIN_MS = 3_000;  // a click 2 s after its order joins it, and no other order of its customer
    static final long WAIT_MS = 90_000;

    record Order(String id, String customer, String product, long amount, long timestamp) {
        String value() {
            return customer + ":" + product + ":" + amount;
        }
    }

    static void run(String bootstrap, String prefix) throws Exception {
        String orders = prefix + "-orders";
        String customers = prefix + "-customers";
        String products = prefix + "-products";
        String clicks = prefix + "-clicks";
        String windowTotals = prefix + "-window-totals";
        String regionTotals = prefix + "-region-totals";
        String categoryTotals = prefix + "-category-totals";
        String clickOrders = prefix + "-click-orders";
        String app = prefix + "-app";
        List<String> outputs = List.of(windowTotals, regionTotals, categoryTotals, clickOrders);
        long base = System.currentTimeMillis() / WINDOW_MS * WINDOW_MS - 3_600_000;  // an hour ago, on a window edge

        try (Admin admin = Admin.create(Interop.props(bootstrap))) {
            List<NewTopic> topics = new ArrayList<>();
            for (String topic : List.of(orders, customers, products, clicks, windowTotals, regionTotals, categoryTotals,
                    clickOrders)) {
                topics.add(new NewTopic(topic, 2, Interop.replication()));
            }
            admin.createTopics(topics).all().get();

            StreamsBuilder builder = new StreamsBuilder();
            KTable<String, String> customerTable = builder.table(customers, Consumed.with(Serdes.String(), Serdes.String()),
                    Materialized.as("customers"));
            KTable<String, String> productTable = builder.table(products, Consumed.with(Serdes.String(), Serdes.String()),
                    Materialized.as("products"));
            // one source for the orders: a topic may feed only one source node; tombstones delete from the table
            KStream<String, String> orderRecords = builder.stream(orders, Consumed.with(Serdes.String(), Serdes.String()));
            KStream<String, String> orderStream = orderRecords.filter((id, order) -> order != null);
            KStream<String, String> byCustomer = orderStream.selectKey((id, order) -> order.split(":")[0]);

            // a tumbling-window sum per customer
            byCustomer.groupByKey(Grouped.with("orders-by-customer", Serdes.String(), Serdes.String()))
                    .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(WINDOW_MS), Duration.ofHours(2)))
                    .aggregate(() -> 0L, (customer, order, sum) -> sum + amount(order),
                            Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("window-sums")
                                    .withValueSerde(Serdes.Long()))
                    .toStream((window, sum) -> window.key() + "@" + (window.window().start() - base))
                    .to(windowTotals, Produced.with(Serdes.String(), Serdes.Long()));

            // a stream-table join on the customer, summed per region
            byCustomer.join(customerTable, (order, region) -> region + ":" + amount(order))
                    .groupBy((customer, joined) -> joined.split(":")[0], Grouped.with("by-region", Serdes.String(), Serdes.String()))
                    .aggregate(() -> 0L, (region, joined, sum) -> sum + Long.parseLong(joined.split(":")[1]),
                            Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("region-sums")
                                    .withValueSerde(Serdes.Long()))
                    .toStream().to(regionTotals, Produced.with(Serdes.String(), Serdes.Long()));

            // a foreign-key join of the orders table on its product, summed per category with a subtractor
            orderRecords.toTable(Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("orders")
                            .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()))
                    .join(productTable, order -> order.split(":")[1], (order, category) -> category + ":" + amount(order))
                    .groupBy((id, joined) -> KeyValue.pair(joined.split(":")[0], Long.parseLong(joined.split(":")[1])),
                            Grouped.with("by-category", Serdes.String(), Serdes.Long()))
                    .aggregate(() -> 0L, (category, amount, sum) -> sum + amount, (category, amount, sum) -> sum - amount,
                            Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("category-sums")
                                    .withValueSerde(Serdes.Long()))
                    .toStream().to(categoryTotals, Produced.with(Serdes.String(), Serdes.Long()));

            // a windowed stream-stream join of clicks with the orders of the same customer, counted
            builder.stream(clicks, Consumed.with(Serdes.String(), Serdes.String()))
                    .join(byCustomer, (click, order) -> click + "|" + order,
                            JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(JOIN_MS), Duration.ofHours(2)),
                            StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String()).withName("clicks-orders"))
                    .groupByKey(Grouped.with("joined-by-customer", Serdes.String(), Serdes.String()))
                    .count(Materialized.as("click-counts"))
                    .toStream().to(clickOrders, Produced.with(Serdes.String(), Serdes.Long()));

            List<String> states = new CopyOnWriteArrayList<>();
            List<String> errors = new CopyOnWriteArrayList<>();
            List<Order> sent = new ArrayList<>();
            try (KafkaStreams streams = new KafkaStreams(builder.build(), StreamsChecks.config(bootstrap, app, StreamsConfig.AT_LEAST_ONCE));
                 KafkaConsumer<String, Long> results = new KafkaConsumer<>(Interop.props(bootstrap, "auto.offset.reset", "earliest"),
                         new StringDeserializer(), new LongDeserializer());
                 KafkaProducer<String, String> producer = Data.producer(bootstrap, "linger.ms", "5")) {
                streams.setStateListener((now, before) -> states.add(now.name()));
                streams.setUncaughtExceptionHandler(e -> {
                    errors.add(Json.error(e));
                    return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
                });
                List<TopicPartition> outputPartitions = new ArrayList<>();
                for (String topic : outputs) {
                    outputPartitions.add(new TopicPartition(topic, 0));
                    outputPartitions.add(new TopicPartition(topic, 1));
                }
                results.assign(outputPartitions);
                Map<String, Map<String, Long>> seen = new TreeMap<>();
                for (String topic : outputs) {
                    seen.put(topic, new TreeMap<>());
                }

                Interop.step("topology_tables", () -> {
                    for (int c = 0; c < CUSTOMERS; c++) {
                        producer.send(new ProducerRecord<>(customers, null, base - 60_000, "c" + c, "r" + c % 3));
                    }
                    for (int p = 0; p < PRODUCTS; p++) {
                        producer.send(new ProducerRecord<>(products, null, base - 60_000, "p" + p, "k" + p % 2));
                    }
                    producer.flush();
                    streams.start();
                    Json.emit("topology_tables", "committed", committedTables(admin, app, List.of(customers, products), errors),
                            "errors", errors);
                });

                Interop.step("topology_orders", () -> {
                    for (int i = 0; i < ORDERS; i++) {
                        Order order = new Order("o" + i, "c" + i % CUSTOMERS, "p" + i % PRODUCTS, i + 1, base + i * 1_000L);
                        sent.add(order);
                        producer.send(new ProducerRecord<>(orders, null, order.timestamp(), order.id(), order.value()));
                        if (i % 2 == 0) {
                            producer.send(new ProducerRecord<>(clicks, null, order.timestamp() + 2_000, order.customer(), order.id()));
                        }
                    }
                    producer.flush();
                    Map<String, Map<String, Long>> expected = expected(sent, Map.of(), base);
                    Json.emit("topology_orders", "outputs", outputs(results, seen, expected, prefix, errors),
                            "expected", expected, "errors", errors);
                });

                Interop.step("topology_changes", () -> {
                    Map<String, Order> live = new HashMap<>();
                    for (int i = 0; i < CHANGED; i++) {
                        Order before = sent.get(i);
                        Order order = new Order(before.id(), before.customer(), "p" + (i + 1) % PRODUCTS, before.amount(),
                                base + (ORDERS + 40 + i) * 1_000L);
                        sent.add(order);
                        live.put(order.id(), order);
                        producer.send(new ProducerRecord<>(orders, null, order.timestamp(), order.id(), order.value()));
                    }
                    for (int i = CHANGED; i < CHANGED + DELETED; i++) {
                        live.put("o" + i, null);
                        producer.send(new ProducerRecord<String, String>(orders, null, base + (ORDERS + 60 + i) * 1_000L, "o" + i, (String) null));
                    }
                    producer.flush();
                    Map<String, Map<String, Long>> expected = expected(sent, live, base);
                    Json.emit("topology_changes", "outputs", outputs(results, seen, expected, prefix, errors),
                            "expected", expected, "errors", errors);
                });

                Interop.step("topology_topics", () -> Json.emit("topology_topics", "internal", internalTopics(admin, app)));
                boolean closed = streams.close(Duration.ofSeconds(30));
                Json.emit("topology_closed", "closed", closed, "final", streams.state().name(), "states", states,
                        "errors", errors);
            }
        }
    }

    static long amount(String order) {
        return Long.parseLong(order.split(":")[2]);
    }

    /**
     * What each output must hold (its latest value per key) after the orders SENT, in order, of which
     * the table side sees only the latest per id, with LATEST overriding (null: deleted).
     */
    static Map<String, Map<String, Long>> expected(List<Order> sent, Map<String, Order> latest, long base) {
        Map<String, Long> windows = new TreeMap<>();
        Map<String, Long> regions = new TreeMap<>();
        Map<String, Long> categories = new TreeMap<>();
        Map<String, Long> clicked = new TreeMap<>();
        Map<String, Order> table = new TreeMap<>();
        for (Order order : sent) {
            int customer = Integer.parseInt(order.customer().substring(1));
            windows.merge(order.customer() + "@" + (order.timestamp() - order.timestamp() % WINDOW_MS - base), order.amount(), Long::sum);
            regions.merge("r" + customer % 3, order.amount(), Long::sum);
            table.put(order.id(), order);
        }
        for (int i = 0; i < ORDERS; i += 2) {
            clicked.merge("c" + i % CUSTOMERS, 1L, Long::sum);
        }
        latest.forEach((id, order) -> {
            if (order == null) {
                table.remove(id);
            } else {
                table.put(id, order);
            }
        });
        categories.put("k0", 0L);
        categories.put("k1", 0L);
        for (Order order : table.values()) {
            categories.merge("k" + Integer.parseInt(order.product().substring(1)) % 2, order.amount(), Long::sum);
        }
        Map<String, Map<String, Long>> expected = new TreeMap<>();
        expected.put("window-totals", windows);
        expected.put("region-totals", regions);
        expected.put("category-totals", categories);
        expected.put("click-orders", clicked);
        return expected;
    }

    /** Reads the outputs until each one's latest values are the expected ones (or the wait ends). */
    static Map<String, Map<String, Long>> outputs(KafkaConsumer<String, Long> results, Map<String, Map<String, Long>> seen,
                                                 Map<String, Map<String, Long>> expected, String prefix,
                                                 List<String> errors) {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (!byShortName(seen, prefix).equals(expected) && errors.isEmpty() && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, Long> record : results.poll(Duration.ofMillis(200))) {
                seen.get(record.topic()).put(record.key(), record.value());
            }
        }
        return byShortName(seen, prefix);
    }

    /** The outputs by their names without the prefix, as `expected` names them. */
    static Map<String, Map<String, Long>> byShortName(Map<String, Map<String, Long>> seen, String prefix) {
        Map<String, Map<String, Long>> out = new TreeMap<>();
        seen.forEach((topic, values) -> out.put(topic.substring(prefix.length() + 1), new TreeMap<>(values)));
        return out;
    }

    /** The app's committed offsets on the table topics once they reach the topics' ends (or the wait ends). */
    static Map<String, Long> committedTables(Admin admin, String app, List<String> topics, List<String> errors) throws Exception {
        Map<TopicPartition, org.apache.kafka.clients.admin.OffsetSpec> ends = new HashMap<>();
        for (String topic : topics) {
            ends.put(new TopicPartition(topic, 0), org.apache.kafka.clients.admin.OffsetSpec.latest());
            ends.put(new TopicPartition(topic, 1), org.apache.kafka.clients.admin.OffsetSpec.latest());
        }
        Map<String, Long> wanted = new TreeMap<>();
        admin.listOffsets(ends).all().get().forEach((tp, info) -> wanted.put(tp.toString(), info.offset()));
        Map<String, Long> committed = new TreeMap<>();
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (errors.isEmpty() && System.currentTimeMillis() < deadline) {
            committed.clear();
            Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(app).partitionsToOffsetAndMetadata().get();
            for (String key : wanted.keySet()) {
                committed.put(key, wanted.get(key) == 0 ? 0L : -1L);
            }
            offsets.forEach((tp, offset) -> {
                if (wanted.containsKey(tp.toString()) && offset != null) {
                    committed.put(tp.toString(), offset.offset());
                }
            });
            if (committed.equals(wanted)) {
                break;
            }
            Thread.sleep(100);
        }
        return committed;
    }

    /** The app's internal topics with their partition counts and the configs set on them (not defaults). */
    static Map<String, Object> internalTopics(Admin admin, String app) throws Exception {
        List<String> names = admin.listTopics().names().get().stream().filter(t -> t.startsWith(app)).sorted().toList();
        Map<String, Object> out = new TreeMap<>();
        Map<ConfigResource, Config> configs = admin.describeConfigs(names.stream()
                .map(name -> new ConfigResource(ConfigResource.Type.TOPIC, name)).toList()).all().get();
        Map<String, org.apache.kafka.clients.admin.TopicDescription> described = admin.describeTopics(names).allTopicNames().get();
        for (String name : names) {
            Map<String, String> set = new TreeMap<>();
            for (ConfigEntry entry : configs.get(new ConfigResource(ConfigResource.Type.TOPIC, name)).entries()) {
                if (entry.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG) {
                    set.put(entry.name(), entry.value());
                }
            }
            Map<String, Object> topic = new TreeMap<>();
            topic.put("partitions", described.get(name).partitions().size());
            topic.put("configs", set);
            out.put(name.substring(app.length() + 1), topic);
        }
        return out;
    }
}
