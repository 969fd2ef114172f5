//! Log compaction through Kafka's own clients and tools: 100,000 records over 1,000 keys (a
//! tenth of them deleted by tombstones) from kafka-python and batches in every codec from
//! kcat, produced to a topic with
//! `cleanup.policy=compact`. Once the cleaner has passed them, a consumer from the start sees
//! each key once, with its last value, on every replica's log, which shrank; Kafka's
//! DumpLogSegments reads the cleaned segments and their indexes; and after
//! `delete.retention.ms` and a later clean, the deleted keys are gone altogether. A record
//! without a key is refused, as Kafka refuses it on a compacted topic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tests::kafka::run;

const TOPIC: &str = "compacted";
const RECORDS: usize = 100_000;
const KEYS: usize = 1_000;
const TOMB_EVERY: usize = 10;
/// Each bulk value: `v{i}-` and 90 bytes of padding.
const PAD: usize = 90;

/// Runs `tests/py/compaction.py` with `args` after the bootstrap list and topic.
fn py(bootstrap: &str, args: &[&str]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/compaction.py");
    let (code, out, err) = run(
        Command::new("timeout")
            .arg("180")
            .arg("python3")
            .arg(&script)
            .args([bootstrap, TOPIC])
            .args(args),
        "",
    );
    assert_eq!(code, Some(0), "kafka-python {args:?} failed: {err}");
    serde_json::from_str(out.trim()).unwrap()
}

/// The partition's folders, one per replica.
fn folders(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n == "compacted-0") {
                    found.push(p.clone());
                }
                stack.push(p);
            }
        }
    }
    found
}

/// The cleaned point of the partition in the cleaner checkpoint of the log dir holding `folder`.
fn cleaned_to(folder: &Path) -> Option<i64> {
    let text = std::fs::read_to_string(folder.parent()?.join(broker::cleaner::checkpoint::FILE)).ok()?;
    broker::dir_checkpoints::parse(&text)?
        .into_iter()
        .find(|(t, p, _)| t == TOPIC && *p == 0)
        .map(|(_, _, o)| o)
}

