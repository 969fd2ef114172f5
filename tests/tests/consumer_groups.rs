//! Consumer groups with real clients against a four-node cluster: Kafka's own console consumers
//! sharing a topic in one group, kafka-python's `KafkaConsumer(group_id=...)` with a member
//! leaving, librdkafka (kcat `-G`), and `kafka-consumer-groups` listing, describing, resetting
//! and deleting. Each record produced is consumed exactly once across a group's members.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use tests::kafka::{tool, Listeners};

/// Creates a topic of `partitions` partitions and 3 replicas.
fn create(b: &str, topic: &str, partitions: u32) {
    {
        let (ok, out) = tool(
            "kafka-topics",
            &[
                "--bootstrap-server",
                b,
                "--create",
                "--topic",
                topic,
                "--partitions",
                &partitions.to_string(),
                "--replication-factor",
                "3",
            ],
            "",
        );
        assert!(ok, "{out}");
    }
}

/// Produces records `r-<from>..` with Kafka's console producer, keyed so that they spread over
/// the partitions.
fn produce(b: &str, topic: &str, from: usize, n: usize) {
    let lines: String = (from..from + n).map(|i| format!("{i}:r-{i}\n")).collect();
    let (ok, out) = tool(
        "kafka-console-producer",
        &[
            "--bootstrap-server",
            b,
            "--topic",
            topic,
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
        ],
        &lines,
    );
    assert!(ok, "{out}");
}

/// The members of `group` and its state, as kafka-python's admin client describes it.
fn describe(b: &str, group: &str) -> (String, usize) {
    let script = format!(
        "from kafka import KafkaAdminClient\n\
         a = KafkaAdminClient(bootstrap_servers='{b}')\n\
         g = a.describe_groups(['{group}'])['{group}']\n\
         print(g['group_state'], len(g['members']))\n"
    );
    let out = Command::new("timeout")
        .args(["60", "python3", "-c", &script])
        .output()
        .expect("python3 with kafka-python (tools/test.sh installs it)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut parts = text.split_whitespace();
    let state = parts.next().unwrap_or("").to_string();
    let members = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    (state, members)
}

/// Counts each record seen across the outputs.
fn tally(outputs: &[String]) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for o in outputs {
        for line in o.lines().filter(|l| l.starts_with("r-")) {
            *seen.entry(line.to_string()).or_insert(0) += 1;
        }
    }
    seen
}

