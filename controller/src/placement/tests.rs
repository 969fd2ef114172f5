//! Tests of placement: spread, racks, leaders, explicit assignments.

use super::*;

fn unracked(n: i32) -> Vec<BrokerSlot> {
    (0..n).map(|id| BrokerSlot { id, rack: None }).collect()
}

/// `sizes[r]` brokers in rack `r`; ids are numbered rack by rack.
fn racked(sizes: &[usize]) -> Vec<BrokerSlot> {
    let mut out = Vec::new();
    for (r, &size) in sizes.iter().enumerate() {
        for _ in 0..size {
            out.push(BrokerSlot {
                id: out.len() as i32,
                rack: Some(format!("rack-{r}")),
            });
        }
    }
    out
}

fn rack_of(brokers: &[BrokerSlot], id: i32) -> Option<&str> {
    brokers.iter().find(|b| b.id == id).and_then(|b| b.rack.as_deref())
}

/// Max minus min over all brokers (brokers with no replicas count as zero).
fn spread(brokers: &[BrokerSlot], counts: &BTreeMap<i32, usize>) -> usize {
    let all: Vec<usize> = brokers
        .iter()
        .map(|b| counts.get(&b.id).copied().unwrap_or(0))
        .collect();
    all.iter().max().unwrap() - all.iter().min().unwrap()
}

fn replica_counts(assignment: &[Vec<i32>]) -> BTreeMap<i32, usize> {
    let mut counts = BTreeMap::new();
    for id in assignment.iter().flatten() {
        *counts.entry(*id).or_insert(0) += 1;
    }
    counts
}

fn leader_counts(assignment: &[Vec<i32>]) -> BTreeMap<i32, usize> {
    let mut counts = BTreeMap::new();
    for replicas in assignment {
        *counts.entry(replicas[0]).or_insert(0) += 1;
    }
    counts
}

fn assert_well_formed(brokers: &[BrokerSlot], assignment: &[Vec<i32>], rf: u32, partitions: u32) {
    let known: BTreeSet<i32> = brokers.iter().map(|b| b.id).collect();
    assert_eq!(assignment.len(), partitions as usize);
    assert_eq!(validate_assignment(assignment, &known, Some(rf as usize)), Ok(()));
}

fn assert_even(brokers: &[BrokerSlot], assignment: &[Vec<i32>], ctx: &str) {
    assert!(
        spread(brokers, &replica_counts(assignment)) <= 1,
        "replicas uneven: {ctx} {assignment:?}"
    );
    assert!(
        spread(brokers, &leader_counts(assignment)) <= 1,
        "leaders uneven: {ctx} {assignment:?}"
    );
}

fn assert_rack_distinct(brokers: &[BrokerSlot], assignment: &[Vec<i32>], ctx: &str) {
    for replicas in assignment {
        let racks: BTreeSet<_> = replicas.iter().map(|id| rack_of(brokers, *id)).collect();
        assert_eq!(racks.len(), replicas.len(), "racks shared: {ctx} {replicas:?}");
    }
}

#[test]
fn rejects_bad_requests() {
    let two = unracked(2);
    assert_eq!(assign_replicas(&two, 0, 1, 0, 0), Err(PlacementError::ZeroPartitions));
    assert_eq!(
        assign_replicas(&two, 1, 0, 0, 0),
        Err(PlacementError::ZeroReplicationFactor)
    );
    assert_eq!(assign_replicas(&[], 1, 1, 0, 0), Err(PlacementError::NoBrokers));
    let dup = vec![BrokerSlot { id: 4, rack: None }, BrokerSlot { id: 4, rack: None }];
    assert_eq!(
        assign_replicas(&dup, 1, 1, 0, 0),
        Err(PlacementError::DuplicateBroker { id: 4 })
    );
}

#[test]
fn rejects_replication_factor_larger_than_brokers() {
    let err = assign_replicas(&unracked(2), 4, 3, 0, 0).unwrap_err();
    assert_eq!(
        err,
        PlacementError::ReplicationFactor {
            requested: 3,
            available: 2
        }
    );
    assert_eq!(
        err.to_string(),
        "replication factor: 3 larger than available brokers: 2"
    );
    // Racks do not lower the limit: rf 3 on two racks of two still works.
    assert!(assign_replicas(&racked(&[2, 2]), 4, 3, 0, 0).is_ok());
}

