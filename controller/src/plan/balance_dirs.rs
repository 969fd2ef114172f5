//! Dir balance inside one broker: moves replicas between its open dirs (online, not cordoned)
//! until each holds within a tolerance of the mean bytes. Greedy, as the broker balance: from
//! the fullest dir to the emptiest, the smallest replica that covers the excess, else the
//! largest below it, and only moves that lower the imbalance.

use std::collections::{BTreeSet, HashMap};

use super::balance::Bounds;
use super::cluster::ClusterModel;
use super::error::{self, PlanError};
use super::loads::{move_to, Loads};
use super::model::{DirId, PlanKind};
use super::summary::Planned;

/// A dir balance and the bytes per dir before and after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirsBalanced {
    /// The moves.
    pub planned: Planned,
    /// The band (bytes) each dir had to end in.
    pub bounds: Bounds,
    /// Bytes per open dir before.
    pub before: Vec<(DirId, u64)>,
    /// Bytes per open dir after.
    pub after: Vec<(DirId, u64)>,
    /// Whether every dir ends within the band.
    pub within_tolerance: bool,
}

/// Plans a balance of `broker`'s open dirs by bytes within `tolerance_pct` (0 to 100) of the
/// mean. An error names the broker: unknown, down or cordoned whole, or with fewer than two
/// open dirs.
pub fn balance_dirs(model: &ClusterModel, broker: i32, tolerance_pct: i64) -> Result<DirsBalanced, PlanError> {
    let tolerance_pct = error::tolerance(tolerance_pct)?;
    if !model.brokers.contains_key(&broker) {
        return Err(PlanError::UnknownBroker {
            field: "broker",
            broker,
        });
    }
    let Some(dirs) = model.open_dirs(broker) else {
        return Err(PlanError::CannotBalanceDirs {
            reason: format!("broker {broker} is down or cordoned whole"),
        });
    };
    if dirs.len() < 2 {
        return Err(PlanError::CannotBalanceDirs {
            reason: format!(
                "broker {broker} has {} open log dirs (online, not cordoned); a dir balance needs two",
                dirs.len()
            ),
        });
    }
    let mut loads = Loads::of(model);
    let total: u64 = dirs.iter().map(|d| loads.dir(broker, *d)).sum();
    let bounds = Bounds::new(0, total, dirs.len(), tolerance_pct);
    let per_dir = |loads: &Loads| dirs.iter().map(|d| (*d, loads.dir(broker, *d))).collect::<Vec<_>>();
    let before = per_dir(&loads);
    let imbalance = |loads: &Loads| -> u64 {
        dirs.iter()
            .map(|d| bounds.outside(0, loads.dir(broker, *d)).1)
            .fold(0, u64::saturating_add)
    };
    // Movable replicas per dir, smallest first: (bytes, partition index).
    let mut hosted: HashMap<DirId, BTreeSet<(u64, usize)>> = HashMap::new();
    let mut left_out = 0;
    for (i, p) in model.partitions.iter().enumerate() {
        let Some(r) = p.replicas.iter().find(|r| r.broker == broker && dirs.contains(&r.dir)) else {
            continue;
        };
        if p.moving {
            left_out += 1;
        } else {
            hosted.entry(r.dir).or_default().insert((p.bytes, i));
        }
    }
    let mut placed: HashMap<usize, DirId> = HashMap::new();
    let mut order = Vec::new();
    let mut now = imbalance(&loads);
    let mut budget = hosted.values().map(BTreeSet::len).sum::<usize>() * 2 + 16;
    while now > 0 && budget > 0 {
        budget -= 1;
        let key = |d: &DirId| (loads.dir(broker, *d), *d);
        let (Some(src), Some(dst)) = (
            dirs.iter().copied().max_by_key(key),
            dirs.iter().copied().min_by_key(key),
        ) else {
            break;
        };
        let (sb, db) = (loads.dir(broker, src), loads.dir(broker, dst));
        let need = sb
            .saturating_sub(bounds.bytes_hi)
            .max(bounds.bytes_lo.saturating_sub(db));
        let Some(set) = hosted.get(&src) else { break };
        let old = bounds.outside(0, sb).1 + bounds.outside(0, db).1;
        let lowers = |&&(size, _): &&(u64, usize)| {
            let new = bounds.outside(0, sb - size.min(sb)).1 + bounds.outside(0, db.saturating_add(size)).1;
            new < old
        };
        let pick = set
            .range((need, 0)..)
            .find(lowers)
            .or_else(|| set.range(..(need, 0)).rev().find(lowers))
            .copied();
        let Some((size, i)) = pick else { break };
        let p = &model.partitions[i];
        let from = p.replicas.iter().find(|r| r.broker == broker).copied();
        if let Some(mut r) = from {
            r.dir = src;
            loads.remove(r, size);
            r.dir = dst;
            loads.add(r, size);
        }
        if let Some(s) = hosted.get_mut(&src) {
            s.remove(&(size, i));
        }
        hosted.entry(dst).or_default().insert((size, i));
        if placed.insert(i, dst).is_none() {
            order.push(i);
        }
        now = imbalance(&loads);
    }
    let moves = order
        .into_iter()
        .filter_map(|i| {
            let p = &model.partitions[i];
            let dst = placed.get(&i)?;
            let mut to = p.replicas.clone();
            let at = to.iter().position(|r| r.broker == broker)?;
            // Sent away and back again: no move.
            if to[at].dir == *dst {
                return None;
            }
            to[at].dir = *dst;
            Some(move_to(p, to))
        })
        .collect();
    Ok(DirsBalanced {
        planned: Planned::new(PlanKind::BalanceDirs { broker, tolerance_pct }, moves, left_out)?,
        bounds,
        before,
        after: per_dir(&loads),
        within_tolerance: now == 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::cluster::ClusterBuilder;

    #[test]
    fn dirs_ninety_and_ten_percent_full_end_within_tolerance_moving_little() {
        // Two dirs of 1,000 units: /full holds 900 in 30 partitions of 5 to 55, /empty 100.
        let mut b = ClusterBuilder::new();
        b.broker(1, None, true, &[("/full", false), ("/empty", false)]);
        b.broker(2, None, true, &[("/x", false)]);
        let mut held = 0;
        for p in 0..30u32 {
            let size = 5 + u64::from(p % 11) * 5;
            held += size;
            b.partition("t", p, 1, size, &[(1, "/full"), (2, "/x")]);
        }
        b.partition("t", 30, 1, 900 - held, &[(1, "/full")]);
        b.partition("u", 0, 1, 100, &[(1, "/empty")]);
        let m = b.build();
        let got = balance_dirs(&m, 1, 10).expect("valid");
        let full = m.dir_id(1, "/full").expect("known");
        let empty = m.dir_id(1, "/empty").expect("known");
        assert_eq!(got.before, vec![(full, 900), (empty, 100)]);
        assert!(got.within_tolerance, "{:?}", got.after);
        for (_, bytes) in &got.after {
            assert!((450..=550).contains(bytes), "{:?}", got.after);
        }
        // At least 350 must move to reach 550; the greedy moves not much more than that.
        let moved = got.planned.summary.bytes;
        assert!((350..=450).contains(&moved), "moved {moved}");
        for mv in &got.planned.moves {
            let load = mv.load();
            assert_eq!(load.dir, vec![1]);
            assert!(load.into.is_empty() && load.out.is_empty());
            assert_eq!(mv.to.iter().find(|r| r.broker == 1).map(|r| r.dir), Some(empty));
        }
        assert_eq!(got.planned.summary.dir_moves, got.planned.moves.len() as u64);
    }

    #[test]
    fn a_broker_without_two_open_dirs_is_refused_by_name() {
        let mut b = ClusterBuilder::new();
        b.broker(1, None, true, &[("/a", false), ("/b", false)])
            .cordon_dir(1, "/b");
        b.broker(2, None, false, &[("/a", false), ("/b", false)]);
        let m = b.build();
        assert!(balance_dirs(&m, 1, 10)
            .unwrap_err()
            .to_string()
            .contains("broker 1 has 1 open log dirs"));
        assert!(balance_dirs(&m, 2, 10)
            .unwrap_err()
            .to_string()
            .contains("broker 2 is down"));
        assert!(balance_dirs(&m, 3, 10)
            .unwrap_err()
            .to_string()
            .contains("broker 3 is not registered"));
        assert!(balance_dirs(&m, 1, 200)
            .unwrap_err()
            .to_string()
            .contains("tolerance_pct"));
    }
}