fn assert_exactly_once(seen: &BTreeMap<String, usize>, n: usize) {
    let twice: Vec<_> = seen.iter().filter(|(_, c)| **c > 1).take(5).collect();
    assert!(twice.is_empty(), "records read twice: {twice:?}");
    let missing: Vec<_> = (0..n)
        .filter(|i| !seen.contains_key(&format!("r-{i}")))
        .take(5)
        .collect();
    assert!(
        missing.is_empty(),
        "records never read: {missing:?} ({} read)",
        seen.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_java_console_consumers_in_a_classic_group_read_each_record_once() {
    java_console_consumers("classic").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_java_console_consumers_in_a_kip_848_consumer_group_read_each_record_once() {
    java_console_consumers("consumer").await;
}

/// The state and member count `kafka-consumer-groups --describe --state` prints.
fn group_state(b: &str, group: &str) -> (String, usize) {
    let (_, out) = tool(
        "kafka-consumer-groups",
        &["--bootstrap-server", b, "--describe", "--group", group, "--state"],
        "",
    );
    out.lines()
        .find(|l| l.starts_with(&format!("{group} ")))
        .and_then(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            Some((cols[cols.len() - 2].to_string(), cols[cols.len() - 1].parse().ok()?))
        })
        .unwrap_or_default()
}

async fn wait_members(b: &str, group: &str, members: usize) {
    let (b, group) = (b.to_string(), group.to_string());
    tests::wait_until(Duration::from_secs(120), "the group stable with its members", || {
        let (b, group) = (b.clone(), group.clone());
        async move {
            let (state, n) = tokio::task::spawn_blocking(move || group_state(&b, &group))
                .await
                .unwrap();
            state == "Stable" && n == members
        }
    })
    .await;
}

/// The sum of the lag `kafka-consumer-groups --describe` prints.
fn lag(b: &str, group: &str) -> Option<i64> {
    let (ok, out) = tool(
        "kafka-consumer-groups",
        &["--bootstrap-server", b, "--describe", "--group", group],
        "",
    );
    let rows: Vec<i64> = out
        .lines()
        .filter(|l| l.starts_with(&format!("{group} ")))
        .filter_map(|l| l.split_whitespace().nth(5)?.parse().ok())
        .collect();
    (ok && !rows.is_empty()).then(|| rows.iter().sum())
}

/// Three console consumers of `protocol` share a topic: each record once. Then one stops (it
/// leaves the group) and the other two take its partitions and read what comes next, once.
async fn java_console_consumers(protocol: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (_four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let b = k.bootstrap();
    let group = format!("jgroup-{protocol}");
    create(&b, "jg", 6);
    let spawn = || {
        tests::kafka::kafka_tool("kafka-console-consumer")
            .args([
                "--bootstrap-server",
                &b,
                "--topic",
                "jg",
                "--group",
                &group,
                "--timeout-ms",
                "120000",
            ])
            .args(["--consumer-property", &format!("group.protocol={protocol}")])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut children: Vec<_> = (0..3).map(|_| spawn()).collect();
    wait_members(&b, &group, 3).await;
    produce(&b, "jg", 0, 3000);
    let (bb, g) = (b.clone(), group.clone());
    tests::wait_until(Duration::from_secs(90), "every record read and committed", || {
        let (bb, g) = (bb.clone(), g.clone());
        async move { tokio::task::spawn_blocking(move || lag(&bb, &g)).await.unwrap() == Some(0) }
    })
    .await;
    // One member stops: SIGTERM, so that it leaves the group as a consumer does on close.
    let leaver = children.remove(2);
    let _ = Command::new("kill").args(["-TERM", &leaver.id().to_string()]).status();
    let left = String::from_utf8_lossy(&leaver.wait_with_output().unwrap().stdout).to_string();
    wait_members(&b, &group, 2).await;
    produce(&b, "jg", 3000, 1000);
    // The members stop once everything is read and committed, not on their idle timeout: on a
    // slow machine the leave, rebalance and the producer's start took longer than that timeout.
    let (bb, g) = (b.clone(), group.clone());
    tests::wait_until(
        Duration::from_secs(90),
        "the records after the leave read and committed",
        || {
            let (bb, g) = (bb.clone(), g.clone());
            async move { tokio::task::spawn_blocking(move || lag(&bb, &g)).await.unwrap() == Some(0) }
        },
    )
    .await;
    let mut outputs: Vec<String> = children
        .into_iter()
        .map(|c| {
            let _ = Command::new("kill").args(["-TERM", &c.id().to_string()]).status();
            String::from_utf8_lossy(&c.wait_with_output().unwrap().stdout).to_string()
        })
        .collect();
    for o in &outputs {
        assert!(
            o.lines().any(|l| l.starts_with("r-")),
            "each member got partitions: {outputs:?}"
        );
    }
    outputs.push(left);
    assert_exactly_once(&tally(&outputs), 4000);
}

/// kafka-python: three consumers in one group read a topic once; one closes (LeaveGroup), the
/// other two take its partitions and read what comes next, once.
const PYTHON_GROUP: &str = r#"
import sys, threading, time
from kafka import KafkaConsumer, KafkaProducer
b, topic = sys.argv[1], sys.argv[2]
seen = {}
lock = threading.Lock()
class Member(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.c = KafkaConsumer(topic, bootstrap_servers=b, group_id="pyg", auto_offset_reset="earliest",
                               enable_auto_commit=False)
        self.stop = threading.Event()
        self.parts = 0
    def run(self):
        while not self.stop.is_set():
            got = self.c.poll(timeout_ms=200)
            with lock:
                for tp, records in got.items():
                    for r in records:
                        seen[r.value] = seen.get(r.value, 0) + 1
            if got:
                self.c.commit()
            self.parts = len(self.c.assignment())
        self.c.close()
def wait(members, want, parts):
    deadline = time.time() + 120
    while time.time() < deadline:
        with lock:
            n = len(seen)
        if n >= want and sorted(m.parts for m in members) == parts:
            return
        time.sleep(0.2)
    raise SystemExit("timed out with %d records, partitions %s" % (n, [m.parts for m in members]))
ms = [Member() for _ in range(3)]
for m in ms:
    m.start()
p = KafkaProducer(bootstrap_servers=b, acks="all")
for i in range(1200):
    p.send(topic, key=str(i).encode(), value=("r-%d" % i).encode())
p.flush()
wait(ms, 1200, [2, 2, 2])
print("first", len(seen), sorted(m.parts for m in ms))
ms[2].stop.set()
ms[2].join()
for i in range(1200, 2400):
    p.send(topic, key=str(i).encode(), value=("r-%d" % i).encode())
p.flush()
wait(ms[:2], 2400, [3, 3])
print("after", len(seen), sorted(m.parts for m in ms[:2]))
for m in ms[:2]:
    m.stop.set()
    m.join()
for v, n in sorted(seen.items()):
    print(v.decode(), n)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_group_members_share_partitions_and_take_over_a_leaver() {
    let dir = tempfile::tempdir().unwrap();
    let (_four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let b = k.bootstrap();
    create(&b, "pyt", 6);
    let out = Command::new("timeout")
        .args(["300", "python3", "-c", PYTHON_GROUP, &b, "pyt"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("first 1200 [2, 2, 2]"), "{stdout}");
    assert!(stdout.contains("after 2400 [3, 3]"), "{stdout}");
    let counts: BTreeMap<String, usize> = stdout
        .lines()
        .filter_map(|l| {
            let (v, n) = l.split_once(' ')?;
            Some((v.to_string(), n.parse().ok()?))
        })
        .filter(|(v, _)| v.starts_with("r-"))
        .collect();
    assert_exactly_once(&counts, 2400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_balanced_consumers_and_the_group_tool() {
    let dir = tempfile::tempdir().unwrap();
    // The offsets topic's size is the brokers' setting, as Kafka's offsets.topic.* are.
    let offsets_args = |_| {
        [
            "--offsets-topic-num-partitions",
            "7",
            "--offsets-topic-replication-factor",
            "2",
        ]
        .map(String::from)
        .to_vec()
    };
    let (four, k) = tests::kafka::start(dir.path(), offsets_args).await;
    let b = k.bootstrap();
    create(&b, "kc", 4);
    produce(&b, "kc", 0, 2000);
    // Two kcat balanced consumers in one group; each exits at the end of its partitions.
    let kcat = || {
        Command::new("timeout")
            .args([
                "120",
                "kcat",
                "-b",
                &b,
                "-G",
                "kgroup",
                "-o",
                "beginning",
                "-q",
                "-e",
                "-X",
                "auto.commit.interval.ms=100",
                "kc",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = kcat();
    let second = kcat();
    let outputs: Vec<String> = [first, second]
        .into_iter()
        .map(|c| String::from_utf8_lossy(&c.wait_with_output().unwrap().stdout).to_string())
        .collect();
    // librdkafka's -e exits at each partition's end, so a late joiner can find little left:
    // what matters is that together they read each record once.
    assert_exactly_once(&tally(&outputs), 2000);
    let offsets = tests::data::partition_states(&four.client, "__consumer_offsets")
        .await
        .expect("the first group created __consumer_offsets");
    let shape: Vec<(u32, usize)> = offsets.iter().map(|(p, s)| (*p, s.replicas.len())).collect();
    assert_eq!(shape, (0..7).map(|p| (p, 2)).collect::<Vec<_>>());
    group_tool(&k, "kgroup", "kc").await;
}

/// `kafka-consumer-groups`: list, describe with lag, reset to the earliest offset, delete the
/// offsets of a topic, delete the group.
async fn group_tool(k: &Listeners, group: &str, topic: &str) {
    let b = k.bootstrap();
    let g = |args: &[&str]| {
        let mut all = vec!["--bootstrap-server", b.as_str()];
        all.extend_from_slice(args);
        tool("kafka-consumer-groups", &all, "")
    };
    tests::wait_until(Duration::from_secs(60), "the group committed and empty", || {
        let b = b.clone();
        let group = group.to_string();
        async move {
            let (state, _) = tokio::task::spawn_blocking(move || describe(&b, &group)).await.unwrap();
            state == "Empty"
        }
    })
    .await;
    let (ok, out) = g(&["--list"]);
    assert!(ok && out.lines().any(|l| l == group), "{out}");
    let (ok, out) = g(&["--describe", "--group", group]);
    // "has no active members" goes to stderr; the state was checked above.
    assert!(ok, "{out}");
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with(&format!("{group} "))).collect();
    assert_eq!(rows.len(), 4, "{out}");
    let total: i64 = rows
        .iter()
        .map(|r| {
            r.split_whitespace()
                .nth(3)
                .and_then(|o| o.parse::<i64>().ok())
                .unwrap_or(-1)
        })
        .sum();
    assert_eq!(total, 2000, "committed offsets add up to the records read: {out}");
    let (ok, out) = g(&[
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        topic,
        "--to-earliest",
        "--execute",
    ]);
    assert!(ok, "{out}");
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with(&format!("{group} ")) && l.trim_end().ends_with(" 0"))
            .count(),
        4,
        "{out}"
    );
    let (ok, out) = g(&["--describe", "--group", group]);
    assert!(ok, "{out}");
    let lags: i64 = out
        .lines()
        .filter(|l| l.starts_with(&format!("{group} ")))
        .filter_map(|l| l.split_whitespace().nth(5)?.parse::<i64>().ok())
        .sum();
    assert_eq!(lags, 2000, "after the reset every record is lag again: {out}");
    let (ok, out) = g(&["--delete-offsets", "--group", group, "--topic", topic]);
    assert!(
        ok && out.lines().filter(|l| l.contains(" Successful")).count() == 4,
        "{out}"
    );
    let (ok, out) = g(&["--delete", "--group", group]);
    assert!(
        ok && out.contains("Deletion of requested consumer groups ('") && out.contains("was successful"),
        "{out}"
    );
    let (ok, out) = g(&["--list"]);
    assert!(ok && !out.lines().any(|l| l == group), "{out}");
}

/// A kafka-python consumer in group `fg` reads the first half, says so, then reads until it has
/// seen every record of both halves, committing after each poll.
const PYTHON_FAILOVER: &str = r#"
import sys, time
from kafka import KafkaConsumer
b, topic, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = KafkaConsumer(topic, bootstrap_servers=b, group_id="fg", auto_offset_reset="earliest",
                  enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=1000,
                  request_timeout_ms=15000, retry_backoff_ms=200)
seen = set()
said = False
deadline = time.time() + 150
while len(seen) < total and time.time() < deadline:
    got = c.poll(timeout_ms=200)
    for tp, records in got.items():
        for r in records:
            seen.add(r.value)
    if got:
        while time.time() < deadline:
            try:
                c.commit()
                break
            except Exception as e:
                print("commit retry:", type(e).__name__, flush=True)
                time.sleep(0.5)
    if not said and len(seen) >= total // 2:
        print("half", flush=True)
        said = True
print("done", len(seen), flush=True)
c.close()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_coordinator_moves_the_group_and_loses_no_commit() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let (mut four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let b = k.bootstrap();
    create(&b, "ft", 4);
    produce(&b, "ft", 0, 1000);
    let stderr_path = dir.path().join("consumer.stderr");
    let mut child = Command::new("timeout")
        .args(["200", "python3", "-c", PYTHON_FAILOVER, &b, "ft", "2000"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let stderr = move || std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let half = tokio::task::spawn_blocking(move || {
        let first = lines.next();
        (first.and_then(|l| l.ok()), lines)
    });
    let (first, lines) = half.await.unwrap();
    assert_eq!(
        first.as_deref(),
        Some("half"),
        "the consumer read the first half: {}",
        stderr()
    );
    // The coordinator: the leader of the group's partition of __consumer_offsets.
    let p = broker::coordinator::hash::partition_for("fg", 50);
    let state = tests::data::partition_state(&four.client, "__consumer_offsets", p)
        .await
        .unwrap();
    let coordinator = state.leader;
    four.nodes.get_mut(&coordinator).unwrap().kill();
    let c = four.client.clone();
    tests::wait_until(Duration::from_secs(60), "a new coordinator", || {
        let c = c.clone();
        async move {
            tests::data::partition_state(&c, "__consumer_offsets", p)
                .await
                .is_some_and(|s| s.leader >= 0 && s.leader != coordinator)
        }
    })
    .await;
    let live: Vec<String> = (1..=4).filter(|id| *id != coordinator).map(|id| k.addr(id)).collect();
    let live = live.join(",");
    produce(&live, "ft", 1000, 1000);
    let rest = tokio::task::spawn_blocking(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    let rest = rest.await.unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{rest:?} {}", stderr());
    assert!(
        rest.iter().any(|l| l == "done 2000"),
        "every record was read: {rest:?} {}",
        stderr()
    );
    // Every commit was kept: the group's offsets cover all 2000 records.
    let (ok, out) = tool(
        "kafka-consumer-groups",
        &["--bootstrap-server", &live, "--describe", "--group", "fg", "--offsets"],
        "",
    );
    assert!(ok, "{out}");
    let total: i64 = out
        .lines()
        .filter(|l| l.starts_with("fg "))
        .filter_map(|l| l.split_whitespace().nth(3)?.parse::<i64>().ok())
        .sum();
    assert_eq!(total, 2000, "{out}");
}
