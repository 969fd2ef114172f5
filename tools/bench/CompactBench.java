// Kafka's side of ferry-compact-bench: writes the same dirty log (keyed records, each key written
// many times, in the same order and batches) with Kafka's own log code, then times one clean of
// it by Kafka's own Cleaner, built as a cleaner thread builds it with the broker's defaults (a
// 128 MiB dedupe buffer, 256 KiB I/O buffers, no throttle). Prints the throughput: the dirty
// bytes over the clean's time, in MB/s (10^6 bytes). Run as a source file with Kafka's jars:
//   java -cp 'JARS/*' tools/bench/CompactBench.java WORK_DIR SIZE_MIB ROUNDS
// (100,000 keys, 100-byte values, 130 records a batch, uncompressed, 64 MiB segments, as
// ferry-compact-bench's defaults). The log was just written, so its pages are likely cached.
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.stream.Stream;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.SimpleRecord;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.log.Cleaner;
import org.apache.kafka.storage.internals.log.CleanerStats;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.LogToClean;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.SkimpyOffsetMap;
import org.apache.kafka.storage.internals.log.UnifiedLog;
import org.apache.kafka.storage.internals.utils.Throttler;
import org.apache.kafka.storage.log.metrics.BrokerTopicStats;

public class CompactBench {
  static final int KEYS = 100_000;
  static final int VALUE_BYTES = 100;
  static final int BATCH_RECORDS = 130;

  public static void main(String[] a) throws Exception {
    Path work = Path.of(a[0]);
    long size = Long.parseLong(a[1]) << 20;
    int rounds = Integer.parseInt(a[2]);
    Properties props = new Properties();
    props.put("segment.bytes", String.valueOf(64 << 20));
    props.put("cleanup.policy", "compact");
    // Old segments go at once rather than after a minute (not timed either way).
    props.put("file.delete.delay.ms", "0");
    LogConfig config = new LogConfig(props);
    KafkaScheduler scheduler = new KafkaScheduler(1);
    scheduler.startup();
    List<Double> rates = new ArrayList<>();
    for (int round = 0; round < rounds; round++) {
      delete(work);
      File dir = work.resolve("t-0").toFile();
      UnifiedLog log = UnifiedLog.create(dir, config, 0L, 0L, scheduler, new BrokerTopicStats(),
          Time.SYSTEM, 900_000, new ProducerStateManagerConfig(86_400_000, false), 600_000,
          new LogDirFailureChannel(1), true, Optional.empty());
      long records = write(log, size);
      // As LogCleaner builds each of its cleaner threads with the broker's defaults.
      Cleaner cleaner = new Cleaner(0, new SkimpyOffsetMap(128 << 20), 512 * 1024 / 2, 1_048_588,
          0.9, new Throttler(Double.MAX_VALUE, 300, "cleaner-io", "bytes", Time.SYSTEM),
          Time.SYSTEM, tp -> { });
      LogToClean dirty = new LogToClean(log, log.logStartOffset(), log.activeSegment().baseOffset(), false);
      long bytes = dirty.cleanableBytes();
      long start = System.nanoTime();
      Map.Entry<Long, CleanerStats> done = cleaner.clean(dirty);
      double secs = (System.nanoTime() - start) / 1e9;
      double rate = bytes / secs / 1e6;
      rates.add(rate);
      System.out.printf("{\"round\":%d,\"records\":%d,\"cleaned_bytes_before\":%d,\"bytes_after\":%d,"
              + "\"seconds\":%.3f,\"mb_per_s\":%.1f}%n",
          round, records, bytes, log.size(), secs, rate);
      log.close();
    }
    scheduler.shutdown();
    delete(work);
    rates.sort(null);
    System.out.printf("compaction throughput (dirty bytes cleaned per second, %d rounds): median %.1f MB/s, min %.1f, max %.1f%n",
        rates.size(), rates.get(rates.size() / 2), rates.get(0), rates.get(rates.size() - 1));
  }

  /** Writes keyed batches until the log holds SIZE bytes (ferry-compact-bench's keys and order). */
  static long write(UnifiedLog log, long size) throws Exception {
    byte[] value = new byte[VALUE_BYTES];
    java.util.Arrays.fill(value, (byte) 'v');
    long n = 0;
    long state = 0x9e3779b97f4a7c15L;
    while (log.size() < size) {
      SimpleRecord[] batch = new SimpleRecord[BATCH_RECORDS];
      for (int i = 0; i < BATCH_RECORDS; i++) {
        // xorshift: every key comes back many times, in no order.
        state ^= state << 13;
        state ^= state >>> 7;
        state ^= state << 17;
        byte[] key = String.format("key-%08d", Long.remainderUnsigned(state, KEYS)).getBytes();
        batch[i] = new SimpleRecord(1_700_000_000_000L + n, key, value);
      }
      log.appendAsLeader(MemoryRecords.withRecords(Compression.NONE, batch), 1);
      n += BATCH_RECORDS;
    }
    log.flush(true);
    return n;
  }

  static void delete(Path p) throws Exception {
    if (Files.exists(p)) {
      try (Stream<Path> s = Files.walk(p)) {
        s.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
      }
    }
  }
}
