// Consumer-group figures through Kafka's own Java consumer: the same driver for Kafka and Ferry.
// Run as a source file with Kafka's jars on the class path:
//   java -cp 'JARS/*' tools/bench/GroupBench.java MODE BOOTSTRAP PROTOCOL TOPIC ARGS...
// PROTOCOL is the consumers' group.protocol: classic, or consumer (KIP-848). TOPIC is created,
// unless it exists, with one partition per member and 3 replicas. The consumers are threads of
// this process, with the client's defaults unless said. Modes (each prints one line):
//   stable MEMBERS: a member of a group of its own joins and leaves first (unmeasured: the
//     offsets topic then exists and the client's code is loaded); then MEMBERS consumers of a new
//     group start polling together; prints the ms until each has partitions and the group's
//     description says Stable with MEMBERS members, each with partitions.
//   commits MEMBERS SECONDS: MEMBERS consumers of one group, once all have partitions, each
//     poll (returning at once) and commitSync their positions in a loop; counted for SECONDS after
//     2 s unmeasured; prints commits per second (all members) and the p99 commit latency in ms.
//   failover AVOID ID=PID,...: one consumer in a group whose coordinator is not node AVOID (the
//     active controller: its loss is timed elsewhere) commits; its coordinator's process gets
//     SIGKILL; prints the ms from the kill until a commit succeeds again, and the killed node id.
//     Its client retries every 20 to 100 ms (instead of up to 1 s) so that the figure is the
//     cluster's.
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.utils.Utils;

public class GroupBench {
  static String bootstrap;
  static String protocol;
  static String topic;
  static final long DEADLINE_NS = 120_000_000_000L;

