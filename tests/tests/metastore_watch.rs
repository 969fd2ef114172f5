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

/// A range's header names the revision its keys were read at, never a later one: a follower
/// (`Client::follow`) watches from the next revision, so a key created between the read and its
/// header would be missed for good. Keys are only ever created here, so every key of the final
/// state created at or before a range's revision must be in that range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_holds_every_key_created_up_to_its_header_revision() {
    use proto::metastore as pb;
    tests::init_logging();
    let c = Cluster::start(3).await;
    let client = c.client();
    // Enough keys that walking them takes a while, so writes land during the walk.
    for batch in 0..4 {
        let ops = (0..5_000)
            .map(|i| pb::Op {
                op: Some(pb::op::Op::Put(pb::PutOp {
                    key: format!("/r/base-{batch}-{i:05}"),
                    value: vec![0u8; 64].into(),
                    lease: 0,
                })),
            })
            .collect();
        let r = client
            .txn(pb::TxnRequest {
                guards: vec![],
                ops,
                request_id: String::new(),
            })
            .await
            .unwrap();
        assert!(r.succeeded);
    }
    let writer = c.client();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let writes = tokio::spawn(async move {
        let mut i = 0u32;
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) && i < 5_000 {
            writer
                .put(&format!("/r/new-{i:05}"), "v")
                .await
                .expect("put acknowledged");
            i += 1;
        }
    });
    let mut reads = Vec::new();
    for _ in 0..30 {
        let r = client.range("/r/", 0).await.unwrap();
        let revision = r.header.unwrap().revision;
        let keys: BTreeSet<String> = r.kvs.into_iter().map(|kv| kv.key).collect();
        reads.push((revision, keys));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writes.await.unwrap();
    let last = client.range("/r/", 0).await.unwrap();
    for (revision, keys) in &reads {
        for kv in last.kvs.iter().filter(|kv| kv.create_revision <= *revision) {
            assert!(
                keys.contains(&kv.key),
                "{} (created at revision {}) is missing from a range at revision {revision}",
                kv.key,
                kv.create_revision
            );
        }
    }
}
