//! A large drain the controller runs, on a real cluster of processes: a broker holding
//! 500 partitions with data (`FERRY_TEST_DRAIN_PARTITIONS` for more) is drained with no throttle under a cap of 4 moves into
//! and out of each broker, while a bounded acks=all producer runs. Sampled from the metastore,
//! never more than 4 moves at once into or out of any broker; every acknowledged record read
//! back; the broker empty and cordoned at the end, and no throttle left.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tests::plans::{
    cordon_config, create_ok, drain_req, every_ack_read_back, no_throttle_left, produce_steadily, sample_peaks, states,
    wait_state,
};
use tests::reassign::{create, list, produce_n, start_four};
use tests::wait_until;

const TOPIC: &str = "big";
/// Partitions on the drained broker when `FERRY_TEST_DRAIN_PARTITIONS` does not say (the
/// issue's full size is 2,000).
const DEFAULT_PARTITIONS: u32 = 500;
/// The cap into and out of each broker.
const CAP: i64 = 4;

/// Partitions on the drained broker: [`DEFAULT_PARTITIONS`] unless `FERRY_TEST_DRAIN_PARTITIONS`
/// gives a number (1 to 100,000).
fn partitions() -> u32 {
    std::env::var("FERRY_TEST_DRAIN_PARTITIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| (1..=100_000).contains(n))
        .unwrap_or(DEFAULT_PARTITIONS)
}

/// A drain of broker 4 holding [`partitions`] partitions of 2 kB each, caps of 4, no throttle,
/// under acks=all produce: the caps hold at every sample, the moves run side by side and are
/// listed as reassignments while they run, every acknowledged record is read back, and broker 4
/// ends empty, cordoned, with no throttle left anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_capped_drain_keeps_the_caps_and_every_acknowledged_record() {
    let partitions = partitions();
    let dir = tempfile::tempdir().unwrap();
    let f = start_four(dir.path());
    let c = f.client.clone();
    let assignment = (0..partitions).map(|p| vec![4, 1 + (p % 3) as i32]).collect();
    create(&c, TOPIC, assignment, &[]).await;
    let filled = Instant::now();
    futures::stream::iter(0..partitions)
        .map(|p| {
            let c = c.clone();
            async move { produce_n(&c, TOPIC, p, 1, 10, 200).await }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    eprintln!("filled {partitions} partitions in {:?}", filled.elapsed());

    let stop = Arc::new(AtomicBool::new(false));
    let producer = produce_steadily(c.clone(), TOPIC, partitions, 20_000, stop.clone());
    let sampler = sample_peaks(f.meta.clone(), TOPIC, stop.clone());
    let started = Instant::now();
    let plan = create_ok(&c, drain_req(4, CAP, CAP, None)).await;
    assert_eq!(plan.moves_total, partitions, "{plan:?}");
    eprintln!("plan stored in {:?}", started.elapsed());
    // The plan's moves are reassignments: ListPartitionReassignments lists them, within the cap.
    wait_until(Duration::from_secs(60), "the plan's moves listed", || async {
        let l = list(&c).await.reassignments;
        assert!(l.len() <= CAP as usize, "{} listed at once", l.len());
        l.iter().any(|r| r.topic == TOPIC && r.removing == vec![4])
    })
    .await;

    let done = wait_state(&c, plan.id, "done", Duration::from_secs(900)).await;
    eprintln!("drained {partitions} partitions in {:?}", started.elapsed());
    stop.store(true, Ordering::Relaxed);
    let acked = producer.await.unwrap();
    let peak = sampler.await.unwrap();
    eprintln!("{} records acknowledged during the drain; {peak:?}", acked.len());
    assert_eq!((done.done, done.skipped, done.failed), (partitions, 0, 0), "{done:?}");
    assert!(
        peak.into as i64 <= CAP && peak.out as i64 <= CAP,
        "caps exceeded: {peak:?}"
    );
    assert!(peak.out >= 2, "moves ran side by side: {peak:?}");
    let now = states(&f.meta, TOPIC).await;
    assert_eq!(now.len(), partitions as usize);
    for (p, s) in &now {
        assert!(
            !s.replicas.contains(&4),
            "{TOPIC}-{p} still on broker 4: {:?}",
            s.replicas
        );
        assert_eq!(s.replicas.len(), 2, "{TOPIC}-{p} keeps its replication factor");
    }
    wait_until(Duration::from_secs(120), "broker 4 to delete its replicas", || async {
        c.describe_log_dirs(&[4], &[]).await.is_ok_and(|r| {
            r.iter()
                .flat_map(|d| &d.dirs)
                .all(|d| d.replicas.iter().all(|r| r.topic != TOPIC))
        })
    })
    .await;
    assert_eq!(cordon_config(&c, 4).await, "*");
    no_throttle_left(&c, &f.meta, TOPIC, &[1, 2, 3, 4]).await;
    assert!(acked.len() > 50, "the producer kept going: {}", acked.len());
    every_ack_read_back(&c, TOPIC, &acked).await;
}
