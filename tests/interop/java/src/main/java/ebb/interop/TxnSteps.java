package ebb.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

/**
 * A transactional producer driven step by step from stdin, for tests that change the cluster between
 * the steps (tests/cluster/test_feature_updates_cluster.py). Arguments: bootstrap, topic, transactional id.
 * Commands, one a line, each answered by one JSON line (Json.emit) naming the command:
 *   open                  a new producer with the id (the old one closed), initTransactions
 *   begin LABEL N         beginTransaction and N records "LABEL-i" over the topic's partitions, each acknowledged
 *   commit | abort        end the transaction
 *   read N                the values a read_committed consumer finds (waiting for N at most 20 s)
 * Every answer carries "v2": whether the producer runs transactions version 2 for its next transaction
 * (Kafka's producer decides it from the brokers' ApiVersions when it connects and after each end).
 */
public final class TxnSteps {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], id = args[2];
        KafkaProducer<String, String> producer = null;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] words = line.trim().split(" ");
            try {
                switch (words[0]) {
                    case "open" -> {
                        if (producer != null) {
                            producer.close();
                        }
                        producer = Data.producer(bootstrap, "transactional.id", id);
                        producer.initTransactions();
                        Json.emit("open", "v2", v2(producer));
                    }
                    case "begin" -> {
                        producer.beginTransaction();
                        List<PartitionInfo> partitions = producer.partitionsFor(topic);
                        for (int i = 0; i < Integer.parseInt(words[2]); i++) {
                            int partition = partitions.get(i % partitions.size()).partition();
                            producer.send(new ProducerRecord<>(topic, partition, null, words[1] + "-" + i)).get();
                        }
                        Json.emit("begin", "v2", v2(producer));
                    }
                    case "commit" -> {
                        producer.commitTransaction();
                        Json.emit("commit", "v2", v2(producer));
                    }
                    case "abort" -> {
                        producer.abortTransaction();
                        Json.emit("abort", "v2", v2(producer));
                    }
                    case "read" -> Json.emit("read", "values", read(bootstrap, topic, Integer.parseInt(words[1])));
                    default -> Json.emit(words[0], "error", "unknown command");
                }
            } catch (Exception e) {
                Json.emit(words[0], "error", e.toString());
            }
        }
        if (producer != null) {
            producer.close();
        }
    }

    private static boolean v2(KafkaProducer<?, ?> producer) throws Exception {
        Field field = KafkaProducer.class.getDeclaredField("transactionManager");
        field.setAccessible(true);
        Object manager = field.get(producer);
        return (Boolean) manager.getClass().getMethod("isTransactionV2Enabled").invoke(manager);
    }

    private static List<String> read(String bootstrap, String topic, int expected) {
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = Data.consumer(bootstrap, "isolation.level", "read_committed")) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo p : consumer.partitionsFor(topic)) {
                tps.add(new TopicPartition(topic, p.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 20_000;
            while (values.size() < expected && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    values.add(r.value());
                }
            }
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(300))) {
                values.add(r.value());  // nothing more may turn up
            }
        }
        values.sort(null);
        return values;
    }
}
