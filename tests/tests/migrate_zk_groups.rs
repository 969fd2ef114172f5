//! A consumer group moves with its cluster: a ZooKeeper-mode Kafka 3.9 cluster, whose
//! `__consumer_offsets` has 7 partitions and lz4-compressed batches, keeps the offsets a group
//! committed with Kafka's own console consumer. After `ferry migrate-zk` and Ferry brokers on
//! Kafka's log dirs, `kafka-consumer-groups` shows the same offsets, and a consumer of the group
//! resumes exactly after them: every record not yet consumed once, none consumed before.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use broker::coordinator::hash::partition_for;
use tests::kafka::{run, tool};
use tests::kafka_zk::{self, run_tool, Takeover, ZkBroker};
use tests::zk::ZkServer;

const CHROOT: &str = "/kafka";
const TOPIC: &str = "orders";
const GROUP: &str = "billing";
const RECORDS: usize = 2000;
/// Not Kafka's default of 50, so that a coordinator that assumed the default would look in the
/// wrong partition.
const OFFSETS_PARTITIONS: u32 = 7;

/// Per partition of `TOPIC`: (CURRENT-OFFSET, LOG-END-OFFSET) as `kafka-consumer-groups
/// --describe` prints them for `GROUP`.
type Described = BTreeMap<i32, (i64, i64)>;

fn parse_describe(out: &str) -> Described {
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 4 && f[0] == GROUP && f[1] == TOPIC).then_some(())?;
            Some((
                f.get(2)?.parse().ok()?,
                (f.get(3)?.parse().ok()?, f.get(4)?.parse().ok()?),
            ))
        })
        .collect()
}

/// Every record of `TOPIC` read with kcat: (partition, offset) to value; `None` while not all
/// of them are readable.
fn records(bootstrap: &str) -> Option<BTreeMap<(i32, i64), String>> {
    let (code, out, _) = run(
        Command::new("timeout").args([
            "30",
            "kcat",
            "-C",
            "-q",
            "-e",
            "-b",
            bootstrap,
            "-t",
            TOPIC,
            "-f",
            "%p %o %s\\n",
        ]),
        "",
    );
    let all: BTreeMap<(i32, i64), String> = out
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ' ');
            Some((
                (f.next()?.parse().ok()?, f.next()?.parse().ok()?),
                f.next()?.to_string(),
            ))
        })
        .collect();
    (code == Some(0) && all.len() == RECORDS).then_some(all)
}

/// The compression codec of each record batch Kafka wrote to partition `p` of
/// `__consumer_offsets` (bits 0-2 of a v2 batch's attributes), from its segments under `root`.
fn offsets_codecs(root: &Path, p: u32) -> Vec<u16> {
    let mut codecs = Vec::new();
    for d in std::fs::read_dir(root).unwrap().flatten() {
        let dir = d.path().join(format!("__consumer_offsets-{p}"));
        if !d.file_name().to_string_lossy().starts_with("kafka") || !dir.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(dir).unwrap().flatten() {
            if f.path().extension().is_none_or(|e| e != "log") {
                continue;
            }
            let b = std::fs::read(f.path()).unwrap();
            // base offset (8), length (4), then length bytes: epoch (4), magic (1), crc (4),
            // attributes (2), ...
            let mut at = 0;
            while at + 23 <= b.len() {
                let len = i32::from_be_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
                codecs.push(u16::from_be_bytes([b[at + 21], b[at + 22]]) & 7);
                at += 12 + len;
            }
        }
    }
    codecs
}

/// A member of `GROUP` that must start from the group's committed offsets (`none`: no offset
/// is an error), reads until it has `want` records, prints each as `partition offset value`,
/// then commits where it stopped.
const RESUME: &str = r#"
import sys, time
from kafka import KafkaConsumer
b, topic, group, want = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = KafkaConsumer(topic, bootstrap_servers=b, group_id=group, enable_auto_commit=False,
                  auto_offset_reset="none", request_timeout_ms=15000, retry_backoff_ms=200)
n = 0
deadline = time.time() + 90
while n < want and time.time() < deadline:
    for tp, rs in c.poll(timeout_ms=500).items():
        for r in rs:
            print(r.partition, r.offset, r.value.decode(), flush=True)
            n += 1
