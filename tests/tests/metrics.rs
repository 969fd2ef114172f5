//! Every node serves `/metrics` as Prometheus text: the families exist with their types, a
//! throttled reassignment moves its leader's gauges up and back down and its bytes show as
//! throttled replication traffic, a log dir move counts its bytes, and the Raft metrics move.
//! A follower copies many partitions from each leader over one replication stream.

use std::collections::BTreeMap;
use std::time::Duration;

use proto::ferry::ReplicaLogDirMove;
use tests::data::isr_is;
use tests::metrics::{scrape_parsed, Exposition};
use tests::reassign::{alter, create, ok, produce_n, replica_dirs, start_four_each, wait_all_done};
use tests::wait_until;

const RATE: i64 = 500_000;
/// 30 batches of 100 records of over 1000 bytes: over 3 MB, about six seconds at the throttle.
const BATCHES: usize = 30;
const PER_BATCH: usize = 100;
const RECORD: usize = 1000;
const DATA: f64 = (BATCHES * PER_BATCH * RECORD) as f64;

const BROKER_FAMILIES: &[(&str, &str)] = &[
    ("ferry_reassigning_partitions", "gauge"),
    ("ferry_under_replicated_partitions", "gauge"),
    ("ferry_offline_log_dirs", "gauge"),
    ("ferry_replica_fetch_sessions", "gauge"),
    ("ferry_group_coordinator_partitions", "gauge"),
    ("ferry_group_coordinator_groups", "gauge"),
    ("ferry_replication_bytes_in_total", "counter"),
    ("ferry_replication_bytes_out_total", "counter"),
    ("ferry_dir_move_bytes_total", "counter"),
];
const QUORUM_FAMILIES: &[(&str, &str)] = &[
    ("ferry_raft_commit_latency_seconds", "histogram"),
    ("ferry_raft_leader_changes_total", "counter"),
    ("ferry_metastore_revision", "gauge"),
];

/// Scrapes a node's `/metrics`, parsed strictly.
async fn scrape(addr: &str) -> Result<Exposition, String> {
    let addr = addr.to_string();
    tokio::task::spawn_blocking(move || scrape_parsed(&addr))
        .await
        .map_err(|e| e.to_string())?
}

