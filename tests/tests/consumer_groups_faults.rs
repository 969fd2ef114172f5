//! Kafka's own system-test clients, `kafka-verifiable-producer` and
//! `kafka-verifiable-consumer`, through faults: a broker is killed and started again, and the
//! `__consumer_offsets` partitions that coordinate the group move to other brokers, while the
//! producer writes and the consumer reads in its group. Every acknowledged record is consumed,
//! and no committed offset of a partition ever goes backwards.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tests::kafka::tool;

/// Starts a Kafka tool whose stdout lines are collected as they come.
fn spawn_collecting(name: &str, args: &[&str]) -> (std::process::Child, Arc<Mutex<Vec<String>>>) {
    let mut child = tests::kafka::kafka_tool(name)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let out = child.stdout.take().unwrap();
    let sink = lines.clone();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(l);
        }
    });
    (child, lines)
}

fn events(lines: &[String], name: &str) -> Vec<Value> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["name"] == name)
        .collect()
}

/// (partition, offset) of every record the producer had acknowledged.
fn acked(lines: &[String]) -> BTreeSet<(i64, i64)> {
    events(lines, "producer_send_success")
        .iter()
        .map(|e| (e["partition"].as_i64().unwrap(), e["offset"].as_i64().unwrap()))
        .collect()
}

/// (partition, offset) of every record the consumer reported, from its offset ranges.
fn consumed(lines: &[String]) -> BTreeSet<(i64, i64)> {
    let mut out = BTreeSet::new();
    for e in events(lines, "records_consumed") {
        for p in e["partitions"].as_array().unwrap() {
            let part = p["partition"].as_i64().unwrap();
            for o in p["minOffset"].as_i64().unwrap()..=p["maxOffset"].as_i64().unwrap() {
                out.insert((part, o));
            }
        }
    }
    out
}

/// Writes a plan that moves the `__consumer_offsets` partitions in `parts` to replicas that
/// leave out their current leader, and runs it.
async fn move_offsets_partitions(c: &broker::ClusterClient, b: &str, parts: &[u32], dir: &std::path::Path) {
    let mut moves = Vec::new();
    for p in parts {
        let s = tests::data::partition_state(c, "__consumer_offsets", *p).await.unwrap();
        let target: Vec<i32> = (1..=4).filter(|id| *id != s.leader).take(3).collect();
        moves.push(serde_json::json!({"topic": "__consumer_offsets", "partition": p, "replicas": target}));
    }
    let plan = dir.join("move.json");
    std::fs::write(
        &plan,
        serde_json::json!({"version": 1, "partitions": moves}).to_string(),
    )
    .unwrap();
    let plan = plan.to_string_lossy().to_string();
    let (ok, out) = tool(
        "kafka-reassign-partitions",
        &["--bootstrap-server", b, "--reassignment-json-file", &plan, "--execute"],
        "",
    );
    assert!(
        ok && out.contains("Successfully started partition reassignment"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verifiable_clients_keep_every_acked_record_through_a_broker_bounce_and_a_coordinator_move() {
    let dir = tempfile::tempdir().unwrap();
    let (mut four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let b = k.bootstrap();
    let (ok, out) = tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            &b,
            "--create",
            "--topic",
            "vt",
            "--partitions",
            "4",
            "--replication-factor",
            "3",
        ],
        "",
    );
    assert!(ok, "{out}");
    let (mut consumer, consumer_lines) = spawn_collecting(
        "kafka-verifiable-consumer",
        &[
            "--bootstrap-server",
            &b,
            "--topic",
            "vt",
            "--group-id",
            "vg",
            "--reset-policy",
            "earliest",
        ],
    );
    let seen = consumer_lines.clone();
    tests::wait_until(Duration::from_secs(90), "the consumer's partitions assigned", || {
        let seen = seen.clone();
        async move { !events(&seen.lock().unwrap(), "partitions_assigned").is_empty() }
    })
    .await;
    let (mut producer, producer_lines) = spawn_collecting(
        "kafka-verifiable-producer",
        &[
            "--bootstrap-server",
            &b,
            "--topic",
            "vt",
            "--max-messages",
            "6000",
            "--throughput",
            "500",
            "--acks",
            "-1",
        ],
    );
    // While records flow: move the group's coordinator partition (and a neighbour) away from
    // their leaders, then kill a broker that is not the coordinator's new leader and start it again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let p = broker::coordinator::hash::partition_for("vg", 50);
    move_offsets_partitions(&four.client, &b, &[p, (p + 1) % 50], dir.path()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let leader = tests::data::partition_state(&four.client, "__consumer_offsets", p)
        .await
        .unwrap()
        .leader;
    let victim = (1..=3).find(|id| *id != leader).unwrap();
    four.nodes.get_mut(&victim).unwrap().kill();
    tokio::time::sleep(Duration::from_secs(3)).await;
    four.nodes.get_mut(&victim).unwrap().spawn();
    let done = producer.wait().unwrap();
    assert!(done.success(), "the producer ran to its end");
    let acked = acked(&producer_lines.lock().unwrap());
    assert!(acked.len() > 3000, "most records were acknowledged: {}", acked.len());
    let seen = consumer_lines.clone();
    let want = acked.clone();
    tests::wait_until(Duration::from_secs(120), "every acknowledged record consumed", || {
        let (seen, want) = (seen.clone(), want.clone());
        async move { want.is_subset(&consumed(&seen.lock().unwrap())) }
    })
    .await;
    // SIGTERM, which `timeout` passes on: a SIGKILL would end only the wrapper and leave the
    // consumer's JVM running.
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &consumer.id().to_string()])
        .status();
    let _ = consumer.wait();
    // Committed offsets per partition, in the order the consumer saw them succeed.
    let lines = consumer_lines.lock().unwrap().clone();
    let mut last: BTreeMap<i64, i64> = BTreeMap::new();
    for e in events(&lines, "offsets_committed") {
        if e["success"] != true {
            continue;
        }
        for o in e["offsets"].as_array().unwrap() {
            let (part, off) = (o["partition"].as_i64().unwrap(), o["offset"].as_i64().unwrap());
            let before = last.insert(part, off).unwrap_or(0);
            assert!(
                off >= before,
                "partition {part}'s committed offset went from {before} back to {off}"
            );
        }
    }
    let written: BTreeSet<i64> = acked.iter().map(|(p, _)| *p).collect();
    assert!(
        written.iter().all(|p| last.contains_key(p)),
        "every partition written had commits: {last:?}"
    );
}
