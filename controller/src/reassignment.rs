//! The replica-set algebra of a reassignment, and its three transitions: submit (or supersede),
//! complete and cancel. Pure functions over the stored partition state, which holds the
//! reassignment record while the partition moves (`PartitionState::check_record`).
//!
//! ORS = original replicas, TRS = target; RS = TRS followed by (ORS − TRS); adding = TRS − ORS;
//! removing = ORS − TRS. While a partition moves, TRS is RS without `removing`, so completion can
//! be decided from the partition state alone.

use std::collections::{BTreeMap, BTreeSet};

use proto::errors::{ErrorCode, Refusal};
use proto::ferry::{BrokerRegistration, PartitionState, ReassignmentRecord};

use crate::partition_change::{bump_epochs, NO_LEADER};

/// RS, adding and removing for moving from `current` replicas (first submit: the originals) to
/// `target`. Removing is taken against the current replicas, not the originals: a replica added
/// by a superseded request (perhaps the only one in sync) stays until the new target is in sync,
/// so superseding never shrinks the ISR. Adding stays relative to the originals, so a replica
/// still copying for the earlier request keeps its throttle.
pub fn replica_sets(current: &[i32], original: &[i32], target: &[i32]) -> (Vec<i32>, Vec<i32>, Vec<i32>) {
    let removing: Vec<i32> = current.iter().copied().filter(|r| !target.contains(r)).collect();
    let adding: Vec<i32> = target.iter().copied().filter(|r| !original.contains(r)).collect();
    let replicas: Vec<i32> = target.iter().chain(removing.iter()).copied().collect();
    (replicas, adding, removing)
}

/// `next` as a quiet partition owns nothing when nothing is left to move: no throttle, no record.
fn quiet_owns_nothing(next: PartitionState) -> PartitionState {
    if next.is_moving() {
        return next;
    }
    PartitionState {
        throttle_rate: 0,
        reassignment: None,
        ..next
    }
}

/// The target replicas of a moving partition (its replicas when it is not moving).
pub fn target_of(state: &PartitionState) -> Vec<i32> {
    state
        .replicas
        .iter()
        .copied()
        .filter(|r| !state.removing.contains(r))
        .collect()
}

/// Checks a target list: not empty, no broker twice, every broker registered.
pub fn validate_target(target: &[i32], registered: &BTreeSet<i32>) -> Result<(), Refusal> {
    let invalid = |m: String| Err(Refusal::new(ErrorCode::INVALID_REPLICA_ASSIGNMENT, m));
    if target.is_empty() {
        return invalid("the replica list is empty".into());
    }
    let mut seen = BTreeSet::new();
    for b in target {
        if !seen.insert(*b) {
            return invalid(format!("broker {b} appears twice in the replica list"));
        }
        if !registered.contains(b) {
            return invalid(format!("broker {b} is not registered"));
        }
    }
    Ok(())
}

/// The log dir named for each target replica, "" for any: `dirs` is empty (no dir named) or
/// one entry per replica, where "any" also means any.
pub fn named_dirs(target: &[i32], dirs: &[String]) -> Vec<String> {
    (0..target.len())
        .map(|i| dirs.get(i).filter(|d| d.as_str() != "any").cloned().unwrap_or_default())
        .collect()
}

/// Checks the log dirs named for a target against the brokers' registrations: one per replica,
/// each "any" or an absolute path that is an online log dir of its broker.
pub fn validate_dirs(
    target: &[i32],
    dirs: &[String],
    brokers: &BTreeMap<i32, BrokerRegistration>,
) -> Result<(), Refusal> {
    if dirs.is_empty() {
        return Ok(());
    }
    if dirs.len() != target.len() {
        return Err(Refusal::new(
            ErrorCode::INVALID_REQUEST,
            format!(
                "{} log_dirs for {} replicas; give one per replica",
                dirs.len(),
                target.len()
            ),
        ));
    }
    for (b, d) in target.iter().zip(named_dirs(target, dirs)) {
        if d.is_empty() {
            continue;
        }
        if !std::path::Path::new(&d).is_absolute() {
            return Err(Refusal::new(
                ErrorCode::LOG_DIR_NOT_FOUND,
                format!("log dir '{d}' for broker {b} is neither \"any\" nor an absolute path"),
            ));
        }
        let Some(reg) = brokers.get(b) else {
            continue; // validate_target names the unregistered broker
        };
        let same = |x: &String| std::path::Path::new(x) == std::path::Path::new(&d);
        if !reg.log_dirs.iter().any(same) {
            return Err(Refusal::new(
                ErrorCode::LOG_DIR_NOT_FOUND,
                format!(
                    "broker {b} has no log dir '{d}' (its dirs: {})",
                    reg.log_dirs.join(", ")
                ),
            ));
        }
        if reg.offline_log_dirs.iter().any(same) {
            return Err(Refusal::new(
                ErrorCode::KAFKA_STORAGE_ERROR,
                format!("log dir '{d}' of broker {b} is offline"),
            ));
        }
    }
    Ok(())
}

