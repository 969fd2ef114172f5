//! One step of a running plan, as writes: the scheduler's decision ([`crate::plan::next_moves`])
//! over the cluster as observed, turned into ONE transaction: the plan's new state, the moves it
//! starts (submitted as AlterPartitionReassignments submits them: the plan's throttle, the submit
//! epoch, auto-remove throttles armed) and the moves it rolls back (cancelled as a reassignment
//! cancel is). Guarded by the plan's revision, each touched partition's revision and, when it
//! starts moves, the cancel-all marker: a move is running and visible, or neither. Pure; the
//! driver ([`crate::plan_driver`]) reads and writes.

use std::collections::BTreeSet;

use proto::cluster_view::ClusterView;
use proto::keys;
use proto::metastore as pb;

use crate::plan::{next_moves, Move, MoveState, Plan};
use crate::reassign_admin::{change, merge, unclean_allowed, Change};
use crate::store::at_revision;
use crate::throttles::{BrokerConfigs, Touched};
use crate::{plan_view, reassignment};

/// What a step reads besides the plan: the cluster view at `revision`, the cancel-all marker's
/// revision (0: absent), the broker config records (to arm throttles) and the wall time.
pub struct StepInput<'a> {
    /// Brokers, topics and partitions.
    pub view: &'a ClusterView,
    /// The revision the view is at.
    pub revision: u64,
    /// The cancel-all marker's revision, 0 when absent.
    pub marker: u64,
    /// The broker config records.
    pub brokers: &'a BrokerConfigs,
    /// Wall time, stamped on the reassignments started.
    pub now_ms: u64,
}

/// A step's transaction.
#[derive(Debug, Clone)]
pub struct StepWrite {
    /// The plan as written.
    pub plan: Plan,
    /// The guards (the term fence is the driver's).
    pub guards: Vec<pb::Guard>,
    /// The ops.
    pub ops: Vec<pb::Op>,
    /// Whether it changes partitions (so a later view must show them before the next step).
    pub moves_partitions: bool,
    /// Moves started.
    pub started: usize,
    /// Moves rolled back.
    pub rolled_back: usize,
}

/// A put of a plan.
pub fn plan_put(plan: &Plan) -> pb::Op {
    pb::Op {
        op: Some(pb::op::Op::Put(pb::PutOp {
            key: keys::plan(plan.id),
            value: plan.encode().into(),
            lease: 0,
        })),
    }
}

/// The brokers and named dirs a move's submit gives: a dir is named for a replica that is new
/// or changes dir; a replica that stays where it is names none (it has nothing to report).
pub fn target_of(plan: &Plan, m: &Move) -> (Vec<i32>, Vec<String>) {
    let brokers = m.to.iter().map(|r| r.broker).collect();
    let dirs =
        m.to.iter()
            .map(|t| {
                let stays = m.from.iter().any(|f| f.broker == t.broker && f.dir == t.dir);
                if t.dir.is_named() && !stays {
                    plan.names.dir(t.dir).to_string()
                } else {
                    String::new()
                }
            })
            .collect();
    (brokers, dirs)
}

