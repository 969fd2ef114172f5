//! Watches: one watcher per node during a write load, with the leader killed in the middle. Each
//! watcher sees every committed change exactly once, in revision order.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_watcher_sees_every_change_once_in_order_across_a_leader_kill() {
    tests::init_logging();
    let mut c = Cluster::start(3).await;
    let start = c.client().put("/marker", "m").await.unwrap() + 1;

    // Each watcher starts on its own node and knows the others, to move on when its node dies.
    let mut watchers: Vec<_> = (0..3).map(|i| c.client().starting_at(i).watch("/w/", start)).collect();

    let writer = c.client();
    let mut acked = BTreeSet::new();
    for i in 0..300u32 {
        if i == 150 {
            let leader = c.wait_leader().await;
            c.stop(leader).await;
        }
        let key = format!("/w/{i:04}");
        writer.put(&key, format!("v{i}")).await.expect("put acknowledged");
        acked.insert(key);
    }
    c.client().put("/outside", "not watched").await.unwrap();

    for (n, rx) in watchers.iter_mut().enumerate() {
        let mut seen: BTreeMap<String, u64> = BTreeMap::new();
        let mut last_rev = 0;
        while seen.len() < acked.len() {
            let msg = tokio::time::timeout(Duration::from_secs(30), rx.recv())
                .await
                .unwrap_or_else(|_| panic!("watcher {n} stalled with {} of {} keys", seen.len(), acked.len()))
                .expect("watch stream open")
                .expect("watch event");
            assert!(
                msg.revision > last_rev,
                "watcher {n}: revision {} after {last_rev}",
                msg.revision
            );
            last_rev = msg.revision;
            for ev in msg.events {
                let kv = ev.kv.unwrap();
                assert!(
                    kv.key.starts_with("/w/"),
                    "watcher {n} got {} outside its prefix",
                    kv.key
                );
                assert_eq!(kv.mod_revision, msg.revision);
                if let Some(prev) = seen.insert(kv.key.clone(), msg.revision) {
                    panic!(
                        "watcher {n} saw {} twice (revisions {prev} and {})",
                        kv.key, msg.revision
                    );
                }
            }
        }
        let keys: BTreeSet<String> = seen.keys().cloned().collect();
        assert_eq!(keys, acked, "watcher {n} saw a different set of changes");
    }
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_revision_gets_a_clear_error() {
    let c = Cluster::start_with(3, |cfg| cfg.history_events = 10).await;
    let client = c.client();
    for i in 0..40 {
        client.put(&format!("/h/{i}"), "x").await.unwrap();
    }
    let mut rx = client.watch("/h/", 1);
    let err = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap()
        .expect_err("revision 1 is compacted");
    assert_eq!(err.code(), tonic::Code::OutOfRange);
    assert!(err.to_string().contains("compacted"), "{err}");
    c.shutdown().await;
}