c.commit()
c.close()
"#;

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_groups_committed_offsets_survive_the_move_from_zookeeper_kafka() {
    assert_ne!(
        partition_for(GROUP, OFFSETS_PARTITIONS),
        partition_for(GROUP, 50),
        "the group's partition depends on the topic's real partition count"
    );
    let started = Instant::now();
    let jars = blocking(kafka_zk::jars);
    let zk = ZkServer::start().await;
    let zkc = zk.client().await;
    zkc.create(
        CHROOT,
        &[],
        &zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all()),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let zk_connect = format!("{}{CHROOT}", zk.addr);
    // Codec 3 is lz4: the coordinator's batches are compressed as Kafka wrote them.
    let props = format!("offsets.topic.num.partitions={OFFSETS_PARTITIONS}\noffsets.topic.compression.codec=3\n");
    let mut kafka: Vec<ZkBroker> = (1..=3)
        .map(|id| ZkBroker::start_with(&jars, root, id, &zk_connect, &props))
        .collect();
    let controller = kafka_zk::wait_registered(&zkc, CHROOT, 3).await;
    let kb = kafka[0].addr.clone();

    // Kafka 3.9's tools: a topic, keyed records, and a group member that reads part of them
    // and commits as it closes.
    let (described, written) = blocking(|| {
        let (ok, out) = run_tool(
            "kafka-topics",
            &[
                "--bootstrap-server",
                &kb,
                "--create",
                "--topic",
                TOPIC,
                "--partitions",
                "4",
                "--replication-factor",
                "2",
            ],
            "",
        );
        assert!(ok, "{out}");
        let lines: String = (0..RECORDS).map(|i| format!("{i}:r-{i}\n")).collect();
        let (ok, out) = run_tool(
            "kafka-console-producer",
            &[
                "--bootstrap-server",
                &kb,
                "--topic",
                TOPIC,
                "--property",
                "parse.key=true",
                "--property",
                "key.separator=:",
            ],
            &lines,
        );
        assert!(ok, "{out}");
        // Every partition gets a committed offset first: the consumer below commits only the
        // partitions it happened to fetch from before its 700th record.
        let (ok, out) = run_tool(
            "kafka-consumer-groups",
            &[
                "--bootstrap-server",
                &kb,
                "--group",
                GROUP,
                "--topic",
                TOPIC,
                "--reset-offsets",
                "--to-earliest",
                "--execute",
            ],
            "",
        );
        assert!(ok, "{out}");
        let (ok, out) = run_tool(
            "kafka-console-consumer",
            &[
                "--bootstrap-server",
                &kb,
                "--topic",
                TOPIC,
                "--group",
                GROUP,
                "--from-beginning",
                "--max-messages",
                "700",
            ],
            "",
        );
        assert!(ok && out.lines().count() == 700, "{out}");
        let (ok, out) = run_tool(
            "kafka-consumer-groups",
            &["--bootstrap-server", &kb, "--describe", "--group", GROUP],
            "",
        );
        assert!(ok, "{out}");
        (out, records(&kb).expect("Kafka serves every record"))
    });
    let on_kafka = parse_describe(&described);
    assert_eq!(on_kafka.len(), 4, "{described}");
    let committed: i64 = on_kafka.values().map(|(c, _)| c).sum();
    assert!(
        (700..RECORDS as i64).contains(&committed),
        "the group consumed part of the topic: {on_kafka:?}"
    );
    assert_eq!(on_kafka.values().map(|(_, e)| e).sum::<i64>(), RECORDS as i64);

    // The brokers stop, the controller last, and Ferry takes over their dirs.
    blocking(|| {
        for b in kafka.iter_mut().filter(|b| b.id != controller) {
            b.stop();
        }
        kafka.iter_mut().for_each(ZkBroker::stop);
    });
    let codecs = offsets_codecs(root, partition_for(GROUP, OFFSETS_PARTITIONS));
    assert!(
        !codecs.is_empty() && codecs.iter().all(|c| *c == 3),
        "Kafka wrote the group's records in lz4 batches: {codecs:?}"
    );
    let mut ferry = blocking(|| Takeover::start_quorum(root));
    let (code, out, err) = blocking(|| ferry.migrate(&zk_connect, &[]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!(
            ": 2 topics (0 being deleted), {} partitions, 0 reassignments in flight",
            4 + OFFSETS_PARTITIONS
        )),
        "__consumer_offsets is imported with the topic: {out}"
    );
    let fb = ferry.start_brokers(root, &kafka);

    // Kafka 4's group tool against Ferry prints what Kafka 3.9's printed against Kafka, once the
    // group's coordinator has loaded its partition.
    let deadline = Instant::now() + Duration::from_secs(90);
    let on_ferry = loop {
        let (ok, out) = blocking(|| {
            tool(
                "kafka-consumer-groups",
                &["--bootstrap-server", &fb, "--describe", "--group", GROUP],
                "",
            )
        });
        let got = parse_describe(&out);
        if ok && got == on_kafka {
            break got;
        }
        assert!(
            Instant::now() < deadline,
            "Ferry shows the offsets Kafka showed, {on_kafka:?}; last: {out}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };

    // A member of the group resumes at the committed offsets: it reads each record after them
    // once, and none before.
    let want: BTreeMap<(i32, i64), String> = written.into_iter().filter(|((p, o), _)| *o >= on_ferry[p].0).collect();
    let remaining = want.len().to_string();
    let (code, out, err) = blocking(|| {
        run(
            Command::new("timeout").args(["120", "python3", "-c", RESUME, &fb, TOPIC, GROUP, &remaining]),
            "",
        )
    });
    assert_eq!(code, Some(0), "{out}{err}");
    let mut read: Vec<((i32, i64), String)> = out
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ' ');
            Some((
                (f.next()?.parse().ok()?, f.next()?.parse().ok()?),
                f.next()?.to_string(),
            ))
        })
        .collect();
    read.sort();
    assert_eq!(
        read,
        want.into_iter().collect::<Vec<_>>(),
        "the resumed member reads exactly the records after the committed offsets"
    );

    // Its commit lands after Kafka's in the same partition of `__consumer_offsets`.
    let (ok, out) = blocking(|| {
        tool(
            "kafka-consumer-groups",
            &["--bootstrap-server", &fb, "--describe", "--group", GROUP],
            "",
        )
    });
    let done = parse_describe(&out);
    assert!(
        ok && done.len() == 4 && done.values().all(|(c, e)| c == e),
        "the group has consumed everything: {out}"
    );
    eprintln!("took {:?}", started.elapsed());
}
