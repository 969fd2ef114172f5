//! Replica placement for new topics and partitions, plus checks for explicit assignments.
//!
//! Placement is deterministic: the same brokers, counts and `start` always give the same answer,
//! and partition `p` gets the same replicas whether it is created with the topic or added later.
//!
//! Two layouts are used:
//! - Striped (no racks, or all racks the same size): each round of `n` partitions (n = brokers)
//!   walks a per-round broker order `rf` times, cutting it into consecutive blocks of `rf`. Every
//!   broker therefore gets `rf` replicas and one leadership per round, and any prefix of a round
//!   stays within one of even. The order changes every round so followers change partners.
//! - Walked (racks of different sizes, where evenness is impossible anyway): leader by rotation
//!   over a rack-alternated list, followers by walking that list with a per-round shift and
//!   skipping brokers whose rack the partition already uses.

use std::collections::{BTreeMap, BTreeSet};

use proto::errors::{ErrorCode, Refusal};

/// A broker as placement sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerSlot {
    /// Broker id.
    pub id: i32,
    /// Rack the broker reported, if any.
    pub rack: Option<String>,
}

/// Why replicas could not be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// More replicas per partition than there are brokers.
    #[error("replication factor: {requested} larger than available brokers: {available}")]
    ReplicationFactor {
        /// Requested replication factor.
        requested: u32,
        /// Number of brokers placement could use.
        available: usize,
    },
    /// Zero partitions were requested.
    #[error("number of partitions must be larger than 0")]
    ZeroPartitions,
    /// Replication factor zero was requested.
    #[error("replication factor must be larger than 0")]
    ZeroReplicationFactor,
    /// The broker list was empty.
    #[error("no brokers are available")]
    NoBrokers,
    /// The same broker id was passed twice.
    #[error("broker {id} is listed more than once")]
    DuplicateBroker {
        /// The repeated broker id.
        id: i32,
    },
}

/// Places `partitions` partitions starting at partition index `first_partition`; the first replica is the preferred
/// leader. `start` rotates the broker order so callers can vary which broker leads partition 0.
///
/// With equal racks (or racks ignored), replica and leader counts per broker differ by at most one over the topic's
/// partitions `0..first_partition + partitions`, so a topic stays even as partitions are added.
pub fn assign_replicas(
    brokers: &[BrokerSlot],
    partitions: u32,
    replication_factor: u32,
    first_partition: u32,
    start: u32,
) -> Result<Vec<Vec<i32>>, PlacementError> {
    if partitions == 0 {
        return Err(PlacementError::ZeroPartitions);
    }
    if replication_factor == 0 {
        return Err(PlacementError::ZeroReplicationFactor);
    }
    if brokers.is_empty() {
        return Err(PlacementError::NoBrokers);
    }
    let mut sorted: Vec<&BrokerSlot> = brokers.iter().collect();
    sorted.sort_by_key(|b| b.id);
    if let Some(pair) = sorted.windows(2).find(|w| w[0].id == w[1].id) {
        return Err(PlacementError::DuplicateBroker { id: pair[0].id });
    }
    let n = sorted.len();
    let rf = replication_factor as usize;
    if rf > n {
        return Err(PlacementError::ReplicationFactor {
            requested: replication_factor,
            available: n,
        });
    }

    let layout = Layout::new(&sorted);
    let start = u64::from(start);
    let first = u64::from(first_partition);
    let mut out = Vec::with_capacity(partitions as usize);
    // Consecutive partitions share a round, so its broker order is built once per round.
    let mut order = Vec::new();
    let mut order_round = None;
    for p in first..first + u64::from(partitions) {
        let replicas = match &layout {
            Layout::Striped { groups } => {
                let round = p / n as u64;
                if order_round != Some(round) {
                    order = round_order(groups, round);
                    order_round = Some(round);
                }
                striped_partition(&order, rf, (p % n as u64) as usize, (start % n as u64) as usize)
            }
            Layout::Walked { alternated, racks } => walked_partition(alternated, *racks, rf, p, start),
        };
        out.push(replicas);
    }
    Ok(out)
}

