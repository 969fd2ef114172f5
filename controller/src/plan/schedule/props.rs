//! Properties of the scheduler over any sequence of passes, completions, brokers dying and
//! coming back, pauses and moves by hand, on the simulated cluster.

use std::collections::HashSet;

use proptest::prelude::*;

use super::*;
use crate::plan::testkit::{on, part, plan_of, Sim};

const BROKERS: i32 = 6;

#[derive(Debug, Clone)]
enum Op {
    /// One pass, its starts and rollbacks applied.
    Pass,
    /// Two passes over the same view, then the second's actions applied.
    PassTwice,
    /// Completes the moves in flight picked by the mask (whoever started them).
    Complete(u32),
    Kill(i32),
    Revive(i32),
    Pause,
    Resume,
    /// A reassignment by hand of a partition (by index) to one broker.
    ByHand(u32, i32),
    /// A move outside the plan into one broker starts.
    Foreign(i32, i32),
    /// The moves outside the plan end.
    ForeignEnd,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => Just(Op::Pass),
        2 => Just(Op::PassTwice),
        5 => any::<u32>().prop_map(Op::Complete),
        1 => (0..BROKERS).prop_map(Op::Kill),
        2 => (0..BROKERS).prop_map(Op::Revive),
        1 => Just(Op::Pause),
        1 => Just(Op::Resume),
        1 => (0..24u32, 0..BROKERS).prop_map(|(p, b)| Op::ByHand(p, b)),
        1 => (0..BROKERS, 0..BROKERS).prop_map(|(i, o)| Op::Foreign(i, o)),
        1 => Just(Op::ForeignEnd),
    ]
}

/// A set of 1 to 3 distinct brokers.
fn brokers() -> impl Strategy<Value = Vec<i32>> {
    proptest::sample::subsequence((0..BROKERS).collect::<Vec<_>>(), 1..=3).prop_shuffle()
}

/// Each move's (from, to) brokers, the caps, and `min.insync.replicas`.
type Setup = (Vec<(Vec<i32>, Vec<i32>)>, Caps, u16);

fn setup() -> impl Strategy<Value = Setup> {
    let moves = proptest::collection::vec((brokers(), brokers()), 1..24);
    let caps = (1..4u32, 1..4u32, 1..3u32, 1..8u32).prop_map(|(i, o, d, c)| Caps {
        into_broker: i,
        out_of_broker: o,
        dir_moves_per_broker: d,
        cluster: c,
    });
    (moves, caps, 1..3u16)
}

/// Runs one pass and applies it, checking the caps for every broker a start touched and that
/// no move starts twice.
fn pass(plan: &mut Plan, sim: &mut Sim, started: &mut HashSet<u32>, twice: bool) -> Result<(), TestCaseError> {
    let view = sim.observe();
    let mut step = next_moves(plan, &view);
    if twice {
        let again = next_moves(plan, &view);
        prop_assert!(
            again.start.is_empty(),
            "a second pass over one view started {:?}",
            again.start
        );
        step.roll_back = again.roll_back;
    }
    for s in &step.start {
        prop_assert!(started.insert(s.index), "move {} started twice", s.index);
    }
    sim.apply(plan, &step);
    let (into, out, dir, cluster) = sim.counts();
    let caps = plan.caps;
    for s in &step.start {
        let load = plan.moves[s.index as usize].load();
        for b in &load.into {
            prop_assert!(into[b] <= caps.into_broker, "broker {b}: {} moves in", into[b]);
        }
        for b in &load.out {
            prop_assert!(out[b] <= caps.out_of_broker, "broker {b}: {} moves out", out[b]);
        }
        for b in &load.dir {
            prop_assert!(dir[b] <= caps.dir_moves_per_broker, "broker {b}: {} dir moves", dir[b]);
        }
        prop_assert!(cluster <= caps.cluster, "{cluster} moves in the cluster");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn caps_hold_nothing_starts_twice_and_every_move_ends((moves, caps, min_insync) in setup(), ops in proptest::collection::vec(op(), 0..60)) {
        let moves = moves
            .iter()
            .enumerate()
            .map(|(p, (from, to))| Move {
                partition: part(p as u32),
                from: on(from),
                to: on(to),
                bytes: 1,
                state: MoveState::Queued,
            })
            .collect();
        let mut plan = plan_of(moves, caps);
        let mut sim = Sim::new(0..BROKERS, &plan, min_insync);
        let mut started = HashSet::new();
        let mut by_hand = HashSet::new();
        for op in ops {
            match op {
                Op::Pass => pass(&mut plan, &mut sim, &mut started, false)?,
                Op::PassTwice => pass(&mut plan, &mut sim, &mut started, true)?,
                Op::Complete(mask) => {
                    let moving: Vec<PartitionRef> = {
                        let mut v: Vec<_> = sim.parts.iter().filter(|(_, n)| n.moving.is_some()).map(|(p, _)| *p).collect();
                        v.sort();
                        v
                    };
                    for (i, p) in moving.into_iter().enumerate() {
                        if mask & (1 << (i % 32)) != 0 {
                            sim.complete(p, &plan);
                        }
                    }
                }
                Op::Kill(b) => {
                    sim.live.remove(&b);
                    sim.revision += 1;
                }
                Op::Revive(b) => {
                    sim.live.insert(b);
                    sim.revision += 1;
                }
                Op::Pause => {
                    let _ = pause(&mut plan);
                }
                Op::Resume => {
                    let _ = resume(&mut plan);
                }
                Op::ByHand(p, b) => {
                    let p = part(p);
                    if sim.parts.get(&p).is_some_and(|n| n.moving.is_none()) {
                        sim.submit(p, &on(&[b]));
                        by_hand.insert(p);
                    }
                }
                Op::Foreign(i, o) => {
                    sim.foreign.push(Load { into: vec![i], out: vec![o], dir: vec![] });
                    sim.revision += 1;
                }
                Op::ForeignEnd => {
                    sim.foreign.clear();
                    sim.revision += 1;
                }
            }
        }
        // Everything recovers and every move in flight completes: the plan must end, each move
        // done or left out with a reason.
        sim.live.extend(0..BROKERS);
        sim.foreign.clear();
        sim.revision += 1;
        let _ = resume(&mut plan);
        let mut passes = 0;
        while !plan.state.is_terminal() {
            passes += 1;
            prop_assert!(passes <= 2 * plan.moves.len() + 4, "plan still {:?} after {passes} passes: {:?}", plan.state, plan.moves);
            pass(&mut plan, &mut sim, &mut started, false)?;
            let moving: Vec<PartitionRef> = sim.parts.iter().filter(|(_, n)| n.moving.is_some()).map(|(p, _)| *p).collect();
            for p in moving {
                prop_assert!(sim.complete(p, &plan));
            }
        }
        prop_assert_eq!(plan.state, PlanState::Done);
        for m in &plan.moves {
            match m.state {
                // A partition moved by hand after its move was done is where the hand put it.
                MoveState::Done if by_hand.contains(&m.partition) => {}
                MoveState::Done => {
                    let now = &sim.parts[&m.partition];
                    let mut have: Vec<i32> = now.replicas.iter().map(|r| r.broker).collect();
                    let mut want: Vec<i32> = m.to.iter().map(|r| r.broker).collect();
                    have.sort();
                    want.sort();
                    prop_assert_eq!(have, want);
                }
                MoveState::Skipped(r) => prop_assert!(!r.to_string().is_empty()),
                other => prop_assert!(false, "move ended {:?}", other),
            }
        }
    }
}
