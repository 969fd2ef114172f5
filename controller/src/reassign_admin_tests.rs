//! Planning a reassignment request without a metastore: which partitions refuse the whole
//! request, and which are only answered.

use super::*;
use proto::cluster_view::{PartitionEntry, TopicEntry};

/// Brokers 1–3; topic `t` with partition 0 moving from [1, 2] to [2, 3] and partition 1 settled.
fn moving_view() -> ClusterView {
    let mut v = ClusterView::default();
    for b in 1..=3 {
        v.brokers.insert(b, BrokerRegistration::default());
    }
    let moving = PartitionState {
        replicas: vec![1, 2, 3],
        isr: vec![1, 2],
        leader: 1,
        adding: vec![3],
        removing: vec![1],
        reassignment: Some(Box::new(ReassignmentRecord {
            original: vec![1, 2],
            target: vec![2, 3],
            ..Default::default()
        })),
        ..Default::default()
    };
    let settled = PartitionState {
        replicas: vec![1, 2],
        isr: vec![1, 2],
        leader: 1,
        ..Default::default()
    };
    let entry = |state, mod_revision| PartitionEntry { state, mod_revision };
    v.topics.insert(
        "t".into(),
        TopicEntry {
            record: Some(TopicRecord::default()),
            mod_revision: 5,
            partitions: [(0, entry(moving, 6)), (1, entry(settled, 7))].into(),
        },
    );
    v
}

fn target(p: u32, replicas: Option<Vec<i32>>) -> ReassignmentTarget {
    ReassignmentTarget {
        topic: "t".into(),
        partition: p,
        replicas: replicas.map(|brokers| Replicas { brokers }),
        log_dirs: vec![],
    }
}

fn request(partitions: Vec<ReassignmentTarget>) -> AlterPartitionReassignmentsRequest {
    AlterPartitionReassignmentsRequest {
        partitions,
        ..Default::default()
    }
}

#[test]
fn a_cancel_of_a_finished_move_is_answered_alone_and_the_rest_is_cancelled() {
    let v = moving_view();
    let req = request(vec![target(0, None), target(1, None)]);
    let Decided::Write(changes, results, submitted) = plan_alter(&req, &v, 0, 1) else {
        panic!("a cancel with one finished move was refused whole");
    };
    assert_eq!(changes.len(), 1, "only t-0 is written");
    assert!(submitted.is_empty());
    // Only the partition answered alone is answered: t-0 was accepted.
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].partition, 1);
    assert_eq!(ErrorCode(results[0].error_code), ErrorCode::NO_REASSIGNMENT_IN_PROGRESS);
    assert!(results[0].error_message.contains("t-1"), "{}", results[0].error_message);
}

#[test]
fn bad_input_still_refuses_the_whole_request_and_is_named_first() {
    let v = moving_view();
    let req = request(vec![target(1, None), target(0, None), target(9, Some(vec![1]))]);
    let Decided::Refused(r) = plan_alter(&req, &v, 0, 1) else {
        panic!("a request naming a missing partition was written");
    };
    assert_eq!(ErrorCode(r.error_code), ErrorCode::INVALID_REQUEST);
    assert!(r.error_message.contains("t-9 does not exist"), "{}", r.error_message);
    assert!(
        r.error_message.contains("2 partition(s) refused"),
        "{}",
        r.error_message
    );
}

#[test]
fn a_cancel_that_would_leave_no_original_replica_in_sync_does_not_stop_the_others() {
    let mut v = moving_view();
    // t-2 moves like t-0, but only its new replica 3 is in sync now.
    let topic = v.topics.get_mut("t").unwrap();
    let mut stuck = topic.partitions[&0].clone();
    stuck.state.isr = vec![3];
    stuck.state.leader = 3;
    topic.partitions.insert(2, stuck);
    let req = request(vec![target(2, None), target(0, None)]);
    let Decided::Write(changes, results, _) = plan_alter(&req, &v, 0, 1) else {
        panic!("one partition that cannot roll back refused the whole cancel");
    };
    assert_eq!(changes.len(), 1, "only t-0 is rolled back");
    assert_eq!(
        ErrorCode(results[0].error_code),
        ErrorCode::ELIGIBLE_LEADERS_NOT_AVAILABLE
    );
    assert!(results[0].error_message.contains("t-2"), "{}", results[0].error_message);
    assert_eq!(results.len(), 1, "t-0 was accepted, so not answered alone: {results:?}");
}

