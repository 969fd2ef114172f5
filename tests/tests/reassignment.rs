//! Reassignment on a real cluster: three nodes that are quorum members and brokers, and a fourth,
//! broker-only node, all as processes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use proto::errors::ErrorCode;
use proto::ferry::*;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use tests::data::{isr_is, partition_state, read_all};
use tests::reassign::{alter, create, list, ok, produce_n, replica_dirs, snapshot, start_four, wait_all_done};
use tests::wait_until;

/// Kafka's reassignment system test, adapted: 20 partitions, RF 3, min.insync.replicas=2, a
/// producer at acks=all throughout, every replica list shuffled, every other broker bounced
/// during the move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shuffle_under_load_with_bounces_completes_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = start_four(dir.path());
    let c = f.client.clone();
    let initial: Vec<Vec<i32>> = (0..20)
        .map(|p| vec![1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3])
        .collect();
    create(&c, "shuffle", initial, &[("min.insync.replicas", "2")]).await;
    for p in 0..20 {
        wait_until(Duration::from_secs(30), "full ISRs", || async {
            partition_state(&c, "shuffle", p)
                .await
                .is_some_and(|s| s.isr.len() == 3 && s.leader >= 0)
        })
        .await;
    }

    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (c, stop) = (c.clone(), stop.clone());
        tokio::spawn(async move {
            let mut acked: Vec<(u32, i64, Vec<String>)> = Vec::new();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let p = (n % 20) as u32;
                let values: Vec<String> = (0..5).map(|i| format!("r{n}-{i}")).collect();
                n += 1;
                let recs = values.iter().map(|v| Bytes::from(v.clone())).collect();
                match c.produce_once("shuffle", p, recs, -1).await {
                    Ok(base) => acked.push((p, base, values)),
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
            acked
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;

    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let targets: Vec<Vec<i32>> = (0..20)
        .map(|_| {
            let mut b = [1, 2, 3, 4];
            b.shuffle(&mut rng);
            b[..3].to_vec()
        })
        .collect();
    let moves: Vec<(&str, u32, Option<Vec<i32>>)> = targets
        .iter()
        .enumerate()
        .map(|(p, t)| ("shuffle", p as u32, Some(t.clone())))
        .collect();
    ok(&alter(&c, &moves, None).await);

    for b in [2, 4] {
        f.nodes.get_mut(&b).unwrap().kill();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        f.nodes.get_mut(&b).unwrap().spawn();
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    wait_all_done(&c, Duration::from_secs(120)).await;
    for (p, t) in targets.iter().enumerate() {
        wait_until(Duration::from_secs(60), "the target ISR", || {
            isr_is(&c, "shuffle", p as u32, t)
        })
        .await;
        let s = partition_state(&c, "shuffle", p as u32).await.unwrap();
        assert_eq!(&s.replicas, t, "partition {p} is not at its target");
        assert!(s.adding.is_empty() && s.removing.is_empty());
    }
    stop.store(true, Ordering::Relaxed);
    let acked = producer.await.unwrap();
    assert!(acked.len() > 20, "too few acknowledged batches: {}", acked.len());

    let mut by_partition: HashMap<u32, HashMap<String, i64>> = HashMap::new();
    for p in 0..20u32 {
        let mut at = HashMap::new();
        for (offset, v) in read_all(&c, "shuffle", p).await {
            assert!(at.insert(v.clone(), offset).is_none(), "{v} appears twice");
        }
        by_partition.insert(p, at);
    }
    for (p, base, values) in &acked {
        for (i, v) in values.iter().enumerate() {
            let at = by_partition[p]
                .get(v)
                .unwrap_or_else(|| panic!("acknowledged {v} lost"));
            assert_eq!(*at, base + i as i64, "{v} moved");
        }
    }
    // Replicas no longer assigned were deleted from disk.
    for (p, t) in targets.iter().enumerate() {
        let dirs = replica_dirs(dir.path(), "shuffle", p as u32);
        assert_eq!(dirs.len(), t.len(), "partition {p}: {dirs:?}");
    }
}

/// Cancels: mid-copy, after a superseding request, of a replication-factor increase, and
/// cancel-all with its marker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancels_restore_the_original_replicas_and_remove_the_new_ones() {
    let dir = tempfile::tempdir().unwrap();
    let f = start_four(dir.path());
    let c = f.client.clone();
    create(&c, "c", vec![vec![1, 2], vec![2, 3], vec![3, 1], vec![1, 3]], &[]).await;
    wait_until(Duration::from_secs(30), "full ISRs", || isr_is(&c, "c", 3, &[1, 3])).await;
    // About 300 KB in partitions 0 and 1, so that a 20 KB/s move takes long enough to cancel.
    produce_n(&c, "c", 0, 30, 10, 1000).await;
    produce_n(&c, "c", 1, 30, 10, 1000).await;

    // Mid-copy: 4 joins partition 0 under a throttle; cancel while it copies.
    ok(&alter(&c, &[("c", 0, Some(vec![1, 4]))], Some(20_000)).await);
    wait_until(Duration::from_secs(30), "the new replica to start copying", || async {
        replica_dirs(dir.path(), "c", 0).len() == 3
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let l = list(&c).await;
    assert_eq!(l.reassignments.len(), 1, "the throttled move finished too early: {l:?}");
    assert_eq!(l.reassignments[0].original_replicas, vec![1, 2]);
    assert_eq!(l.reassignments[0].adding, vec![4]);
    ok(&alter(&c, &[("c", 0, None)], None).await);
    let s = partition_state(&c, "c", 0).await.unwrap();
    assert_eq!(
        (s.replicas.clone(), s.adding.len(), s.throttle_rate),
        (vec![1, 2], 0, 0)
    );

    // Supersede, then cancel: the first request's original order comes back.
    ok(&alter(&c, &[("c", 1, Some(vec![4, 3]))], Some(20_000)).await);
    ok(&alter(&c, &[("c", 1, Some(vec![1, 4]))], Some(20_000)).await);
    let l = list(&c).await;
    assert_eq!(l.reassignments[0].original_replicas, vec![2, 3]);
    ok(&alter(&c, &[("c", 1, None)], None).await);
    assert_eq!(partition_state(&c, "c", 1).await.unwrap().replicas, vec![2, 3]);

    // A replication-factor increase (empty partition: it may even complete; cancel whatever remains).
    let r = alter(&c, &[("c", 2, Some(vec![3, 1, 4]))], Some(1)).await;
    ok(&r);
    let pending = !list(&c).await.reassignments.is_empty();
    if pending {
        ok(&alter(&c, &[("c", 2, None)], None).await);
        assert_eq!(partition_state(&c, "c", 2).await.unwrap().replicas, vec![3, 1]);
    }

    // Cancel-all sets a marker that refuses new submissions until it is removed.
    ok(&alter(&c, &[("c", 0, Some(vec![4, 2]))], Some(20_000)).await);
    let all = c
        .admin_call(|mut a| async move { a.cancel_all_reassignments(CancelAllReassignmentsRequest {}).await })
        .await
        .unwrap();
    assert_eq!(all.error_code, 0, "{}", all.error_message);
    assert_eq!(all.cancelled.len(), 1);
    assert_eq!(partition_state(&c, "c", 0).await.unwrap().replicas, vec![1, 2]);
    let refused = alter(&c, &[("c", 3, Some(vec![3, 1]))], None).await;
    assert_eq!(
        ErrorCode(refused.results[0].error_code),
        ErrorCode::REASSIGNMENT_CANCEL_IN_PROGRESS
    );
    assert!(list(&c).await.cancel_in_progress);
    let removed = c
        .admin_call(|mut a| async move { a.remove_cancel(RemoveCancelRequest {}).await })
        .await
        .unwrap();
    assert!(removed.removed);
    ok(&alter(&c, &[("c", 3, Some(vec![3, 1]))], None).await);
    wait_all_done(&c, Duration::from_secs(30)).await;
    assert_eq!(partition_state(&c, "c", 3).await.unwrap().replicas, vec![3, 1]);

    // After all that: the new replicas' folders are gone and every ISR is whole.
    let expect: [(u32, Vec<i32>); 4] = [(0, vec![1, 2]), (1, vec![2, 3]), (2, vec![]), (3, vec![3, 1])];
    for (p, want) in expect {
        let want = if want.is_empty() {
            partition_state(&c, "c", p).await.unwrap().replicas
        } else {
            want
        };
        wait_until(Duration::from_secs(30), "a whole ISR", || isr_is(&c, "c", p, &want)).await;
        wait_until(
            Duration::from_secs(30),
            "the removed replicas' folders to go",
            || async { replica_dirs(dir.path(), "c", p).len() == want.len() },
        )
        .await;
    }
    // Nothing was lost from the partitions that were moved back and forth.
    assert_eq!(read_all(&c, "c", 0).await.len(), 300);
    assert_eq!(read_all(&c, "c", 1).await.len(), 300);
    drop(f);
}

/// A bad request: its moves, its throttle, the code and a piece of the message expected.
type BadCase<'a> = (Vec<(&'a str, u32, Option<Vec<i32>>)>, Option<i64>, ErrorCode, &'a str);

/// Each bad request is refused as a whole, names the partition and the reason, and leaves the
/// metastore exactly as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_reassignments_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let f = start_four(dir.path());
    let c = f.client.clone();
    create(&c, "v", vec![vec![1, 2], vec![2, 3]], &[]).await;
    wait_until(Duration::from_secs(30), "ISRs", || isr_is(&c, "v", 1, &[2, 3])).await;
    wait_until(Duration::from_secs(30), "broker 4", || async {
        let r = c
            .admin_call(|mut a| async move { a.describe_cluster(DescribeClusterRequest {}).await })
            .await;
        r.is_ok_and(|r| r.brokers.len() == 4)
    })
    .await;
    let before = snapshot(&f.meta).await;
    let good = ("v", 0u32, Some(vec![2, 4]));
    let cases: Vec<BadCase> = vec![
        (
            vec![good.clone(), ("nope", 0, Some(vec![1]))],
            None,
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            "nope-0",
        ),
        (
            vec![good.clone(), ("v", 9, Some(vec![1]))],
            None,
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            "v-9",
        ),
        (
            vec![good.clone(), ("v", 1, Some(vec![1, 7]))],
            None,
            ErrorCode::INVALID_REPLICA_ASSIGNMENT,
            "broker 7 is not registered",
        ),
        (
            vec![good.clone(), ("v", 1, Some(vec![1, 1]))],
            None,
            ErrorCode::INVALID_REPLICA_ASSIGNMENT,
            "twice",
        ),
        (
            vec![good.clone(), ("v", 1, Some(vec![]))],
            None,
            ErrorCode::INVALID_REPLICA_ASSIGNMENT,
            "empty",
        ),
        (
            vec![good.clone(), ("v", 0, Some(vec![1, 3]))],
            None,
            ErrorCode::INVALID_REQUEST,
            "appears twice",
        ),
    ];
    for (moves, throttle, code, needle) in cases {
        let r = alter(&c, &moves, throttle).await;
        assert_ne!(r.error_code, 0, "{moves:?} was accepted");
        let bad = r
            .results
            .iter()
            .find(|x| x.error_code != 0)
            .expect("a per-partition error");
        assert_eq!(ErrorCode(bad.error_code), code, "{moves:?}: {}", bad.error_message);
        assert!(
            bad.error_message.contains(needle),
            "{:?} lacks {needle:?}",
            bad.error_message
        );
        assert_eq!(snapshot(&f.meta).await, before, "{moves:?} changed the metastore");
    }
    for t in [0, -5] {
        let r = alter(&c, std::slice::from_ref(&good), Some(t)).await;
        assert_eq!(
            ErrorCode(r.error_code),
            ErrorCode::INVALID_THROTTLE,
            "{}",
            r.error_message
        );
        assert_eq!(snapshot(&f.meta).await, before);
    }
    // A cancel of a partition that is not moving is answered for that partition alone, as Kafka
    // answers it, and writes nothing.
    let r = alter(&c, &[("v", 1, None)], None).await;
    assert_eq!(r.error_code, 0, "{}", r.error_message);
    assert_eq!(
        ErrorCode(r.results[0].error_code),
        ErrorCode::NO_REASSIGNMENT_IN_PROGRESS
    );
    assert!(
        r.results[0].error_message.contains("v-1"),
        "{}",
        r.results[0].error_message
    );
    assert_eq!(snapshot(&f.meta).await, before);
    // A cancel-all marker refuses submissions, and changes nothing else.
    let all = c
        .admin_call(|mut a| async move { a.cancel_all_reassignments(CancelAllReassignmentsRequest {}).await })
        .await
        .unwrap();
    assert_eq!(all.error_code, 0);
    let with_marker = snapshot(&f.meta).await;
    let r = alter(&c, std::slice::from_ref(&good), None).await;
    assert_eq!(
        ErrorCode(r.results[0].error_code),
        ErrorCode::REASSIGNMENT_CANCEL_IN_PROGRESS
    );
    assert_eq!(snapshot(&f.meta).await, with_marker);
}

/// Lists the reassignments of the partitions named.
async fn list_named(c: &broker::ClusterClient, named: &[(&str, u32)]) -> Vec<(String, u32)> {
    let req = ListPartitionReassignmentsRequest {
        partitions: named
            .iter()
            .map(|(t, p)| TopicPartition {
                topic: t.to_string(),
                partition: *p,
            })
            .collect(),
        with_progress: false,
    };
    let r = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.list_partition_reassignments(req).await }
        })
        .await
        .unwrap();
    r.reassignments.into_iter().map(|m| (m.topic, m.partition)).collect()
}

