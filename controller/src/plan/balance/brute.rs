//! The fewest bytes any balance needs, by trying every assignment: for tiny clusters in tests
//! only, to measure how far the greedy planner is from the minimum.

use super::{balance_brokers, Bounds};
use crate::plan::cluster::ClusterModel;

/// One way to place a partition's replicas on the balanced brokers: the brokers (by position)
/// and the bytes it copies.
struct Option_ {
    on: Vec<usize>,
    cost: u64,
}

/// The fewest bytes copied by any assignment that keeps each partition's replica count on the
/// balanced brokers, never loses racks, and brings every broker within `bounds`; `None` when
/// no assignment does. Exponential: a handful of brokers and partitions only.
pub fn minimal_bytes(model: &ClusterModel, bounds: &Bounds) -> Option<u64> {
    let brokers = balance_brokers(model);
    let n = brokers.len();
    assert!(n <= 8, "brute force is for tiny cases");
    let racks = model.racks_exist();
    let mut choices: Vec<(u64, Vec<Option_>)> = Vec::new();
    for p in &model.partitions {
        let mine: Vec<usize> = p
            .replicas
            .iter()
            .filter_map(|r| brokers.iter().position(|b| *b == r.broker))
            .collect();
        let fixed: Vec<i32> = p
            .replicas
            .iter()
            .map(|r| r.broker)
            .filter(|b| !brokers.contains(b))
            .collect();
        let before = model.distinct_racks(p.replicas.iter().map(|r| r.broker));
        let mut opts = Vec::new();
        for mask in 0u32..(1 << n) {
            if mask.count_ones() as usize != mine.len() {
                continue;
            }
            let on: Vec<usize> = (0..n).filter(|i| mask & (1 << i) != 0).collect();
            if p.moving && on != mine {
                continue;
            }
            let after = model.distinct_racks(on.iter().map(|i| brokers[*i]).chain(fixed.iter().copied()));
            if racks && after < before {
                continue;
            }
            let added = on.iter().filter(|i| !mine.contains(i)).count() as u64;
            opts.push(Option_ {
                on,
                cost: added * p.bytes,
            });
        }
        choices.push((p.bytes, opts));
    }
    let mut best = None;
    let mut count = vec![0u64; n];
    let mut bytes = vec![0u64; n];
    search(&choices, 0, 0, &mut count, &mut bytes, bounds, &mut best);
    best
}

fn search(
    choices: &[(u64, Vec<Option_>)],
    at: usize,
    cost: u64,
    count: &mut [u64],
    bytes: &mut [u64],
    bounds: &Bounds,
    best: &mut Option<u64>,
) {
    if best.is_some_and(|b| cost >= b) {
        return;
    }
    let Some((size, opts)) = choices.get(at) else {
        if (0..count.len()).all(|i| bounds.outside(count[i], bytes[i]) == (0, 0)) {
            *best = Some(cost);
        }
        return;
    };
    for o in opts {
        for i in &o.on {
            count[*i] += 1;
            bytes[*i] += size;
        }
        search(choices, at + 1, cost + o.cost, count, bytes, bounds, best);
        for i in &o.on {
            count[*i] -= 1;
            bytes[*i] -= size;
        }
    }
}
