use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::plan::cluster::ClusterBuilder;
use crate::plan::model::PlanState;
use crate::plan::Caps;

/// Six brokers in three racks, 30 partitions of replication factor 3 striped over them, sizes
/// 10 to 300.
fn racked() -> ClusterBuilder {
    let mut b = ClusterBuilder::new();
    for id in 1..=6 {
        let rack = ["a", "b", "c"][(id as usize - 1) % 3];
        b.broker(id, Some(rack), true, &[("/d1", false), ("/d2", false)]);
    }
    for p in 0..30u32 {
        let r: Vec<(i32, &str)> = (0..3).map(|k| (((p as i32 + k) % 6) + 1, "/d1")).collect();
        b.partition("t", p, r[0].0, 10 * (p as u64 + 1), &r);
    }
    b
}

fn racks_of(m: &ClusterModel, rs: &[Replica]) -> usize {
    m.distinct_racks(rs.iter().map(|r| r.broker))
}

#[test]
fn a_broker_drain_moves_every_replica_off_keeping_factor_and_racks_leaders_first() {
    let m = racked().build();
    let planned = drain_broker(&m, 1).expect("drains");
    let holding: BTreeSet<_> = m
        .partitions
        .iter()
        .filter(|p| p.replicas.iter().any(|r| r.broker == 1))
        .map(|p| p.partition)
        .collect();
    let moved: BTreeSet<_> = planned.moves.iter().map(|mv| mv.partition).collect();
    assert_eq!(moved, holding);
    let leads = |mv: &Move| {
        m.partitions
            .iter()
            .any(|p| p.partition == mv.partition && p.leader == 1)
    };
    let first_follower = planned
        .moves
        .iter()
        .position(|mv| !leads(mv))
        .unwrap_or(planned.moves.len());
    assert!(
        planned.moves[first_follower..].iter().all(|mv| !leads(mv)),
        "leaders first"
    );
    assert!(first_follower > 0);
    for mv in &planned.moves {
        assert_eq!(mv.to.len(), mv.from.len());
        assert!(mv.to.iter().all(|r| r.broker != 1));
        assert!(racks_of(&m, &mv.to) >= racks_of(&m, &mv.from), "{mv:?}");
        assert_eq!(mv.load().into.len(), 1);
    }
    assert_eq!(planned.summary.moves, holding.len() as u64);
    assert_eq!(
        planned.summary.bytes,
        planned.moves.iter().map(|m| m.bytes).sum::<u64>()
    );
}

#[test]
fn a_broker_drain_spreads_bytes_evenly_over_the_others() {
    // Broker 1 holds 40 partitions of sizes 1..=40; brokers 2 to 5 hold nothing.
    let mut b = ClusterBuilder::new();
    for id in 1..=5 {
        b.broker(id, None, true, &[]);
    }
    for p in 0..40u32 {
        b.partition("t", p, 1, u64::from(p) + 1, &[(1, "")]);
    }
    let m = b.build();
    let planned = drain_broker(&m, 1).expect("drains");
    let mut got: BTreeMap<i32, u64> = BTreeMap::new();
    for mv in &planned.moves {
        *got.entry(mv.to[0].broker).or_default() += mv.bytes;
    }
    let (lo, hi) = (got.values().min().copied(), got.values().max().copied());
    assert_eq!(got.len(), 4);
    // Largest first onto the emptiest: the spread is at most one partition.
    assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 40), "{got:?}");
}

#[test]
fn nothing_goes_to_a_cordoned_or_down_broker_or_a_cordoned_dir() {
    let mut b = racked();
    b.cordon_broker(2).cordon_dir(3, "/d1");
    b.broker(4, Some("a"), false, &[("/d1", false)]);
    let m = b.build();
    let d2 = m.dir_id(3, "/d2").expect("known");
    let planned = drain_broker(&m, 1).expect("drains");
    for mv in &planned.moves {
        for r in mv.load().into {
            assert!(r != 2 && r != 4, "{mv:?}");
        }
        for r in mv
            .to
            .iter()
            .filter(|r| r.broker == 3 && !mv.from.iter().any(|f| f.broker == 3))
        {
            assert_eq!(r.dir, d2);
        }
    }
}

#[test]
fn a_drain_that_cannot_be_done_names_the_broker_and_the_partition() {
    let mut b = ClusterBuilder::new();
    for id in 1..=3 {
        b.broker(id, None, true, &[]);
    }
    b.partition("orders", 0, 1, 5, &[(1, ""), (2, ""), (3, "")]);
    let err = drain_broker(&b.build(), 3).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("broker 3") && msg.contains("orders-0"), "{msg}");
    assert_eq!(err.refusal().code, proto::errors::ErrorCode::INVALID_REPLICATION_FACTOR);
    let err = drain_broker(&b.build(), 9).unwrap_err();
    assert!(err.to_string().starts_with("broker: broker 9"), "{err}");
}

#[test]
fn a_partition_moving_by_hand_is_left_out_and_counted() {
    let mut b = racked();
    b.partition("u", 0, 1, 7, &[(1, ""), (2, ""), (3, "")]).moving();
    let m = b.build();
    let planned = drain_broker(&m, 1).expect("drains");
    assert_eq!(planned.summary.left_out, 1);
    assert!(planned.moves.iter().all(|mv| m.names.topic(mv.partition) != "u"));
}

