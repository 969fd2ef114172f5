//! Kafka 4.4's command-line tools against `ferry dev`, as a new user would run them: each tool's
//! output is checked, not only its exit code.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use tests::kafka::tool;

/// Kills the cluster when dropped, so a failed assertion leaves nothing running.
struct Dev(std::process::Child);

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `ferry dev` on free ports in `dir`; returns it with its Kafka bootstrap addresses and
/// its gRPC bootstrap.
fn start_dev(dir: &std::path::Path) -> (Dev, String, String) {
    let mut child = Command::new(tests::ferry_bin())
        .current_dir(dir)
        .args(["dev", "--base-port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting ferry dev");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let dev = Dev(child);
    let (mut grpc, mut kafka) = (None, None);
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(b) = line.strip_prefix("bootstrap: ") {
            grpc = Some(b.to_string());
        }
        if let Some(rest) = line.strip_prefix("kafka bootstrap: ") {
            kafka = rest.split(' ').next().map(String::from);
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    (
        dev,
        kafka.expect("ferry dev prints its Kafka bootstrap"),
        grpc.expect("a bootstrap line"),
    )
}

/// Runs a tool that must succeed; its output.
fn ok(name: &str, args: &[&str]) -> String {
    let (ok, out) = tool(name, args, "");
    assert!(ok, "{name} {args:?} failed: {out}");
    out
}

/// The `topic:partition:offset` lines of kafka-get-offsets, as a map.
fn offsets(b: &str, topic: &str, time: &str) -> Vec<(u32, i64)> {
    let out = ok(
        "kafka-get-offsets",
        &["--bootstrap-server", b, "--topic", topic, "--time", time],
    );
    let mut v: Vec<(u32, i64)> = out
        .lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            (f.next()? == topic).then_some(())?;
            Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
        })
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn kafkas_tools_answer_correctly_against_ferry_dev() {
    let dir = tempfile::tempdir().unwrap();
    let (_dev, b, _grpc) = start_dev(dir.path());
    let b = b.as_str();
    // The brokers and their API versions: each of the three, with the APIs a tool needs.
    let out = ok("kafka-broker-api-versions", &["--bootstrap-server", b]);
    assert_eq!(out.matches("(id: ").count(), 3, "{out}");
    for api in [
        "Produce(0): 0 to 11",
        "DescribeQuorum(55)",
        "ConsumerGroupHeartbeat(68)",
        "DeleteRecords(21)",
    ] {
        assert!(out.contains(api), "{api} missing: {out}");
    }
    // Finalized features.
    let out = ok("kafka-features", &["--bootstrap-server", b, "describe"]);
    assert!(
        out.contains("Feature: metadata.version") && out.contains("FinalizedVersionLevel: 3.9-IV0"),
        "{out}"
    );
    // The cluster id is the cluster's, and the quorum is its three voters.
    let out = ok("kafka-cluster", &["cluster-id", "--bootstrap-server", b]);
    let id = out.trim().strip_prefix("Cluster ID: ").expect("a cluster id line");
    assert_eq!(id.len(), 22, "a Kafka-style id: {out}");
    let out = ok(
        "kafka-metadata-quorum",
        &["--bootstrap-server", b, "describe", "--status"],
    );
    assert!(out.contains(&format!("ClusterId:              {id}")), "{out}");
    for v in 1..=3 {
        assert!(out.contains(&format!("{{\"id\": {v}, ")), "voter {v}: {out}");
    }
    // Topics, produce and offsets.
    let out = ok(
        "kafka-topics",
        &[
            "--bootstrap-server",
            b,
            "--create",
            "--topic",
            "t",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
        ],
    );
    assert!(out.contains("Created topic t."), "{out}");
    let out = ok("kafka-topics", &["--bootstrap-server", b, "--describe", "--topic", "t"]);
    assert!(
        out.contains("PartitionCount: 3") && out.contains("ReplicationFactor: 3"),
        "{out}"
    );
    let out = ok(
        "kafka-verifiable-producer",
        &[
            "--bootstrap-server",
            b,
            "--topic",
            "t",
            "--max-messages",
            "30",
            "--acks",
            "-1",
        ],
    );
    assert!(out.contains("\"sent\":30,\"acked\":30"), "{out}");
    let ends = offsets(b, "t", "-1");
    assert_eq!(ends.iter().map(|(_, o)| o).sum::<i64>(), 30, "{ends:?}");
    // The console clients: 10 lines in, the same 10 out.
    let lines: Vec<String> = (0..10).map(|i| format!("line-{i}")).collect();
    ok(
        "kafka-topics",
        &["--bootstrap-server", b, "--create", "--topic", "c", "--partitions", "2"],
    );
    let (done, out) = tool(
        "kafka-console-producer",
        &["--bootstrap-server", b, "--topic", "c"],
        &(lines.join("\n") + "\n"),
    );
    assert!(done, "{out}");
    let out = ok(
        "kafka-console-consumer",
        &[
            "--bootstrap-server",
            b,
            "--topic",
            "c",
            "--from-beginning",
            "--max-messages",
            "10",
            "--timeout-ms",
            "60000",
        ],
    );
    let mut read: Vec<&str> = out.lines().filter(|l| l.starts_with("line-")).collect();
    read.sort_unstable();
    assert_eq!(read, lines.iter().map(String::as_str).collect::<Vec<_>>());
    // DeleteRecords moves the log start, which kafka-get-offsets --time -2 reads back.
    let (p, end) = *ends.iter().max_by_key(|(_, o)| *o).unwrap();
    let json = dir.path().join("delete.json");
    std::fs::write(
        &json,
        format!(
            "{{\"partitions\":[{{\"topic\":\"t\",\"partition\":{p},\"offset\":{}}}],\"version\":1}}",
            end / 2
        ),
    )
    .unwrap();
    let out = ok(
        "kafka-delete-records",
        &["--bootstrap-server", b, "--offset-json-file", json.to_str().unwrap()],
    );
    assert!(
        out.contains(&format!("partition: t-{p}\tlow_watermark: {}", end / 2)),
        "{out}"
    );
    assert!(offsets(b, "t", "-2").contains(&(p, end / 2)));
    // Configs: a topic's, the brokers' default, a client's quota.
    ok(
        "kafka-configs",
        &[
            "--bootstrap-server",
            b,
            "--entity-type",
            "topics",
            "--entity-name",
            "t",
            "--alter",
            "--add-config",
            "retention.ms=86400000",
        ],
    );
    let out = ok(
        "kafka-configs",
        &[
            "--bootstrap-server",
            b,
            "--entity-type",
            "topics",
            "--entity-name",
            "t",
            "--describe",
        ],
    );
    assert!(out.contains("retention.ms=86400000"), "{out}");
    ok(
        "kafka-configs",
        &[
            "--bootstrap-server",
            b,
            "--entity-type",
            "brokers",
            "--entity-default",
            "--alter",
            "--add-config",
            "leader.replication.throttled.rate=5000",
        ],
    );
    let out = ok(
        "kafka-configs",
        &[
            "--bootstrap-server",
            b,
            "--entity-type",
            "brokers",
            "--entity-default",
            "--describe",
        ],
    );
    assert!(
        out.contains("leader.replication.throttled.rate=5000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG"),
        "{out}"
    );
    ok(
        "kafka-configs",
        &[
            "--bootstrap-server",
            b,
            "--entity-type",
            "clients",
            "--entity-name",
            "c1",
            "--alter",
            "--add-config",
            "producer_byte_rate=2048",
        ],
    );
    let out = ok(
        "kafka-configs",
        &[
            "--bootstrap-server",
            b,
            "--entity-type",
            "clients",
            "--entity-name",
            "c1",
            "--describe",
        ],
    );
    assert!(
        out.contains("Quota configs for client-id 'c1' are producer_byte_rate=2048.0"),
        "{out}"
    );
    // Log dirs: each broker's replicas of t, with their sizes.
    let out = ok(
        "kafka-log-dirs",
        &[
            "--bootstrap-server",
            b,
            "--describe",
            "--broker-list",
            "1,2,3",
            "--topic-list",
            "t",
        ],
    );
    let json = out
        .lines()
        .find(|l| l.starts_with('{'))
        .expect("kafka-log-dirs prints JSON");
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let brokers = v["brokers"].as_array().unwrap();
    assert_eq!(brokers.len(), 3, "{out}");
    for br in brokers {
        let parts: usize = br["logDirs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["partitions"].as_array().unwrap().len())
            .sum();
        assert_eq!(
            parts, 3,
            "every broker holds a replica of each of t's partitions: {out}"
        );
    }
    // A reassignment to one broker and back, then preferred elections.
    ok(
        "kafka-topics",
        &[
            "--bootstrap-server",
            b,
            "--create",
            "--topic",
            "u",
            "--replica-assignment",
            "1",
        ],
    );
    let plan = dir.path().join("move.json");
    std::fs::write(
        &plan,
        r#"{"version":1,"partitions":[{"topic":"u","partition":0,"replicas":[2]}]}"#,
    )
    .unwrap();
    let plan = plan.to_str().unwrap();
    let out = ok(
        "kafka-reassign-partitions",
        &["--bootstrap-server", b, "--reassignment-json-file", plan, "--execute"],
    );
    assert!(
        out.contains("Successfully started partition reassignment for u-0"),
        "{out}"
    );
    let mut verified = String::new();
    for _ in 0..60 {
        verified = ok(
            "kafka-reassign-partitions",
            &["--bootstrap-server", b, "--reassignment-json-file", plan, "--verify"],
        );
        if verified.contains("Reassignment of partition u-0 is completed.") {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        verified.contains("Reassignment of partition u-0 is completed."),
        "{verified}"
    );
    let out = ok("kafka-topics", &["--bootstrap-server", b, "--describe", "--topic", "u"]);
    assert!(out.contains("Leader: 2\tReplicas: 2\tIsr: 2"), "{out}");
    let out = ok(
        "kafka-leader-election",
        &[
            "--bootstrap-server",
            b,
            "--election-type",
            "PREFERRED",
            "--all-topic-partitions",
        ],
    );
    assert!(
        out.contains("Valid replica already elected for partitions")
            || out.contains("Successfully completed leader election"),
        "{out}"
    );
}