  public static void main(String[] a) throws Exception {
    bootstrap = a[1];
    protocol = a[2];
    topic = a[3];
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      switch (a[0]) {
        case "stable" -> stable(admin, Integer.parseInt(a[4]));
        case "commits" -> commits(admin, Integer.parseInt(a[4]), Integer.parseInt(a[5]));
        case "failover" -> failover(admin, Integer.parseInt(a[4]), a[5]);
        default -> throw new IllegalArgumentException("unknown mode " + a[0]);
      }
    }
    // The members left in their threads; nothing else needs to finish.
    System.exit(0);
  }

  /** A consumer of GROUP that counts the partitions it owns (its listener runs in its poll). */
  static final class Member implements ConsumerRebalanceListener {
    final KafkaConsumer<byte[], byte[]> consumer;
    final String id;
    final AtomicInteger owned = new AtomicInteger();

    Member(String group, String id, Map<String, String> extra) {
      Properties p = new Properties();
      p.put("bootstrap.servers", bootstrap);
      p.put("group.id", group);
      p.put("group.protocol", protocol);
      p.put("client.id", id);
      p.put("enable.auto.commit", "false");
      p.put("auto.offset.reset", "earliest");
      p.putAll(extra);
      consumer = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
      this.id = id;
    }

    void subscribe() {
      consumer.subscribe(List.of(topic), this);
    }

    /** The member's positions, to commit (each partition's is known after its first poll). */
    Map<TopicPartition, OffsetAndMetadata> positions() {
      Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
      for (TopicPartition tp : consumer.assignment()) {
        m.put(tp, new OffsetAndMetadata(consumer.position(tp)));
      }
      return m;
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
      owned.addAndGet(parts.size());
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
      owned.addAndGet(-parts.size());
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> parts) {
      owned.addAndGet(-parts.size());
    }
  }

  /** Creates TOPIC (retrying while the cluster settles) and waits until each partition has a leader. */
  static void ensureTopic(Admin admin, int partitions) throws Exception {
    long start = System.nanoTime();
    while (true) {
      try {
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 3))).all().get();
      } catch (ExecutionException e) {
        if (!(e.getCause() instanceof TopicExistsException)) {
          check(start, e);
          Thread.sleep(500);
          continue;
        }
      }
      if (leaders(admin, topic) != null) {
        return;
      }
      check(start, null);
      Thread.sleep(200);
    }
  }

  /** Each partition's leader of TOPIC, or null while the topic is unknown or a partition has none. */
  static Map<Integer, Integer> leaders(Admin admin, String t) {
    try {
      TopicDescription d = admin.describeTopics(List.of(t)).allTopicNames().get().get(t);
      Map<Integer, Integer> m = new HashMap<>();
      for (TopicPartitionInfo p : d.partitions()) {
        if (p.leader() == null) {
          return null;
        }
        m.put(p.partition(), p.leader().id());
      }
      return m;
    } catch (Exception e) {
      return null;
    }
  }

  static void check(long start, Exception e) {
    if (System.nanoTime() - start > DEADLINE_NS) {
      throw new IllegalStateException("gave up after 120 s", e);
    }
  }

  /** The group's description, or null while it cannot be had. */
  static ConsumerGroupDescription describe(Admin admin, String group) {
    try {
      return admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
    } catch (Exception e) {
      return null;
    }
  }

  /** True once the group is Stable with N members and every member has partitions. */
  static boolean stableWith(Admin admin, String group, int n) {
    ConsumerGroupDescription d = describe(admin, group);
    return d != null
        && d.groupState() == GroupState.STABLE
        && d.members().size() == n
        && d.members().stream().allMatch(m -> !m.assignment().topicPartitions().isEmpty());
  }

  /** Starts one thread per member: subscribe, then BODY (which polls) until it returns; close. */
  static List<Thread> run(List<Member> ms, CountDownLatch gate, MemberBody body) {
    List<Thread> ts = new ArrayList<>();
    for (Member m : ms) {
      Thread t = new Thread(() -> {
        try {
          gate.await();
          m.subscribe();
          body.run(m);
        } catch (Exception e) {
          System.err.println(m.id + ": " + e);
        } finally {
          m.consumer.close();
        }
      });
      t.start();
      ts.add(t);
    }
    return ts;
  }

  interface MemberBody {
    void run(Member m) throws Exception;
  }

  static volatile boolean stop;

  static void stable(Admin admin, int n) throws Exception {
    ensureTopic(admin, n);
    // Unmeasured: one member of a group of its own joins and leaves.
    Member warm = new Member("stable-warm-" + protocol, "warm", Map.of());
    warm.subscribe();
    long start = System.nanoTime();
    while (warm.owned.get() == 0) {
      warm.consumer.poll(Duration.ofMillis(100));
      check(start, null);
    }
    warm.consumer.close();

    String group = "stable-" + protocol;
    List<Member> ms = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      ms.add(new Member(group, "stable-" + i, Map.of()));
    }
    CountDownLatch gate = new CountDownLatch(1);
    List<Thread> ts = run(ms, gate, m -> {
      while (!stop) {
        m.consumer.poll(Duration.ofMillis(100));
      }
    });
    start = System.nanoTime();
    gate.countDown();
    while (!(ms.stream().allMatch(m -> m.owned.get() > 0) && stableWith(admin, group, n))) {
      check(start, null);
      Thread.sleep(5);
    }
    System.out.println((System.nanoTime() - start) / 1_000_000);
    stop = true;
    for (Thread t : ts) {
      t.join(30_000);
    }
  }

  static void commits(Admin admin, int n, int seconds) throws Exception {
    ensureTopic(admin, n);
    String group = "commits-" + protocol;
    List<Member> ms = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      ms.add(new Member(group, "commits-" + i, Map.of()));
    }
    // Set once every member has partitions: from then on each commits after every poll.
    long[] window = new long[2];
    CountDownLatch ready = new CountDownLatch(1);
    List<List<Long>> latencies = new ArrayList<>();
    AtomicInteger failed = new AtomicInteger();
    for (int i = 0; i < n; i++) {
      latencies.add(new ArrayList<>());
    }
    CountDownLatch gate = new CountDownLatch(1);
    List<Thread> ts = run(ms, gate, m -> {
      List<Long> mine = latencies.get(ms.indexOf(m));
      while (ready.getCount() > 0) {
        m.consumer.poll(Duration.ofMillis(100));
      }
      while (true) {
        m.consumer.poll(Duration.ZERO);
        long t0 = System.nanoTime();
        if (t0 >= window[1]) {
          return;
        }
        try {
          m.consumer.commitSync(m.positions());
        } catch (Exception e) {
          failed.incrementAndGet();
          continue;
        }
        if (t0 >= window[0]) {
          mine.add(System.nanoTime() - t0);
        }
      }
    });
    long start = System.nanoTime();
    gate.countDown();
    while (!(ms.stream().allMatch(m -> m.owned.get() > 0) && stableWith(admin, group, n))) {
      check(start, null);
      Thread.sleep(20);
    }
    window[0] = System.nanoTime() + 2_000_000_000L;
    window[1] = window[0] + seconds * 1_000_000_000L;
    ready.countDown();
    for (Thread t : ts) {
      t.join();
    }
    List<Long> all = new ArrayList<>();
    latencies.forEach(all::addAll);
    all.sort(null);
    if (failed.get() > 0) {
      System.err.println(failed.get() + " commits failed");
    }
    double p99 = all.isEmpty() ? 0 : all.get((int) (all.size() * 0.99)) / 1e6;
    System.out.printf("%.1f %.2f%n", all.size() / (double) seconds, p99);
  }

  static void failover(Admin admin, int avoid, String pidList) throws Exception {
    Map<Integer, Long> pids = new HashMap<>();
    for (String kv : pidList.split(",")) {
      String[] p = kv.split("=");
      pids.put(Integer.parseInt(p[0]), Long.parseLong(p[1]));
    }
    ensureTopic(admin, 1);
    // The offsets topic exists after a first FindCoordinator (an offsets fetch makes one).
    long start = System.nanoTime();
    Map<Integer, Integer> offsets;
    while ((offsets = leaders(admin, "__consumer_offsets")) == null) {
      try {
        admin.listConsumerGroupOffsets("failover-probe").partitionsToOffsetAndMetadata().get();
      } catch (ExecutionException e) {
        // Not yet: the coordinator may still be loading.
      }
      check(start, null);
      Thread.sleep(200);
    }
    // A group whose offsets partition (Kafka's abs(hashCode) % partitions) avoid does not lead.
    String group = null;
    for (int k = 0; group == null; k++) {
      String g = "failover-" + protocol + "-" + k;
      if (offsets.get(Utils.abs(g.hashCode()) % offsets.size()) != avoid) {
        group = g;
      }
    }
    Member m = new Member(group, "failover", Map.of(
        "retry.backoff.ms", "20", "retry.backoff.max.ms", "100",
        "reconnect.backoff.ms", "20", "reconnect.backoff.max.ms", "100"));
    m.subscribe();
    while (m.owned.get() == 0) {
      m.consumer.poll(Duration.ofMillis(100));
      check(start, null);
    }
    Map<TopicPartition, OffsetAndMetadata> commit = m.positions();
    for (int i = 0; i < 3; i++) {
      m.consumer.commitSync(commit);
    }
    ConsumerGroupDescription d = describe(admin, group);
    if (d == null || d.coordinator() == null) {
      throw new IllegalStateException("no coordinator for " + group);
    }
    int coordinator = d.coordinator().id();
    ProcessHandle.of(pids.get(coordinator)).orElseThrow().destroyForcibly();
    long killed = System.nanoTime();
    List<String> seen = new ArrayList<>();
    while (true) {
      check(killed, null);
      m.consumer.poll(Duration.ofMillis(10));
      try {
        m.consumer.commitSync(commit, Duration.ofSeconds(1));
        break;
      } catch (Exception e) {
        String name = e.getClass().getSimpleName();
        if (!seen.contains(name)) {
          seen.add(name);
        }
      }
    }
    System.out.println((System.nanoTime() - killed) / 1_000_000 + " " + coordinator);
    if (!seen.isEmpty()) {
      System.err.println("failover of node " + coordinator + ", commits failed meanwhile with " + seen);
    }
    m.consumer.close();
  }
}
