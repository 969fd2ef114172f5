//! Records through the Kafka listener with Kafka's own clients: kcat produces with keys and
//! headers in every codec and reads them back identical; kafka-python produces at acks=all and
//! reads with assign() and no group; gRPC and Kafka clients share one partition's batches; the
//! batches on disk are kept as produced, codec and all.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tests::kafka::{kcat_read, run};
use tests::reassign::create;

/// The partition folder `name` under `root`, wherever a broker keeps it.
fn find_dir(root: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n == name) {
                    found.push(p.clone());
                }
                stack.push(p);
            }
        }
    }
    found
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_clients_produce_and_fetch_records_identical_in_every_codec() {
    let dir = tempfile::tempdir().unwrap();
    let (four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let kafka = |id: i32| k.addr(id);
    create(&four.client, "codecs", vec![vec![1, 2, 3]], &[]).await;
    create(&four.client, "py", vec![vec![2, 3, 4]], &[]).await;
    create(&four.client, "both", vec![vec![3, 4, 1]], &[]).await;
    let bootstrap = k.bootstrap();
    tests::wait_until(Duration::from_secs(60), "kcat to see the three topics led", || {
        let (code, out, _) = run(
            Command::new("kcat").args(["-L", "-J", "-b", &bootstrap, "-m", "20"]),
            "",
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
        let led = v["topics"].as_array().is_some_and(|ts| {
            ts.len() == 3
                && ts
                    .iter()
                    .all(|t| t["partitions"][0]["leader"].as_i64().unwrap_or(-1) > 0)
        });
        async move { code == Some(0) && led }
    })
    .await;

    // kcat: 20 compressible records with keys and headers in each codec, at acks=all.
    let codecs = ["none", "gzip", "snappy", "lz4", "zstd"];
    let before = now_ms();
    let mut want = Vec::new();
    for codec in codecs {
        let lines: Vec<String> = (0..20)
            .map(|i| format!("{codec}-{i}\t{codec} value {i} {}", "x".repeat(200)))
            .collect();
        let (code, _, err) = run(
            Command::new("timeout").args([
                "60",
                "kcat",
                "-P",
                "-b",
                &bootstrap,
                "-t",
                "codecs",
                "-p",
                "0",
                "-K",
                "\t",
                "-z",
                codec,
                "-H",
                &format!("codec={codec}"),
                "-H",
                "empty=",
                "-X",
                "acks=all",
            ]),
            &(lines.join("\n") + "\n"),
        );
        assert_eq!(code, Some(0), "kcat produce with {codec}: {err}");
        want.extend(lines);
    }
    let after = now_ms();
    let got = kcat_read(&bootstrap, "codecs");
    assert_eq!(got.len(), want.len(), "every record comes back once");
    for (i, (rec, line)) in got.iter().zip(&want).enumerate() {
        let (key, value) = line.split_once('\t').unwrap();
        let codec = key.split('-').next().unwrap();
        assert_eq!(rec["offset"], i as i64);
        assert_eq!(rec["key"], key);
        assert_eq!(rec["payload"], value);
        assert_eq!(
            rec["headers"],
            serde_json::json!(["codec", codec, "empty", ""]),
            "{rec}"
        );
        let ts = rec["ts"].as_i64().unwrap();
        assert!(rec["tstype"] == "create" && (before..=after).contains(&ts), "{rec}");
    }
    // Read through another broker's bootstrap, the same records with the same timestamps.
    assert_eq!(kcat_read(&kafka(4), "codecs"), got);

    // On disk, each replica holds the producer's batches as they came: every codec is there.
    let folders = find_dir(dir.path(), "codecs-0");
    assert_eq!(folders.len(), 3, "{folders:?}");
    for f in &folders {
        let raw = std::fs::read(f.join("00000000000000000000.log")).unwrap();
        let batches = broker::record_batch::split_batches(&raw).unwrap();
        let seen: BTreeSet<&str> = batches.iter().map(|(h, _)| h.codec().unwrap()).collect();
        assert_eq!(seen, codecs.into_iter().collect(), "{}", f.display());
        assert_eq!(batches.last().unwrap().0.next_offset(), want.len() as i64);
    }
    // Kafka's own DumpLogSegments reads the offset and time indexes and checks each entry
    // against the batches.
    for f in &folders {
        let files = ["index", "timeindex"].map(|e| f.join(format!("00000000000000000000.{e}")).display().to_string());
        let (ok, out) = tests::kafka::tool("kafka-dump-log", &["--files", &files.join(",")], "");
        assert!(ok, "{out}");
        assert!(
            out.contains("timestamp: ") && out.contains("offset: "),
            "entries in both:\n{out}"
        );
        for bad in ["mismatch", "out of order", "not found", "Exception"] {
            assert!(!out.contains(bad), "{bad}:\n{out}");
        }
    }
    // Each folder names its topic's id in partition.metadata, as a Kafka broker writes it.
    let described = four
        .client
        .admin_call(|mut a| async move {
            a.describe_topics(proto::ferry::DescribeTopicsRequest {
                topics: vec!["codecs".into()],
            })
            .await
        })
        .await
        .unwrap();
    let topic_id = uuid::Uuid::parse_str(&described.topics[0].topic_id).unwrap();
    let file = broker::partition_log::partition_metadata::FILE;
    // And each log dir keeps Kafka's checkpoint files: the high watermark and log start.
    let checkpoint = |f: &Path, name: &str| {
        std::fs::read_to_string(f.parent().unwrap().join(name))
            .ok()
            .and_then(|t| broker::dir_checkpoints::parse(&t))
            .and_then(|entries| entries.into_iter().find(|(t, p, _)| t == "codecs" && *p == 0))
            .map(|(_, _, offset)| offset)
    };
    let end = want.len() as i64;
    tests::wait_until(Duration::from_secs(30), "partition.metadata and checkpoints", || {
        let folders = folders.clone();
        async move {
            folders.iter().all(|f| {
                std::fs::read_to_string(f.join(file))
                    .ok()
                    .and_then(|t| broker::partition_log::partition_metadata::parse(&t))
                    == Some(topic_id)
                    && checkpoint(f, broker::dir_checkpoints::REPLICATION) == Some(end)
                    && checkpoint(f, broker::dir_checkpoints::LOG_START) == Some(0)
                    && checkpoint(f, broker::dir_checkpoints::RECOVERY_POINT) == Some(0)
            })
        }
    })
    .await;

    // kafka-python: a producer at acks=all and a consumer with assign() and no group.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/kafka_produce_consume.py");
    let (code, out, err) = run(
        Command::new("timeout")
            .arg("180")
            .arg("python3")
            .arg(&script)
            .args([&bootstrap, "py", "0", "10"]),
        "",
    );
    assert_eq!(code, Some(0), "kafka-python failed: {err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["offsets"], serde_json::json!((0..10).collect::<Vec<i64>>()));
    assert_eq!(v["end"], 10);
    let records = v["records"].as_array().unwrap();
    assert_eq!(records.len(), 10, "{out}");
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r["offset"], i as i64);
        assert_eq!(r["key"], format!("py-key-{i}"));
        assert_eq!(r["value"], format!("py-value-{i}").repeat(3));
        assert_eq!(
            r["headers"],
            serde_json::json!([["n", i.to_string()], ["from", "kafka-python"]])
        );
        assert_eq!(r["timestamp"], 1_700_000_000_000i64 + i as i64);
    }
    // kafka-python is an idempotent producer here: its batches carry its id and sequences.
    for f in find_dir(dir.path(), "py-0") {
        let raw = std::fs::read(f.join("00000000000000000000.log")).unwrap();
        let mut next_seq = 0;
        for (h, _) in broker::record_batch::split_batches(&raw).unwrap() {
            assert!(h.producer_id >= 0 && h.base_sequence == next_seq, "{h:?}");
            next_seq += h.record_count as i32;
        }
        assert_eq!(next_seq, 10);
    }

    // One partition, both paths: gRPC values and kcat records share the log, each readable
    // through the other.
    four.client
        .produce_once("both", 0, vec!["grpc-1".into(), "grpc-2".into()], -1)
        .await
        .unwrap();
    let (code, _, err) = run(
        Command::new("timeout").args([
            "60", "kcat", "-P", "-b", &bootstrap, "-t", "both", "-p", "0", "-K", ":", "-X", "acks=all",
        ]),
        "k3:kafka-3\nk4:kafka-4\n",
    );
    assert_eq!(code, Some(0), "{err}");
    four.client
        .produce_once("both", 0, vec!["grpc-5".into()], -1)
        .await
        .unwrap();
    let grpc = tests::data::read_all(&four.client, "both", 0).await;
    let values = |v: &[&str]| {
        v.iter()
            .enumerate()
            .map(|(i, s)| (i as i64, s.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(grpc, values(&["grpc-1", "grpc-2", "kafka-3", "kafka-4", "grpc-5"]));
    let via_kafka: Vec<(serde_json::Value, serde_json::Value)> = kcat_read(&bootstrap, "both")
        .into_iter()
        .map(|r| (r["key"].clone(), r["payload"].clone()))
        .collect();
    assert_eq!(
        via_kafka,
        vec![
            (serde_json::Value::Null, "grpc-1".into()),
            (serde_json::Value::Null, "grpc-2".into()),
            ("k3".into(), "kafka-3".into()),
            ("k4".into(), "kafka-4".into()),
            (serde_json::Value::Null, "grpc-5".into()),
        ]
    );

    // Bad batches get Kafka's error per partition and change nothing: a CRC mismatch, an old
    // magic, a record count that lies, two batches in one partition's records.
    let good = broker::record_batch::encode_batch(0, 0, now_ms(), &[b"never".as_slice()]);
    let mut crc = good.clone();
    *crc.last_mut().unwrap() ^= 0x55;
    let mut magic = good.clone();
    magic[16] = 1;
    let mut count = good.clone();
    count[23..27].copy_from_slice(&999i32.to_be_bytes());
    count[57..61].copy_from_slice(&1000i32.to_be_bytes());
    reseal(&mut count);
    let two = [good.clone(), good.clone()].concat();
    let leader_of_codecs = kafka(1);
    for (what, batch, code) in [
        ("crc", crc, 2),
        ("magic", magic, 87),
        ("count", count, 87),
        ("two", two, 87),
    ] {
        assert_eq!(raw_produce(&leader_of_codecs, "codecs", &batch).0, code, "{what}");
    }
    assert_eq!(kcat_read(&bootstrap, "codecs").len(), want.len(), "nothing was written");

    // An idempotent producer's retry is answered with the first offsets and written once; a
    // gap in its sequence and an older epoch are refused.
    let n = want.len() as i64;
    let idem = |epoch: i16, seq: i32| {
        let mut b = broker::record_batch::encode_batch(0, 0, now_ms(), &[b"idem".as_slice()]);
        b[43..51].copy_from_slice(&4242i64.to_be_bytes());
        b[51..53].copy_from_slice(&epoch.to_be_bytes());
        b[53..57].copy_from_slice(&seq.to_be_bytes());
        reseal(&mut b);
        b
    };
    assert_eq!(raw_produce(&leader_of_codecs, "codecs", &idem(1, 0)), (0, n));
    assert_eq!(raw_produce(&leader_of_codecs, "codecs", &idem(1, 0)), (0, n), "a retry");
    assert_eq!(raw_produce(&leader_of_codecs, "codecs", &idem(1, 5)).0, 45, "a gap");
    assert_eq!(
        raw_produce(&leader_of_codecs, "codecs", &idem(0, 1)).0,
        47,
        "an old epoch"
    );
    assert_eq!(raw_produce(&leader_of_codecs, "codecs", &idem(1, 1)), (0, n + 1));
    assert_eq!(kcat_read(&bootstrap, "codecs").len() as i64, n + 2, "each written once");
    drop(four);
}

/// Recomputes a batch's CRC after an edit.
fn reseal(b: &mut [u8]) {
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Sends a Produce v3 request (acks 1) for partition 0 of `topic` holding `records`, built by
/// hand so that it can carry what no client would send; returns the partition's error code and
/// base offset.
fn raw_produce(addr: &str, topic: &str, records: &[u8]) -> (i16, i64) {
    use std::io::{Read, Write};
    let mut body = Vec::new();
    body.extend_from_slice(&0i16.to_be_bytes()); // Produce
    body.extend_from_slice(&3i16.to_be_bytes());
    body.extend_from_slice(&7i32.to_be_bytes()); // correlation id
    body.extend_from_slice(&(-1i16).to_be_bytes()); // no client id
    body.extend_from_slice(&(-1i16).to_be_bytes()); // no transactional id
    body.extend_from_slice(&1i16.to_be_bytes()); // acks
    body.extend_from_slice(&10_000i32.to_be_bytes());
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    body.extend_from_slice(topic.as_bytes());
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&0i32.to_be_bytes());
    body.extend_from_slice(&(records.len() as i32).to_be_bytes());
    body.extend_from_slice(records);
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(&(body.len() as i32).to_be_bytes()).unwrap();
    s.write_all(&body).unwrap();
    let mut size = [0u8; 4];
    s.read_exact(&mut size).unwrap();
    let mut resp = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut resp).unwrap();
    // correlation id, topic count, name, partition count, index, then the error code.
    let at = 4 + 4 + 2 + topic.len() + 4 + 4;
    let mut base = [0u8; 8];
    base.copy_from_slice(&resp[at + 2..at + 10]);
    (i16::from_be_bytes([resp[at], resp[at + 1]]), i64::from_be_bytes(base))
}
