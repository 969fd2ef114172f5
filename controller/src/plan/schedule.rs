//! The scheduler: from a plan and the cluster as observed, which moves start now, which end,
//! and which are rolled back. Level-triggered and idempotent: the driver calls
//! [`next_moves`] on every change it sees, writes the plan back, and submits the starts in the
//! same metastore transaction as the plan's new state, so that a move is either running and
//! visible, or neither, across any failover.
//!
//! Every reassignment in flight counts against the caps, whoever submitted it; each partition
//! completes on its own, and the slot it frees is refilled on the next call (no waves).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::caps::Caps;
use super::error::PlanError;
use super::model::{DirId, Load, Move, MoveState, PartitionRef, Plan, PlanState, Reason, Replica};

/// A reassignment in flight on a partition, as its state shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InFlight {
    /// Its target brokers (TRS).
    pub target: Vec<i32>,
    /// What it loads: `adding`, `removing`, and `dir_pending` brokers that are not adding.
    pub load: Load,
}

/// A plan partition as it is now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionNow {
    /// Its replicas (RS), with their dirs where known.
    pub replicas: Vec<Replica>,
    /// The ISR.
    pub isr: Vec<i32>,
    /// The topic's `min.insync.replicas`.
    pub min_insync: u16,
    /// Its reassignment, whoever submitted it.
    pub moving: Option<InFlight>,
}

/// The cluster as observed at one revision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// The metastore revision the view was read at.
    pub revision: u64,
    /// Registered brokers.
    pub live_brokers: BTreeSet<i32>,
    /// Each broker's rack, for those that have one.
    pub racks: BTreeMap<i32, String>,
    /// Failed dirs.
    pub offline_dirs: BTreeSet<(i32, DirId)>,
    /// The partitions of the plan's moves that may still change; one of those missing here was
    /// deleted.
    pub partitions: HashMap<PartitionRef, PartitionNow>,
    /// Reassignments in flight on partitions outside the plan.
    pub foreign: Vec<Load>,
}

/// A move to submit now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoveStart {
    /// Its index in [`Plan::moves`].
    pub index: u32,
    /// Its partition.
    pub partition: PartitionRef,
}

/// What the driver does after one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    /// Moves to submit, in the same write as the plan.
    pub start: Vec<MoveStart>,
    /// The plan's reassignments to cancel (a cancelled plan, or a move that failed).
    pub roll_back: Vec<PartitionRef>,
}

/// Moves in flight per broker and in the cluster.
#[derive(Debug, Default)]
struct Counts {
    into: HashMap<i32, u32>,
    out: HashMap<i32, u32>,
    dir: HashMap<i32, u32>,
    cluster: u32,
}

impl Counts {
    fn add(&mut self, load: &Load) {
        for (map, brokers) in [
            (&mut self.into, &load.into),
            (&mut self.out, &load.out),
            (&mut self.dir, &load.dir),
        ] {
            for b in brokers {
                *map.entry(*b).or_default() += 1;
            }
        }
        self.cluster += 1;
    }

    /// Whether one more move with `load` stays within `caps`.
    fn fits(&self, load: &Load, caps: &Caps) -> bool {
        let under = |map: &HashMap<i32, u32>, brokers: &[i32], cap: u32| {
            brokers.iter().all(|b| map.get(b).copied().unwrap_or(0) < cap)
        };
        self.cluster < caps.cluster
            && under(&self.into, &load.into, caps.into_broker)
            && under(&self.out, &load.out, caps.out_of_broker)
            && under(&self.dir, &load.dir, caps.dir_moves_per_broker)
    }
}

fn same_brokers(a: impl IntoIterator<Item = i32>, b: impl IntoIterator<Item = i32>) -> bool {
    let a: BTreeSet<i32> = a.into_iter().collect();
    let b: BTreeSet<i32> = b.into_iter().collect();
    a == b
}

/// Whether the partition, not moving, holds the move's target: its brokers, and each named dir.
fn at_target(now: &PartitionNow, m: &Move) -> bool {
    now.moving.is_none()
        && same_brokers(now.replicas.iter().map(|r| r.broker), m.to.iter().map(|r| r.broker))
        && m.to
            .iter()
            .filter(|t| t.dir.is_named())
            .all(|t| now.replicas.iter().any(|r| r.broker == t.broker && r.dir == t.dir))
}

