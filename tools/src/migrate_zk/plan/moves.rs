//! Reassignments: Kafka's in-flight moves, the reassignment znodes applied as Ferry submits,
//! and a cancel-all.

use std::collections::{BTreeMap, BTreeSet};

use controller::reassignment;
use proto::ferry::{PartitionState, ReassignmentRecord, TopicRecord};
use proto::{keys, topic_config};

use super::model::{Plan, Value};
use super::topic::duplicate;
use crate::migrate_zk::parse::{self, invalid, Invalid, ReassignmentEntry, ZkCluster};

/// The partitions being planned, each with its reassignment in flight in its state.
#[derive(Default)]
pub(super) struct Partitions {
    /// Partition states, by topic and partition.
    pub(super) states: BTreeMap<(String, u32), PartitionState>,
}

impl Partitions {
    /// Adds a partition as Kafka left it, with a record for a move in flight.
    pub(super) fn adopt(&mut self, key: (String, u32), mut s: PartitionState, submitted_ms: u64) {
        if s.is_moving() {
            // Kafka (2.4+) keeps RS = target followed by the rest of the originals.
            let original: Vec<i32> = s.replicas.iter().copied().filter(|r| !s.adding.contains(r)).collect();
            s.reassignment = Some(Box::new(ReassignmentRecord {
                original,
                target: reassignment::target_of(&s),
                throttle_rate: 0,
                submitted_ms,
                target_log_dirs: vec![],
                original_log_dirs: vec![],
            }));
        }
        self.states.insert(key, s);
    }
}

/// Applies one entry of a reassignment znode (Kafka's, or a request) the way a Ferry submit
/// does, keeping the original replicas the entry names.
fn apply_entry(
    ps: &mut Partitions,
    e: &ReassignmentEntry,
    path: &str,
    submitted_ms: u64,
    live: &BTreeSet<i32>,
) -> Result<(), Invalid> {
    let tp = format!("{}-{}", e.topic, e.partition);
    let key = (e.topic.clone(), e.partition);
    let Some(state) = ps.states.get(&key).cloned() else {
        return Err(invalid(path, format!("{tp}: no such partition is imported")));
    };
    if e.replicas.is_empty() {
        return Err(invalid(path, format!("{tp}: the replica list is empty")));
    }
    if let Some(b) = duplicate(&e.replicas) {
        return Err(invalid(
            path,
            format!("{tp}: broker {b} appears twice in the replica list"),
        ));
    }
    let mut existing = state.reassignment.clone();
    let mut base = state.clone();
    match (&mut existing, &e.original_replicas) {
        (Some(r), Some(o)) => {
            let (a, b): (BTreeSet<_>, BTreeSet<_>) = (o.iter().collect(), r.original.iter().collect());
            if a != b || o.len() != r.original.len() {
                return Err(invalid(
                    path,
                    format!(
                        "{tp}: original_replicas {o:?} are not the replicas {:?} the running move started from",
                        r.original
                    ),
                ));
            }
            r.original = o.clone();
        }
        (None, Some(o)) => {
            if o.is_empty() || duplicate(o).is_some() {
                return Err(invalid(
                    path,
                    format!("{tp}: original_replicas {o:?} is not a replica list"),
                ));
            }
            let (started, _, _) = reassignment::replica_sets(o, o, &e.replicas);
            if state.replicas == started {
                base.replicas = o.clone();
                base.log_dirs = vec![String::new(); o.len()];
            } else if state.replicas != *o {
                return Err(invalid(
                    path,
                    format!(
                        "{tp}: the assigned replicas {:?} are neither original_replicas {o:?} nor the target followed by them {started:?}",
                        state.replicas
                    ),
                ));
            }
        }
        (_, None) => {}
    }
    if existing.is_none() && base.replicas == e.replicas {
        // Already where the entry wants it: nothing is moving.
        return Ok(());
    }
    if existing.is_some() && reassignment::target_of(&state) == e.replicas {
        // The same move as the running one: only the original order may have been learnt.
        ps.states.insert(
            key,
            PartitionState {
                reassignment: existing,
                ..state
            },
        );
        return Ok(());
    }
    base.reassignment = existing;
    let next = reassignment::submit(&base, &e.replicas, &[], 0, submitted_ms, live);
    ps.states.insert(key, next);
    Ok(())
}

/// Applies the legacy reassignment znode, then the requests in order; a partition named twice
/// in one znode is a contradiction.
pub(super) fn apply_znodes(c: &ZkCluster, ps: &mut Partitions, live: &BTreeSet<i32>, skipped: &mut Vec<Invalid>) {
    for r in c.legacy_reassignment.iter().chain(&c.requests) {
        let mut seen = BTreeSet::new();
        for e in &r.partitions {
            let res = if seen.insert((e.topic.as_str(), e.partition)) {
                apply_entry(ps, e, &r.path, r.ctime_ms.max(0) as u64, live)
            } else {
                Err(invalid(
                    &r.path,
                    format!("{}-{}: the partition appears twice", e.topic, e.partition),
                ))
            };
            if let Err(e) = res {
                skipped.push(e);
            }
        }
    }
}

/// Rolls every move back as a cancel-all does, and keeps the cancel-all marker.
pub(super) fn cancel_all(
    ps: &mut Partitions,
    topics: &BTreeMap<String, TopicRecord>,
    live: &BTreeSet<i32>,
    out: &mut Plan,
) {
    for (key, s) in ps.states.iter_mut().filter(|(_, s)| s.reassignment.is_some()) {
        let unclean = topics
            .get(&key.0)
            .is_some_and(|t| topic_config::unclean_election_allowed(&t.config));
        match reassignment::cancel(s, live, unclean) {
            Ok(state) => *s = state,
            Err(e) => out.skipped.push(invalid(
                parse::REASSIGN_CANCEL,
                format!("{}-{}: {}", key.0, key.1, e.message),
            )),
        }
    }
    out.writes.insert(
        keys::REASSIGN_CANCEL.into(),
        Value::Reassignment(ReassignmentRecord::default()),
    );
}
