//! Groups from Ferry's own CLI and from Kafka's performance tools, on a four-node cluster with
//! Kafka listeners: two `ferry consume --group` members share a topic (each record printed
//! once, the offsets committed where `kafka-consumer-groups` sees them), `ferry reassign
//! --progress` names the broker that coordinates a group, and Kafka's EndToEndLatency and
//! kafka-consumer-perf-test run against the cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use tests::kafka::tool;

/// Produces `records` to one partition, retrying while its leader settles.
async fn produce(c: &broker::ClusterClient, topic: &str, partition: u32, records: Vec<String>) {
    let records: Vec<Bytes> = records.into_iter().map(Bytes::from).collect();
    let mut tries = 0;
    while let Err(e) = c.produce_once(topic, partition, records.clone(), -1).await {
        tries += 1;
        assert!(tries < 100, "producing to {topic}-{partition}: {e}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `ferry consume --group`, with its stdout kept.
fn spawn_member(bootstrap: &str, group: &str, topic: &str, extra: &[&str]) -> Child {
    Command::new(tests::ferry_bin())
        .args([
            "consume",
            "--bootstrap-server",
            bootstrap,
            "--group",
            group,
            "--topic",
            topic,
            "--from-beginning",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running ferry consume")
}

/// Waits for a member to end: its exit code, stdout and stderr.
async fn finish(child: Child) -> (Option<i32>, String, String) {
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The rows of `kafka-consumer-groups --describe --group`: partition, current offset, log end
/// offset, consumer id.
fn describe(b: &str, group: &str) -> (String, Vec<(i32, String, i64, String)>) {
    let (_, out) = tool(
        "kafka-consumer-groups",
        &["--bootstrap-server", b, "--describe", "--group", group],
        "",
    );
    let rows = out
        .lines()
        .filter(|l| l.starts_with(&format!("{group} ")))
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            Some((
                cols.get(2)?.parse().ok()?,
                cols.get(3)?.to_string(),
                cols.get(4)?.parse().ok()?,
                cols.get(6)?.to_string(),
            ))
        })
        .collect();
    (out, rows)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ferry_consume_group_members_share_a_topic_print_each_record_once_and_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let c = four.client.clone();
    let (b, kb) = (four.bootstrap(), k.bootstrap());
    tests::data::create_topic(&c, "cg", 4, 3, &[]).await.unwrap();
    for p in 0..4 {
        produce(&c, "cg", p, (0..100).map(|i| format!("a-{p}-{i}")).collect()).await;
    }

    // Generous idle timeouts: the members end once nothing has come for 45 s.
    let idle = ["--timeout-ms", "45000"];
    let one = spawn_member(&b, "fg", "cg", &idle);
    let two = spawn_member(&b, "fg", "cg", &idle);
    // Both members hold partitions, as Kafka's own tool describes the group.
    let kb2 = kb.clone();
    tests::wait_until(
        Duration::from_secs(120),
        "two members holding two partitions each",
        || {
            let kb = kb2.clone();
            async move {
                let (_, rows) = tokio::task::spawn_blocking(move || describe(&kb, "fg")).await.unwrap();
                let mut per_member: BTreeMap<String, usize> = BTreeMap::new();
                for (_, _, _, member) in &rows {
                    *per_member.entry(member.clone()).or_default() += 1;
                }
                rows.len() == 4
                    && per_member.len() == 2
                    && per_member.values().all(|n| *n == 2)
                    && !per_member.contains_key("-")
            }
        },
    )
    .await;
    for p in 0..4 {
        produce(&c, "cg", p, (0..50).map(|i| format!("b-{p}-{i}")).collect()).await;
    }

    let outputs = [finish(one).await, finish(two).await];
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (code, out, err) in &outputs {
        assert_eq!(*code, Some(0), "a member failed: {err}");
        // Each member read some of the records produced once both held partitions.
        assert!(out.lines().any(|l| l.starts_with("b-")), "{out}\n{err}");
        for l in out.lines() {
            *seen.entry(l.to_string()).or_default() += 1;
        }
    }
    let want: BTreeSet<String> = (0..4)
        .flat_map(|p| {
            (0..100)
                .map(move |i| format!("a-{p}-{i}"))
                .chain((0..50).map(move |i| format!("b-{p}-{i}")))
        })
        .collect();
    assert_eq!(seen.keys().cloned().collect::<BTreeSet<_>>(), want);
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "printed more than once: {twice:?}");

    // The members left; their commits cover every record.
    let (out, rows) = tokio::task::spawn_blocking(move || describe(&kb, "fg")).await.unwrap();
    let committed: Vec<(i32, String, i64)> = rows.into_iter().map(|(p, cur, end, _)| (p, cur, end)).collect();
    assert_eq!(
        committed,
        (0..4).map(|p| (p, "150".to_string(), 150)).collect::<Vec<_>>(),
        "{out}"
    );
    drop(four);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reassign_progress_names_the_broker_that_coordinates_a_group() {
    let dir = tempfile::tempdir().unwrap();
    let (four, _k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let c = four.client.clone();
    let b = four.bootstrap();
    tests::data::create_topic(&c, "pg", 1, 3, &[]).await.unwrap();
    produce(&c, "pg", 0, (0..10).map(|i| format!("r-{i}")).collect()).await;
    let (code, out, err) = finish(spawn_member(&b, "progress-group", "pg", &["--max-records", "10"])).await;
    assert_eq!((code, out.lines().count()), (Some(0), 10), "{out}\n{err}");

    let (code, out, err) =
        tokio::task::block_in_place(|| tests::run_ferry(&["reassign", "--progress", "--bootstrap-server", &b]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("No partition reassignments found.\n"), "{out}");
    // The group's `__consumer_offsets` partition, by Kafka's rule, and who leads it.
    let offsets = c.refresh("__consumer_offsets").await.unwrap();
    let n = offsets.partitions.len() as u32;
    let p = broker::coordinator::hash::partition_for("progress-group", n);
    let leader = offsets
        .partitions
        .iter()
        .find(|x| x.partition == p)
        .unwrap()
        .state
        .as_ref()
        .unwrap()
        .leader;
    let mut led: BTreeMap<i32, usize> = BTreeMap::new();
    for x in &offsets.partitions {
        *led.entry(x.state.as_ref().unwrap().leader).or_default() += 1;
    }
    for id in 1..=4 {
        let groups = if id == leader { "1 group" } else { "0 groups" };
        let parts = led.get(&id).copied().unwrap_or(0);
        let noun = if parts == 1 { "partition" } else { "partitions" };
        let line = format!("coordinator: broker {id} leads {parts} __consumer_offsets {noun}, {groups}");
        assert!(out.lines().any(|l| l == line), "no line {line:?} in:\n{out}");
    }
    drop(four);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_end_to_end_latency_and_consumer_perf_test_run_with_groups() {
    let dir = tempfile::tempdir().unwrap();
    let (four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let c = four.client.clone();
    let kb = k.bootstrap();

    // EndToEndLatency: each record produced (acks=all) is read back before the next goes.
    tests::data::create_topic(&c, "e2e", 1, 3, &[]).await.unwrap();
    let kb1 = kb.clone();
    let (ok, out) =
        tokio::task::spawn_blocking(move || tool("kafka-e2e-latency", &[&kb1, "e2e", "200", "all", "100"], ""))
            .await
            .unwrap();
    assert!(ok, "{out}");
    assert!(out.contains("Avg latency: "), "{out}");
    assert!(out.contains("Percentiles: 50th = ") && out.contains("99th = "), "{out}");

    // kafka-consumer-perf-test in a group reads every record of a 4-partition topic.
    tests::data::create_topic(&c, "perf", 4, 3, &[]).await.unwrap();
    for p in 0..4 {
        for chunk in 0..5 {
            produce(
                &c,
                "perf",
                p,
                (0..250).map(|i| format!("perf-{p}-{chunk}-{i}")).collect(),
            )
            .await;
        }
    }
    // Once in a classic group, once in a KIP-848 consumer group.
    for protocol in ["classic", "consumer"] {
        let (kb, group) = (kb.clone(), format!("perf-{protocol}"));
        let (ok, out) = tokio::task::spawn_blocking(move || {
            let property = format!("group.protocol={protocol}");
            let (ok, out) = tool(
                "kafka-consumer-perf-test",
                &[
                    "--bootstrap-server",
                    &kb,
                    "--topic",
                    "perf",
                    "--num-records",
                    "5000",
                    "--group",
                    &group,
                    "--timeout",
                    "60000",
                    "--command-property",
                    &property,
                ],
                "",
            );
            assert!(ok, "{protocol}: {out}");
            // The header, then one line: its fifth column is data.consumed.in.nMsg.
            let header = out.lines().position(|l| l.starts_with("start.time")).expect(&out);
            let cols: Vec<&str> = out
                .lines()
                .nth(header + 1)
                .expect(&out)
                .split(',')
                .map(str::trim)
                .collect();
            assert_eq!(cols.get(4), Some(&"5000"), "{protocol}: {out}");
            // The group committed every record (auto-commit on close).
            tool(
                "kafka-consumer-groups",
                &["--bootstrap-server", &kb, "--describe", "--group", &group, "--offsets"],
                "",
            )
        })
        .await
        .unwrap();
        assert!(ok, "{out}");
        let total: i64 = out
            .lines()
            .filter(|l| l.starts_with(&format!("perf-{protocol} ")))
            .filter_map(|l| l.split_whitespace().nth(3)?.parse::<i64>().ok())
            .sum();
        assert_eq!(total, 5000, "{protocol}: {out}");
    }
    drop(four);
}
