// Times new client connections through Kafka's own Java client network layer (the Selector and
// channel builder its producer, consumer and admin client use): each connection is opened fresh,
// does the listener's handshake (TLS, then SASL: ApiVersions, SaslHandshake, SaslAuthenticate
// rounds, as the client's authenticator sends them; nothing on a PLAINTEXT listener), then one
// ApiVersions and one Metadata request (no topics), as a client does first on every connection,
// and is closed. Run as a source file with Kafka's (4.x) jars on the class path:
//   java -cp 'JARS/*' tools/bench/ConnBench.java BOOTSTRAP CLIENT_CONFIG|- N WARM [PIDS]
// CLIENT_CONFIG is a Kafka client properties file (security.protocol, sasl.*, ssl.*), or - for
// PLAINTEXT. The connections go to the brokers of BOOTSTRAP in turn, one at a time. WARM
// connections first, untimed, so that the client's code is compiled (the channel builder, and
// with it the SSL context and the SASL login, is built once, before them, as one client would).
// Then N timed ones, from the connect call until the Metadata answer is read. PIDS (comma-separated)
// are the brokers' processes: their utime+stime from /proc over the N timed connections.
// Prints "MEDIAN_MS P99_MS SERVER_CPU_TICKS"; exits 1, with the reason on stderr, if a
// connection fails or takes over 30 s.
import java.io.IOException;
import java.io.Reader;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.ClientUtils;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.network.ChannelBuilder;
import org.apache.kafka.common.network.ChannelState;
import org.apache.kafka.common.network.NetworkReceive;
import org.apache.kafka.common.network.NetworkSend;
import org.apache.kafka.common.network.Selectable;
import org.apache.kafka.common.network.Selector;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.ApiVersionsRequest;
import org.apache.kafka.common.requests.ApiVersionsResponse;
import org.apache.kafka.common.requests.MetadataRequest;
import org.apache.kafka.common.requests.MetadataResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.common.utils.internals.LogContext;

public class ConnBench {
  static final long TIMEOUT_NS = 30_000_000_000L;
  // ApiVersions v3: what Kafka's clients have sent first since 2.4, taken by every broker here.
  static final short API_VERSIONS_VERSION = 3;
  static int correlation = 0;

  public static void main(String[] args) throws Exception {
    List<String> brokers = Arrays.asList(args[0].split(","));
    Properties props = new Properties();
    if (!args[1].equals("-")) {
      try (Reader in = Files.newBufferedReader(Path.of(args[1]))) {
        props.load(in);
      }
    }
    props.put("bootstrap.servers", args[0]);
    int n = Integer.parseInt(args[2]);
    int warm = Integer.parseInt(args[3]);
    List<String> pids = args.length > 4 && !args[4].isEmpty() ? Arrays.asList(args[4].split(",")) : List.of();

    LogContext log = new LogContext("[conn-bench] ");
    ChannelBuilder builder = ClientUtils.createChannelBuilder(new AdminClientConfig(props), Time.SYSTEM, log);
    try (Metrics metrics = new Metrics();
        Selector selector = new Selector(600_000, metrics, Time.SYSTEM, "conn-bench", builder, log)) {
      for (int i = 0; i < warm; i++) {
        once(selector, brokers.get(i % brokers.size()), "w" + i);
      }
      double[] ms = new double[n];
      long cpu = cpuTicks(pids);
      for (int i = 0; i < n; i++) {
        ms[i] = once(selector, brokers.get(i % brokers.size()), "c" + i) / 1e6;
      }
      cpu = cpuTicks(pids) - cpu;
      Arrays.sort(ms);
      System.out.printf("%.3f %.3f %d%n", percentile(ms, 50), percentile(ms, 99), cpu);
    } finally {
      builder.close();
    }
  }

  // Nearest rank.
  static double percentile(double[] sorted, double p) {
    int rank = (int) Math.ceil(p / 100.0 * sorted.length);
    return sorted[Math.max(0, rank - 1)];
  }

