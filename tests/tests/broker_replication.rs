//! Replication across node failures: three `ferry node` processes (quorum and broker each), a
//! producer at acks=all, and the partition's leader, then a follower, SIGKILLed and restarted.
//! Every acknowledged record must be read back exactly once, in order, and the ISR must return
//! to all three brokers.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use broker::ClusterClient;
use bytes::Bytes;
use tests::data::{create_topic, isr_is, partition_state, read_all};
use tests::{wait_until, ProcNode};

const TOPIC: &str = "orders";
const BROKER_ARGS: &[&str] = &[
    "--session-timeout-ms",
    "2000",
    "--replica-lag-time-max-ms",
    "2000",
    "--leader-imbalance-check-interval-ms",
    "500",
    "--segment-bytes",
    "65536",
];

/// Produces batches of 10 unique values until stopped; returns the acknowledged batches in the
/// order they were acknowledged, with their base offsets.
async fn produce_until(c: ClusterClient, stop: Arc<AtomicBool>) -> Vec<(i64, Vec<String>)> {
    let mut acked = Vec::new();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let values: Vec<String> = (0..10).map(|i| format!("v{n}-{i}")).collect();
        n += 1;
        let records = values.iter().map(|v| Bytes::from(v.clone())).collect();
        match c.produce_once(TOPIC, 0, records, -1).await {
            Ok(base) => acked.push((base, values)),
            // Not acknowledged: these values may or may not be in the log; new values go next.
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    acked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_records_survive_killing_the_leader_then_a_follower() {
    let dir = tempfile::tempdir().unwrap();
    let peers = tests::loopback_peers(3);
    let mut nodes: BTreeMap<i32, ProcNode> = peers
        .iter()
        .map(|(id, addr)| {
            let n = ProcNode::new(*id, addr, &dir.path().join(format!("n{id}")), &peers, false).with_args(BROKER_ARGS);
            (*id as i32, n)
        })
        .collect();
    for n in nodes.values_mut() {
        n.spawn();
    }
    let endpoints: Vec<String> = peers.values().cloned().collect();
    let c = ClusterClient::new(&endpoints).unwrap();
    wait_until(Duration::from_secs(30), "three brokers registered", || async {
        create_topic(&c, TOPIC, 1, 3, &[("min.insync.replicas", "2")])
            .await
            .is_ok()
    })
    .await;
    wait_until(Duration::from_secs(30), "a full ISR", || {
        isr_is(&c, TOPIC, 0, &[1, 2, 3])
    })
    .await;

    let stop = Arc::new(AtomicBool::new(false));
    let producer = tokio::spawn(produce_until(c.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;

    let leader = partition_state(&c, TOPIC, 0).await.unwrap().leader;
    let follower = [1, 2, 3].into_iter().find(|b| *b != leader).unwrap();
    for victim in [leader, follower] {
        nodes.get_mut(&victim).unwrap().kill();
        wait_until(Duration::from_secs(30), "the victim to leave the ISR", || async {
            partition_state(&c, TOPIC, 0)
                .await
                .is_some_and(|s| !s.isr.contains(&victim) && s.leader >= 0 && s.leader != victim)
        })
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        nodes.get_mut(&victim).unwrap().spawn();
        wait_until(
            Duration::from_secs(60),
            "the restarted broker to rejoin the ISR",
            || isr_is(&c, TOPIC, 0, &[1, 2, 3]),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let acked = producer.await.unwrap();
    assert!(acked.len() > 20, "too few batches acknowledged: {}", acked.len());

    let log = read_all(&c, TOPIC, 0).await;
    let mut position: HashMap<&str, i64> = HashMap::new();
    for (offset, v) in &log {
        assert!(
            position.insert(v.as_str(), *offset).is_none(),
            "{v} appears twice in the log"
        );
    }
    let mut last = -1;
    for (base, values) in &acked {
        for (i, v) in values.iter().enumerate() {
            let at = *position
                .get(v.as_str())
                .unwrap_or_else(|| panic!("acknowledged record {v} is missing"));
            assert_eq!(at, base + i as i64, "{v} is not at the offset it was acknowledged with");
            assert!(at > last, "{v} is out of order");
            last = at;
        }
    }
    // A follower that rejoined can still drop out once more under the producer's load (seen in
    // about 1 CI run in 10, cause not found yet); what must hold is that the ISR is whole again.
    wait_until(Duration::from_secs(30), "a whole ISR at the end", || {
        isr_is(&c, TOPIC, 0, &[1, 2, 3])
    })
    .await;
}
