//! What a planner hands back: the moves and a summary for the dry run (count, bytes, and the
//! expected time at a throttle rate).

use std::collections::HashMap;

use super::caps::Caps;
use super::error::PlanError;
use super::model::{Move, Names, Plan, PlanKind, PlanState, MAX_PLAN_MOVES};

/// A dry run's numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Moves in the plan.
    pub moves: u64,
    /// Of them, moves that change brokers.
    pub broker_moves: u64,
    /// Of them, moves between the dirs of a broker only.
    pub dir_moves: u64,
    /// Bytes copied in all.
    pub bytes: u64,
    /// Bytes copied into (or between the dirs of) the busiest broker: a throttle is a rate per
    /// broker, so this broker sets the plan's length.
    pub busiest_broker_bytes: u64,
    /// Partitions the planner left out because a reassignment already moves them.
    pub left_out: u64,
}

impl Summary {
    /// The numbers of `moves`.
    pub fn of(moves: &[Move], left_out: u64) -> Summary {
        let mut per_broker: HashMap<i32, u64> = HashMap::new();
        let mut s = Summary {
            left_out,
            ..Default::default()
        };
        for m in moves {
            let load = m.load();
            s.moves += 1;
            s.bytes = s.bytes.saturating_add(m.bytes);
            if load.into.is_empty() && load.out.is_empty() {
                s.dir_moves += 1;
            } else {
                s.broker_moves += 1;
            }
            // `bytes` counts each copied replica once; each broker receiving one gets its share.
            let copies = (load.into.len() + load.dir.len()).max(1) as u64;
            for b in load.into.iter().chain(&load.dir) {
                let e = per_broker.entry(*b).or_default();
                *e = e.saturating_add(m.bytes / copies);
            }
        }
        s.busiest_broker_bytes = per_broker.values().copied().max().unwrap_or(0);
        s
    }

    /// Seconds the plan takes at `rate` bytes/s per broker (rounded up), `None` without a
    /// throttle (its speed is then the disks' and the network's).
    pub fn expected_secs(&self, rate: u64) -> Option<u64> {
        (rate > 0).then(|| self.busiest_broker_bytes.div_ceil(rate))
    }
}

/// A planner's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// What was planned.
    pub kind: PlanKind,
    /// The moves, in the order they are to start.
    pub moves: Vec<Move>,
    /// Their numbers.
    pub summary: Summary,
}

impl Planned {
    /// The moves and their summary.
    pub fn new(kind: PlanKind, moves: Vec<Move>, left_out: u64) -> Result<Planned, PlanError> {
        if moves.len() > MAX_PLAN_MOVES {
            return Err(PlanError::TooManyMoves { moves: moves.len() });
        }
        let summary = Summary::of(&moves, left_out);
        Ok(Planned { kind, moves, summary })
    }

    /// The plan to store, running, checked.
    pub fn into_plan(self, id: u64, caps: Caps, throttle_rate: u64, names: Names) -> Result<Plan, PlanError> {
        let plan = Plan {
            id,
            kind: self.kind,
            caps,
            throttle_rate,
            state: PlanState::Running,
            names,
            moves: self.moves,
        };
        plan.check()?;
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testkit::mv;

    #[test]
    fn the_busiest_broker_sets_the_expected_time() {
        let mut a = mv(0, &[1], &[2]);
        a.bytes = 300;
        let mut b = mv(1, &[1], &[2]);
        b.bytes = 100;
        let mut c = mv(2, &[1], &[3]);
        c.bytes = 50;
        let s = Summary::of(&[a, b, c], 2);
        assert_eq!((s.moves, s.bytes, s.broker_moves, s.left_out), (3, 450, 3, 2));
        assert_eq!(s.busiest_broker_bytes, 400);
        assert_eq!(s.expected_secs(100), Some(4));
        assert_eq!(s.expected_secs(0), None);
    }
}
