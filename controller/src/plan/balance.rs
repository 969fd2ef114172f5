//! Broker balance: brings every open broker's replica count and bytes within a tolerance of the
//! mean, moving as few bytes as it can. Greedy: between the most and the least loaded brokers,
//! each step weighs for every pair the smallest replica that covers the excess and the largest
//! below it, and takes the best by a ranking; it runs twice, with two rankings (few larger
//! moves, or small partitions first), and keeps the plan that balances with fewer bytes. It
//! never places on a cordoned, offline or down broker or dir and never loses a partition's
//! racks; each move must lower the imbalance, so it ends. Partitions already moving stay put
//! but count. Measured against a brute-force minimum on tiny clusters (`balance/tests.rs`).

use std::collections::{BTreeSet, HashMap};

use super::cluster::ClusterModel;
use super::error::{self, PlanError};
use super::loads::{keeps_racks, move_to, Loads};
use super::model::{PlanKind, Replica};
use super::summary::Planned;

/// The band each broker must end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Fewest replicas.
    pub count_lo: u64,
    /// Most replicas.
    pub count_hi: u64,
    /// Fewest bytes.
    pub bytes_lo: u64,
    /// Most bytes.
    pub bytes_hi: u64,
}

impl Bounds {
    /// The mean of `count` replicas and `bytes` over `brokers`, widened by `tolerance_pct`
    /// either way (rounded outward, so an even spread always fits).
    pub fn new(count: u64, bytes: u64, brokers: usize, tolerance_pct: u32) -> Bounds {
        let n = brokers.max(1) as u128;
        let t = u128::from(tolerance_pct.min(100));
        let lo = |total: u64| (u128::from(total) * (100 - t) / (100 * n)) as u64;
        let hi = |total: u64| (u128::from(total) * (100 + t)).div_ceil(100 * n) as u64;
        Bounds {
            count_lo: lo(count),
            count_hi: hi(count),
            bytes_lo: lo(bytes),
            bytes_hi: hi(bytes),
        }
    }

    /// How far one broker is outside the band: (replicas, bytes).
    pub fn outside(&self, count: u64, bytes: u64) -> (u64, u64) {
        let off = |v: u64, lo: u64, hi: u64| v.saturating_sub(hi) + lo.saturating_sub(v);
        (
            off(count, self.count_lo, self.count_hi),
            off(bytes, self.bytes_lo, self.bytes_hi),
        )
    }
}

/// The spread of replicas and bytes over the brokers balanced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spread {
    /// Fewest replicas on one broker.
    pub min_count: u64,
    /// Most replicas on one broker.
    pub max_count: u64,
    /// Fewest bytes on one broker.
    pub min_bytes: u64,
    /// Most bytes on one broker.
    pub max_bytes: u64,
}

impl Spread {
    fn of(loads: &Loads, brokers: &[i32]) -> Spread {
        let counts = brokers.iter().map(|b| loads.broker_count(*b));
        let bytes = brokers.iter().map(|b| loads.broker_bytes(*b));
        Spread {
            min_count: counts.clone().min().unwrap_or(0),
            max_count: counts.max().unwrap_or(0),
            min_bytes: bytes.clone().min().unwrap_or(0),
            max_bytes: bytes.max().unwrap_or(0),
        }
    }
}

/// A balance plan and how the brokers stand before and after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Balanced {
    /// The moves.
    pub planned: Planned,
    /// The band every broker had to end in.
    pub bounds: Bounds,
    /// Before the moves.
    pub before: Spread,
    /// After them.
    pub after: Spread,
    /// Whether every broker ends within the band (a greedy plan may stop short).
    pub within_tolerance: bool,
}

/// The brokers a balance spreads over: registered, not cordoned whole, with an open dir.
pub fn balance_brokers(model: &ClusterModel) -> Vec<i32> {
    model
        .brokers
        .keys()
        .copied()
        .filter(|b| model.open_dirs(*b).is_some())
        .collect()
}

/// Imbalance over `brokers`: summed (replicas, bytes) outside the band.
fn imbalance(loads: &Loads, brokers: &[i32], bounds: &Bounds) -> (u64, u64) {
    brokers.iter().fold((0, 0), |acc, b| {
        let o = bounds.outside(loads.broker_count(*b), loads.broker_bytes(*b));
        (acc.0 + o.0, acc.1.saturating_add(o.1))
    })
}

