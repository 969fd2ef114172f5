//! One path for every change the ISR, the live brokers or an election make to a partition, as
//! Kafka's `PartitionChangeBuilder` is for its controller. A driver says what happened (an ISR
//! change asked for, the live brokers changed, an election wanted, a cancel-all in force), and
//! [`PartitionChangeBuilder::build`] applies the rules in one fixed order:
//!
//! 1. the ISR change, checked against the leader, the epochs and the joiners' processes;
//! 2. the cancel-all rule: an adding replica does not join the ISR while a cancel-all is in force;
//! 3. brokers gone or back: the ISR shrinks to live members and a leader is elected if needed;
//! 4. the election asked for (preferred, or any live replica);
//! 5. completion of a move whose target replicas are all in sync and in their named dirs.
//!
//! Each step bumps the epochs it must (`partition_change::bump_epochs`, which also asserts the
//! partition rules); the built change then moves the partition epoch by one, and the leader
//! epoch by one if the leader changed, however many steps it took. The `AlterPartition` and `ElectLeaders` handlers, the active controller and
//! the property test all call it, so the test checks the code that runs.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proto::errors::{ErrorCode, Refusal};
use proto::ferry::{BrokerRegistration, PartitionState};

use crate::partition_change::{self, Election, IsrChange};
use crate::reassignment;

/// Which election a change asks for, after the ISR and the live brokers are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elect {
    /// Only what the live brokers require (a leader that went away is replaced).
    Needed,
    /// The preferred replica (first in the replica set); refused when it is not live and in sync.
    Preferred,
    /// The preferred replica when it can lead; otherwise the leader stays (the rebalance tick).
    PreferredIfPossible,
    /// Any eligible replica, for a partition with no live leader; refused when it has one.
    Any,
}

/// The processes an ISR change names for its joining replicas, and the registered brokers.
#[derive(Debug, Clone, Copy)]
pub struct Joiners<'a> {
    /// Broker id to the incarnation whose fetches brought it in sync.
    pub incarnations: &'a HashMap<i32, u64>,
    /// The registered brokers.
    pub registered: &'a BTreeMap<i32, BrokerRegistration>,
}

/// What a change wrote: the next state, and whether it completes the partition's move (its
/// reassignment record goes in the same transaction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    /// The state to write.
    pub state: PartitionState,
    /// The move ended with this change.
    pub completes: bool,
}

/// A change to one partition, built step by step; see the module docs for the order.
#[derive(Debug, Clone)]
pub struct PartitionChangeBuilder<'a> {
    state: &'a PartitionState,
    live: &'a BTreeSet<i32>,
    election: Election,
    isr: Option<(&'a IsrChange, Option<Joiners<'a>>)>,
    brokers_changed: bool,
    elect: Elect,
    cancel_all: bool,
    complete: bool,
}

/// Whether `next` lets an adding replica into the ISR that `old` did not have there.
pub fn joins_adding(old: &PartitionState, next: &PartitionState) -> bool {
    next.isr.iter().any(|r| old.adding.contains(r) && !old.isr.contains(r))
}

impl<'a> PartitionChangeBuilder<'a> {
    /// A change to `state` with `live` the registered brokers; clean elections only, no move
    /// completed, unless asked for.
    pub fn new(state: &'a PartitionState, live: &'a BTreeSet<i32>) -> Self {
        Self {
            state,
            live,
            election: Election::Clean,
            isr: None,
            brokers_changed: false,
            elect: Elect::Needed,
            cancel_all: false,
            complete: false,
        }
    }

    /// Whether a replica out of sync may lead (the topic's `unclean.leader.election.enable`).
    pub fn election(mut self, election: Election) -> Self {
        self.election = election;
        self
    }

    /// The partition leader asks for a new ISR; `joiners` checks the processes of the replicas
    /// it adds.
    pub fn isr(mut self, change: &'a IsrChange, joiners: Option<Joiners<'a>>) -> Self {
        self.isr = Some((change, joiners));
        self
    }

    /// The live broker set may have changed since the state was written.
    pub fn brokers_changed(mut self) -> Self {
        self.brokers_changed = true;
        self
    }

    /// The election to hold after the ISR and the brokers are applied.
    pub fn elect(mut self, elect: Elect) -> Self {
        self.elect = elect;
        self
    }

    /// A cancel-all is in force (its marker is stored).
    pub fn cancel_all(mut self, in_force: bool) -> Self {
        self.cancel_all = in_force;
        self
    }

    /// Completes the partition's move when its targets are all in sync.
    pub fn complete(mut self) -> Self {
        self.complete = true;
        self
    }