fn log_dirs_for(state: &PartitionState, replicas: &[i32]) -> Vec<String> {
    replicas
        .iter()
        .map(|r| {
            state
                .replicas
                .iter()
                .position(|x| x == r)
                .and_then(|i| state.log_dirs.get(i).cloned())
                .unwrap_or_default()
        })
        .collect()
}

/// A leader for `replicas` from `isr`: the current one if it qualifies, else the first in
/// replica order that is in sync and live.
fn leader_within(current: i32, replicas: &[i32], isr: &[i32], live: &BTreeSet<i32>) -> i32 {
    if replicas.contains(&current) && isr.contains(&current) && live.contains(&current) {
        return current;
    }
    replicas
        .iter()
        .copied()
        .find(|r| isr.contains(r) && live.contains(r))
        .unwrap_or(NO_LEADER)
}

/// Starts a reassignment to `target`, or supersedes the running one. A superseding request keeps
/// the first request's original replicas, so a later cancel restores them. Replicas added by the
/// superseded request and not wanted any more are removed when the new target completes. A
/// replica given a log dir in `target_dirs` (see [`named_dirs`]) must also report being there.
/// The next state holds the reassignment's record while it moves; one already where it should
/// be comes back quiet, without one.
pub fn submit(
    state: &PartitionState,
    target: &[i32],
    target_dirs: &[String],
    throttle_rate: u64,
    now_ms: u64,
    live: &BTreeSet<i32>,
) -> PartitionState {
    let existing = state.reassignment.as_ref();
    let original: Vec<i32> = match existing {
        Some(r) => r.original.clone(),
        None => state
            .replicas
            .iter()
            .copied()
            .filter(|r| !state.adding.contains(r))
            .collect(),
    };
    let original_log_dirs = match existing {
        Some(r) => r.original_log_dirs.clone(),
        None => log_dirs_for(state, &original),
    };
    let named = named_dirs(target, target_dirs);
    let (replicas, adding, removing) = replica_sets(&state.replicas, &original, target);
    let mut log_dirs = log_dirs_for(state, &replicas);
    // The target comes first in `replicas`, so index i is target[i].
    for (slot, d) in log_dirs.iter_mut().zip(&named) {
        if !d.is_empty() {
            *slot = d.clone();
        }
    }
    let dir_pending: Vec<i32> = target
        .iter()
        .zip(&named)
        .filter(|(_, d)| !d.is_empty())
        .map(|(r, _)| *r)
        .collect();
    let isr: Vec<i32> = state.isr.iter().copied().filter(|r| replicas.contains(r)).collect();
    let leader = leader_within(state.leader, &replicas, &isr, live);
    let record = ReassignmentRecord {
        original,
        target: target.to_vec(),
        throttle_rate,
        submitted_ms: existing.map_or(now_ms, |r| r.submitted_ms),
        target_log_dirs: named,
        original_log_dirs,
    };
    let next = bump_epochs(
        state,
        quiet_owns_nothing(PartitionState {
            log_dirs,
            replicas,
            adding,
            removing,
            leader,
            isr,
            throttle_rate,
            dir_pending,
            reassignment: Some(Box::new(record)),
            ..state.clone()
        }),
    );
    complete(&next, live).unwrap_or(next)
}

/// Completes a moving partition whose every target replica is in sync and in its named log
/// dir: RS := TRS, the removed replicas leave the ISR, and the leader moves into the target if
/// it is outside. `None` when the partition is not moving or not ready.
pub fn complete(state: &PartitionState, live: &BTreeSet<i32>) -> Option<PartitionState> {
    if !state.is_moving() {
        return None;
    }
    settle_if_ready(state, live)
}

