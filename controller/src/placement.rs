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
    /// A partition needs a new replica and no broker that could take it is left: the others
    /// hold one already or have every log dir cordoned.
    #[error("partition #{index} of the list needs {missing} more replica(s) and no broker can take one (brokers {closed:?} have every log dir cordoned)")]
    NoBrokerFor {
        /// The partition's position in the list given.
        index: usize,
        /// Replicas it still lacks.
        missing: usize,
        /// The brokers left out because every dir of theirs is cordoned.
        closed: Vec<i32>,
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

/// A proposal for `--generate`: each partition keeps the replicas it has on the listed brokers
/// and gets the missing ones from the least-loaded listed brokers not in `closed` (brokers whose
/// every log dir is cordoned keep what they hold but take nothing new), preferring racks it does
/// not use yet when `rack_aware`, so that as few replicas as possible move. Errors when a
/// partition needs more replicas than there are brokers, or than brokers can take.
pub fn propose_moves(
    current: &[Vec<i32>],
    brokers: &[BrokerSlot],
    rack_aware: bool,
    closed: &BTreeSet<i32>,
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
    for (index, (rs, mut keep)) in current.iter().zip(kept).enumerate() {
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
                .filter(|(b, _)| !keep.contains(b) && !closed.contains(b))
                .min_by_key(|(b, n)| {
                    let rack_clash = rack_aware && rack_of(**b).is_some_and(|r| used_racks.contains(&r));
                    (rack_clash, **n, **b)
                })
                .map(|(b, _)| *b);
            let Some(b) = pick else {
                return Err(PlacementError::NoBrokerFor {
                    index,
                    missing: rs.len() - keep.len(),
                    closed: closed.iter().copied().collect(),
                });
            };
            keep.push(b);
            *load.entry(b).or_default() += 1;
        }
        out.push(keep);
    }
    Ok(out)
}

#[cfg(test)]
mod propose_tests;

#[cfg(test)]
mod tests;
