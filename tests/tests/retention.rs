//! Delete retention and DeleteRecords seen through Kafka's clients: `retention.ms` (with
//! `segment.ms` rolling the active segment) and `retention.bytes` delete old segments from
//! every replica and move the log start, which ListOffsets answers and consumers are reset to;
//! `kafka-delete-records` moves the low watermark, and the follower's log start follows.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tests::kafka::{run, tool, Listeners};
use tests::reassign::{create, replica_dirs, Four};

/// Starts the four nodes with retention checked twice a second.
async fn start(dir: &Path) -> (Four, Listeners) {
    tests::kafka::start(dir, |_| {
        vec!["--log-retention-check-interval-ms".to_string(), "500".to_string()]
    })
    .await
}

/// Runs `tests/py/kafka_retention.py` on partition 0 of `topic`; its JSON answer.
fn py(bootstrap: &str, topic: &str, args: &[&str]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/kafka_retention.py");
    let (code, out, err) = run(
        Command::new("timeout")
            .arg("90")
            .arg("python3")
            .arg(&script)
            .args([bootstrap, topic, "0"])
            .args(args),
        "",
    );
    assert_eq!(code, Some(0), "kafka-python failed: {err}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The earliest and latest offsets of partition 0, by ListOffsets.
fn offsets(bootstrap: &str, topic: &str) -> (i64, i64) {
    let v = py(bootstrap, topic, &["offsets"]);
    (v["earliest"].as_i64().unwrap(), v["latest"].as_i64().unwrap())
}

/// Produces `n` records of about 200 bytes with kcat at acks=all, `per` to a batch.
fn kcat_produce(bootstrap: &str, topic: &str, n: usize, per: usize) {
    let lines: Vec<String> = (0..n).map(|i| format!("{i:05}-{}", "x".repeat(200))).collect();
    let per = per.to_string();
    let (code, _, err) = run(
        Command::new("timeout").args([
            "60",
            "kcat",
            "-P",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-p",
            "0",
            "-X",
            "acks=all",
            "-X",
            &format!("batch.num.messages={per}"),
        ]),
        &(lines.join("\n") + "\n"),
    );
    assert_eq!(code, Some(0), "kcat produce: {err}");
}

/// Broker `id`'s folder of partition 0 of `topic`.
fn folder(root: &Path, id: i32, topic: &str) -> PathBuf {
    let found = replica_dirs(&root.join(format!("n{id}")), topic, 0);
    assert_eq!(found.len(), 1, "{found:?}");
    found.into_iter().next().unwrap()
}

/// The segments in a replica folder, (base offset, bytes), oldest first; and whether any
/// deleted segment's files are still there.
fn segments(folder: &Path) -> (Vec<(i64, u64)>, bool) {
    let mut segs = Vec::new();
    let mut deleted = false;
    for e in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        deleted |= name.ends_with(".deleted");
        if let Some(base) = name.strip_suffix(".log").and_then(|b| b.parse().ok()) {
            segs.push((base, e.metadata().map_or(0, |m| m.len())));
        }
    }
    segs.sort();
    (segs, deleted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_retention_deletes_old_segments_and_consumers_move_to_the_new_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let (four, k) = start(dir.path()).await;
    let b = k.bootstrap();
    let config = [
        ("retention.ms", "5000"),
        ("segment.bytes", "10000"),
        ("segment.ms", "2000"),
        ("file.delete.delay.ms", "1000"),
    ];
    create(&four.client, "rt", vec![vec![1, 2]], &config).await;
    tests::wait_until(Duration::from_secs(30), "the partition in sync", || {
        tests::data::isr_is(&four.client, "rt", 0, &[1, 2])
    })
    .await;

    // About 65 kB in batches of 5 records: several segments of 10 kB on each replica.
    kcat_produce(&b, "rt", 300, 5);
    let (leader, follower) = (folder(dir.path(), 1, "rt"), folder(dir.path(), 2, "rt"));
    let (segs, _) = segments(&leader);
    assert!(segs.len() >= 5 && segs[0].0 == 0, "{segs:?}");

    // Five seconds on, the sealed segments expire: the log start moves past 0 and the oldest
    // segment's files go (renamed first, removed after file.delete.delay.ms).
    tests::wait_until(Duration::from_secs(20), "the oldest segments deleted", || {
        let (segs, _) = segments(&leader);
        let earliest = offsets(&b, "rt").0;
        async move { earliest > 0 && segs.first().is_some_and(|s| s.0 == earliest) }
    })
    .await;
    // segment.ms rolls the active segment too, so that in the end the whole log expires, on
    // the follower as well (each replica applies retention to its own log).
    tests::wait_until(Duration::from_secs(20), "every record expired on both replicas", || {
        let (lead, lead_deleted) = segments(&leader);
        let (foll, foll_deleted) = segments(&follower);
        let o = offsets(&b, "rt");
        async move { o == (300, 300) && lead == [(300, 0)] && foll == [(300, 0)] && !lead_deleted && !foll_deleted }
    })
    .await;

    // New records stamped ten minutes ahead stay; a consumer at offset 0 is out of range.
    let produced = py(&b, "rt", &["produce", "20", "600000"]);
    assert_eq!(produced["offsets"], serde_json::json!((300..320).collect::<Vec<i64>>()));
    let reset = py(&b, "rt", &["read-from-zero", "earliest"]);
    assert_eq!(reset["error"], serde_json::Value::Null, "{reset}");
    assert_eq!(
        reset["offsets"],
        serde_json::json!((300..320).collect::<Vec<i64>>()),
        "{reset}"
    );
    let strict = py(&b, "rt", &["read-from-zero", "none"]);
    assert_eq!(strict["error"], "OffsetOutOfRangeError", "{strict}");
    assert_eq!(strict["offsets"], serde_json::json!([]), "{strict}");
    assert_eq!(offsets(&b, "rt"), (300, 320));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_retention_keeps_each_replica_at_least_retention_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (four, k) = start(dir.path()).await;
    let b = k.bootstrap();
    let config = [("retention.bytes", "30000"), ("segment.bytes", "10000")];
    create(&four.client, "rb", vec![vec![2, 3]], &config).await;
    tests::wait_until(Duration::from_secs(30), "the partition in sync", || {
        tests::data::isr_is(&four.client, "rb", 0, &[2, 3])
    })
    .await;
    kcat_produce(&b, "rb", 500, 5);

    // On both replicas the oldest segments go while what is left stays at least 30000 bytes.
    let done = |f: &Path| {
        let (segs, _) = segments(f);
        let total: u64 = segs.iter().map(|s| s.1).sum();
        segs.len() > 1 && segs[0].0 > 0 && total - segs[0].1 < 30_000
    };
    let (leader, follower) = (folder(dir.path(), 2, "rb"), folder(dir.path(), 3, "rb"));
    tests::wait_until(Duration::from_secs(20), "both replicas down to retention.bytes", || {
        let ok = done(&leader) && done(&follower);
        async move { ok }
    })
    .await;
    for f in [&leader, &follower] {
        let (segs, _) = segments(f);
        let total: u64 = segs.iter().map(|s| s.1).sum();
        assert!(total >= 30_000, "{segs:?}");
    }
    // ListOffsets (Kafka's own tool) answers the leader's first segment as the earliest offset,
    // and a consumer reset to it reads from there to the end.
    let start = segments(&leader).0[0].0;
    let (ok, out) = tool(
        "kafka-get-offsets",
        &["--bootstrap-server", &b, "--topic", "rb", "--time", "-2"],
        "",
    );
    assert!(ok, "{out}");
    assert_eq!(out.trim(), format!("rb:0:{start}"));
    let read = py(&b, "rb", &["read-from-zero", "earliest"]);
    assert_eq!(
        read["offsets"],
        serde_json::json!((start..500).collect::<Vec<i64>>()),
        "{read}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_delete_records_moves_the_low_watermark_on_leader_and_follower() {
    let dir = tempfile::tempdir().unwrap();
    let (four, k) = start(dir.path()).await;
    let b = k.bootstrap();
    create(&four.client, "dr", vec![vec![1, 4]], &[]).await;
    tests::wait_until(Duration::from_secs(30), "the partition in sync", || {
        tests::data::isr_is(&four.client, "dr", 0, &[1, 4])
    })
    .await;
    // Batches of 7: offset 40 lies inside the batch 35..42.
    kcat_produce(&b, "dr", 100, 7);

    let delete = |offset: i64| {
        let file = dir.path().join(format!("delete-{offset}.json"));
        let json = format!(r#"{{"partitions":[{{"topic":"dr","partition":0,"offset":{offset}}}],"version":1}}"#);
        std::fs::write(&file, json).unwrap();
        let file = file.display().to_string();
        tool(
            "kafka-delete-records",
            &["--bootstrap-server", &b, "--offset-json-file", &file],
            "",
        )
    };
    let get_offsets = |time: &str| {
        let (ok, out) = tool(
            "kafka-get-offsets",
            &["--bootstrap-server", &b, "--topic", "dr", "--time", time],
            "",
        );
        assert!(ok, "{out}");
        out.trim().to_string()
    };
    let (ok, out) = delete(40);
    assert!(ok && out.contains("partition: dr-0\tlow_watermark: 40"), "{out}");
    assert_eq!(get_offsets("-2"), "dr:0:40");
    // A consumer at 0 is reset to 40, mid-batch: it is given nothing below.
    let read = py(&b, "dr", &["read-from-zero", "earliest"]);
    assert_eq!(
        read["offsets"],
        serde_json::json!((40..100).collect::<Vec<i64>>()),
        "{read}"
    );

    // The follower takes the leader's log start from its next fetch answer, and its dir's
    // checkpoint (written every 5 s) says so.
    let checkpoint = folder(dir.path(), 4, "dr")
        .parent()
        .unwrap()
        .join("log-start-offset-checkpoint");
    tests::wait_until(Duration::from_secs(20), "the follower's log start at 40", || {
        let text = std::fs::read_to_string(&checkpoint).unwrap_or_default();
        async move { text.lines().any(|l| l == "dr 0 40") }
    })
    .await;

    // Past the high watermark is refused; -1 means the high watermark.
    let (_, out) = delete(1000);
    assert!(out.contains("OffsetOutOfRange"), "{out}");
    assert_eq!(get_offsets("-2"), "dr:0:40");
    let (ok, out) = delete(-1);
    assert!(ok && out.contains("partition: dr-0\tlow_watermark: 100"), "{out}");
    assert_eq!(get_offsets("-2"), "dr:0:100");
    assert_eq!(get_offsets("-1"), "dr:0:100");
}