/// Whether the partition moves toward the move's target (the plan's own reassignment).
fn moving_to_target(now: &PartitionNow, m: &Move) -> bool {
    now.moving
        .as_ref()
        .is_some_and(|f| same_brokers(f.target.iter().copied(), m.to.iter().map(|r| r.broker)))
}

/// What a queued move may do now.
enum Verdict {
    Ready,
    Done,
    Skip(Reason),
    Wait(Reason),
}

/// Checks a move not started yet against the partition now: left out for good (moved or
/// changed by hand, gone, unsafe) or waiting (a broker down, a dir offline, an ISR too small).
fn check(m: &Move, now: Option<&PartitionNow>, obs: &Observed) -> Verdict {
    let Some(now) = now else {
        return Verdict::Skip(Reason::PartitionGone);
    };
    if now.moving.is_some() {
        return Verdict::Skip(Reason::MovedByHand);
    }
    if at_target(now, m) {
        return Verdict::Done;
    }
    let dir_changed = m.from.iter().any(|f| {
        now.replicas
            .iter()
            .any(|r| r.broker == f.broker && r.dir.is_named() && f.dir.is_named() && r.dir != f.dir)
    });
    if dir_changed || !same_brokers(now.replicas.iter().map(|r| r.broker), m.from.iter().map(|r| r.broker)) {
        return Verdict::Skip(Reason::ChangedByHand);
    }
    let min = now.min_insync;
    if m.to.len() < usize::from(min) {
        return Verdict::Skip(Reason::TargetBelowMin {
            replicas: m.to.len() as u16,
            min,
        });
    }
    if one_rack(&m.to, &obs.racks) {
        return Verdict::Skip(Reason::OneRack);
    }
    if let Some(r) = m.to.iter().find(|r| !obs.live_brokers.contains(&r.broker)) {
        return Verdict::Wait(Reason::BrokerDown(r.broker));
    }
    if let Some(r) = m.to.iter().find(|r| obs.offline_dirs.contains(&(r.broker, r.dir))) {
        return Verdict::Wait(Reason::DirOffline(r.broker, r.dir));
    }
    // A replica that fell behind leaves the ISR short for a while: no replica goes until it is
    // back. A partition with fewer replicas than the minimum never gets there, and its move is
    // the cure, so it goes on.
    if m.removes() && now.isr.len() < usize::from(min) && now.replicas.len() >= usize::from(min) {
        return Verdict::Wait(Reason::IsrBelowMin {
            isr: now.isr.len().min(usize::from(u16::MAX)) as u16,
            min,
        });
    }
    Verdict::Ready
}

/// Whether racks exist (two or more among the brokers) and every replica of `to` (two or
/// more, each with a rack) is in one of them.
fn one_rack(to: &[Replica], racks: &BTreeMap<i32, String>) -> bool {
    let distinct: BTreeSet<&String> = racks.values().collect();
    if distinct.len() < 2 || to.len() < 2 {
        return false;
    }
    let mut used = BTreeSet::new();
    for r in to {
        match racks.get(&r.broker) {
            Some(rack) => {
                used.insert(rack);
            }
            None => return false,
        }
    }
    used.len() == 1
}

/// Where a started move stands, judged from a view after it was started.
fn judge_running(m: &Move, now: Option<&PartitionNow>, obs: &Observed, cancelling: bool) -> (MoveState, bool) {
    let Some(now) = now else {
        return (MoveState::Skipped(Reason::PartitionGone), false);
    };
    if moving_to_target(now, m) {
        if let Some(r) = m.to.iter().find(|r| obs.offline_dirs.contains(&(r.broker, r.dir))) {
            return (MoveState::Failed(Reason::DirOffline(r.broker, r.dir)), true);
        }
        return (m.state, cancelling);
    }
    if now.moving.is_some() {
        return (MoveState::Skipped(Reason::SupersededByHand), false);
    }
    if at_target(now, m) {
        return (MoveState::Done, false);
    }
    let reason = if cancelling {
        Reason::RolledBack
    } else {
        Reason::CancelledByHand
    };
    (MoveState::Skipped(reason), false)
}

