use std::collections::BTreeMap;

use proptest::prelude::*;

use super::brute::minimal_bytes;
use super::*;
use crate::plan::cluster::ClusterBuilder;

/// Per broker (replicas, bytes) once `moves` are applied to `model`.
fn after_moves(model: &ClusterModel, planned: &Planned) -> BTreeMap<i32, (u64, u64)> {
    let mut out: BTreeMap<i32, (u64, u64)> = model.brokers.keys().map(|b| (*b, (0, 0))).collect();
    for p in &model.partitions {
        let to = planned
            .moves
            .iter()
            .find(|m| m.partition == p.partition)
            .map_or(p.replicas.clone(), |m| m.to.to_vec());
        for r in to {
            let e = out.entry(r.broker).or_default();
            e.0 += 1;
            e.1 += p.bytes;
        }
    }
    out
}

fn skewed() -> ClusterBuilder {
    let mut b = ClusterBuilder::new();
    for id in 1..=4 {
        b.broker(id, Some(if id % 2 == 0 { "b" } else { "a" }), true, &[("/d", false)]);
    }
    // Every partition on brokers 1 and 2 (racks a and b); 3 and 4 empty.
    for p in 0..20u32 {
        b.partition("t", p, 1, u64::from(p % 5 + 1) * 100, &[(1, "/d"), (2, "/d")]);
    }
    b
}

#[test]
fn a_skewed_cluster_ends_within_tolerance_keeping_racks() {
    let m = skewed().build();
    let got = balance(&m, 10).expect("valid");
    assert!(got.within_tolerance, "{got:?}");
    let loads = after_moves(&m, &got.planned);
    for (b, (count, bytes)) in &loads {
        assert_eq!(
            got.bounds.outside(*count, *bytes),
            (0, 0),
            "broker {b}: {count} replicas, {bytes} bytes"
        );
    }
    assert_eq!(got.after.max_count, loads.values().map(|v| v.0).max().unwrap_or(0));
    for mv in &got.planned.moves {
        assert!(m.distinct_racks(mv.to.iter().map(|r| r.broker)) >= 2, "{mv:?}");
    }
    assert_eq!(got.before.max_count, 20);
    assert_eq!(got.planned.kind, PlanKind::Balance { tolerance_pct: 10 });
}

#[test]
fn a_cordoned_broker_gets_nothing_and_a_balanced_cluster_no_moves() {
    let mut b = skewed();
    b.cordon_broker(4);
    let m = b.build();
    let got = balance(&m, 10).expect("valid");
    assert!(!got.planned.moves.is_empty());
    assert!(got.planned.moves.iter().all(|mv| mv.to.iter().all(|r| r.broker != 4)));
    // Broker 2 is the only one in rack b, so it keeps a replica of every partition and the
    // band cannot be reached; the plan still evens out what it can.
    assert!(!got.within_tolerance);
    assert!(got.after.max_count - got.after.min_count < got.before.max_count - got.before.min_count);
    // Applied, the plan leaves nothing more to do.
    let mut again = ClusterBuilder::new();
    for id in 1..=3 {
        again.broker(id, Some(if id % 2 == 0 { "b" } else { "a" }), true, &[]);
    }
    for p in &m.partitions {
        let to = got
            .planned
            .moves
            .iter()
            .find(|mv| mv.partition == p.partition)
            .map_or(p.replicas.clone(), |mv| mv.to.to_vec());
        let rs: Vec<(i32, &str)> = to.iter().map(|r| (r.broker, "")).collect();
        again.partition("t", p.partition.partition, rs[0].0, p.bytes, &rs);
    }
    let settled = balance(&again.build(), 10).expect("valid");
    assert!(settled.planned.moves.is_empty(), "{:?}", settled.planned.moves);
}

#[test]
fn a_tolerance_out_of_range_is_refused_by_name() {
    let m = skewed().build();
    for bad in [-1, 101] {
        let err = balance(&m, bad).unwrap_err();
        assert!(err.to_string().starts_with("tolerance_pct"), "{err}");
    }
}