/// Brokers 1–3 and topic `t` of `n` settled partitions on [1, 2].
fn settled_view(n: u32) -> ClusterView {
    let mut v = ClusterView::default();
    for b in 1..=3 {
        v.brokers.insert(b, BrokerRegistration::default());
    }
    let settled = PartitionState {
        replicas: vec![1, 2],
        isr: vec![1, 2],
        leader: 1,
        ..Default::default()
    };
    let partitions = (0..n)
        .map(|p| {
            let entry = PartitionEntry {
                state: settled.clone(),
                mod_revision: 10 + u64::from(p),
            };
            (p, entry)
        })
        .collect();
    v.topics.insert(
        "t".into(),
        TopicEntry {
            record: Some(TopicRecord::default()),
            mod_revision: 5,
            partitions,
        },
    );
    v
}

#[test]
fn answers_follow_the_request_and_writes_follow_the_keys_on_every_thread() {
    // More partitions than one thread plans, named in an order that is neither numeric nor the
    // keys', with missing partitions spread over the threads' shares and one named twice.
    let n = 2 * PLAN_CHUNK as u32 + 7;
    let view = settled_view(n);
    let mut named: Vec<u32> = (0..n).rev().collect();
    named.swap(3, n as usize / 2);
    let mut bad = named.clone();
    for (at, missing) in [(10, n + 5), (PLAN_CHUNK + 3, n + 1), (2 * PLAN_CHUNK, n + 3)] {
        bad.insert(at, missing);
    }
    bad.push(42);
    let req = request(bad.iter().map(|p| target(*p, Some(vec![2, 3]))).collect());
    let Decided::Refused(r) = plan_alter(&req, &view, 0, 1) else {
        panic!("a partition named twice must refuse the request");
    };
    // Only the refused partitions are answered, in the request's order; of a partition named
    // twice, the first naming is planned and the second refused.
    let answered: Vec<(u32, &str)> = r
        .results
        .iter()
        .map(|r| (r.partition, r.error_message.as_str()))
        .collect();
    let missing = |p: u32| format!("partition t-{p} does not exist");
    assert_eq!(answered.len(), 4, "{answered:?}");
    for (a, p) in answered.iter().zip([n + 5, n + 1, n + 3]) {
        assert_eq!(a.0, p);
        assert!(a.1.contains(&missing(p)), "{}", a.1);
    }
    assert_eq!(answered[3], (42, "partition t-42 appears twice in the request"));

    let req = request(named.iter().map(|p| target(*p, Some(vec![2, 3]))).collect());
    let Decided::Write(changes, results, touched) = plan_alter(&req, &view, 0, 1) else {
        panic!("a valid request must be written");
    };
    assert!(
        results.is_empty(),
        "an accepted partition is not answered alone: {results:?}"
    );
    let guarded: Vec<String> = changes.iter().map(|c| c.guard.key.clone()).collect();
    let mut by_key = guarded.clone();
    by_key.sort();
    assert_eq!(guarded, by_key, "changes in key order");
    assert_eq!(guarded.len(), n as usize);
    // Each change keeps its own partition's revision, whichever thread planned it.
    for c in &changes {
        let rev = 10 + u64::from(c.partition.1);
        assert_eq!(c.guard.check, Some(pb::guard::Check::ModRevision(rev)));
    }
    assert!(!touched.is_empty());
}
