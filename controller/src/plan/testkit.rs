//! Test support: plans built from broker lists, and a simulated cluster that runs a plan's
//! starts, completions and rollbacks the way the stored partition states would show them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::caps::Caps;
use super::model::{DirId, Load, Move, MoveState, Names, PartitionRef, Plan, PlanKind, PlanState, Replica};
use super::schedule::{InFlight, Observed, PartitionNow, Step};

/// Partition `p` of topic 0.
pub fn part(p: u32) -> PartitionRef {
    PartitionRef { topic: 0, partition: p }
}

/// Replicas on `brokers`, dirs not named.
pub fn on(brokers: &[i32]) -> Box<[Replica]> {
    brokers.iter().map(|b| Replica::new(*b, DirId::ANY)).collect()
}

/// A queued move of partition `p`.
pub fn mv(p: u32, from: &[i32], to: &[i32]) -> Move {
    Move {
        partition: part(p),
        from: on(from),
        to: on(to),
        bytes: 1,
        state: MoveState::Queued,
    }
}

/// A running balance plan of `moves` under `caps`.
pub fn plan_of(moves: Vec<Move>, caps: Caps) -> Plan {
    Plan {
        id: 1,
        kind: PlanKind::Balance { tolerance_pct: 10 },
        caps,
        throttle_rate: 0,
        state: PlanState::Running,
        names: Names {
            topics: vec!["t".into()],
            dirs: vec![],
        },
        moves,
    }
}

/// Moves in flight per broker: into, out of, between dirs; and in the cluster.
pub type Counted = (HashMap<i32, u32>, HashMap<i32, u32>, HashMap<i32, u32>, u32);

/// A cluster whose partitions follow what the driver would submit.
#[derive(Debug, Clone, Default)]
pub struct Sim {
    /// Bumped by every change.
    pub revision: u64,
    /// Registered brokers.
    pub live: BTreeSet<i32>,
    /// Racks.
    pub racks: BTreeMap<i32, String>,
    /// Failed dirs.
    pub offline_dirs: BTreeSet<(i32, DirId)>,
    /// The plan's partitions.
    pub parts: HashMap<PartitionRef, PartitionNow>,
    /// Moves outside the plan.
    pub foreign: Vec<Load>,
}

impl Sim {
    /// Brokers `brokers` live, and each move's partition on its `from`, all in sync.
    pub fn new(brokers: impl IntoIterator<Item = i32>, plan: &Plan, min_insync: u16) -> Sim {
        let mut sim = Sim {
            revision: 1,
            live: brokers.into_iter().collect(),
            ..Default::default()
        };
        for m in &plan.moves {
            sim.parts.insert(
                m.partition,
                PartitionNow {
                    replicas: m.from.to_vec(),
                    isr: m.from.iter().map(|r| r.broker).collect(),
                    min_insync,
                    moving: None,
                },
            );
        }
        sim
    }

    /// The view a driver would read now.
    pub fn observe(&self) -> Observed {
        Observed {
            revision: self.revision,
            live_brokers: self.live.clone(),
            racks: self.racks.clone(),
            offline_dirs: self.offline_dirs.clone(),
            partitions: self.parts.clone(),
            foreign: self.foreign.clone(),
        }
    }

    /// Submits a reassignment of `p` to `to`, as the driver or someone by hand would.
    pub fn submit(&mut self, p: PartitionRef, to: &[Replica]) {
        let Some(now) = self.parts.get_mut(&p) else { return };
        let as_move = Move {
            partition: p,
            from: now.replicas.clone().into(),
            to: to.into(),
            bytes: 0,
            state: MoveState::Queued,
        };
        now.moving = Some(InFlight {
            target: to.iter().map(|r| r.broker).collect(),
            load: as_move.load(),
        });
        self.revision += 1;
    }

    /// Does what a step asks: submits its starts and cancels its rollbacks.
    pub fn apply(&mut self, plan: &Plan, step: &Step) {
        for s in &step.start {
            self.submit(s.partition, &plan.moves[s.index as usize].to);
        }
        for p in &step.roll_back {
            self.cancel(*p);
        }
    }

    /// Cancels `p`'s reassignment: it keeps its replicas.
    pub fn cancel(&mut self, p: PartitionRef) {
        if let Some(now) = self.parts.get_mut(&p) {
            if now.moving.take().is_some() {
                self.revision += 1;
            }
        }
    }

    /// Completes `p`'s reassignment if every target broker is live (in sync); returns whether
    /// it did.
    pub fn complete(&mut self, p: PartitionRef, plan: &Plan) -> bool {
        let live = &self.live;
        let Some(now) = self.parts.get_mut(&p) else {
            return false;
        };
        let Some(f) = &now.moving else { return false };
        if !f.target.iter().all(|b| live.contains(b)) {
            return false;
        }
        // The plan's move names the dirs; a move by hand names none.
        let to: Vec<Replica> = match plan.moves.iter().find(|m| m.partition == p) {
            Some(m) if f.target == m.to.iter().map(|r| r.broker).collect::<Vec<_>>() => m.to.to_vec(),
            _ => f.target.iter().map(|b| Replica::new(*b, DirId::ANY)).collect(),
        };
        now.isr = to.iter().map(|r| r.broker).collect();
        now.replicas = to;
        now.moving = None;
        self.revision += 1;
        true
    }

    /// Moves in flight per broker (into, out, dir) and in the cluster.
    pub fn counts(&self) -> Counted {
        let mut c = (HashMap::new(), HashMap::new(), HashMap::new(), 0);
        let loads = self
            .parts
            .values()
            .filter_map(|n| n.moving.as_ref().map(|f| &f.load))
            .chain(self.foreign.iter());
        for l in loads {
            for b in &l.into {
                *c.0.entry(*b).or_default() += 1;
            }
            for b in &l.out {
                *c.1.entry(*b).or_default() += 1;
            }
            for b in &l.dir {
                *c.2.entry(*b).or_default() += 1;
            }
            c.3 += 1;
        }
        c
    }
}
