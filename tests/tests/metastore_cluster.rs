//! A 3-node metastore on loopback over real gRPC: writes, linearizable reads from every node,
//! forwarding from followers, retries applied once, and transactions that never half-apply.

use std::sync::Arc;

use proto::metastore as pb;
use tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_any_node_are_read_linearizably_from_every_node() {
    tests::init_logging();
    let c = Cluster::start(3).await;
    let clients: Vec<_> = (0..3).map(|i| c.client_at(i)).collect();
    for round in 0..10 {
        for (i, w) in clients.iter().enumerate() {
            let key = format!("/t/{i}/{round}");
            let value = format!("v{round}-{i}");
            w.put(&key, value.clone()).await.expect("put");
            // Linearizable: a read on any node right after the ack sees the write.
            for r in &clients {
                let kv = r.get(&key).await.expect("get").expect("key present");
                assert_eq!(kv.value, value.as_bytes());
            }
        }
    }
    let all = c.client().range("/t/", 0).await.unwrap();
    assert_eq!(all.kvs.len(), 30);
    let limited = c.client().range("/t/", 7).await.unwrap();
    assert_eq!(limited.kvs.len(), 7);
    assert!(limited.more);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_with_the_same_request_id_is_applied_once() {
    let c = Cluster::start(3).await;
    let leader = c.wait_leader().await;
    let follower = (leader + 1) % 3;
    let client = c.client_at(follower);
    let req = pb::PutRequest {
        key: "/once".into(),
        value: "x".into(),
        lease: 0,
        request_id: "retry-1".into(),
    };
    for _ in 0..3 {
        let r = req.clone();
        client
            .call(|mut g| {
                let r = r.clone();
                async move { g.put(r).await }
            })
            .await
            .expect("put");
    }
    let kv = c.client().get("/once").await.unwrap().unwrap();
    assert_eq!(kv.version, 1, "three sends of one request id must apply once");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaved_transactions_never_half_apply() {
    let c = Cluster::start(3).await;
    let client = c.client();
    client.put("/counter", "0").await.unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));

    // Readers check that the pair written by one transaction is never seen half-written.
    let mut readers = Vec::new();
    for i in 0..3 {
        let r = c.client_at(i);
        let stop = stop.clone();
        readers.push(tokio::spawn(async move {
            let mut checks = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let kvs = r.range("/pair/", 0).await.expect("range").kvs;
                if kvs.len() == 2 {
                    assert_eq!(kvs[0].value, kvs[1].value, "a transaction was seen half-applied");
                    assert_eq!(kvs[0].mod_revision, kvs[1].mod_revision);
                } else {
                    assert!(kvs.is_empty(), "one key of the pair without the other: {kvs:?}");
                }
                checks += 1;
            }
            checks
        }));
    }

    // Writers increment a counter with compare-and-set and write the pair in the same txn.
    let mut writers = Vec::new();
    for w in 0..6u64 {
        let client = c.client().starting_at(w as usize);
        writers.push(tokio::spawn(async move {
            let mut done = 0u64;
            while done < 15 {
                let cur = client.get("/counter").await.unwrap().unwrap();
                let n: u64 = std::str::from_utf8(&cur.value).unwrap().parse().unwrap();
                let tag = format!("w{w}-{done}");
                let put = |k: &str, v: &str| pb::Op {
                    op: Some(pb::op::Op::Put(pb::PutOp {
                        key: k.into(),
                        value: v.to_string().into(),
                        lease: 0,
                    })),
                };
                let r = client
                    .txn(pb::TxnRequest {
                        guards: vec![pb::Guard {
                            key: "/counter".into(),
                            check: Some(pb::guard::Check::Version(cur.version)),
                        }],
                        ops: vec![
                            put("/counter", &(n + 1).to_string()),
                            put("/pair/a", &tag),
                            put("/pair/b", &tag),
                        ],
                        request_id: String::new(),
                    })
                    .await
                    .unwrap();
                if r.succeeded {
                    done += 1;
                } else {
                    assert_eq!(r.failed_guard, Some(0));
                    assert!(r.failed_reason.contains("expected version"), "{}", r.failed_reason);
                }
            }
            done
        }));
    }
    let mut total = 0;
    for w in writers {
        total += w.await.unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        assert!(r.await.unwrap() > 0);
    }
    let counter = c.client().get("/counter").await.unwrap().unwrap();
    assert_eq!(std::str::from_utf8(&counter.value).unwrap(), total.to_string());
    assert_eq!(counter.version, total + 1);
    c.shutdown().await;
}