/// Bytes of a folder's segment files.
fn log_bytes(folder: &Path) -> u64 {
    std::fs::read_dir(folder)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// Waits until every replica's log is cleaned past `offset`.
async fn cleaned_past(root: &Path, offset: i64) {
    let root = root.to_path_buf();
    tests::wait_until(Duration::from_secs(60), "every replica cleaned past the writes", || {
        let fs = folders(&root);
        async move { fs.len() == 3 && fs.iter().all(|f| cleaned_to(f).is_some_and(|o| o >= offset)) }
    })
    .await;
}

/// kcat writes `lines` (`key\tvalue`) as one batch in `codec`.
fn kcat(bootstrap: &str, codec: &str, lines: &[String]) {
    let (code, _, err) = run(
        Command::new("timeout").args([
            "60",
            "kcat",
            "-P",
            "-b",
            bootstrap,
            "-t",
            TOPIC,
            "-p",
            "0",
            "-K",
            "\t",
            "-z",
            codec,
            "-X",
            "acks=all",
            "-X",
            "linger.ms=100",
        ]),
        &(lines.join("\n") + "\n"),
    );
    assert_eq!(code, Some(0), "kcat produce with {codec}: {err}");
}

/// Every record a consumer (kcat: kafka-python lacks some codecs) reads from the start, by key:
/// each (offset, value) seen.
fn consume(bootstrap: &str) -> BTreeMap<String, Vec<(i64, Option<String>)>> {
    let mut by_key: BTreeMap<String, Vec<(i64, Option<String>)>> = BTreeMap::new();
    for r in tests::kafka::kcat_read(bootstrap, TOPIC) {
        let key = r["key"].as_str().expect("every record has a key").to_string();
        by_key
            .entry(key)
            .or_default()
            .push((r["offset"].as_i64().unwrap(), r["payload"].as_str().map(str::to_string)));
    }
    by_key
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_topic_keeps_the_last_value_of_each_key_and_forgets_deleted_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (four, k) = tests::kafka::start(dir.path(), |_| vec!["--log-cleaner-backoff-ms".into(), "200".into()]).await;
    let bootstrap = k.bootstrap();
    tests::reassign::create(
        &four.client,
        TOPIC,
        vec![vec![1, 2, 3]],
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "65536"),
            ("min.cleanable.dirty.ratio", "0.01"),
            ("delete.retention.ms", "3000"),
        ],
    )
    .await;
    tests::wait_until(Duration::from_secs(30), "the partition in sync", || {
        tests::data::isr_is(&four.client, TOPIC, 0, &[1, 2, 3])
    })
    .await;

    // A compacted topic refuses a record without a key, as Kafka's does.
    assert_eq!(py(&bootstrap, &["keyless"])["error"], "InvalidRecordError");

    // The writes, modelled: the last value of each key (None: deleted).
    let mut model: BTreeMap<String, Option<String>> = BTreeMap::new();
    for i in 0..RECORDS {
        model.insert(format!("k{}", i % KEYS), Some(format!("v{i}-{}", "x".repeat(PAD))));
    }
    for j in (0..KEYS).step_by(TOMB_EVERY) {
        model.insert(format!("k{j}"), None);
    }
    let end = py(
        &bootstrap,
        &[
            "produce",
            &RECORDS.to_string(),
            &KEYS.to_string(),
            &TOMB_EVERY.to_string(),
        ],
    )["end"]
        .as_i64()
        .unwrap();
    assert_eq!(end, (RECORDS + KEYS / TOMB_EVERY) as i64);
    // A batch in each codec, each partly replaced by the next: the clean rebuilds each one in
    // its codec. k0, k10 come back from the dead.
    for (codec, n) in [("lz4", 20), ("zstd", 10), ("snappy", 5), ("gzip", 2)] {
        let lines: Vec<String> = (0..n).map(|j| format!("k{j}\t{codec}-k{j}")).collect();
        kcat(&bootstrap, codec, &lines);
        for j in 0..n {
            model.insert(format!("k{j}"), Some(format!("{codec}-k{j}")));
        }
    }
    let written = end + 37;
    // Keys of their own, enough to roll the segment holding the writes above.
    let filled = py(&bootstrap, &["fill", "a", "800"])["end"].as_i64().unwrap();
    assert_eq!(filled, written + 800);
    for n in 0..800 {
        model.insert(format!("a{n}"), Some(format!("filler-{}", "x".repeat(PAD))));
    }
    cleaned_past(dir.path(), written).await;

    // Each key once, with its last value; a deleted key at most once, as its tombstone.
    let seen = consume(&bootstrap);
    for (key, want) in &model {
        let got = seen.get(key).map(Vec::as_slice).unwrap_or(&[]);
        match want {
            Some(v) => assert!(
                got.len() == 1 && got[0].1.as_deref() == Some(v.as_str()),
                "{key}: {got:?}"
            ),
            None => assert!(got.len() <= 1 && got.iter().all(|(_, v)| v.is_none()), "{key}: {got:?}"),
        }
    }
    assert!(seen.keys().all(|k| model.contains_key(k)));
    // Every replica's log shrank to a small part of the 10 MB written.
    let folders = folders(dir.path());
    assert_eq!(folders.len(), 3);
    for f in &folders {
        let bytes = log_bytes(f);
        assert!(
            bytes < (RECORDS * (PAD + 10) / 10) as u64,
            "{}: {bytes} bytes",
            f.display()
        );
    }

    // Kafka's DumpLogSegments reads every cleaned segment, its records (decompressed) and its
    // indexes, and checks each index entry against the batches.
    let mut files: Vec<String> = std::fs::read_dir(&folders[0])
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|x| x == "log" || x == "index" || x == "timeindex")
        })
        .map(|p| p.display().to_string())
        .collect();
    files.sort();
    let (ok, out) = tests::kafka::tool("kafka-dump-log", &["--files", &files.join(","), "--print-data-log"], "");
    assert!(ok, "{out}");
    assert!(
        out.contains("isvalid: true") && !out.contains("isvalid: false"),
        "{out}"
    );
    for bad in ["mismatch", "out of order", "not found", "Exception"] {
        assert!(!out.contains(bad), "{bad}:\n{out}");
    }
    for codec in ["lz4", "zstd", "snappy", "gzip"] {
        assert!(out.contains(&format!("payload: {codec}-k")), "{codec}:\n{out}");
    }

    // After delete.retention.ms, more writes make the log dirty again, and the next clean
    // removes the tombstones: the deleted keys are gone.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let refilled = py(&bootstrap, &["fill", "b", "800"])["end"].as_i64().unwrap();
    for n in 0..800 {
        model.insert(format!("b{n}"), Some(format!("filler-{}", "x".repeat(PAD))));
    }
    cleaned_past(dir.path(), filled + 1).await;
    let seen = consume(&bootstrap);
    for (key, want) in &model {
        let got = seen.get(key).map(Vec::as_slice).unwrap_or(&[]);
        match want {
            Some(v) => {
                // The b fillers past the clean are in the active segment, once each too.
                assert!(
                    got.len() == 1 && got[0].1.as_deref() == Some(v.as_str()),
                    "{key}: {got:?}"
                )
            }
            None => assert!(got.is_empty(), "{key} was deleted: {got:?}"),
        }
    }
    assert!(refilled > filled);
}
