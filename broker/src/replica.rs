//! One partition replica on this broker: its log, its role (leader or follower, with the epoch)
//! and, as leader, its followers' progress and the high watermark. Waiters (acks=all produces,
//! long-poll fetches) are woken through its change signal (`change_signal`) whenever the log or
//! the watermark moves.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use proto::clock::Clock;
use proto::errors::ErrorCode;
use proto::ferry::PartitionState;

use crate::change_signal::{ChangeSignal, ChangeWatch};
use crate::future_log::FutureLog;
use crate::isr::{self, FollowerProgress};
use crate::lock_order::{lock, Ordered, Rank};
use crate::partition_log::PartitionLog;

/// What this broker does for the partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Serves produce and fetch, at this leader epoch.
    Leader {
        /// The epoch it leads in.
        epoch: u32,
    },
    /// Copies from the leader.
    Follower {
        /// The leader's broker id (-1: none right now).
        leader: i32,
        /// The epoch of that leadership.
        epoch: u32,
    },
}

/// The leader and epoch that broker `me`'s replica in `role` copies from, or `None` when it
/// copies nothing: it leads, no replica leads, or it is on its way out (in `removing`) and not
/// in the ISR. Such a replica is never needed again: it cannot be elected cleanly, a completed
/// move drops it, and only a cancel or a new target that keeps it (when it is wanted, and
/// fetches, again) could. Its copy would only compete with the throttled moves for the bandwidth
/// the throttle protects. Kafka's brokers fetch there; Ferry does not, on purpose.
pub fn fetch_source(me: i32, role: Role, meta: &PartitionState) -> Option<(i32, u32)> {
    let Role::Follower { leader, epoch } = role else {
        return None;
    };
    let leaving_out_of_sync = meta.removing.contains(&me) && !meta.isr.contains(&me);
    (leader >= 0 && !leaving_out_of_sync).then_some((leader, epoch))
}

/// An error answered to a client: Kafka's code and a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ReplicaError {
    /// Kafka's code.
    pub code: ErrorCode,
    /// For people.
    pub message: String,
    /// The leader, when known, for NOT_LEADER_OR_FOLLOWER.
    pub leader_hint: i32,
}

impl ReplicaError {
    /// An error without a leader hint.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            leader_hint: -1,
        }
    }
}

/// The mutable state next to the log.
#[derive(Debug)]
pub struct ReplicaState {
    /// Current role.
    pub role: Role,
    /// The partition as last stored in the metadata (ISR, epochs).
    pub meta: PartitionState,
    /// Records below this offset are committed.
    pub high_watermark: i64,
    /// As leader: the log end offset when this process took the lead. Below it the high
    /// watermark is not yet known (KIP-207): a restarted or newly elected leader learns it from
    /// its followers' next fetches.
    pub epoch_start: Option<i64>,
    /// As leader: each follower's progress.
    pub followers: HashMap<i32, FollowerProgress>,
    /// As leader: an ISR change has been sent and not answered yet.
    pub isr_change_in_flight: bool,
    /// As leader, while an ISR change is in flight: the ISR it asks for. The high watermark counts
    /// its members and the current ISR's (Kafka's maximal ISR): a replica about to join must hold
    /// a record before it is acknowledged, since the change that lets it in may also make it the
    /// leader (a reassignment's completion does).
    pub pending_isr: Option<Vec<i32>>,
}

/// A partition replica.
pub struct Replica {
    /// Topic name.
    pub topic: String,
    /// Partition number.
    pub partition: u32,
    /// This broker's id.
    pub broker_id: i32,
    /// The log. Its locks are taken through the methods below, in the order `lock_order` asserts.
    log: Mutex<PartitionLog>,
    /// The log being filled in another dir while the replica moves there. Boxed, as few
    /// replicas move at once and an inline one costs every replica its size.
    future: Mutex<Option<Box<FutureLog>>>,
    /// Bumped before every truncation, so a copy made without the log's lock can tell whether
    /// the log changed under it.
    pub truncations: std::sync::atomic::AtomicU64,
    /// Role and progress.
    state: Mutex<ReplicaState>,
    changed: ChangeSignal,
    clock: Clock,
}

impl Replica {
    /// A replica over an opened log; it starts as a follower with no leader.
    pub fn new(topic: String, partition: u32, broker_id: i32, log: PartitionLog, clock: Clock) -> Self {
        Self {
            topic,
            partition,
            broker_id,
            log: Mutex::new(log),
            future: Mutex::new(None),
            truncations: std::sync::atomic::AtomicU64::new(0),
            state: Mutex::new(ReplicaState {
                role: Role::Follower { leader: -1, epoch: 0 },
                meta: PartitionState::default(),
                high_watermark: 0,
                epoch_start: None,
                followers: HashMap::new(),
                isr_change_in_flight: false,
                pending_isr: None,
            }),
            changed: ChangeSignal::default(),
            clock,
        }
    }