#[test]
fn replicas_are_distinct_and_sized() {
    for n in 1..=8 {
        let brokers = unracked(n);
        for rf in 1..=n as u32 {
            for partitions in 1..=(2 * n as u32 + 3) {
                for first in [0, 1, 5] {
                    for start in 0..n as u32 {
                        let a = assign_replicas(&brokers, partitions, rf, first, start).unwrap();
                        assert_well_formed(&brokers, &a, rf, partitions);
                    }
                }
            }
        }
    }
}

#[test]
fn rack_unaware_is_even_for_every_size() {
    for n in 1..=9 {
        let brokers = unracked(n);
        for rf in 1..=n as u32 {
            for partitions in 1..=(3 * n as u32 + 1) {
                for start in [0, 1, n as u32 - 1, 17] {
                    let a = assign_replicas(&brokers, partitions, rf, 0, start).unwrap();
                    assert_even(&brokers, &a, &format!("n={n} rf={rf} p={partitions} start={start}"));
                }
            }
        }
    }
}

#[test]
fn equal_racks_are_even_and_rack_distinct() {
    for racks in 2..=4 {
        for per_rack in 1..=3 {
            let brokers = racked(&vec![per_rack; racks]);
            let n = brokers.len() as u32;
            for rf in 1..=n {
                for partitions in 1..=(2 * n + 1) {
                    for start in [0, 1, 7] {
                        let ctx = format!("racks={racks}x{per_rack} rf={rf} p={partitions} start={start}");
                        let a = assign_replicas(&brokers, partitions, rf, 0, start).unwrap();
                        assert_well_formed(&brokers, &a, rf, partitions);
                        assert_even(&brokers, &a, &ctx);
                        if rf as usize <= racks {
                            assert_rack_distinct(&brokers, &a, &ctx);
                        } else {
                            // More replicas than racks: every rack still gets one.
                            for replicas in &a {
                                let used: BTreeSet<_> = replicas.iter().map(|id| rack_of(&brokers, *id)).collect();
                                assert_eq!(used.len(), racks, "{ctx} {replicas:?}");
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn six_brokers_three_racks_sixty_partitions() {
    let brokers = racked(&[2, 2, 2]);
    let a = assign_replicas(&brokers, 60, 3, 0, 0).unwrap();
    assert_well_formed(&brokers, &a, 3, 60);
    assert_rack_distinct(&brokers, &a, "6/3/60/3");
    assert!(
        replica_counts(&a).values().all(|&c| c == 30),
        "{:?}",
        replica_counts(&a)
    );
    assert!(leader_counts(&a).values().all(|&c| c == 10), "{:?}", leader_counts(&a));
    assert_eq!(leader_counts(&a).len(), 6);
    // Replica sets vary instead of repeating the same two triples.
    let sets: BTreeSet<BTreeSet<i32>> = a.iter().map(|r| r.iter().copied().collect()).collect();
    assert!(sets.len() > 2, "{sets:?}");
}

#[test]
fn five_brokers_seven_partitions_rf_two() {
    let brokers = unracked(5);
    for start in 0..5 {
        let a = assign_replicas(&brokers, 7, 2, 0, start).unwrap();
        assert_well_formed(&brokers, &a, 2, 7);
        let replicas = replica_counts(&a);
        assert_eq!(replicas.len(), 5);
        assert!(replicas.values().all(|&c| c == 2 || c == 3), "{replicas:?}");
        let leaders = leader_counts(&a);
        assert_eq!(leaders.len(), 5);
        assert!(leaders.values().all(|&c| c == 1 || c == 2), "{leaders:?}");
    }
}

#[test]
fn leader_is_not_always_followed_by_the_same_broker() {
    for brokers in [unracked(5), racked(&[2, 2, 2]), racked(&[3, 1, 2])] {
        let a = assign_replicas(&brokers, 40, 2, 0, 0).unwrap();
        for b in &brokers {
            let followers: BTreeSet<i32> = a.iter().filter(|r| r[0] == b.id).map(|r| r[1]).collect();
            assert!(followers.len() > 1, "leader {} always followed by {followers:?}", b.id);
        }
    }
}

#[test]
fn mixed_racks_are_ignored() {
    let mut brokers = racked(&[3, 1]);
    brokers[2].rack = None;
    let plain: Vec<BrokerSlot> = brokers.iter().map(|b| BrokerSlot { id: b.id, rack: None }).collect();
    for rf in 1..=4 {
        assert_eq!(
            assign_replicas(&brokers, 9, rf, 0, 2),
            assign_replicas(&plain, 9, rf, 0, 2)
        );
        assert_even(&plain, &assign_replicas(&plain, 9, rf, 0, 2).unwrap(), "mixed");
    }
}

#[test]
fn unequal_racks_stay_rack_distinct() {
    for sizes in [&[3, 1, 2][..], &[1, 4], &[2, 3, 1, 1], &[5, 2, 2]] {
        let brokers = racked(sizes);
        let n = brokers.len() as u32;
        for rf in 1..=n {
            for start in 0..n {
                let ctx = format!("sizes={sizes:?} rf={rf} start={start}");
                let a = assign_replicas(&brokers, 13, rf, 0, start).unwrap();
                assert_well_formed(&brokers, &a, rf, 13);
                assert!(spread(&brokers, &leader_counts(&a)) <= 1, "leaders uneven: {ctx} {a:?}");
                if rf as usize <= sizes.len() {
                    assert_rack_distinct(&brokers, &a, &ctx);
                } else {
                    for replicas in &a {
                        let used: BTreeSet<_> = replicas.iter().map(|id| rack_of(&brokers, *id)).collect();
                        assert_eq!(used.len(), sizes.len(), "{ctx} {replicas:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn unequal_racks_every_partition_uses_each_rack() {
    // Three racks, rf 3: each partition must take the lone broker of rack-1.
    let brokers = racked(&[3, 1, 2]);
    let a = assign_replicas(&brokers, 12, 3, 0, 0).unwrap();
    assert!(a.iter().all(|r| r.contains(&3)), "{a:?}");
    assert_rack_distinct(&brokers, &a, "3/1/2");
}

#[test]
fn input_order_does_not_matter() {
    for brokers in [unracked(7), racked(&[2, 2, 2]), racked(&[3, 1, 2])] {
        let mut reversed = brokers.clone();
        reversed.reverse();
        let mut rotated = brokers.clone();
        rotated.rotate_left(2);
        let expected = assign_replicas(&brokers, 11, 3, 0, 1).unwrap();
        assert_eq!(assign_replicas(&reversed, 11, 3, 0, 1).unwrap(), expected);
        assert_eq!(assign_replicas(&rotated, 11, 3, 0, 1).unwrap(), expected);
    }
}

#[test]
fn sparse_ids_are_sorted() {
    let brokers: Vec<BrokerSlot> = [30, 10, 20].iter().map(|&id| BrokerSlot { id, rack: None }).collect();
    let a = assign_replicas(&brokers, 3, 1, 0, 0).unwrap();
    assert_eq!(a, vec![vec![10], vec![20], vec![30]]);
}

#[test]
fn start_rotates_the_first_leader() {
    let brokers = unracked(4);
    for start in 0..12 {
        let a = assign_replicas(&brokers, 1, 2, 0, start).unwrap();
        assert_eq!(a[0][0], (start % 4) as i32);
    }
    assert_eq!(
        assign_replicas(&brokers, 9, 3, 0, 1),
        assign_replicas(&brokers, 9, 3, 0, 5)
    );
    assert_ne!(
        assign_replicas(&brokers, 9, 3, 0, 0),
        assign_replicas(&brokers, 9, 3, 0, 1)
    );
}

#[test]
fn added_partitions_continue_the_topic() {
    for brokers in [unracked(5), racked(&[2, 2, 2]), racked(&[3, 1, 2])] {
        for existing in [1, 4, 6, 7] {
            let whole = assign_replicas(&brokers, existing + 8, 3, 0, 2).unwrap();
            let mut pieces = assign_replicas(&brokers, existing, 3, 0, 2).unwrap();
            pieces.extend(assign_replicas(&brokers, 8, 3, existing, 2).unwrap());
            assert_eq!(pieces, whole, "existing={existing}");
        }
    }
}

#[test]
fn topic_stays_even_after_adding_partitions() {
    let brokers = racked(&[2, 2, 2]);
    let mut topic = assign_replicas(&brokers, 4, 2, 0, 3).unwrap();
    for added in [3, 1, 5] {
        let next = topic.len() as u32;
        topic.extend(assign_replicas(&brokers, added, 2, next, 3).unwrap());
        assert_even(&brokers, &topic, &format!("after adding {added}"));
        assert_rack_distinct(&brokers, &topic, "grown topic");
    }
}

#[test]
fn large_partition_indexes_do_not_overflow() {
    let brokers = racked(&[3, 3]);
    let a = assign_replicas(&brokers, 10, 2, u32::MAX - 5, u32::MAX).unwrap();
    assert_well_formed(&brokers, &a, 2, 10);
    assert_rack_distinct(&brokers, &a, "overflow");
    let b = assign_replicas(&racked(&[3, 1]), 10, 2, u32::MAX - 5, u32::MAX).unwrap();
    assert_eq!(b.len(), 10);
}

#[test]
fn every_broker_meets_every_allowed_partner() {
    let cases = [
        unracked(4),
        unracked(6),
        unracked(7),
        unracked(12),
        racked(&[2; 3]),
        racked(&[4; 3]),
        racked(&[3; 4]),
    ];
    for brokers in cases {
        let n = brokers.len() as u32;
        for rf in 2..=3 {
            // n - 1 rounds, as Kafka's shift needs to cycle through every follower offset.
            let a = assign_replicas(&brokers, n * (n - 1), rf, 0, 0).unwrap();
            for b in &brokers {
                let partners: BTreeSet<i32> = a
                    .iter()
                    .filter(|r| r.contains(&b.id))
                    .flatten()
                    .copied()
                    .filter(|&o| o != b.id)
                    .collect();
                let allowed: BTreeSet<i32> = brokers
                    .iter()
                    .filter(|o| o.id != b.id && (o.rack.is_none() || o.rack != b.rack))
                    .map(|o| o.id)
                    .collect();
                assert_eq!(partners, allowed, "broker {} rf={rf} brokers={brokers:?}", b.id);
            }
        }
    }
}

#[test]
fn validate_accepts_good_assignment() {
    let known: BTreeSet<i32> = [1, 2, 3].into();
    let a = vec![vec![1, 2], vec![2, 3], vec![3, 1]];
    assert_eq!(validate_assignment(&a, &known, None), Ok(()));
    assert_eq!(validate_assignment(&a, &known, Some(2)), Ok(()));
}

#[test]
fn validate_reports_partition_and_reason() {
    let known: BTreeSet<i32> = [1, 2, 3].into();
    type Case = (Vec<Vec<i32>>, Option<usize>, &'static str);
    let cases: Vec<Case> = vec![
        (
            vec![vec![1, 2], vec![2, 3], vec![3, 7]],
            None,
            "partition 2: broker 7 is not registered",
        ),
        (vec![vec![1, 1]], None, "partition 0: broker 1 appears twice"),
        (
            vec![vec![1, 2, 3], vec![1, 2]],
            None,
            "partition 1: 2 replicas, expected 3",
        ),
        (
            vec![vec![1, 2], vec![1, 2]],
            Some(3),
            "partition 0: 2 replicas, expected 3",
        ),
        (vec![vec![]], None, "partition 0: empty replica list"),
        (vec![vec![1], vec![]], Some(1), "partition 1: empty replica list"),
        (vec![], Some(1), "assignment has no partitions"),
    ];
    for (assignment, rf, expected) in cases {
        assert_eq!(
            validate_assignment(&assignment, &known, rf),
            Err(Refusal::new(ErrorCode::INVALID_REPLICA_ASSIGNMENT, expected)),
            "{assignment:?}"
        );
    }
}