  // One connection to HOST:PORT: its nanoseconds from connect until the Metadata answer.
  static long once(Selector selector, String hostPort, String id) throws IOException {
    long started = System.nanoTime();
    // Resolved anew for each connection, as Kafka's NetworkClient does: the SASL channel asks the
    // address for its host name (a reverse lookup, cached in the InetAddress), and a reused one
    // would then give the next TLS handshake "localhost" to verify instead of the IP.
    int colon = hostPort.lastIndexOf(':');
    InetSocketAddress to = new InetSocketAddress(InetAddress.getByName(hostPort.substring(0, colon)),
        Integer.parseInt(hostPort.substring(colon + 1)));
    long deadline = started + TIMEOUT_NS;
    selector.connect(id, to, Selectable.USE_DEFAULT_BUFFER_SIZE, Selectable.USE_DEFAULT_BUFFER_SIZE);
    // A PLAINTEXT channel counts as ready before its TCP connect completes: wait for both, as
    // Kafka's NetworkClient does.
    boolean connected = false;
    while (!connected || !selector.isChannelReady(id)) {
      selector.poll(10);
      connected |= selector.connected().contains(id);
      failIfGone(selector, id, to, "the handshake");
      if (System.nanoTime() > deadline) {
        throw new IOException(to + ": the handshake took over 30 s");
      }
    }
    ApiVersionsResponse versions = (ApiVersionsResponse) roundTrip(selector, id, to,
        new ApiVersionsRequest.Builder().build(API_VERSIONS_VERSION), deadline);
    if (versions.data().errorCode() != Errors.NONE.code()) {
      throw new IOException(to + ": ApiVersions answered " + Errors.forCode(versions.data().errorCode()));
    }
    short metadata = (short) Math.min(ApiKeys.METADATA.latestVersion(),
        versions.apiVersion(ApiKeys.METADATA.id).maxVersion());
    MetadataResponse md = (MetadataResponse) roundTrip(selector, id, to,
        new MetadataRequest.Builder(Collections.emptyList(), false).build(metadata), deadline);
    if (md.brokers().isEmpty()) {
      throw new IOException(to + ": Metadata named no broker");
    }
    long took = System.nanoTime() - started;
    selector.close(id);
    return took;
  }

  static AbstractResponse roundTrip(Selector selector, String id, InetSocketAddress to, AbstractRequest req,
      long deadline) throws IOException {
    RequestHeader header = new RequestHeader(req.apiKey(), req.version(), "conn-bench", ++correlation);
    selector.send(new NetworkSend(id, req.toSend(header)));
    while (true) {
      selector.poll(10);
      for (NetworkReceive r : selector.completedReceives()) {
        if (r.source().equals(id)) {
          return AbstractResponse.parseResponse(r.payload(), header);
        }
      }
      failIfGone(selector, id, to, req.apiKey().name);
      if (System.nanoTime() > deadline) {
        throw new IOException(to + ": no answer to " + req.apiKey().name + " within 30 s");
      }
    }
  }

  static void failIfGone(Selector selector, String id, InetSocketAddress to, String what) throws IOException {
    Map<String, ChannelState> gone = selector.disconnected();
    ChannelState state = gone.get(id);
    if (state != null) {
      throw new IOException(to + ": disconnected during " + what + ": " + state.state()
          + (state.exception() == null ? "" : " (" + state.exception() + ")"));
    }
  }

  // utime + stime of the processes, in clock ticks.
  static long cpuTicks(List<String> pids) throws IOException {
    long ticks = 0;
    for (String pid : pids) {
      String stat = Files.readString(Path.of("/proc", pid.trim(), "stat"));
      // The fields after the command name, which is in parentheses and may hold spaces.
      String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      ticks += Long.parseLong(f[11]) + Long.parseLong(f[12]);
    }
    return ticks;
  }
}
