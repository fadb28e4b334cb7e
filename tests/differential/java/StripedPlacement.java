// Kafka's own StripedReplicaPlacer, driven with a seeded java.util.Random, for
// tests/differential/test_placement_against_kafka.py. Each stdin line is one placement:
//   seed partitions replicas id:rack id:rack ...   (rack "-" for a broker without one)
// and each answer line the partitions' replicas: "1,2,3 2,3,1 ...".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.stream.Collectors;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.metadata.placement.ClusterDescriber;
import org.apache.kafka.metadata.placement.PartitionAssignment;
import org.apache.kafka.metadata.placement.PlacementSpec;
import org.apache.kafka.metadata.placement.StripedReplicaPlacer;
import org.apache.kafka.metadata.placement.TopicAssignment;
import org.apache.kafka.metadata.placement.UsableBroker;

public class StripedPlacement {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            long seed = Long.parseLong(words[0]);
            int partitions = Integer.parseInt(words[1]);
            short replicas = Short.parseShort(words[2]);
            List<UsableBroker> brokers = new ArrayList<>();
            for (int i = 3; i < words.length; i++) {
                String[] pair = words[i].split(":");
                Optional<String> rack = pair[1].equals("-") ? Optional.empty() : Optional.of(pair[1]);
                brokers.add(new UsableBroker(Integer.parseInt(pair[0]), rack, false));
            }
            ClusterDescriber cluster = new ClusterDescriber() {
                public Iterator<UsableBroker> usableBrokers() { return brokers.iterator(); }
                public Uuid defaultDir(int brokerId) { return Uuid.ZERO_UUID; }
            };
            TopicAssignment placed = new StripedReplicaPlacer(new Random(seed))
                .place(new PlacementSpec(0, partitions, replicas), cluster);
            List<String> out = new ArrayList<>();
            for (PartitionAssignment p : placed.assignments()) {
                out.add(p.replicas().stream().map(String::valueOf).collect(Collectors.joining(",")));
            }
            System.out.println(String.join(" ", out));
        }
    }
}