/// Waits until node `addr`'s metrics satisfy `cond`; returns them.
async fn wait_metrics(addr: &str, what: &str, cond: impl Fn(&Exposition) -> bool) -> Exposition {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let last = scrape(addr).await;
        match last {
            Ok(e) if cond(&e) => return e,
            _ => assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what} at {addr}: {last:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn bytes(e: &Exposition, name: &str, throttled: bool) -> f64 {
    e.value(name, &[("throttled", if throttled { "true" } else { "false" })])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_and_a_throttled_reassignment_moves_them() {
    let dir = tempfile::tempdir().unwrap();
    let metrics: BTreeMap<i32, String> = (1..=4)
        .map(|id| (id, format!("127.0.0.1:{}", tests::free_port())))
        .collect();
    let (a, b) = (dir.path().join("n4").join("a"), dir.path().join("n4").join("b"));
    let four_dirs = format!("{},{}", a.display(), b.display());
    let f = start_four_each(dir.path(), |id| {
        let mut args = vec!["--metrics-listen".to_string(), metrics[&id].clone()];
        if id == 4 {
            args.extend(["--log-dirs".to_string(), four_dirs.clone()]);
        }
        args
    });
    let c = f.client.clone();

    // Every node answers with well-formed text holding its roles' families.
    for (id, addr) in &metrics {
        let e = wait_metrics(addr, "the metrics endpoint", |_| true).await;
        for (name, kind) in BROKER_FAMILIES {
            assert!(e.has(name, kind), "node {id}: no {kind} {name}: {e:?}");
        }
        for (name, kind) in QUORUM_FAMILIES {
            assert_eq!(e.has(name, kind), *id != 4, "node {id}: {kind} {name}: {e:?}");
        }
        assert_eq!(e.value("ferry_offline_log_dirs", &[]), 0.0, "node {id}");
    }

    create(&c, "m", vec![vec![1, 2]], &[]).await;
    wait_until(Duration::from_secs(30), "a full ISR", || isr_is(&c, "m", 0, &[1, 2])).await;
    produce_n(&c, "m", 0, BATCHES, PER_BATCH, RECORD).await;
    let leader = &metrics[&1];
    let before = wait_metrics(leader, "nothing under-replicated on the leader", |e| {
        e.value("ferry_under_replicated_partitions", &[]) == 0.0
    })
    .await;
    assert_eq!(before.value("ferry_reassigning_partitions", &[]), 0.0);
    assert_eq!(bytes(&before, "ferry_replication_bytes_out_total", true), 0.0);

    // Add broker 4 under a throttle: the move takes seconds whatever the machine's speed, and
    // the leader reports it while it runs.
    ok(&alter(&c, &[("m", 0, Some(vec![1, 2, 4]))], Some(RATE)).await);
    wait_metrics(leader, "the leader to report the reassignment", |e| {
        e.value("ferry_reassigning_partitions", &[]) == 1.0
    })
    .await;
    let follower = scrape(&metrics[&2]).await.unwrap();
    assert_eq!(
        follower.value("ferry_reassigning_partitions", &[]),
        0.0,
        "only leaders count"
    );

    wait_all_done(&c, Duration::from_secs(120)).await;
    let after = wait_metrics(leader, "the leader's gauges to go back to 0", |e| {
        e.value("ferry_reassigning_partitions", &[]) == 0.0 && e.value("ferry_under_replicated_partitions", &[]) == 0.0
    })
    .await;
    // The new replica got the whole log while out of sync, so held back; the old follower got
    // it unthrottled.
    let out_throttled = bytes(&after, "ferry_replication_bytes_out_total", true);
    assert!(out_throttled >= DATA, "{out_throttled} throttled bytes out");
    assert!(bytes(&after, "ferry_replication_bytes_out_total", false) >= DATA);
    let four = scrape(&metrics[&4]).await.unwrap();
    assert!(
        bytes(&four, "ferry_replication_bytes_in_total", true) >= DATA,
        "{four:?}"
    );
    let two = scrape(&metrics[&2]).await.unwrap();
    assert!(
        bytes(&two, "ferry_replication_bytes_in_total", false) >= DATA,
        "{two:?}"
    );
    assert_eq!(bytes(&two, "ferry_replication_bytes_in_total", true), 0.0);

    // Raft: every quorum node saw a leader and applied the writes; the leader timed them.
    let mut commits = 0.0;
    for id in 1..=3 {
        let e = scrape(&metrics[&id]).await.unwrap();
        assert!(e.value("ferry_raft_leader_changes_total", &[]) >= 1.0, "node {id}");
        assert!(e.value("ferry_metastore_revision", &[]) > 0.0, "node {id}");
        let count = e.value("ferry_raft_commit_latency_seconds_count", &[]);
        assert_eq!(
            e.value("ferry_raft_commit_latency_seconds_bucket", &[("le", "+Inf")]),
            count,
            "node {id}"
        );
        commits += count;
    }
    assert!(commits > 0.0, "no commit was timed");

    // Move broker 4's new replica to its other log dir: the copy counts as dir-move bytes.
    let dest = if replica_dirs(&a, "m", 0).is_empty() { &a } else { &b };
    let r = c
        .alter_replica_log_dirs(
            4,
            vec![ReplicaLogDirMove {
                topic: "m".into(),
                partition: 0,
                dir: dest.display().to_string(),
            }],
        )
        .await
        .unwrap();
    assert_eq!(r.error_code, 0, "{r:?}");
    assert!(r.results.iter().all(|p| p.error_code == 0), "{r:?}");
    wait_metrics(&metrics[&4], "the dir move's bytes", |e| {
        e.value("ferry_dir_move_bytes_total", &[]) >= DATA
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_copies_many_partitions_from_each_leader_over_one_stream() {
    let dir = tempfile::tempdir().unwrap();
    let metrics: BTreeMap<i32, String> = (1..=4)
        .map(|id| (id, format!("127.0.0.1:{}", tests::free_port())))
        .collect();
    let f = start_four_each(dir.path(), |id| {
        vec!["--metrics-listen".to_string(), metrics[&id].clone()]
    });
    let c = f.client.clone();
    // Broker 2 follows 30 partitions led by broker 1 and 20 led by broker 3.
    create(&c, "from1", vec![vec![1, 2]; 30], &[]).await;
    create(&c, "from3", vec![vec![3, 2]; 20], &[]).await;
    for (t, n, isr) in [("from1", 30, [1, 2]), ("from3", 20, [3, 2])] {
        for p in 0..n {
            wait_until(Duration::from_secs(60), "a full ISR", || isr_is(&c, t, p, &isr)).await;
        }
    }
    for p in 0..30 {
        produce_n(&c, "from1", p, 1, 10, 100).await;
    }
    let two = wait_metrics(&metrics[&2], "broker 2's sessions", |e| {
        e.value("ferry_replica_fetch_sessions", &[]) == 2.0
    })
    .await;
    assert!(bytes(&two, "ferry_replication_bytes_in_total", false) >= 30.0 * 10.0 * 100.0);
    // Leaders hold no session of their own: broker 1 follows nobody.
    let one = scrape(&metrics[&1]).await.unwrap();
    assert_eq!(one.value("ferry_replica_fetch_sessions", &[]), 0.0);
}
