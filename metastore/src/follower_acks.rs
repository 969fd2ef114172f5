//! When each follower last answered the leader's appends, and when it last held everything the
//! leader had: Kafka's DescribeQuorum reports both (`LastFetchTimestamp`,
//! `LastCaughtUpTimestamp`), and openraft 0.9's metrics keep neither. The Raft network
//! (the Raft network module) notes each append it sends and each answer; [`after_ack`] is the rule.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use proto::clock::Clock;

use crate::types::{NodeId, Raft};

/// What the leader knows of one follower's answers, in wall-clock ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Acks {
    /// When the follower last answered an append (a heartbeat included) with success.
    pub last_fetch_ms: Option<u64>,
    /// When the leader last sent an append after which the follower held every entry the
    /// leader had at that moment.
    pub last_caught_up_ms: Option<u64>,
}

/// An append as it left the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// When it was sent (wall ms).
    pub at_ms: u64,
    /// The leader's last log index then.
    pub log_end: Option<u64>,
}

/// The follower's [`Acks`] after it answered `sent` with success at `now_ms`, holding entries up
/// to `matched`. Times never go back, so an answer overtaken by a later one changes nothing.
pub fn after_ack(prev: Acks, sent: Sent, matched: Option<u64>, now_ms: u64) -> Acks {
    let caught_up = (matched >= sent.log_end).then_some(sent.at_ms);
    Acks {
        last_fetch_ms: prev.last_fetch_ms.max(Some(now_ms)),
        last_caught_up_ms: prev.last_caught_up_ms.max(caught_up),
    }
}

/// The followers' answers as this node's Raft network saw them (it only sends appends while it
/// leads). Clones share the record.
#[derive(Clone)]
pub struct FollowerAcks {
    inner: Arc<Inner>,
}

struct Inner {
    clock: Clock,
    /// The node's Raft, for its last log index; set once Raft is made, as the network is made
    /// before it.
    raft: OnceLock<Raft>,
    acks: Mutex<HashMap<NodeId, Acks>>,
}

impl FollowerAcks {
    /// An empty record on `clock`.
    pub fn new(clock: Clock) -> Self {
        Self {
            inner: Arc::new(Inner {
                clock,
                raft: OnceLock::new(),
                acks: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Reads the leader's last log index from `raft` from now on.
    pub fn watch(&self, raft: &Raft) {
        let _ = self.inner.raft.set(raft.clone());
    }

    /// Notes an append leaving now.
    pub fn sending(&self) -> Sent {
        let log_end = self.inner.raft.get().and_then(|r| r.metrics().borrow().last_log_index);
        Sent {
            at_ms: self.inner.clock.wall_ms(),
            log_end,
        }
    }

    /// Notes `target`'s successful answer to `sent`, after which it holds entries up to `matched`.
    pub fn acked(&self, target: NodeId, sent: Sent, matched: Option<u64>) {
        let now = self.inner.clock.wall_ms();
        let mut acks = self.inner.acks.lock();
        let prev = acks.get(&target).copied().unwrap_or_default();
        acks.insert(target, after_ack(prev, sent, matched, now));
    }

    /// Every follower's answers so far.
    pub fn all(&self) -> HashMap<NodeId, Acks> {
        self.inner.acks.lock().clone()
    }

    /// The clock the record is kept on.
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_that_holds_the_leaders_log_end_is_caught_up_as_of_the_send() {
        let sent = Sent {
            at_ms: 100,
            log_end: Some(7),
        };
        let a = after_ack(Acks::default(), sent, Some(7), 130);
        assert_eq!(
            a,
            Acks {
                last_fetch_ms: Some(130),
                last_caught_up_ms: Some(100)
            }
        );
    }

    #[test]
    fn a_follower_behind_keeps_its_last_caught_up_time_and_times_never_go_back() {
        let before = Acks {
            last_fetch_ms: Some(90),
            last_caught_up_ms: Some(50),
        };
        let behind = Sent {
            at_ms: 100,
            log_end: Some(9),
        };
        let a = after_ack(before, behind, Some(7), 120);
        assert_eq!(
            a,
            Acks {
                last_fetch_ms: Some(120),
                last_caught_up_ms: Some(50)
            }
        );
        // An answer that arrives late (overtaken by a newer one) moves nothing back.
        let late = after_ack(
            a,
            Sent {
                at_ms: 10,
                log_end: None,
            },
            Some(7),
            110,
        );
        assert_eq!(late, a);
    }

    #[test]
    fn the_record_keeps_each_followers_answers() {
        let acks = FollowerAcks::new(Clock::manual(1_000));
        let sent = acks.sending();
        assert_eq!(
            sent,
            Sent {
                at_ms: 1_000,
                log_end: None
            }
        );
        acks.clock().advance(5);
        acks.acked(2, sent, Some(3));
        let all = acks.all();
        assert_eq!(all.len(), 1);
        assert_eq!(
            all[&2],
            Acks {
                last_fetch_ms: Some(1_005),
                last_caught_up_ms: Some(1_000)
            }
        );
    }
}