/// How a greedy step ranks the candidate moves, after the fewest replicas left outside the
/// band: neither ranking wins on every cluster, so [`balance`] runs both and keeps the better
/// plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rank {
    /// The least imbalance left, then the fewest bytes: few, larger moves.
    LeastLeft,
    /// The most bytes of imbalance taken away per byte copied: small partitions first.
    MostPerByte,
}

/// A candidate move: the partition's index and the imbalance (replicas, bytes) left after it.
type Pick = (usize, (u64, u64));

/// One greedy run's result: the moves, the loads after them, and the imbalance left.
struct Run {
    moves: Vec<super::model::Move>,
    loads: Loads,
    left: (u64, u64),
}

/// Plans a balance of the open brokers within `tolerance_pct` of the mean (0 to 100).
pub fn balance(model: &ClusterModel, tolerance_pct: i64) -> Result<Balanced, PlanError> {
    let tolerance_pct = error::tolerance(tolerance_pct)?;
    let kind = PlanKind::Balance { tolerance_pct };
    let brokers = balance_brokers(model);
    let loads = Loads::of(model);
    let count: u64 = brokers.iter().map(|b| loads.broker_count(*b)).sum();
    let bytes: u64 = brokers.iter().map(|b| loads.broker_bytes(*b)).sum();
    let bounds = Bounds::new(count, bytes, brokers.len(), tolerance_pct);
    let before = Spread::of(&loads, &brokers);
    let left_out = model.partitions.iter().filter(|p| p.moving).count() as u64;
    let runs = [Rank::LeastLeft, Rank::MostPerByte].map(|rank| greedy(model, &brokers, &bounds, loads.clone(), rank));
    // The plan that leaves the least imbalance, then copies the fewest bytes.
    let best = runs
        .into_iter()
        .min_by_key(|r| (r.left, r.moves.iter().map(|m| m.bytes).sum::<u64>()))
        .unwrap_or(Run {
            moves: vec![],
            loads,
            left: (0, 0),
        });
    Ok(Balanced {
        after: Spread::of(&best.loads, &brokers),
        within_tolerance: best.left == (0, 0),
        planned: Planned::new(kind, best.moves, left_out)?,
        bounds,
        before,
    })
}

/// One greedy run from `loads`, ranking candidates by `rank`.
fn greedy(model: &ClusterModel, brokers: &[i32], bounds: &Bounds, mut loads: Loads, rank: Rank) -> Run {
    let bounds = *bounds;
    let count: u64 = brokers.iter().map(|b| loads.broker_count(*b)).sum();
    let racks = model.racks_exist();
    let in_set: BTreeSet<i32> = brokers.iter().copied().collect();
    // Movable replicas per broker, smallest first: (bytes, partition index).
    let mut hosted: HashMap<i32, BTreeSet<(u64, usize)>> = HashMap::new();
    for (i, p) in model.partitions.iter().enumerate().filter(|(_, p)| !p.moving) {
        for r in p.replicas.iter().filter(|r| in_set.contains(&r.broker)) {
            hosted.entry(r.broker).or_default().insert((p.bytes, i));
        }
    }
    let mut current: HashMap<usize, Vec<Replica>> = HashMap::new();
    let mut order: Vec<usize> = Vec::new();
    // Each accepted move lowers the imbalance, so the loop ends; the bound is a backstop.
    let mut budget = 2 * count + 16;
    let mut now = imbalance(&loads, brokers, &bounds);
    while now != (0, 0) && budget > 0 {
        budget -= 1;
        let score = |b: &i32| {
            let rel = |v: u64, hi: u64| v as f64 / hi.max(1) as f64;
            rel(loads.broker_count(*b), bounds.count_hi) + rel(loads.broker_bytes(*b), bounds.bytes_hi)
        };
        let mut by_load = brokers.to_vec();
        by_load.sort_by(|a, b| score(b).total_cmp(&score(a)).then(a.cmp(b)));
        // The best move between the most and the least loaded few: the fewest replicas left
        // outside the band, then by `rank`.
        let key = |(i, after): Pick| {
            let size = model.partitions[i].bytes;
            let second = match rank {
                Rank::LeastLeft => (after.1 as f64, size as f64),
                Rank::MostPerByte => (-(now.1.saturating_sub(after.1) as f64 / size.max(1) as f64), 0.0),
            };
            (after.0, second)
        };
        let better = |a: (u64, (f64, f64)), b: (u64, (f64, f64))| {
            a.0 < b.0 || (a.0 == b.0 && (a.1 .0 < b.1 .0 || (a.1 .0 == b.1 .0 && a.1 .1 < b.1 .1)))
        };
        let ends = by_load.len().min(PAIR_ENDS);
        let mut found: Option<(i32, i32, Pick)> = None;
        for src in &by_load[..ends] {
            for dst in by_load.iter().rev().take(ends).filter(|d| *d != src) {
                for pick in pick_replica(model, racks, &loads, &bounds, &hosted, &current, *src, *dst, now) {
                    if found.is_none_or(|(_, _, f)| better(key(pick), key(f))) {
                        found = Some((*src, *dst, pick));
                    }
                }
            }
        }
        let Some((src, dst, (i, after))) = found else { break };
        let p = &model.partitions[i];
        let reps = current.entry(i).or_insert_with(|| {
            order.push(i);
            p.replicas.clone()
        });
        let at = reps.iter().position(|r| r.broker == src).unwrap_or(0);
        let dir = loads.pick_dir(model, dst, None).unwrap_or(super::model::DirId::ANY);
        loads.remove(reps[at], p.bytes);
        reps[at] = Replica::new(dst, dir);
        loads.add(reps[at], p.bytes);
        if let Some(set) = hosted.get_mut(&src) {
            set.remove(&(p.bytes, i));
        }
        hosted.entry(dst).or_default().insert((p.bytes, i));
        now = after;
    }
    let moves = order
        .into_iter()
        .filter_map(|i| {
            let p = &model.partitions[i];
            let to = current.remove(&i)?;
            let same: BTreeSet<i32> = to.iter().map(|r| r.broker).collect();
            // A replica sent away and back is no move.
            (same != p.replicas.iter().map(|r| r.broker).collect()).then(|| move_to(p, to))
        })
        .collect();
    Run {
        moves,
        loads,
        left: now,
    }
}