fn put_op(key: String, value: Vec<u8>) -> pb::Op {
    pb::Op {
        op: Some(pb::op::Op::Put(pb::PutOp {
            key,
            value: value.into(),
            lease: 0,
        })),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_larger_than_a_log_entry_applies_all_at_once() {
    let c = Cluster::start(3).await;
    let leader = c.wait_leader().await;
    // Sent through a follower, so the chunks are forwarded too.
    let client = c.client_at((leader + 1) % 3);
    let n = 20_000usize;
    let ops: Vec<pb::Op> = (0..n)
        .map(|i| put_op(format!("/big/{i:06}"), vec![b'r'; 256]))
        .collect();

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let r = c.client_at(leader);
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let resp = r
                    .range_req(pb::RangeRequest {
                        prefix: "/big/".into(),
                        keys_only: true,
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                seen.push(resp.kvs.len());
            }
            seen
        })
    };
    // A guard that fails at commit time: nothing of the staged chunks may show.
    let failed = client
        .txn(pb::TxnRequest {
            guards: vec![pb::Guard {
                key: "/big-gate".into(),
                check: Some(pb::guard::Check::Exists(true)),
            }],
            ops: ops.clone(),
            request_id: String::new(),
        })
        .await
        .unwrap();
    assert!(!failed.succeeded);
    assert!(client.range("/big/", 1).await.unwrap().kvs.is_empty());

    client.put("/big-gate", "open").await.unwrap();
    let ok = client
        .txn(pb::TxnRequest {
            guards: vec![pb::Guard {
                key: "/big-gate".into(),
                check: Some(pb::guard::Check::Exists(true)),
            }],
            ops,
            request_id: String::new(),
        })
        .await
        .unwrap();
    assert!(ok.succeeded, "{}", ok.failed_reason);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for count in reader.await.unwrap() {
        assert!(
            count == 0 || count == n,
            "a reader saw {count} of {n} keys: the transaction was seen half-applied"
        );
    }
    let all = client.range("/big/", 0).await.unwrap().kvs;
    assert_eq!(all.len(), n);
    let rev = all[0].mod_revision;
    assert!(
        all.iter().all(|kv| kv.mod_revision == rev),
        "one transaction, one revision"
    );
    let leader_node = c.nodes[leader].as_ref().unwrap();
    assert!(
        leader_node.sm.inner.read().state.staged.is_empty(),
        "staged chunks were left behind"
    );
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_with_more_guards_than_a_log_entry_holds_is_staged_too() {
    // A reassignment of 100,000 partitions guards every key it writes: the guards alone are
    // megabytes, more than a follower takes within one heartbeat interval in one entry.
    let c = Cluster::start(3).await;
    let client = c.client_at(c.wait_leader().await);
    let n = 100_000usize;
    let guard = |i: usize| pb::Guard {
        key: format!("/guarded/partition-{i:06}"),
        check: Some(pb::guard::Check::Absent(true)),
    };
    client.put("/guarded/partition-099999", "taken").await.unwrap();
    let txn = |guards: Vec<pb::Guard>| pb::TxnRequest {
        guards,
        ops: vec![put_op("/guarded-done".into(), b"yes".to_vec())],
        request_id: String::new(),
    };
    let failed = client.txn(txn((0..n).map(guard).collect())).await.unwrap();
    assert!(!failed.succeeded);
    assert_eq!(failed.failed_guard, Some(99_999), "{}", failed.failed_reason);
    assert!(client.get("/guarded-done").await.unwrap().is_none());
    let ok = client.txn(txn((0..n - 1).map(guard).collect())).await.unwrap();
    assert!(ok.succeeded, "{}", ok.failed_reason);
    assert!(client.get("/guarded-done").await.unwrap().is_some());
    c.shutdown().await;
}

/// openraft 0.9 brings a node whose stored vote says it led back as leader at once, in the same
/// term, with the commit index it last stored, which can be older than writes it acknowledged:
/// its read index could then miss them. A restarted node leads again only after an election.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_leader_leads_again_only_after_a_new_election() {
    let mut c = Cluster::start(1).await;
    c.client().put("/restart/k", "v1").await.expect("put");
    let term = |c: &Cluster| {
        let m = c.nodes[0].as_ref().expect("node runs").raft.metrics().borrow().clone();
        m.current_term
    };
    let before = term(&c);
    c.stop(0).await;
    c.restart(0).await;
    c.wait_leader().await;
    assert!(
        term(&c) > before,
        "the node led again in term {} without an election (it led term {before})",
        term(&c)
    );
    let kv = c.client().get("/restart/k").await.expect("get").expect("key present");
    assert_eq!(kv.value, &b"v1"[..]);
    c.shutdown().await;
}
