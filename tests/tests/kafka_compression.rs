//! librdkafka compresses against Ferry: both the Debian kcat (librdkafka 2.0.2) and PyPI's
//! confluent-kafka produce gzip, snappy, lz4 and zstd batches, which land on disk with their
//! codec. librdkafka enables gzip and snappy only when ApiVersions has Produce v2 and Fetch v2
//! in range, which Ferry advertises (and answers with UNSUPPORTED_VERSION) for that reason.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use tests::kafka::run;
use tests::reassign::create;

const CODECS: [&str; 4] = ["gzip", "snappy", "lz4", "zstd"];

/// confluent-kafka: 20 compressible records per codec to partition 0 of a topic, acks=all,
/// one producer per codec; prints the count delivered without error.
const CONFLUENT: &str = r#"
import sys
from confluent_kafka import Producer
b, topic = sys.argv[1], sys.argv[2]
ok = 0
def done(err, msg):
    global ok
    if err is None:
        ok += 1
    else:
        print("delivery failed:", err, file=sys.stderr)
for codec in ["gzip", "snappy", "lz4", "zstd"]:
    p = Producer({"bootstrap.servers": b, "compression.type": codec, "acks": "all", "linger.ms": 50})
    for i in range(20):
        p.produce(topic, value=(codec + " value " + str(i) + " " + "x" * 200).encode(), partition=0, on_delivery=done)
    p.flush(60)
print(ok)
"#;

/// The codecs of the batches in partition 0 of `topic`, from each replica's first segment (a
/// segment still being written, or not yet there, reads as no codec).
fn codecs_on_disk(root: &std::path::Path, topic: &str) -> Vec<BTreeSet<String>> {
    tests::reassign::replica_dirs(root, topic, 0)
        .iter()
        .map(|f| {
            let raw = std::fs::read(f.join("00000000000000000000.log")).unwrap_or_default();
            let batches = broker::record_batch::split_batches(&raw).unwrap_or_default();
            batches
                .iter()
                .filter_map(|(h, _)| h.codec().ok())
                .map(String::from)
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_and_confluent_kafka_produce_compressed_batches_in_every_codec() {
    let dir = tempfile::tempdir().unwrap();
    let (four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    create(&four.client, "rdk", vec![vec![1, 2]], &[]).await;
    create(&four.client, "ck", vec![vec![2, 3]], &[]).await;
    let bootstrap = k.bootstrap();
    tests::wait_until(Duration::from_secs(60), "kcat to see both topics led", || {
        let (code, out, _) = run(Command::new("kcat").args(["-L", "-J", "-b", &bootstrap]), "");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
        let led = v["topics"].as_array().is_some_and(|ts| {
            ts.iter()
                .filter(|t| t["topic"] == "rdk" || t["topic"] == "ck")
                .filter(|t| t["partitions"][0]["leader"].as_i64().unwrap_or(-1) > 0)
                .count()
                == 2
        });
        async move { code == Some(0) && led }
    })
    .await;

    for codec in CODECS {
        let lines: Vec<String> = (0..20)
            .map(|i| format!("{codec} value {i} {}", "x".repeat(200)))
            .collect();
        let (code, _, err) = run(
            Command::new("timeout").args([
                "60", "kcat", "-P", "-b", &bootstrap, "-t", "rdk", "-p", "0", "-z", codec, "-X", "acks=all", "-d",
                "feature",
            ]),
            &(lines.join("\n") + "\n"),
        );
        assert_eq!(code, Some(0), "kcat produce with {codec}: {err}");
        // librdkafka did not fall back to uncompressed batches.
        assert!(!err.contains("does not support compression"), "{codec}: {err}");
    }
    let (code, out, err) = run(
        Command::new("timeout").args(["120", "python3", "-c", CONFLUENT, &bootstrap, "ck"]),
        "",
    );
    assert_eq!(code, Some(0), "confluent-kafka: {err}");
    assert_eq!(out.trim(), "80", "every record delivered: {err}");

    let want: BTreeSet<String> = CODECS.iter().map(|c| c.to_string()).collect();
    for topic in ["rdk", "ck"] {
        // Followers copy the batches as they are; wait until each replica holds all four.
        tests::wait_until(Duration::from_secs(30), "every replica to hold every codec", || {
            let got = codecs_on_disk(dir.path(), topic);
            let want = want.clone();
            async move { got.len() == 2 && got.iter().all(|g| *g == want) }
        })
        .await;
    }
}