/// A tiny random cluster from a seed: 3 or 4 brokers (in two racks or none), up to 6
/// partitions of replication factor 1 or 2 and sizes 1 to 100.
fn tiny(seed: u64) -> (ClusterModel, i64) {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407) | 1;
    let mut next = |n: u64| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s % n
    };
    let brokers = 3 + next(2) as i32;
    let racked = next(2) == 0;
    let mut b = ClusterBuilder::new();
    for id in 0..brokers {
        let rack = ["a", "b"][id as usize % 2];
        b.broker(id, racked.then_some(rack), true, &[]);
    }
    let parts = 2 + next(5) as u32;
    for p in 0..parts {
        let rf = 1 + next(2) as i32;
        // Skewed: replicas mostly on the first brokers.
        let first = next(2) as i32;
        let rs: Vec<(i32, &str)> = (0..rf).map(|k| ((first + k) % brokers, "")).collect();
        b.partition("t", p, rs[0].0, 1 + next(100), &rs);
    }
    let tolerance = [10, 25, 50][next(3) as usize];
    (b.build(), tolerance)
}

/// The greedy plan against the minimal one over 2,000 tiny clusters. Stated bounds: where both
/// balance, the greedy copies at most twice the minimal bytes, and it balances at least 90% of
/// the clusters brute force can balance. Measured when written: worst 1.66, mean 1.03, 860 of
/// 917 balanced (the run prints its own figures).
#[test]
fn greedy_bytes_stay_within_a_stated_factor_of_the_minimum() {
    const FACTOR: f64 = 2.0;
    let (mut feasible, mut reached, mut worst, mut sum, mut worst_seed) = (0u32, 0u32, 1.0f64, 0.0f64, 0);
    for seed in 0..2000 {
        let (m, tol) = tiny(seed);
        let got = balance(&m, tol).expect("valid");
        let Some(min) = minimal_bytes(&m, &got.bounds) else {
            assert!(
                !got.within_tolerance,
                "seed {seed}: greedy balanced what brute force could not"
            );
            continue;
        };
        feasible += 1;
        if !got.within_tolerance {
            continue;
        }
        reached += 1;
        let bytes = got.planned.summary.bytes;
        assert!(bytes >= min, "seed {seed}: greedy {bytes} below the minimum {min}");
        let ratio = if min == 0 { 1.0 } else { bytes as f64 / min as f64 };
        assert!(ratio <= FACTOR, "seed {seed}: greedy {bytes} bytes, minimum {min}");
        if ratio > worst {
            worst = ratio;
            worst_seed = seed;
        }
        sum += ratio;
    }
    eprintln!(
        "greedy vs minimal: {feasible} balanceable cases, greedy balanced {reached}; bytes ratio worst {worst:.2} (seed {worst_seed}), mean {:.3}",
        sum / f64::from(reached.max(1))
    );
    assert!(
        feasible > 0 && reached * 10 >= feasible * 9,
        "greedy balanced only {reached} of {feasible}"
    );
}

proptest! {
    #[test]
    fn a_balance_never_breaks_racks_or_cordons_and_reports_what_it_leaves(seed in any::<u64>(), cordon in 0..4i32) {
        let (mut m, tol) = tiny(seed);
        m.cordons.brokers.insert(cordon);
        let got = balance(&m, tol).expect("valid");
        let loads = after_moves(&m, &got.planned);
        for mv in &got.planned.moves {
            prop_assert!(mv.load().into.iter().all(|b| *b != cordon));
            prop_assert_eq!(mv.to.len(), mv.from.len());
            if m.racks_exist() {
                prop_assert!(m.distinct_racks(mv.to.iter().map(|r| r.broker)) >= m.distinct_racks(mv.from.iter().map(|r| r.broker)));
            }
        }
        let open = balance_brokers(&m);
        let inside = open.iter().all(|b| got.bounds.outside(loads[b].0, loads[b].1) == (0, 0));
        prop_assert_eq!(inside, got.within_tolerance);
    }
}