#[test]
fn a_dir_drain_moves_its_replicas_to_the_other_open_dirs_evenly() {
    let mut b = ClusterBuilder::new();
    b.broker(
        1,
        None,
        true,
        &[("/a", false), ("/b", false), ("/c", false), ("/x", false)],
    );
    b.broker(2, None, true, &[("/a", false)]);
    b.cordon_dir(1, "/x");
    for p in 0..12u32 {
        b.partition("t", p, 1, 10, &[(1, "/a"), (2, "/a")]);
    }
    b.partition("t", 12, 2, 10, &[(2, "/a"), (1, "/b")]);
    let m = b.build();
    let (a, bb, c) = (m.dir_id(1, "/a"), m.dir_id(1, "/b"), m.dir_id(1, "/c"));
    let planned = drain_dir(&m, 1, "/a").expect("drains");
    assert_eq!(planned.moves.len(), 12);
    assert_eq!(planned.summary.dir_moves, 12);
    let mut per_dir: BTreeMap<DirId, u64> = BTreeMap::new();
    for mv in &planned.moves {
        assert_eq!(mv.load().dir, vec![1]);
        assert!(mv.load().into.is_empty() && mv.load().out.is_empty());
        let r = mv.to.iter().find(|r| r.broker == 1).expect("kept");
        assert_ne!(Some(r.dir), a);
        *per_dir.entry(r.dir).or_default() += 1;
        // Broker 2's replica stays where it is.
        assert_eq!(
            mv.to.iter().find(|r| r.broker == 2),
            mv.from.iter().find(|r| r.broker == 2)
        );
    }
    // /b starts with one partition: the two end within one partition of each other; /x is
    // cordoned and gets nothing.
    let held = |d: Option<DirId>, before: u64| (before + per_dir.get(&d.expect("known")).copied().unwrap_or(0)) * 10;
    assert!(held(bb, 1).abs_diff(held(c, 0)) <= 10, "{per_dir:?}");
    assert_eq!(per_dir.len(), 2);
}

#[test]
fn a_dir_drain_with_no_other_open_dir_or_an_unknown_dir_is_refused() {
    let mut b = ClusterBuilder::new();
    b.broker(1, None, true, &[("/a", false), ("/b", true)]);
    let m = b.build();
    let err = drain_dir(&m, 1, "/a").unwrap_err();
    assert!(err.to_string().contains("no other log dir"), "{err}");
    let err = drain_dir(&m, 1, "/zz").unwrap_err();
    assert!(err.to_string().contains("'/zz'"), "{err}");
    assert_eq!(err.refusal().code, proto::errors::ErrorCode::LOG_DIR_NOT_FOUND);
}

#[test]
fn undrain_drops_the_moves_not_started_and_only_for_its_own_drain() {
    let m = racked().build();
    let planned = drain_broker(&m, 1).expect("drains");
    let n = planned.moves.len();
    let mut plan = planned
        .into_plan(3, Caps::default(), 0, m.names.clone())
        .expect("valid");
    plan.moves[0].state = MoveState::Running { since: 1 };
    assert!(undrain(&mut plan, 2, None)
        .unwrap_err()
        .to_string()
        .contains("not a drain of broker 2"));
    let dropped = undrain(&mut plan, 1, None).expect("its drain");
    assert_eq!(dropped, (1..n as u32).collect::<Vec<_>>());
    assert!(plan.moves[1..]
        .iter()
        .all(|m| m.state == MoveState::Skipped(Reason::Undrained)));
    assert!(matches!(plan.moves[0].state, MoveState::Running { .. }));
    assert_eq!(plan.state, PlanState::Running);
}

#[test]
fn a_drain_of_100000_partitions_plans_and_stores_compactly() {
    // 10 brokers in 5 racks with 100,000 partitions of replication factor 3, a third of them
    // on broker 0: about 30,000 moves.
    let mut b = ClusterBuilder::new();
    for id in 0..10 {
        let rack = ["a", "b", "c", "d", "e"][id as usize % 5];
        b.broker(id, Some(rack), true, &[("/d1", false), ("/d2", false)]);
    }
    for p in 0..100_000u32 {
        let first = (p % 10) as i32;
        let rs = [(first, "/d1"), ((first + 1) % 10, "/d2"), ((first + 2) % 10, "/d1")];
        b.partition("t", p, first, 1 << 20, &rs);
    }
    let m = b.build();
    let started = std::time::Instant::now();
    let planned = drain_broker(&m, 0).expect("drains");
    let took = started.elapsed();
    assert_eq!(planned.moves.len(), 30_000);
    let plan = planned
        .into_plan(1, Caps::default(), 0, m.names.clone())
        .expect("valid");
    let bytes = plan.encode();
    // Each stored move: partition, two replica lists of three, bytes and state.
    assert!(
        bytes.len() / plan.moves.len() <= 40,
        "{} bytes per move",
        bytes.len() / plan.moves.len()
    );
    assert_eq!(Plan::decode(&bytes).expect("decodes"), plan);
    eprintln!(
        "drain of 100,000 partitions: {} moves planned in {took:?}, {} bytes stored ({} per move)",
        plan.moves.len(),
        bytes.len(),
        bytes.len() / plan.moves.len()
    );
}