    /// Starts from a checkpointed high watermark, within the log as recovered.
    pub fn restore_high_watermark(&self, hw: i64) {
        let leo = self.log().log_end_offset();
        self.state().high_watermark = hw.clamp(0, leo);
    }

    /// Role, metadata and progress: the first lock in the order.
    pub fn state(&self) -> Ordered<'_, ReplicaState> {
        lock(&self.state, Rank::State)
    }

    /// The current log: taken after `state`, before `future`.
    pub fn log(&self) -> Ordered<'_, PartitionLog> {
        lock(&self.log, Rank::Log)
    }

    /// The future log of a running dir move: the last lock in the order.
    pub fn future(&self) -> Ordered<'_, Option<Box<FutureLog>>> {
        lock(&self.future, Rank::Future)
    }

    /// `<topic>-<partition>`.
    pub fn name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }

    /// Truncates the log and, so that a move never copies records the log no longer has, its
    /// future log; returns the new log end offset.
    pub fn truncate_log(&self, log: &mut PartitionLog, offset: i64) -> Result<i64, crate::partition_log::LogError> {
        self.truncations.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        log.truncate_to(offset)?;
        let leo = log.log_end_offset();
        if let Some(f) = self.future().as_mut() {
            f.log.truncate_to(leo.min(f.log.log_end_offset()))?;
        }
        Ok(leo)
    }

    /// Milliseconds on the broker's monotonic clock.
    pub fn now_ms(&self) -> u64 {
        self.clock.mono_ms()
    }

    /// Wakes everyone waiting for the log or watermark to move.
    pub fn notify(&self) {
        self.changed.send();
    }

    /// A receiver that sees every later [`Replica::notify`].
    pub fn subscribe(&self) -> ChangeWatch<'_> {
        self.changed.subscribe()
    }

    /// Applies the partition's stored state; returns the new role when it changed (a new leader
    /// or epoch), so that the caller can start or stop fetching.
    pub fn apply_metadata(&self, meta: &PartitionState) -> Option<Role> {
        // A state that breaks the partition rules is not acted on: leading or following on it
        // could acknowledge records no ISR holds.
        if let Err(e) = meta.check_invariants() {
            tracing::error!(replica = %self.name(), error = %e, "ignoring a partition state that breaks the partition rules");
            return None;
        }
        let mut st = self.state();
        let role = if meta.leader == self.broker_id {
            Role::Leader {
                epoch: meta.leader_epoch,
            }
        } else {
            Role::Follower {
                leader: meta.leader,
                epoch: meta.leader_epoch,
            }
        };
        let changed = role != st.role;
        if changed {
            // A leader that keeps the lead under a new epoch knew its high watermark already.
            st.epoch_start = match (st.role, role) {
                (Role::Leader { .. }, Role::Leader { .. }) => st.epoch_start,
                (_, Role::Leader { .. }) => Some(self.log().log_end_offset()),
                _ => None,
            };
            st.role = role;
            st.followers.clear();
            st.isr_change_in_flight = false;
            st.pending_isr = None;
            if let Role::Leader { .. } = role {
                let leo = self.log().log_end_offset();
                st.high_watermark = st.high_watermark.min(leo);
                let now = self.now_ms();
                for r in meta.replicas.iter().filter(|r| **r != self.broker_id) {
                    st.followers.insert(*r, FollowerProgress::new(now));
                }
            }
        }
        // Only a newer view replaces the old one (an ISR change answer may arrive before its watch event).
        if meta.partition_epoch >= st.meta.partition_epoch || changed {
            st.meta = meta.clone();
        }
        drop(st);
        self.update_high_watermark();
        self.notify();
        changed.then_some(role)
    }

    /// Where this replica copies from now, by [`fetch_source`] over its role and stored state.
    pub fn fetch_source(&self) -> Option<(i32, u32)> {
        let st = self.state();
        fetch_source(self.broker_id, st.role, &st.meta)
    }

    /// Recomputes the leader's high watermark; returns it.
    pub fn update_high_watermark(&self) -> i64 {
        let mut st = self.state();
        if let Role::Leader { .. } = st.role {
            let leo = self.log().log_end_offset();
            let isr = isr::maximal(&st.meta.isr, st.pending_isr.as_deref());
            let hw = isr::high_watermark(self.broker_id, leo, isr, &st.followers, st.high_watermark);
            if hw != st.high_watermark {
                st.high_watermark = hw;
                drop(st);
                self.notify();
                return hw;
            }
        }
        st.high_watermark
    }

    /// The leader epoch, or NOT_LEADER_OR_FOLLOWER.
    pub fn leader_epoch(&self) -> Result<u32, ReplicaError> {
        let st = self.state();
        match st.role {
            Role::Leader { epoch } => Ok(epoch),
            Role::Follower { leader, .. } => Err(ReplicaError {
                code: ErrorCode::NOT_LEADER_OR_FOLLOWER,
                message: format!(
                    "broker {} does not lead {}; broker {leader} does",
                    self.broker_id,
                    self.name()
                ),
                leader_hint: leader,
            }),
        }
    }

    /// The high watermark a client may be told as the end of the committed records, or
    /// OFFSET_NOT_AVAILABLE (retriable) while a new leader has not yet learnt it: answering a
    /// lower one would make acknowledged records look gone (Kafka's ListOffsets does the same).
    pub fn known_high_watermark(&self) -> Result<i64, ReplicaError> {
        let st = self.state();
        match st.epoch_start {
            Some(start) if st.high_watermark < start => Err(ReplicaError::new(
                ErrorCode::OFFSET_NOT_AVAILABLE,
                format!(
                    "{}: the leader's high watermark {} is behind the start of its epoch at {start}; its followers have not fetched yet",
                    self.name(),
                    st.high_watermark
                ),
            )),
            _ => Ok(st.high_watermark),
        }
    }

    /// Waits until `done` holds or `timeout` passes; `done` is checked after each change.
    pub async fn wait_until(&self, timeout: Duration, mut done: impl FnMut(&Replica) -> bool) -> bool {
        let mut rx = self.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if done(self) {
                return true;
            }
            if tokio::time::timeout_at(deadline, rx.changed()).await.is_err() {
                return done(self);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(replicas: &[i32], removing: &[i32], leader: i32, isr: &[i32]) -> PartitionState {
        PartitionState {
            replicas: replicas.to_vec(),
            removing: removing.to_vec(),
            leader,
            leader_epoch: 7,
            isr: isr.to_vec(),
            ..Default::default()
        }
    }

    fn follower(leader: i32) -> Role {
        Role::Follower { leader, epoch: 7 }
    }

    #[test]
    fn a_follower_fetches_from_its_leader_and_a_leader_or_a_leaderless_one_does_not() {
        let s = state(&[1, 2, 3], &[], 1, &[1, 2]);
        assert_eq!(fetch_source(2, follower(1), &s), Some((1, 7)));
        assert_eq!(
            fetch_source(3, follower(1), &s),
            Some((1, 7)),
            "out of sync, not leaving"
        );
        assert_eq!(fetch_source(1, Role::Leader { epoch: 7 }, &s), None);
        assert_eq!(fetch_source(2, follower(-1), &state(&[1, 2], &[], -1, &[2])), None);
    }

    #[test]
    fn a_replica_on_its_way_out_fetches_only_while_in_sync() {
        // [1,2,3] -> [4,5,6] superseded by [1,2,4]: RS [1,2,4,5,6,3], removing 5, 6 and 3.
        let s = state(&[1, 2, 4, 5, 6, 3], &[5, 6, 3], 1, &[1, 2, 3]);
        assert_eq!(fetch_source(5, follower(1), &s), None);
        assert_eq!(fetch_source(6, follower(1), &s), None);
        assert_eq!(
            fetch_source(3, follower(1), &s),
            Some((1, 7)),
            "in sync: still a copy to lose"
        );
        assert_eq!(fetch_source(4, follower(1), &s), Some((1, 7)), "adding");
        // Wanted again (a later target keeps it, or a cancel): it fetches again.
        let again = state(&[1, 2, 5, 4, 6, 3], &[4, 6, 3], 1, &[1, 2, 3]);
        assert_eq!(fetch_source(5, follower(1), &again), Some((1, 7)));
        // Dropping out of the ISR while leaving stops it.
        assert_eq!(fetch_source(3, follower(1), &state(&[1, 2, 3], &[3], 1, &[1, 2])), None);
    }

    #[test]
    fn a_new_leader_answers_no_high_watermark_until_it_reaches_the_start_of_its_epoch() {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = PartitionLog::open(&tmp.path().join("t-0"), Default::default()).unwrap();
        log.append_as_leader(&["a", "b", "c", "d"], 1, 0).unwrap();
        let r = Replica::new("t".into(), 0, 1, log, Clock::system());
        assert_eq!(r.known_high_watermark().unwrap(), 0, "a follower has no epoch start");
        // A restarted process that finds itself leader, with a follower in sync: the committed
        // end is unknown until the follower fetches.
        let mut s = state(&[1, 2], &[], 1, &[1, 2]);
        s.partition_epoch = 1;
        r.apply_metadata(&s);
        let e = r.known_high_watermark().unwrap_err();
        assert_eq!(e.code, ErrorCode::OFFSET_NOT_AVAILABLE, "{e:?}");
        assert!(e.message.contains("t-0") && e.message.contains("at 4"), "{}", e.message);
        // The follower leaves the ISR: the leader alone commits its whole log.
        s.isr = vec![1];
        s.partition_epoch = 2;
        r.apply_metadata(&s);
        assert_eq!(r.known_high_watermark().unwrap(), 4);
        // Keeping the lead under a new epoch keeps what it knew.
        s.leader_epoch += 1;
        r.log().append_as_leader(&["e"], s.leader_epoch, 4).unwrap();
        r.apply_metadata(&s);
        assert_eq!(r.known_high_watermark().unwrap(), 5);
    }
}