/// One scheduling pass: settles the moves in flight (done, rolled back, changed by hand,
/// failed), then starts queued moves in plan order while every cap has room, counting every
/// reassignment in flight. A paused plan starts nothing; a cancelling one rolls back what it
/// started. Calling it again over the same view starts nothing new: a move started from a view
/// counts as in flight until a later view shows it.
pub fn next_moves(plan: &mut Plan, obs: &Observed) -> Step {
    let mut step = Step::default();
    if plan.state.is_terminal() {
        return step;
    }
    let cancelling = plan.state == PlanState::Cancelling;
    let mut counts = Counts::default();
    for now in obs.partitions.values() {
        if let Some(f) = &now.moving {
            counts.add(&f.load);
        }
    }
    for load in &obs.foreign {
        counts.add(load);
    }
    // Settle what was started; a move started from this view or a later one is still in flight.
    for m in plan.moves.iter_mut() {
        let now = obs.partitions.get(&m.partition);
        match m.state {
            // Not visible yet: its own load counts (once visible, the observed one does).
            MoveState::Running { since } if obs.revision <= since && now.is_none_or(|n| n.moving.is_none()) => {
                counts.add(&m.load());
            }
            MoveState::Running { since } if obs.revision <= since => {}
            MoveState::Running { .. } => {
                let (state, roll_back) = judge_running(m, now, obs, cancelling);
                m.state = state;
                if roll_back {
                    step.roll_back.push(m.partition);
                }
            }
            MoveState::Failed(_) if now.is_some_and(|n| moving_to_target(n, m)) => {
                step.roll_back.push(m.partition);
            }
            MoveState::Queued | MoveState::Waiting(_) if cancelling => {
                m.state = MoveState::Skipped(Reason::Cancelled);
            }
            _ => {}
        }
    }
    if plan.state == PlanState::Running {
        for (index, m) in plan.moves.iter_mut().enumerate() {
            if !m.state.is_pending() {
                continue;
            }
            match check(m, obs.partitions.get(&m.partition), obs) {
                Verdict::Done => m.state = MoveState::Done,
                Verdict::Skip(r) => m.state = MoveState::Skipped(r),
                Verdict::Wait(r) => m.state = MoveState::Waiting(r),
                Verdict::Ready => {
                    let load = m.load();
                    if counts.fits(&load, &plan.caps) {
                        counts.add(&load);
                        m.state = MoveState::Running { since: obs.revision };
                        step.start.push(MoveStart {
                            index: index as u32,
                            partition: m.partition,
                        });
                    } else {
                        m.state = MoveState::Queued;
                    }
                }
            }
        }
    }
    // A failed move's rollback must be seen done before the plan ends, or a lost write of it
    // would never be retried.
    if step.roll_back.is_empty() {
        finish_if_ended(plan);
    }
    step
}

/// Ends the plan when no move can change any more.
fn finish_if_ended(plan: &mut Plan) {
    if plan.moves.iter().any(|m| !m.state.is_terminal()) {
        return;
    }
    plan.state = if plan.moves.iter().any(|m| matches!(m.state, MoveState::Failed(_))) {
        PlanState::Failed
    } else if plan.state == PlanState::Cancelling {
        PlanState::Cancelled
    } else {
        PlanState::Done
    };
}

fn state_error(plan: &Plan, action: &'static str) -> PlanError {
    PlanError::State {
        id: plan.id,
        state: format!("{:?}", plan.state).to_lowercase(),
        action,
    }
}

/// Stops starting moves; those in flight go on. Pausing a paused plan is a no-op.
pub fn pause(plan: &mut Plan) -> Result<(), PlanError> {
    match plan.state {
        PlanState::Running | PlanState::Paused => {
            plan.state = PlanState::Paused;
            Ok(())
        }
        _ => Err(state_error(plan, "pause")),
    }
}

/// Starts moves again. Resuming a running plan is a no-op.
pub fn resume(plan: &mut Plan) -> Result<(), PlanError> {
    match plan.state {
        PlanState::Running | PlanState::Paused => {
            plan.state = PlanState::Running;
            Ok(())
        }
        _ => Err(state_error(plan, "resume")),
    }
}

/// Cancels the plan: moves not started are dropped, and the next passes roll back the moves in
/// flight (see [`Step::roll_back`]). Cancelling a cancelling plan is a no-op.
pub fn cancel(plan: &mut Plan) -> Result<(), PlanError> {
    if plan.state.is_terminal() {
        return Err(state_error(plan, "cancel"));
    }
    plan.state = PlanState::Cancelling;
    for m in plan.moves.iter_mut().filter(|m| m.state.is_pending()) {
        m.state = MoveState::Skipped(Reason::Cancelled);
    }
    finish_if_ended(plan);
    Ok(())
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod props;
