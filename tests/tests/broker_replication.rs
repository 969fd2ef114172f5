//! Replication across node failures: three `ferry node` processes (quorum and broker each), a
//! producer at acks=all, and the partition's leader, then a follower, SIGKILLed and restarted.
//! Every acknowledged record must be read back exactly once, in order, and the ISR must return
//! to all three brokers. A restarted broker joins the ISR only once its own registration is
//! written, never while the killed process's registration is still waiting to expire.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use broker::ClusterClient;
use bytes::Bytes;
use prost::Message;
use proto::ferry::{BrokerRegistration, PartitionState};
use proto::keys;
use tests::data::{create_topic, isr_is, partition_state, read_all};
use tests::{wait_until, ProcNode};

const TOPIC: &str = "orders";
/// The session outlives the lag time, so that a killed follower always leaves the ISR (on lag)
/// before its registration expires, and its restarted process always catches up while that
/// registration is still there: the case where a rejoined follower used to drop out again.
const BROKER_ARGS: &[&str] = &[
    "--session-timeout-ms",
    "4000",
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

/// Every change under `/brokers/`, as (revision, key, value or `None` for a delete); a reset of
/// the follow (after a lost watch) is recorded as its snapshot, so the history is read sorted.
type History = Arc<Mutex<Vec<(u64, String, Option<Vec<u8>>)>>>;

fn record_history(endpoints: &[String]) -> History {
    let history: History = Default::default();
    let client = metastore::Client::new(endpoints).unwrap();
    let h = history.clone();
    tokio::spawn(async move {
        let mut events = client.follow("/brokers/");
        while let Some(ev) = events.recv().await {
            let mut h = h.lock().unwrap_or_else(|e| e.into_inner());
            for (key, value, rev) in ev.changes() {
                h.push((rev, key.to_string(), value.map(<[u8]>::to_vec)));
            }
        }
    });
    history
}

/// The revisions, after `since`, at which `broker` was added to the partition's ISR while its
/// registration was not the one it ends the test with (the process now running).
fn joins_under_an_old_registration(history: &[(u64, String, Option<Vec<u8>>)], broker: i32, since: u64) -> Vec<u64> {
    let (pkey, bkey) = (keys::partition(TOPIC, 0), keys::broker(broker));
    let incarnation = |v: &Option<Vec<u8>>| {
        v.as_ref()
            .and_then(|v| BrokerRegistration::decode(v.as_slice()).ok())
            .map(|r| r.incarnation)
    };
    let last = history
        .iter()
        .rev()
        .find(|(_, k, _)| *k == bkey)
        .and_then(|(_, _, v)| incarnation(v));
    let mut registered = None;
    let mut in_isr = true;
    let mut bad = Vec::new();
    for (rev, key, value) in history {
        if *key == bkey {
            registered = incarnation(value);
        } else if *key == pkey {
            let isr = value
                .as_ref()
                .and_then(|v| PartitionState::decode(v.as_slice()).ok())
                .map_or(vec![], |s| s.isr);
            let now_in = isr.contains(&broker);
            if now_in && !in_isr && *rev > since && (registered.is_none() || registered != last) {
                bad.push(*rev);
            }
            in_isr = now_in;
        }
    }
    bad
}

/// The process `broker` is registered as, if it is registered.
async fn incarnation(meta: &metastore::Client, broker: i32) -> Option<u64> {
    let kv = meta.get(&keys::broker(broker)).await.ok()??;
    BrokerRegistration::decode(kv.value.as_ref())
        .ok()
        .map(|r| r.incarnation)
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
    let history = record_history(&endpoints);
    let meta = metastore::Client::new(&endpoints).unwrap();
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
    let mut killed_at = Vec::new();
    for victim in [leader, follower] {
        let before = incarnation(&meta, victim).await;
        nodes.get_mut(&victim).unwrap().kill();
        // Any revision read after the kill comes after every change the killed process made.
        let rev = meta
            .range("/brokers/ids/", 0)
            .await
            .unwrap()
            .header
            .map_or(0, |h| h.revision);
        killed_at.push((victim, rev, before));
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
    // The killed processes' registrations are gone, their successors' written: any drop-out
    // their expiry causes has happened.
    for (victim, _, before) in &killed_at {
        wait_until(
            Duration::from_secs(30),
            "the restarted broker's own registration",
            || async { incarnation(&meta, *victim).await.is_some_and(|i| Some(i) != *before) },
        )
        .await;
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
    // Once the history has caught up with the partition's state: no broker may have joined the
    // ISR before its restarted process had registered.
    let s = partition_state(&c, TOPIC, 0).await.unwrap();
    let mut isr = s.isr.clone();
    isr.sort();
    assert_eq!(isr, vec![1, 2, 3], "a rejoined follower dropped out of the ISR: {s:?}");
    let pkv = meta.get(&keys::partition(TOPIC, 0)).await.unwrap().unwrap();
    wait_until(Duration::from_secs(30), "the recorded history to catch up", || {
        let seen = history
            .lock()
            .unwrap()
            .iter()
            .map(|(rev, _, _)| *rev)
            .max()
            .unwrap_or(0);
        async move { seen >= pkv.mod_revision }
    })
    .await;
    let mut history = history.lock().unwrap().clone();
    history.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    history.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    for (victim, since, _) in killed_at {
        let bad = joins_under_an_old_registration(&history, victim, since);
        assert!(
            bad.is_empty(),
            "broker {victim} joined the ISR at revisions {bad:?}, before its restarted process had registered"
        );
    }
}