/// A request on a few topics reads those topics alone, and one on many reads the whole cluster:
/// either way it sees exactly its partitions, even beside a topic whose name starts with
/// another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_see_exactly_their_topics_whether_read_alone_or_whole() {
    let dir = tempfile::tempdir().unwrap();
    let f = start_four(dir.path());
    let c = f.client.clone();
    create(&c, "n", vec![vec![1], vec![1]], &[]).await;
    create(&c, "n1", vec![vec![1]], &[]).await;
    // About 300 KB each, moved at 1 KB/s: these moves stay in progress.
    produce_n(&c, "n", 0, 30, 10, 1000).await;
    produce_n(&c, "n1", 0, 30, 10, 1000).await;
    ok(&alter(&c, &[("n1", 0, Some(vec![2]))], Some(1000)).await);
    assert!(list_named(&c, &[("n", 0), ("n", 1)]).await.is_empty());
    assert_eq!(list_named(&c, &[("n1", 0)]).await, vec![("n1".to_string(), 0)]);
    let nothing = alter(&c, &[("n", 0, None)], None).await;
    assert_eq!(
        ErrorCode(nothing.results[0].error_code),
        ErrorCode::NO_REASSIGNMENT_IN_PROGRESS,
        "n-0 took n1-0's move for its own: {nothing:?}"
    );
    ok(&alter(&c, &[("n", 0, Some(vec![3]))], Some(1000)).await);
    let all: Vec<(String, u32)> = list(&c)
        .await
        .reassignments
        .into_iter()
        .map(|m| (m.topic, m.partition))
        .collect();
    assert_eq!(all, vec![("n".to_string(), 0), ("n1".to_string(), 0)]);
    ok(&alter(&c, &[("n", 0, None), ("n1", 0, None)], None).await);
    assert_eq!(partition_state(&c, "n", 0).await.unwrap().replicas, vec![1]);
    assert_eq!(partition_state(&c, "n1", 0).await.unwrap().replicas, vec![1]);
    assert!(list(&c).await.reassignments.is_empty());

    // More topics than are read alone: the request is planned on the whole cluster.
    let many: Vec<String> = (0..40).map(|i| format!("m{i}")).collect();
    for t in &many {
        create(&c, t, vec![vec![1]], &[]).await;
    }
    let moves: Vec<(&str, u32, Option<Vec<i32>>)> = many.iter().map(|t| (t.as_str(), 0, Some(vec![2]))).collect();
    let r = alter(&c, &moves, None).await;
    ok(&r);
    assert!(r.results.is_empty(), "every partition was accepted: {:?}", r.results);
    wait_all_done(&c, Duration::from_secs(60)).await;
    for t in &many {
        assert_eq!(partition_state(&c, t, 0).await.unwrap().replicas, vec![2], "{t}");
    }
    drop(f);
}
