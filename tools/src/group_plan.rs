//! The decisions of `ferry consume --group` as plain functions: what a new assignment changes,
//! which offsets to commit, where a partition starts, when the next heartbeat goes and what a
//! heartbeat's error calls for. `group_consume` is the driver.

use std::collections::{BTreeMap, BTreeSet};

use proto::errors::ErrorCode;
use uuid::Uuid;

/// The heartbeat interval used until the coordinator names one, and the bounds put on what it
/// names (a zero interval would spin; a huge one would let the session end).
pub const DEFAULT_INTERVAL_MS: u64 = 5_000;
const MIN_INTERVAL_MS: u64 = 100;
const MAX_INTERVAL_MS: u64 = 30_000;

/// What a new assignment changes for a member.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssignmentChange {
    /// Partitions it must stop reading (and commit) before it says it let them go.
    pub revoked: BTreeSet<i32>,
    /// Partitions it starts reading.
    pub added: BTreeSet<i32>,
}

impl AssignmentChange {
    /// Whether the member owns something else now, and so must tell the coordinator.
    pub fn is_empty(&self) -> bool {
        self.revoked.is_empty() && self.added.is_empty()
    }
}

/// The partitions of `topic` in an assignment; other topics' are not this member's concern.
pub fn partitions_of(assignment: &[(Uuid, Vec<i32>)], topic: Uuid) -> BTreeSet<i32> {
    assignment
        .iter()
        .filter(|(id, _)| *id == topic)
        .flat_map(|(_, ps)| ps.iter().copied())
        .collect()
}

/// The change from what a member owns to what it was assigned.
pub fn diff(owned: &BTreeSet<i32>, assigned: &BTreeSet<i32>) -> AssignmentChange {
    AssignmentChange {
        revoked: owned.difference(assigned).copied().collect(),
        added: assigned.difference(owned).copied().collect(),
    }
}

/// The offsets to commit: each partition of `of` whose position moved past its last commit
/// (a partition read but never committed counts as moved).
pub fn to_commit(
    positions: &BTreeMap<i32, i64>,
    committed: &BTreeMap<i32, i64>,
    of: &BTreeSet<i32>,
) -> Vec<(i32, i64)> {
    of.iter()
        .filter_map(|p| {
            let pos = *positions.get(p)?;
            (committed.get(p) != Some(&pos)).then_some((*p, pos))
        })
        .collect()
}

/// Where a newly assigned partition starts: at its committed offset when there is one (Kafka's
/// -1 means none), else at the earliest or latest offset (`auto.offset.reset`).
pub fn start_offset(committed: i64, from_beginning: bool, earliest: i64, latest: i64) -> i64 {
    if committed >= 0 {
        committed
    } else if from_beginning {
        earliest
    } else {
        latest
    }
}

/// The interval to heartbeat at, from the coordinator's answer (ms), within bounds.
pub fn interval_ms(answered: i32) -> u64 {
    u64::try_from(answered)
        .unwrap_or(DEFAULT_INTERVAL_MS)
        .clamp(MIN_INTERVAL_MS, MAX_INTERVAL_MS)
}

/// When the next heartbeat goes (ms on the caller's clock): at once when the member owes the
/// coordinator word of what it now owns, else an interval after the last one sent.
pub fn next_heartbeat(last_sent_ms: u64, interval_ms: u64, owes_ack: bool) -> u64 {
    if owes_ack {
        last_sent_ms
    } else {
        last_sent_ms.saturating_add(interval_ms)
    }
}

/// What a heartbeat's error calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// Ask again, after finding the coordinator again when `rediscover`.
    Retry {
        /// Whether the coordinator moved or is unknown.
        rediscover: bool,
    },
    /// The member was fenced: it loses its partitions uncommitted and joins again.
    Rejoin,
    /// Nothing a retry mends: the command ends with the error.
    Fail,
}

/// Kafka's consumer's reaction to a ConsumerGroupHeartbeat error.
pub fn on_heartbeat_error(code: ErrorCode) -> OnError {
    match code {
        ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE => OnError::Retry { rediscover: true },
        ErrorCode::COORDINATOR_LOAD_IN_PROGRESS | ErrorCode::REQUEST_TIMED_OUT => OnError::Retry { rediscover: false },
        ErrorCode::FENCED_MEMBER_EPOCH | ErrorCode::UNKNOWN_MEMBER_ID => OnError::Rejoin,
        _ => OnError::Fail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ps: &[i32]) -> BTreeSet<i32> {
        ps.iter().copied().collect()
    }

    #[test]
    fn an_assignment_of_other_partitions_revokes_the_old_and_adds_the_new() {
        let c = diff(&set(&[0, 1, 2]), &set(&[2, 3]));
        assert_eq!(c.revoked, set(&[0, 1]));
        assert_eq!(c.added, set(&[3]));
        assert!(diff(&set(&[1]), &set(&[1])).is_empty());
    }

    #[test]
    fn only_the_subscribed_topics_partitions_count() {
        let (t, other) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let a = vec![(t, vec![3, 1]), (other, vec![0]), (t, vec![2])];
        assert_eq!(partitions_of(&a, t), set(&[1, 2, 3]));
        assert_eq!(partitions_of(&a, Uuid::from_u128(3)), set(&[]));
    }

    #[test]
    fn only_positions_that_moved_since_the_last_commit_are_committed() {
        let positions: BTreeMap<i32, i64> = [(0, 10), (1, 5), (2, 7)].into();
        let committed: BTreeMap<i32, i64> = [(0, 10), (1, 3)].into();
        assert_eq!(
            to_commit(&positions, &committed, &set(&[0, 1, 2])),
            vec![(1, 5), (2, 7)]
        );
        // Only the partitions asked about (those being revoked, say).
        assert_eq!(to_commit(&positions, &committed, &set(&[2, 9])), vec![(2, 7)]);
    }

    #[test]
    fn a_partition_starts_at_its_commit_else_at_the_reset_end() {
        assert_eq!(start_offset(42, true, 0, 100), 42);
        assert_eq!(start_offset(0, false, 0, 100), 0);
        assert_eq!(start_offset(-1, true, 5, 100), 5);
        assert_eq!(start_offset(-1, false, 5, 100), 100);
    }

    #[test]
    fn heartbeats_go_at_the_interval_unless_an_ack_is_owed() {
        assert_eq!(next_heartbeat(1_000, interval_ms(5_000), false), 6_000);
        assert_eq!(next_heartbeat(1_000, interval_ms(5_000), true), 1_000);
        // A zero, negative or huge interval is bounded.
        assert_eq!(interval_ms(0), MIN_INTERVAL_MS);
        assert_eq!(interval_ms(-5), DEFAULT_INTERVAL_MS);
        assert_eq!(interval_ms(i32::MAX), MAX_INTERVAL_MS);
    }

    #[test]
    fn a_moved_coordinator_is_found_again_and_a_fenced_member_joins_again() {
        assert_eq!(
            on_heartbeat_error(ErrorCode::NOT_COORDINATOR),
            OnError::Retry { rediscover: true }
        );
        assert_eq!(
            on_heartbeat_error(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS),
            OnError::Retry { rediscover: false }
        );
        assert_eq!(on_heartbeat_error(ErrorCode::FENCED_MEMBER_EPOCH), OnError::Rejoin);
        assert_eq!(on_heartbeat_error(ErrorCode::UNKNOWN_MEMBER_ID), OnError::Rejoin);
        assert_eq!(on_heartbeat_error(ErrorCode::INVALID_REQUEST), OnError::Fail);
    }
}