/// Brokers at each end of the load order whose pairs a step compares.
const PAIR_ENDS: usize = 4;

/// Candidates looked at per direction of one broker pair: keeps a pass over a broker holding
/// many replicas short; the smallest and the best-fitting come first anyway.
const SCAN: usize = 512;

/// The replicas worth moving from `src` to `dst`, each with the imbalance after: the smallest
/// that covers the bytes `src` holds over the band (or `dst` lacks under it), and the largest
/// below that; only moves that lower the imbalance, keep racks and find an open dir on `dst`.
#[allow(clippy::too_many_arguments)]
fn pick_replica(
    model: &ClusterModel,
    racks: bool,
    loads: &Loads,
    bounds: &Bounds,
    hosted: &HashMap<i32, BTreeSet<(u64, usize)>>,
    current: &HashMap<usize, Vec<Replica>>,
    src: i32,
    dst: i32,
    now: (u64, u64),
) -> Vec<Pick> {
    if model.open_dirs(dst).is_none() {
        return vec![];
    }
    let (sc, sb) = (loads.broker_count(src), loads.broker_bytes(src));
    let (dc, db) = (loads.broker_count(dst), loads.broker_bytes(dst));
    let need = sb
        .saturating_sub(bounds.bytes_hi)
        .max(bounds.bytes_lo.saturating_sub(db));
    let Some(set) = hosted.get(&src) else {
        return vec![];
    };
    let old = [bounds.outside(sc, sb), bounds.outside(dc, db)];
    let ok = |&(size, i): &(u64, usize)| -> Option<Pick> {
        let reps = current.get(&i).unwrap_or(&model.partitions[i].replicas);
        if reps.iter().any(|r| r.broker == dst) || !keeps_racks(model, racks, reps, src, dst) {
            return None;
        }
        let new = [
            bounds.outside(sc.saturating_sub(1), sb.saturating_sub(size)),
            bounds.outside(dc + 1, db.saturating_add(size)),
        ];
        let sum = |v: [(u64, u64); 2]| (v[0].0 + v[1].0, v[0].1.saturating_add(v[1].1));
        let (o, n) = (sum(old), sum(new));
        let after = (
            now.0.saturating_sub(o.0) + n.0,
            now.1.saturating_sub(o.1).saturating_add(n.1),
        );
        (after < now).then_some((i, after))
    };
    if need == 0 {
        return set.iter().take(SCAN).find_map(ok).into_iter().collect();
    }
    let covers = set.range((need, 0)..).take(SCAN).find_map(ok);
    let below = set.range(..(need, 0)).rev().take(SCAN).find_map(ok);
    covers.into_iter().chain(below).collect()
}

#[cfg(test)]
mod brute;

#[cfg(test)]
mod tests;