    /// Applies the steps in order; `Ok(None)` when nothing changes, a refusal when a step the
    /// driver asked for cannot be taken (nothing is to be written then).
    pub fn build(self) -> Result<Option<Built>, Refusal> {
        let old = self.state;
        let mut next = old.clone();
        if let Some((change, joiners)) = self.isr {
            next = partition_change::alter_isr(&next, change, self.live)?;
            if let Some(j) = joiners {
                partition_change::check_joiners(old, &next.isr, j.incarnations, j.registered)?;
            }
            if self.cancel_all && joins_adding(old, &next) {
                return Err(Refusal::new(
                    ErrorCode::REASSIGNMENT_CANCEL_IN_PROGRESS,
                    "a cancel-all is rolling back this partition's reassignment; adding replicas do not join the ISR",
                ));
            }
        }
        if self.brokers_changed {
            if let Some(n) = partition_change::on_brokers_changed(&next, self.live, self.election) {
                next = n;
            }
        }
        match self.elect {
            Elect::Needed => {}
            Elect::Preferred => next = partition_change::elect_preferred(&next, self.live)?,
            Elect::PreferredIfPossible => {
                if let Ok(n) = partition_change::elect_preferred(&next, self.live) {
                    next = n;
                }
            }
            Elect::Any => next = partition_change::elect_any(&next, self.live, self.election)?,
        }
        let mut completes = false;
        if self.complete {
            if let Some(done) = reassignment::complete(&next, self.live) {
                next = done;
                completes = true;
            }
        }
        if next == *old {
            return Ok(None);
        }
        // Each step stamped its own epochs; the change as a whole moves the partition epoch
        // once, and the leader epoch once if the leader changed, as Kafka's builder does.
        next.partition_epoch = old.partition_epoch + 1;
        next.leader_epoch = old.leader_epoch + u32::from(next.leader != old.leader);
        Ok(Some(Built { state: next, completes }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moving() -> PartitionState {
        // [1,2] -> [2,3]: 3 adding, 1 removing.
        PartitionState {
            replicas: vec![2, 3, 1],
            adding: vec![3],
            removing: vec![1],
            leader: 1,
            isr: vec![1, 2],
            leader_epoch: 2,
            partition_epoch: 5,
            reassignment: Some(Box::new(proto::ferry::ReassignmentRecord {
                original: vec![1, 2],
                target: vec![2, 3],
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    fn join(s: &PartitionState, b: i32) -> IsrChange {
        let mut new_isr = s.isr.clone();
        new_isr.push(b);
        IsrChange {
            leader: s.leader,
            leader_epoch: s.leader_epoch,
            partition_epoch: s.partition_epoch,
            new_isr,
        }
    }

    #[test]
    fn the_last_target_joining_completes_the_move_in_the_same_change() {
        let s = moving();
        let live: BTreeSet<i32> = [1, 2, 3].into();
        let req = join(&s, 3);
        let built = PartitionChangeBuilder::new(&s, &live)
            .isr(&req, None)
            .complete()
            .build()
            .unwrap()
            .unwrap();
        assert!(built.completes);
        assert_eq!(
            built.state.partition_epoch,
            s.partition_epoch + 1,
            "one change, one bump"
        );
        assert_eq!(built.state.replicas, vec![2, 3]);
        assert!(built.state.adding.is_empty() && built.state.removing.is_empty());
        assert!(built.state.isr.contains(&built.state.leader));
    }

    #[test]
    fn a_cancel_all_keeps_adding_replicas_out_of_the_isr() {
        let s = moving();
        let live: BTreeSet<i32> = [1, 2, 3].into();
        let req = join(&s, 3);
        let e = PartitionChangeBuilder::new(&s, &live)
            .isr(&req, None)
            .cancel_all(true)
            .complete()
            .build()
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::REASSIGNMENT_CANCEL_IN_PROGRESS);
        // Shrinking the ISR is still allowed during a cancel-all.
        let shrink = IsrChange {
            new_isr: vec![1],
            ..join(&s, 3)
        };
        let built = PartitionChangeBuilder::new(&s, &live)
            .isr(&shrink, None)
            .cancel_all(true)
            .build()
            .unwrap()
            .unwrap();
        assert_eq!(built.state.isr, vec![1]);
    }

    #[test]
    fn a_leader_gone_is_replaced_and_nothing_changes_when_nothing_happened() {
        let s = moving();
        let live: BTreeSet<i32> = [2, 3].into();
        let built = PartitionChangeBuilder::new(&s, &live)
            .brokers_changed()
            .build()
            .unwrap()
            .unwrap();
        assert_eq!((built.state.leader, built.state.isr.clone()), (2, vec![2]));
        assert!(built.state.leader_epoch > s.leader_epoch);
        let all: BTreeSet<i32> = [1, 2, 3].into();
        assert_eq!(
            PartitionChangeBuilder::new(&s, &all).brokers_changed().build(),
            Ok(None)
        );
    }

    #[test]
    fn an_election_that_cannot_happen_is_refused() {
        let s = moving();
        let live: BTreeSet<i32> = [1, 2, 3].into();
        let e = PartitionChangeBuilder::new(&s, &live)
            .elect(Elect::Any)
            .build()
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::ELECTION_NOT_NEEDED);
        // Preferred is 2 (first in RS), live and in sync.
        let built = PartitionChangeBuilder::new(&s, &live)
            .elect(Elect::Preferred)
            .build()
            .unwrap()
            .unwrap();
        assert_eq!(built.state.leader, 2);
    }
}