/// The completed state when every target replica is in sync and no named dir is pending.
fn settle_if_ready(state: &PartitionState, live: &BTreeSet<i32>) -> Option<PartitionState> {
    if !state.dir_pending.is_empty() {
        return None;
    }
    let target = target_of(state);
    if !target.iter().all(|r| state.isr.contains(r)) {
        return None;
    }
    let isr: Vec<i32> = state.isr.iter().copied().filter(|r| target.contains(r)).collect();
    // NO_LEADER when no target replica is live: the controller elects one when it returns.
    let leader = leader_within(state.leader, &target, &isr, live);
    let log_dirs = log_dirs_for(state, &target);
    Some(settled(state, target, log_dirs, isr, leader))
}

/// A broker reports its replica is in `dir`: it leaves `dir_pending` when that is the dir named
/// for it, and the reassignment completes if nothing else holds it (the result is then not
/// [`PartitionState::is_moving`]). `None` when the report changes nothing (not pending, or
/// another dir is named now).
pub fn dir_reached(state: &PartitionState, broker: i32, dir: &str, live: &BTreeSet<i32>) -> Option<PartitionState> {
    if !state.dir_pending.contains(&broker) {
        return None;
    }
    let i = state.replicas.iter().position(|r| *r == broker)?;
    // As paths: `/d/a/` and `/d/a` are one dir.
    if state.log_dirs.get(i).map(std::path::Path::new) != Some(std::path::Path::new(dir)) {
        return None;
    }
    let next = PartitionState {
        dir_pending: state.dir_pending.iter().copied().filter(|r| *r != broker).collect(),
        ..state.clone()
    };
    if let Some(done) = settle_if_ready(&next, live) {
        return Some(done);
    }
    // Nothing else was moving (a reorder whose new replica is out of sync, say): the partition is
    // quiet now, as `submit` leaves such a request, and owns no throttle and no record.
    Some(bump_epochs(state, quiet_owns_nothing(next)))
}

/// Rolls a reassignment back: RS := the original replicas in their original order, the adding
/// replicas leave the ISR, and a leader is elected from the originals if needed. Refused when no
/// original replica is in sync, unless unclean election is allowed, and when nothing moves.
pub fn cancel(state: &PartitionState, live: &BTreeSet<i32>, unclean_allowed: bool) -> Result<PartitionState, Refusal> {
    let Some(record) = &state.reassignment else {
        return Err(Refusal::new(
            ErrorCode::NO_REASSIGNMENT_IN_PROGRESS,
            "there is no reassignment to cancel",
        ));
    };
    let original = record.original.clone();
    let mut isr: Vec<i32> = state.isr.iter().copied().filter(|r| original.contains(r)).collect();
    if isr.is_empty() {
        match original.iter().copied().find(|r| live.contains(r)).filter(|_| unclean_allowed) {
            Some(r) => isr = vec![r],
            None => {
                return Err(Refusal {
                    code: ErrorCode::ELIGIBLE_LEADERS_NOT_AVAILABLE,
                    message: format!(
                        "cancelling would leave no in-sync replica: none of the original replicas {original:?} is in the ISR {:?}",
                        state.isr
                    ),
                })
            }
        }
    }
    let leader = leader_within(state.leader, &original, &isr, live);
    // Records from before log dirs were stored hold none: keep the current ones then.
    let log_dirs = if record.original_log_dirs.len() == original.len() {
        record.original_log_dirs.clone()
    } else {
        log_dirs_for(state, &original)
    };
    Ok(settled(state, original, log_dirs, isr, leader))
}

