//! Snapshots: built from a consistent view, the log purged behind them, and a new node that joins
//! after the purge catches up by receiving the snapshot in chunks.

use std::collections::BTreeMap;
use std::time::Duration;

use metastore::NodeConfig;
use tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_joining_after_log_purge_catches_up_from_a_snapshot() {
    tests::init_logging();
    let tune = |cfg: &mut NodeConfig| {
        cfg.raft.snapshot_every = 100;
        cfg.raft.keep_behind_snapshot = 10;
    };
    let mut c = Cluster::start_with(3, tune).await;
    let client = c.client();
    let mut last = 0;
    for i in 0..400 {
        last = client.put(&format!("/s/{i:04}"), vec![b'x'; 2000]).await.unwrap();
    }
    c.wait_revision(last).await;

    // Every node has snapshotted and purged its log behind the snapshot.
    for n in c.nodes.iter().flatten() {
        let mut tries = 0;
        loop {
            let m = n.raft.metrics().borrow().clone();
            if m.snapshot.is_some() && m.purged.is_some_and(|p| p.index > 0) {
                break;
            }
            assert!(
                tries < 300,
                "node {} has no snapshot/purge: {:?} {:?}",
                n.id,
                m.snapshot,
                m.purged
            );
            tries += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // A new node: the entries it lacks are gone from every log, so only a snapshot can bring it up.
    let addr = format!("127.0.0.1:{}", tests::free_port());
    let mut cfg = NodeConfig::new(4, c.dir.path().join("n4"), tests::sock(&addr), BTreeMap::new());
    cfg.join = true;
    cfg.raft = tests::test_tuning();
    tune(&mut cfg);
    let n4 = metastore::start(cfg).await.unwrap();
    client.member_add_learner(4, &addr).await.unwrap();
    let mut tries = 0;
    while n4.sm.inner.read().revision() < last {
        assert!(tries < 300, "the learner did not catch up");
        tries += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let m = n4.raft.metrics().borrow().clone();
    assert!(m.snapshot.is_some(), "the learner caught up without a snapshot");
    let keys = n4
        .sm
        .inner
        .read()
        .state
        .kv
        .keys()
        .filter(|k| k.starts_with("/s/"))
        .count();
    assert_eq!(keys, 400);
    n4.shutdown().await;
    c.stop(0).await;
    c.shutdown().await;
}