/// The step of `plan` (stored at `plan_rev`) over `input`, or `None` when nothing changes:
/// neither the plan nor any partition (a plan is not rewritten for nothing).
pub fn step(plan: &Plan, plan_rev: u64, input: &StepInput<'_>) -> Option<StepWrite> {
    let obs = plan_view::observed(input.view, input.revision, plan);
    let mut next = plan.clone();
    let decided = next_moves(&mut next, &obs);
    let live: BTreeSet<i32> = input.view.live_brokers();
    let mut changes: Vec<Change> = Vec::new();
    let mut touched = Touched::default();
    let mut started = 0;
    for s in &decided.start {
        let m = &next.moves[s.index as usize];
        let (topic, p) = plan_view::partition_name(&next, s.partition);
        let entry = input.view.partition(topic, p);
        match entry {
            // Submits wait while a cancel-all is in force, as a submit by hand is refused.
            Some(e) if input.marker == 0 => {
                let (brokers, dirs) = target_of(&next, m);
                let state = reassignment::submit(&e.state, &brokers, &dirs, next.throttle_rate, input.now_ms, &live);
                if state.is_moving() {
                    touched.add(topic, &state);
                }
                changes.push(change(topic, p, e.mod_revision, &state));
                started += 1;
            }
            _ => next.moves[s.index as usize].state = MoveState::Queued,
        }
    }
    let mut rolled_back = 0;
    for r in &decided.roll_back {
        let (topic, p) = plan_view::partition_name(&next, *r);
        let Some(e) = input.view.partition(topic, p) else {
            continue;
        };
        // A partition that cannot be rolled back now (no original replica in sync) is tried
        // again at the next step: the plan keeps asking while the move runs.
        if let Ok(state) = reassignment::cancel(&e.state, &live, unclean_allowed(input.view, topic)) {
            changes.push(change(topic, p, e.mod_revision, &state));
            rolled_back += 1;
        }
    }
    if changes.is_empty() && next == *plan {
        return None;
    }
    let mut guards = vec![at_revision(keys::plan(plan.id), plan_rev)];
    if started > 0 {
        guards.push(at_revision(keys::REASSIGN_CANCEL.into(), input.marker));
    }
    let moves_partitions = !changes.is_empty();
    let (mut guards, mut ops) = merge(changes, guards);
    ops.insert(0, plan_put(&next));
    if !touched.is_empty() {
        let (g, o) = crate::throttles::arming(input.view, input.brokers, touched);
        guards.extend(g);
        ops.extend(o);
        ops.push(pb::Op {
            op: Some(pb::op::Op::Put(pb::PutOp {
                key: keys::REASSIGN_EPOCH.into(),
                value: Default::default(),
                lease: 0,
            })),
        });
    }
    Some(StepWrite {
        plan: next,
        guards,
        ops,
        moves_partitions,
        started,
        rolled_back,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Caps, DirId, Names, PartitionRef, PlanKind, PlanState, Reason, Replica};
    use prost::Message;
    use proto::ferry::{BrokerRegistration, PartitionState, TopicRecord};

    fn view(states: &[PartitionState]) -> ClusterView {
        let mut v = ClusterView::default();
        for id in 1..=4 {
            let reg = BrokerRegistration {
                id,
                ..Default::default()
            };
            v.apply(&keys::broker(id), Some(&reg.encode_to_vec()), 1);
        }
        v.apply(&keys::topic("t"), Some(&TopicRecord::default().encode_to_vec()), 2);
        for (p, s) in states.iter().enumerate() {
            v.apply(&keys::partition("t", p as u32), Some(&s.encode_to_vec()), 3 + p as u64);
        }
        v
    }

    fn quiet(replicas: &[i32]) -> PartitionState {
        PartitionState {
            replicas: replicas.to_vec(),
            isr: replicas.to_vec(),
            leader: replicas[0],
            ..Default::default()
        }
    }

    /// A drain of broker 1 with one move per partition, each to broker 4.
    fn drain(n: u32, cap: u32) -> Plan {
        Plan {
            id: 7,
            kind: PlanKind::DrainBroker { broker: 1 },
            caps: Caps {
                out_of_broker: cap,
                ..Caps::default()
            },
            throttle_rate: 5000,
            state: PlanState::Running,
            names: Names {
                topics: vec!["t".into()],
                dirs: vec![],
            },
            moves: (0..n)
                .map(|p| Move {
                    partition: PartitionRef { topic: 0, partition: p },
                    from: vec![Replica::new(1, DirId::ANY), Replica::new(2, DirId::ANY)].into(),
                    to: vec![Replica::new(4, DirId::ANY), Replica::new(2, DirId::ANY)].into(),
                    bytes: 10,
                    state: MoveState::Queued,
                })
                .collect(),
        }
    }

    fn input<'a>(v: &'a ClusterView, b: &'a BrokerConfigs, revision: u64, marker: u64) -> StepInput<'a> {
        StepInput {
            view: v,
            revision,
            marker,
            brokers: b,
            now_ms: 1,
        }
    }

    fn put_keys(w: &StepWrite) -> Vec<String> {
        w.ops
            .iter()
            .filter_map(|o| match &o.op {
                Some(pb::op::Op::Put(p)) => Some(p.key.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_step_starts_moves_under_the_cap_in_one_guarded_write_with_the_plan() {
        let v = view(&[quiet(&[1, 2]), quiet(&[1, 2]), quiet(&[1, 2])]);
        let b = BrokerConfigs::new();
        let plan = drain(3, 2);
        let w = step(&plan, 40, &input(&v, &b, 50, 0)).expect("starts moves");
        assert_eq!((w.started, w.rolled_back, w.moves_partitions), (2, 0, true));
        let keys = put_keys(&w);
        assert_eq!(keys[0], keys::plan(7), "the plan first");
        assert!(keys.contains(&keys::partition("t", 0)) && keys.contains(&keys::partition("t", 1)));
        assert!(!keys.contains(&keys::partition("t", 2)), "the cap of 2 holds the third");
        assert!(keys.contains(&keys::REASSIGN_EPOCH.to_string()));
        assert!(w.guards.contains(&at_revision(keys::plan(7), 40)));
        assert!(w.guards.contains(&at_revision(keys::REASSIGN_CANCEL.into(), 0)));
        assert!(w.guards.contains(&at_revision(keys::partition("t", 0), 3)));
        let Some(pb::op::Op::Put(put)) = &w.ops[1].op else {
            panic!("a put")
        };
        let s = PartitionState::decode(put.value.as_ref()).unwrap();
        assert_eq!(
            (s.adding.clone(), s.removing.clone(), s.throttle_rate),
            (vec![4], vec![1], 5000)
        );
        assert_eq!(w.plan.moves[2].state, MoveState::Queued);
        assert_eq!(Plan::decode(&plan.encode()).unwrap(), plan);
    }

    #[test]
    fn nothing_new_writes_nothing_and_a_cancel_all_holds_the_starts() {
        let v = view(&[quiet(&[1, 2])]);
        let b = BrokerConfigs::new();
        let plan = drain(1, 2);
        let w = step(&plan, 40, &input(&v, &b, 50, 0)).expect("starts");
        // The same view again: the move counts as started from it, nothing changes.
        assert!(step(&w.plan, 41, &input(&v, &b, 50, 0)).is_none());
        // A cancel-all in force: nothing starts, and the unchanged plan is not rewritten.
        assert!(step(&plan, 40, &input(&v, &b, 50, 9)).is_none());
    }

    #[test]
    fn a_cancelled_plan_rolls_back_its_moves_in_flight() {
        let b = BrokerConfigs::new();
        let v0 = view(&[quiet(&[1, 2])]);
        let mut plan = drain(1, 2);
        let w = step(&plan, 40, &input(&v0, &b, 50, 0)).expect("starts");
        let Some(pb::op::Op::Put(put)) = &w.ops[1].op else {
            panic!("a put")
        };
        let moving = PartitionState::decode(put.value.as_ref()).unwrap();
        plan = w.plan;
        crate::plan::cancel(&mut plan).unwrap();
        let v1 = view(&[moving]);
        let w = step(&plan, 41, &input(&v1, &b, 60, 0)).expect("rolls back");
        assert_eq!(w.rolled_back, 1);
        let Some(pb::op::Op::Put(put)) = &w.ops[1].op else {
            panic!("a put")
        };
        let back = PartitionState::decode(put.value.as_ref()).unwrap();
        assert_eq!((back.replicas, back.throttle_rate), (vec![1, 2], 0));
        // Once the view shows it back, the move is rolled back and the plan cancelled.
        let w = step(&w.plan, 42, &input(&view(&[quiet(&[1, 2])]), &b, 70, 0)).expect("ends");
        assert_eq!(w.plan.state, PlanState::Cancelled);
        assert_eq!(w.plan.moves[0].state, MoveState::Skipped(Reason::RolledBack));
        assert!(!w.moves_partitions);
    }

    #[test]
    fn only_new_replicas_and_dir_changes_are_named_a_dir() {
        let mut plan = drain(1, 2);
        plan.names.dirs = vec!["/a".into(), "/b".into()];
        plan.moves[0].from = vec![Replica::new(1, DirId(0)), Replica::new(2, DirId(0))].into();
        plan.moves[0].to = vec![Replica::new(4, DirId(1)), Replica::new(2, DirId(0))].into();
        assert_eq!(
            target_of(&plan, &plan.moves[0]),
            (vec![4, 2], vec!["/b".to_string(), String::new()])
        );
    }
}