/// Checks an explicit assignment: every list non-empty, no duplicate broker within a list, all lists the same length
/// (and equal to `replication_factor` when Some), every broker in `known_brokers`.
pub fn validate_assignment(
    assignment: &[Vec<i32>],
    known_brokers: &BTreeSet<i32>,
    replication_factor: Option<usize>,
) -> Result<(), Refusal> {
    let invalid = |m: String| Err(Refusal::new(ErrorCode::INVALID_REPLICA_ASSIGNMENT, m));
    if assignment.is_empty() {
        return invalid("assignment has no partitions".to_string());
    }
    // Without an explicit factor the first partition sets the expected length.
    let expected = replication_factor.unwrap_or(assignment[0].len());
    for (index, replicas) in assignment.iter().enumerate() {
        if replicas.is_empty() {
            return invalid(format!("partition {index}: empty replica list"));
        }
        let mut seen = BTreeSet::new();
        for &broker in replicas {
            if !seen.insert(broker) {
                return invalid(format!("partition {index}: broker {broker} appears twice"));
            }
            if !known_brokers.contains(&broker) {
                return invalid(format!("partition {index}: broker {broker} is not registered"));
            }
        }
        if replicas.len() != expected {
            return invalid(format!(
                "partition {index}: {} replicas, expected {expected}",
                replicas.len()
            ));
        }
    }
    Ok(())
}

enum Layout {
    /// Equal-sized groups of broker ids (racks, or one broker per group when racks are ignored).
    Striped { groups: Vec<Vec<i32>> },
    /// Rack-alternated `(broker, rack index)` list for racks of different sizes.
    Walked {
        alternated: Vec<(i32, usize)>,
        racks: usize,
    },
}

impl Layout {
    /// `sorted` must be sorted by id and non-empty.
    fn new(sorted: &[&BrokerSlot]) -> Layout {
        let singletons = || Layout::Striped {
            groups: sorted.iter().map(|b| vec![b.id]).collect(),
        };
        // Brokers without a rack make rack spreading meaningless, so ignore racks entirely.
        if sorted.iter().any(|b| b.rack.is_none()) {
            return singletons();
        }
        let mut by_rack: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for b in sorted {
            by_rack
                .entry(b.rack.as_deref().unwrap_or_default())
                .or_default()
                .push(b.id);
        }
        // One rack constrains nothing; singletons give more varied partners.
        if by_rack.len() == 1 {
            return singletons();
        }
        let groups: Vec<Vec<i32>> = by_rack.into_values().collect();
        if groups.iter().all(|g| g.len() == groups[0].len()) {
            return Layout::Striped { groups };
        }
        let racks = groups.len();
        let deepest = groups.iter().map(Vec::len).max().unwrap_or(0);
        let mut alternated = Vec::with_capacity(sorted.len());
        for depth in 0..deepest {
            for (rack, members) in groups.iter().enumerate() {
                if let Some(&id) = members.get(depth) {
                    alternated.push((id, rack));
                }
            }
        }
        Layout::Walked { alternated, racks }
    }
}

/// Broker order for one round of the striped layout. Position `row * groups + col` holds member
/// `(row + offset * col) % members` of group `perm[col]`, so any `groups` consecutive positions (cyclically) hold one
/// broker of each group.
fn round_order(groups: &[Vec<i32>], round: u64) -> Vec<i32> {
    let count = groups.len();
    let members = groups[0].len();
    // Kafka shifts followers each round; here whole orders change instead. Rounds step through every group stride
    // and, per stride, every member offset between neighbouring columns, so over about n rounds each broker shares
    // partitions with every broker it may. Round 0 is the plain alternated order.
    let strides = (count as u64 - 1).max(1);
    let perm = stride_permutation(count, 1 + (round % strides) as usize);
    let offset = ((round / strides) % members as u64) as usize;
    (0..count * members)
        .map(|i| {
            let (row, col) = (i / count, i % count);
            groups[perm[col]][(row + offset * col) % members]
        })
        .collect()
}

/// Permutation of `0..len` that visits `c, c+stride, c+2*stride, ...` for each coset start `c` in turn.
fn stride_permutation(len: usize, stride: usize) -> Vec<usize> {
    let cosets = gcd(stride, len);
    (0..cosets)
        .flat_map(|c| (0..len / cosets).map(move |t| (c + t * stride) % len))
        .collect()
}

/// Replicas of the `q`-th partition of a round: `rf` consecutive positions of the round's order, leader first.
fn striped_partition(order: &[i32], rf: usize, q: usize, start: usize) -> Vec<i32> {
    let n = order.len();
    // Plain blocks `q * rf` only ever start at multiples of gcd(rf, n) and would repeat after n / gcd partitions.
    // Each such stretch covers whole cycles of the order, so stepping the block start by one after each stretch keeps
    // the counts even, gives every position one leadership per round, and changes the blocks within the round.
    let block = q * rf + q * gcd(rf, n) / n;
    (0..rf).map(|k| order[(block + k + start) % n]).collect()
}

