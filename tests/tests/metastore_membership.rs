//! Membership: grow from 3 to 4 voters and shrink back while writes go on, losing nothing.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use metastore::NodeConfig;
use tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grow_to_four_and_shrink_back_under_writes() {
    tests::init_logging();
    let mut c = Cluster::start(3).await;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let client = c.client();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("/m/{i:06}");
                client
                    .put(&key, format!("v{i}"))
                    .await
                    .expect("write during membership change");
                acked.push(key);
                i += 1;
            }
            acked
        })
    };

    // A fourth node joins: it starts empty, is added as a learner, then promoted.
    let addr = format!("127.0.0.1:{}", tests::free_port());
    let mut cfg = NodeConfig::new(4, c.dir.path().join("n4"), tests::sock(&addr), BTreeMap::new());
    cfg.join = true;
    cfg.raft = tests::test_tuning();
    let n4 = metastore::start(cfg).await.unwrap();
    c.nodes.push(Some(n4));
    c.addrs.push(addr.clone());
    let admin = c.client();
    admin.member_add_learner(4, &addr).await.unwrap();
    let members = admin.member_promote(4).await.unwrap();
    assert_eq!(members.iter().filter(|m| m.voter).count(), 4, "{members:?}");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;

    // And leaves again.
    let members = admin.member_remove(4).await.unwrap();
    assert_eq!(members.len(), 3, "{members:?}");
    assert!(members.iter().all(|m| m.voter && m.id != 4));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let acked = writer.await.unwrap();
    assert!(!acked.is_empty());
    c.stop(3).await;

    let rev = c.client().put("/m-done", "x").await.unwrap();
    c.wait_revision(rev).await;
    for i in 0..3 {
        let node = c.client_at(i);
        let kvs = node
            .range_req(proto::metastore::RangeRequest {
                prefix: "/m/".into(),
                serializable: true,
                keys_only: true,
                ..Default::default()
            })
            .await
            .unwrap()
            .kvs;
        let keys: Vec<String> = kvs.into_iter().map(|kv| kv.key).collect();
        for k in &acked {
            assert!(keys.binary_search(k).is_ok(), "node {} lost {k}", i + 1);
        }
    }
    c.shutdown().await;
}
