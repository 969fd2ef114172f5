// Times one AlterPartitionReassignments request through Kafka's own Java admin client, so that a
// submit or cancel is timed without a tool's JVM start and its reads before the request.
// Run as a source file with Kafka's jars on the class path:
//   java -cp 'JARS/*' tools/bench/SubmitApi.java BOOTSTRAP PLAN (BROKER|cancel) [WALL_FILE]
// PLAN is kafka-reassign-partitions' plan file; every partition in it moves to BROKER, or has its
// move cancelled. Before the clock starts the client is connected, has the cluster's metadata, and
// has sent two requests of the same size for a topic that does not exist (which change nothing on
// either system), so that its own code is compiled rather than interpreted while timed. Prints the
// seconds; exits 1, with the reason on stderr, if any partition is refused. A cancel of a partition
// whose move finished first (NoReassignmentInProgress, a race Kafka answers per partition) is only
// counted on stderr. WALL_FILE gets the wall-clock time the request was sent, in seconds.
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.NoReassignmentInProgressException;

public class SubmitApi {
  public static void main(String[] args) throws Exception {
    String plan = Files.readString(Path.of(args[1]));
    boolean cancel = args[2].equals("cancel");
    Optional<NewPartitionReassignment> to =
        cancel ? Optional.empty() : Optional.of(new NewPartitionReassignment(List.of(Integer.parseInt(args[2]))));
    // The plan files the bench writes: {"topic":"T","partition":N,"replicas":[...]}, one per partition.
    Matcher m = Pattern.compile("\"topic\":\"([^\"]+)\",\"partition\":(\\d+)").matcher(plan);
    Map<TopicPartition, Optional<NewPartitionReassignment>> moves = new HashMap<>();
    Map<TopicPartition, Optional<NewPartitionReassignment>> warmUp = new HashMap<>();
    while (m.find()) {
      int p = Integer.parseInt(m.group(2));
      moves.put(new TopicPartition(m.group(1), p), to);
      warmUp.put(new TopicPartition("submit-api-warm-up-" + m.group(1), p), to);
    }
    Properties props = new Properties();
    props.put("bootstrap.servers", args[0]);
    props.put("request.timeout.ms", "600000");
    props.put("default.api.timeout.ms", "600000");
    try (Admin admin = Admin.create(props)) {
      admin.listPartitionReassignments().reassignments().get();
      for (int i = 0; i < 2; i++) {
        awaitAll(admin.alterPartitionReassignments(warmUp).values());
      }
      long wall = System.currentTimeMillis();
      long started = System.nanoTime();
      Map<TopicPartition, Throwable> errors = awaitAll(admin.alterPartitionReassignments(moves).values());
      double secs = (System.nanoTime() - started) / 1e9;
      if (args.length > 3) {
        Files.writeString(Path.of(args[3]), String.format("%.3f", wall / 1e3));
      }
      List<TopicPartition> finished = new ArrayList<>();
      errors.forEach((tp, e) -> {
        if (cancel && e instanceof NoReassignmentInProgressException) finished.add(tp);
      });
      finished.forEach(errors::remove);
      if (!finished.isEmpty()) {
        System.err.printf("%d of %d moves had finished before the cancel%n", finished.size(), moves.size());
      }
      if (!errors.isEmpty()) {
        Map.Entry<TopicPartition, Throwable> first = errors.entrySet().iterator().next();
        System.err.printf("%d of %d partitions refused, first %s: %s%n", errors.size(), moves.size(),
            first.getKey(), first.getValue());
        System.exit(1);
      }
      System.out.printf("%.3f%n", secs);
    }
  }

  // Waits for every partition's answer; returns the refused ones with their errors.
  static Map<TopicPartition, Throwable> awaitAll(Map<TopicPartition, KafkaFuture<Void>> answers)
      throws InterruptedException {
    Map<TopicPartition, Throwable> errors = new HashMap<>();
    for (Map.Entry<TopicPartition, KafkaFuture<Void>> a : answers.entrySet()) {
      try {
        a.getValue().get();
      } catch (ExecutionException e) {
        errors.put(a.getKey(), e.getCause());
      }
    }
    return errors;
  }
}