/// Replicas of partition `p` in the walked layout.
fn walked_partition(alternated: &[(i32, usize)], racks: usize, rf: usize, p: u64, start: u64) -> Vec<i32> {
    let n = alternated.len() as u64;
    let leader = ((p + start) % n) as usize;
    let mut replicas = vec![alternated[leader].0];
    let mut racks_used = vec![false; racks];
    racks_used[alternated[leader].1] = true;
    let mut racks_left = racks - 1;
    if rf == 1 {
        return replicas;
    }
    // Followers start at a per-round offset from the leader so pairings differ between rounds.
    let shift = (p / n + start) % (n - 1);
    let candidates: Vec<(i32, usize)> = (0..n - 1)
        .map(|k| alternated[((leader as u64 + 1 + (shift + k) % (n - 1)) % n) as usize])
        .collect();
    while replicas.len() < rf {
        // Prefer an unused rack until every rack has a replica; then any unused broker will do.
        let pick = candidates
            .iter()
            .find(|(id, rack)| !replicas.contains(id) && (racks_left == 0 || !racks_used[*rack]))
            .copied()
            .expect("rf <= brokers and an unused rack always has an unused broker");
        if !racks_used[pick.1] {
            racks_used[pick.1] = true;
            racks_left -= 1;
        }
        replicas.push(pick.0);
    }
    replicas
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
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
}

/// A proposal for `--generate`: each partition keeps the replicas it has on the listed brokers
/// and gets the missing ones from the least-loaded listed brokers (preferring racks it does not
/// use yet, when `rack_aware`), so that as few replicas as possible move. Errors when a partition
/// needs more replicas than there are brokers.
pub fn propose_moves(
    current: &[Vec<i32>],
    brokers: &[BrokerSlot],
    rack_aware: bool,
) -> Result<Vec<Vec<i32>>, PlacementError> {
    let mut load: BTreeMap<i32, usize> = brokers.iter().map(|b| (b.id, 0)).collect();
    let rack_of = |id: i32| brokers.iter().find(|b| b.id == id).and_then(|b| b.rack.clone());
    let kept: Vec<Vec<i32>> = current
        .iter()
        .map(|rs| rs.iter().copied().filter(|r| load.contains_key(r)).collect())
        .collect();
    for k in &kept {
        for r in k {
            *load.entry(*r).or_default() += 1;
        }
    }
    let mut out = Vec::with_capacity(current.len());
    for (rs, mut keep) in current.iter().zip(kept) {
        if rs.len() > brokers.len() {
            return Err(PlacementError::ReplicationFactor {
                requested: rs.len() as u32,
                available: brokers.len(),
            });
        }
        while keep.len() < rs.len() {
            let used_racks: BTreeSet<String> = keep.iter().filter_map(|r| rack_of(*r)).collect();
            let pick = load
                .iter()
                .filter(|(b, _)| !keep.contains(b))
                .min_by_key(|(b, n)| {
                    let rack_clash = rack_aware && rack_of(**b).is_some_and(|r| used_racks.contains(&r));
                    (rack_clash, **n, **b)
                })
                .map(|(b, _)| *b);
            let Some(b) = pick else { break };
            keep.push(b);
            *load.entry(b).or_default() += 1;
        }
        out.push(keep);
    }
    Ok(out)
}

#[cfg(test)]
mod propose_tests {
    use super::*;

    fn slots(ids: &[(i32, &str)]) -> Vec<BrokerSlot> {
        ids.iter()
            .map(|(id, rack)| BrokerSlot {
                id: *id,
                rack: (!rack.is_empty()).then(|| rack.to_string()),
            })
            .collect()
    }

    #[test]
    fn keeps_what_it_can_and_fills_from_the_least_loaded() {
        let b = slots(&[(1, ""), (2, ""), (4, "")]);
        let p = propose_moves(&[vec![1, 2, 3], vec![3, 1, 2]], &b, true).unwrap();
        assert_eq!(p, vec![vec![1, 2, 4], vec![1, 2, 4]]);
        // Nothing to move when every replica is on a listed broker.
        let p = propose_moves(&[vec![2, 1]], &b, true).unwrap();
        assert_eq!(p, vec![vec![2, 1]]);
    }

    #[test]
    fn prefers_an_unused_rack_and_refuses_too_few_brokers() {
        let b = slots(&[(1, "a"), (2, "a"), (3, "b"), (4, "b")]);
        let p = propose_moves(&[vec![1, 9]], &b, true).unwrap();
        assert_eq!(p, vec![vec![1, 3]]);
        let p = propose_moves(&[vec![1, 9]], &b, false).unwrap();
        assert_eq!(p, vec![vec![1, 2]]);
        assert!(propose_moves(&[vec![1, 2, 3, 4, 5]], &b, true).is_err());
    }
}