/// The quiet state a move ends in (completed or cancelled): no adding or removing replicas, no
/// named dir pending, no owned throttle.
fn settled(
    state: &PartitionState,
    replicas: Vec<i32>,
    log_dirs: Vec<String>,
    isr: Vec<i32>,
    leader: i32,
) -> PartitionState {
    bump_epochs(
        state,
        PartitionState {
            log_dirs,
            replicas,
            adding: vec![],
            removing: vec![],
            leader,
            isr,
            throttle_rate: 0,
            dir_pending: vec![],
            reassignment: None,
            ..state.clone()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(replicas: &[i32], leader: i32, isr: &[i32]) -> PartitionState {
        PartitionState {
            replicas: replicas.to_vec(),
            leader,
            isr: isr.to_vec(),
            log_dirs: vec![String::new(); replicas.len()],
            ..Default::default()
        }
    }
    fn live(ids: &[i32]) -> BTreeSet<i32> {
        ids.iter().copied().collect()
    }

    #[test]
    fn sets_follow_kafka() {
        assert_eq!(
            replica_sets(&[1, 2, 3], &[1, 2, 3], &[3, 4, 5]),
            (vec![3, 4, 5, 1, 2], vec![4, 5], vec![1, 2])
        );
        assert_eq!(
            replica_sets(&[1, 2], &[1, 2], &[1, 2, 3]),
            (vec![1, 2, 3], vec![3], vec![])
        );
    }

    #[test]
    fn submit_then_complete_moves_leader_into_target() {
        let all = live(&[1, 2, 3, 4, 5]);
        let s = st(&[1, 2, 3], 1, &[1, 2, 3]);
        let sub = submit(&s, &[3, 4, 5], &[], 0, 7, &all);
        let r = sub.reassignment.clone().unwrap();
        assert_eq!(r.original, vec![1, 2, 3]);
        assert_eq!(sub.replicas, vec![3, 4, 5, 1, 2]);
        assert_eq!(sub.leader, 1);
        assert!(complete(&sub, &all).is_none());
        let synced = PartitionState {
            isr: vec![1, 2, 3, 4, 5],
            ..sub.clone()
        };
        let done = complete(&synced, &all).unwrap();
        assert_eq!(
            (done.replicas.clone(), done.isr.clone(), done.leader),
            (vec![3, 4, 5], vec![3, 4, 5], 3)
        );
        assert!(done.leader_epoch > synced.leader_epoch);
        assert!(done.reassignment.is_none(), "the record goes with the move");
    }

    #[test]
    fn supersede_keeps_first_original_and_cancel_restores_its_order() {
        let all = live(&[1, 2, 3, 4, 5]);
        let s = st(&[3, 1, 2], 3, &[3, 1, 2]);
        let first = submit(&s, &[1, 2, 4], &[], 0, 1, &all);
        let second = submit(&first, &[1, 2, 5], &[], 0, 2, &all);
        let rec2 = second.reassignment.clone().unwrap();
        assert_eq!(rec2.original, vec![3, 1, 2]);
        assert_eq!(rec2.submitted_ms, 1, "the first submit's time is kept");
        assert!(
            second.removing.contains(&4),
            "the superseded adding replica leaves at completion"
        );
        assert_eq!(target_of(&second), vec![1, 2, 5]);
        let back = cancel(&second, &all, false).unwrap();
        assert_eq!(back.replicas, vec![3, 1, 2]);
        assert!(back.adding.is_empty() && back.removing.is_empty() && back.reassignment.is_none());
        assert!(back.isr.iter().all(|r| [3, 1, 2].contains(r)));
        assert_eq!(
            cancel(&back, &all, false).unwrap_err().code,
            ErrorCode::NO_REASSIGNMENT_IN_PROGRESS
        );
    }

    #[test]
    fn cancel_refuses_to_leave_no_in_sync_replica() {
        let all = live(&[1, 2]);
        let s = PartitionState {
            adding: vec![2],
            removing: vec![1],
            reassignment: Some(Box::new(ReassignmentRecord {
                original: vec![1],
                target: vec![2],
                ..Default::default()
            })),
            ..st(&[2, 1], 2, &[2])
        };
        assert_eq!(
            cancel(&s, &all, false).unwrap_err().code,
            ErrorCode::ELIGIBLE_LEADERS_NOT_AVAILABLE
        );
        let forced = cancel(&s, &all, true).unwrap();
        assert_eq!(
            (forced.replicas.clone(), forced.isr.clone(), forced.leader),
            (vec![1], vec![1], 1)
        );
    }

    #[test]
    fn shrinking_replication_factor_completes_at_once() {
        let all = live(&[1, 2, 3]);
        let s = st(&[1, 2, 3], 2, &[1, 2, 3]);
        let sub = submit(&s, &[1, 2], &[], 0, 0, &all);
        assert!(sub.reassignment.is_none());
        assert_eq!((sub.replicas.clone(), sub.isr.clone()), (vec![1, 2], vec![1, 2]));
    }

    fn dirs(d: &[&str]) -> Vec<String> {
        d.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_named_dir_holds_completion_until_reported_and_cancel_restores_dirs() {
        let all = live(&[1, 2, 3]);
        let s = PartitionState {
            log_dirs: dirs(&["/a1", ""]),
            ..st(&[1, 2], 1, &[1, 2])
        };
        // Same replicas, one moved to another dir: an intra-broker move is a reassignment too.
        let sub = submit(&s, &[1, 2], &dirs(&["/b1", "any"]), 0, 0, &all);
        let rec = sub
            .reassignment
            .clone()
            .expect("a named dir keeps the reassignment open");
        assert_eq!(sub.dir_pending, vec![1]);
        assert_eq!(sub.log_dirs, dirs(&["/b1", ""]));
        assert_eq!(rec.target_log_dirs, dirs(&["/b1", ""]));
        assert_eq!(rec.original_log_dirs, dirs(&["/a1", ""]));
        assert!(complete(&sub, &all).is_none(), "in sync but not in its dir yet");
        assert!(dir_reached(&sub, 1, "/a1", &all).is_none(), "not the named dir");
        assert!(dir_reached(&sub, 2, "/b1", &all).is_none(), "broker 2 has no dir named");
        let done = dir_reached(&sub, 1, "/b1", &all).unwrap();
        assert!(!done.is_moving(), "the last named dir reached completes the move");
        assert!(done.reassignment.is_none());
        assert!(done.partition_epoch > sub.partition_epoch);
        assert_eq!(
            (done.replicas.clone(), done.log_dirs.clone()),
            (vec![1, 2], dirs(&["/b1", ""]))
        );
        let back = cancel(&sub, &all, false).unwrap();
        assert_eq!(back.log_dirs, dirs(&["/a1", ""]));
        assert!(back.dir_pending.is_empty());
        // A new replica with a named dir waits for both the ISR and the dir.
        let grow = submit(&s, &[1, 2, 3], &dirs(&["any", "any", "/c2"]), 0, 0, &all);
        let synced = PartitionState {
            isr: vec![1, 2, 3],
            ..grow.clone()
        };
        assert!(complete(&synced, &all).is_none());
        let waiting = dir_reached(&grow, 3, "/c2", &all).unwrap();
        assert!(
            waiting.dir_pending.is_empty() && waiting.is_moving(),
            "still waits for the ISR"
        );
        assert!(!dir_reached(&synced, 3, "/c2", &all).unwrap().is_moving());
    }

    #[test]
    fn named_dirs_are_checked_against_registrations() {
        let reg = |d: &[&str], off: &[&str]| BrokerRegistration {
            log_dirs: dirs(d),
            offline_log_dirs: dirs(off),
            ..Default::default()
        };
        let brokers: BTreeMap<i32, BrokerRegistration> =
            [(1, reg(&["/a1", "/b1"], &["/b1"])), (2, reg(&["/a2"], &[]))].into();
        let check = |t: &[i32], d: &[&str]| validate_dirs(t, &dirs(d), &brokers);
        assert!(check(&[1, 2], &[]).is_ok());
        assert!(check(&[1, 2], &["/a1", "any"]).is_ok());
        let Refusal { code, message: msg } = check(&[1, 2], &["/a1"]).unwrap_err();
        assert_eq!(
            (code, msg.contains("1 log_dirs for 2 replicas")),
            (ErrorCode::INVALID_REQUEST, true)
        );
        let Refusal { code, message: msg } = check(&[1], &["a1"]).unwrap_err();
        assert_eq!((code, msg.contains("absolute")), (ErrorCode::LOG_DIR_NOT_FOUND, true));
        let Refusal { code, message: msg } = check(&[2], &["/a1"]).unwrap_err();
        assert_eq!(
            (code, msg.contains("broker 2 has no log dir '/a1'")),
            (ErrorCode::LOG_DIR_NOT_FOUND, true)
        );
        assert_eq!(check(&[1], &["/b1"]).unwrap_err().code, ErrorCode::KAFKA_STORAGE_ERROR);
    }

    #[test]
    fn validation_names_the_problem() {
        let reg = live(&[1, 2]);
        assert!(validate_target(&[], &reg).unwrap_err().message.contains("empty"));
        assert!(validate_target(&[1, 1], &reg).unwrap_err().message.contains("twice"));
        assert!(validate_target(&[1, 9], &reg)
            .unwrap_err()
            .message
            .contains("broker 9 is not registered"));
        assert!(validate_target(&[2, 1], &reg).is_ok());
    }
}
