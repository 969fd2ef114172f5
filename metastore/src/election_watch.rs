//! Calls every election of its node, after a pre-vote ([`crate::pre_vote`]); openraft's own
//! election timer is off.
//!
//! The watch asks for an election once a voter has heard from no leader or candidate for the
//! lease plus a random election timeout (openraft's own timing), and only once a majority would
//! vote for it (a pre-vote, which also keeps a node with a shorter log from campaigning). Without the
//! random part, two followers that last heard the same leader campaigned together in the same
//! term and split the vote. It began as a backstop: openraft 0.9 adds twice the maximum
//! election timeout to a follower's wait once one of its elections met a voter with a longer
//! log, which left a paused leader unreplaced for 4.7 s in the fault suite.
//!
//! [`Watch`] decides; [`start`] drives it from the node's Raft metrics and the Raft service's
//! record of the last leader or candidate it heard ([`Heard`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::ServerState;

use crate::peers::Peers;
use crate::types::Raft;

/// What the Raft service learns for the watch and for pre-votes: when this node last heard from
/// a leader it follows or a candidate it voted for. (A node whose log is shorter than a peer's
/// is kept from campaigning by the pre-vote, which compares logs.)
#[derive(Clone, Debug)]
pub struct Heard(Arc<parking_lot::Mutex<HeardState>>);

#[derive(Debug)]
struct HeardState {
    at: Instant,
    /// Leader requests (entries, snapshot chunks) received and not yet answered.
    receiving: usize,
}

impl Default for Heard {
    fn default() -> Self {
        Self(Arc::new(parking_lot::Mutex::new(HeardState {
            at: Instant::now(),
            receiving: 0,
        })))
    }
}

/// A leader's request being taken; see [`Heard::receiving`].
#[must_use = "the request counts as heard only while this lives"]
pub struct Receiving(Heard);

impl Drop for Receiving {
    fn drop(&mut self) {
        let mut s = self.0 .0.lock();
        s.receiving -= 1;
    }
}

impl Heard {
    /// Records contact now: a leader's entries or snapshot taken, or a vote granted.
    pub fn touch(&self) {
        self.0.lock().at = Instant::now();
    }

    /// A leader's request has arrived: until the returned guard drops, the node counts as
    /// hearing from a leader. A follower writing a large append can take longer than the
    /// election watch's silence, and its leader's heartbeats queue behind that append; counted
    /// only once answered, it would ask for a pre-vote, which its peer, as stuck, would grant.
    pub fn receiving(&self) -> Receiving {
        self.0.lock().receiving += 1;
        Receiving(self.clone())
    }

    /// The last contact: now while a leader's request is being taken.
    pub fn at(&self) -> Instant {
        let s = self.0.lock();
        if s.receiving > 0 {
            Instant::now()
        } else {
            s.at
        }
    }
}

/// The watch's timing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    /// Least silence after which the node asks for an election.
    pub quiet: Duration,
    /// Up to this much more, drawn at random for each round.
    pub spread: Duration,
    /// A longer gap between two ticks means the process was paused or starved.
    pub max_gap: Duration,
    /// How long a pre-vote waits for each peer's answer.
    pub ask: Duration,
    /// Least wait before a candidate whose election came to nothing (a split vote) tries
    /// again: Raft's random election timeout. The lease is already known to be over.
    pub retry: Duration,
}

/// How often the driver ticks.
const TICK: Duration = Duration::from_millis(50);

impl Timing {
    /// From openraft's settings, openraft's own election timing: the lease (openraft makes it
    /// the longest election timeout) plus a random election timeout. The watch calls every
    /// election (openraft's timer is off, see [`crate::pre_vote`]), so it waits no longer than
    /// openraft would have.
    pub fn from_raft(election_min_ms: u64, election_max_ms: u64) -> Self {
        Self {
            quiet: Duration::from_millis(election_max_ms + election_min_ms),
            spread: Duration::from_millis(election_max_ms.saturating_sub(election_min_ms)),
            max_gap: 4 * TICK,
            ask: Duration::from_millis(election_min_ms),
            retry: Duration::from_millis(election_min_ms),
        }
    }

    /// One round's wait: `quiet` plus `fraction` (in 0..=1) of `spread`.
    pub fn wait(&self, fraction: f64) -> Duration {
        self.quiet + self.spread.mul_f64(fraction.clamp(0.0, 1.0))
    }

    /// A candidate's wait before it tries again: `retry` plus `fraction` of `spread`.
    pub fn retry_wait(&self, fraction: f64) -> Duration {
        self.retry + self.spread.mul_f64(fraction.clamp(0.0, 1.0))
    }
}

/// The decision state: when the node last heard a leader or candidate, or changed its vote, when
/// it last ticked, and how much silence this round waits for.
#[derive(Clone, Debug)]
pub struct Watch {
    quiet_since: Instant,
    last_tick: Instant,
    wait: Duration,
}

impl Watch {
    /// A watch that starts quiet at `now` and waits `wait` of silence.
    pub fn new(now: Instant, wait: Duration) -> Self {
        Self {
            quiet_since: now,
            last_tick: now,
            wait,
        }
    }

    /// Time spent at `now` asking for pre-votes is not a pause of the process.
    pub fn resume(&mut self, now: Instant) {
        self.last_tick = now;
    }

    /// The silence the next round waits for (a fresh draw of [`Timing::wait`]).
    pub fn set_wait(&mut self, wait: Duration) {
        self.wait = wait;
    }

    /// Something was heard at `at` (a leader's append, a vote it granted, its own candidacy):
    /// the silence starts again from there.
    pub fn heard(&mut self, at: Instant) {
        self.quiet_since = self.quiet_since.max(at);
    }

    /// One tick at `now`; `eligible` when the node is a voting follower or candidate allowed to
    /// campaign. True when it should ask for an election.
    pub fn tick(&mut self, now: Instant, eligible: bool, t: &Timing) -> bool {
        debug_assert!(
            self.wait >= t.retry.min(t.quiet),
            "a round waits at least an election timeout"
        );
        // After a pause (SIGSTOP) or starvation the node cannot tell what it missed; campaigning
        // at once would depose a leader elected meanwhile, so it waits a whole quiet time.
        if now.saturating_duration_since(self.last_tick) > t.max_gap || !eligible {
            self.quiet_since = now;
        }
        self.last_tick = now;
        if now.saturating_duration_since(self.quiet_since) >= self.wait {
            // Its own election changes its vote; until then it does not ask again.
            self.quiet_since = now;
            return true;
        }
        false
    }
}

/// Starts the watch of `raft` on the current runtime (the Raft thread's, which a busy node
/// leaves free), fed by what the Raft traffic of `peers` heard. Ends when Raft shuts down.
pub fn start(raft: Raft, peers: Peers, voter: crate::pre_vote::Voter, timing: Timing) {
    tokio::spawn(async move {
        let (heard, credential) = (peers.heard(), peers.credential());
        let lane = peers.raft_lane();
        let mut metrics = raft.metrics();
        let mut watch = Watch::new(Instant::now(), timing.wait(rand::random()));
        let mut vote = metrics.borrow().vote;
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if metrics.has_changed().is_err() {
                return;
            }
            let now = Instant::now();
            let eligible = {
                let m = metrics.borrow_and_update();
                if m.vote != vote {
                    vote = m.vote;
                    // Only its own candidacy restarts the silence. A rival's rejected request
                    // also moves the vote (to its term); counting it would let nodes with shorter
                    // logs, campaigning in turn, keep the one with the longest log from asking.
                    if vote.leader_id().voted_for() == Some(m.id) {
                        watch.heard(now);
                        // Should this election come to nothing (two candidates split the
                        // vote), the next is called after an election timeout, not the lease.
                        watch.set_wait(timing.retry_wait(rand::random()));
                    } else {
                        watch.set_wait(timing.wait(rand::random()));
                    }
                }
                matches!(m.state, ServerState::Follower | ServerState::Candidate)
                    && m.membership_config.membership().voter_ids().any(|v| v == m.id)
                    && credential.may_campaign()
            };
            watch.heard(heard.at());
            if watch.tick(now, eligible, &timing) {
                watch.set_wait(timing.wait(rand::random()));
                let (id, addrs, voters) = {
                    let m = metrics.borrow();
                    let membership = m.membership_config.membership();
                    let voters: Vec<_> = membership.voter_ids().collect();
                    let addrs: Vec<String> = voters
                        .iter()
                        .filter(|v| **v != m.id)
                        .filter_map(|v| membership.get_node(v).map(|n| n.addr.clone()))
                        .collect();
                    (m.id, addrs, voters.len())
                };
                let granted = voter.ask(&lane, id, &addrs, voters, timing.ask).await;
                watch.resume(Instant::now());
                if !granted {
                    tracing::debug!("no majority would vote for this node: not campaigning");
                    continue;
                }
                tracing::info!(
                    quiet_ms = watch.wait.as_millis() as u64,
                    "no leader heard from and a majority would vote: calling an election"
                );
                if raft.trigger().elect().await.is_err() {
                    return;
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watch's timing with a 900 ms quiet time and a 200 ms spread (round numbers for the
    /// decision tests; `from_raft` is checked on its own).
    fn timing() -> Timing {
        Timing {
            quiet: Duration::from_millis(900),
            spread: Duration::from_millis(200),
            max_gap: 4 * TICK,
            ask: Duration::from_millis(200),
            retry: Duration::from_millis(300),
        }
    }

    /// A watch that waits the least quiet time every round.
    fn watch(at: Instant) -> Watch {
        Watch::new(at, timing().wait(0.0))
    }

    /// Ticks every 50 ms from `start` for `ms`, returning the offsets (ms) at which it elects.
    fn run(w: &mut Watch, start: Instant, from_ms: u64, to_ms: u64, eligible: bool) -> Vec<u64> {
        (from_ms / 50..=to_ms / 50)
            .map(|i| i * 50)
            .filter(|&ms| w.tick(start + Duration::from_millis(ms), eligible, &timing()))
            .collect()
    }

    #[test]
    fn the_wait_is_openrafts_the_lease_plus_a_random_election_timeout() {
        let t = Timing::from_raft(200, 400);
        assert_eq!(t.quiet, Duration::from_millis(600));
        assert_eq!(t.wait(0.0), Duration::from_millis(600));
        assert_eq!(t.wait(0.5), Duration::from_millis(700));
        assert_eq!(t.retry_wait(0.0), Duration::from_millis(200));
        assert_eq!(t.retry_wait(1.0), Duration::from_millis(400));
        assert_eq!(t.wait(1.0), Duration::from_millis(800));
        assert_eq!(t.wait(7.0), Duration::from_millis(800));
        assert_eq!(t.ask, Duration::from_millis(200));
    }

    #[test]
    fn two_followers_with_different_draws_do_not_campaign_together() {
        let t0 = Instant::now();
        let (mut a, mut b) = (Watch::new(t0, timing().wait(0.1)), Watch::new(t0, timing().wait(0.9)));
        let fired_a = run(&mut a, t0, 50, 1100, true);
        let fired_b = run(&mut b, t0, 50, 1100, true);
        assert_eq!(fired_a, vec![950]);
        assert_eq!(fired_b, vec![1100]);
    }

    #[test]
    fn contact_moves_the_heard_time_forward() {
        let heard = Heard::default();
        let before = heard.at();
        heard.touch();
        assert!(heard.at() >= before);
        let touched = heard.at();
        heard.touch();
        assert!(heard.at() >= touched);
    }

    #[test]
    fn a_request_being_taken_counts_as_heard_until_it_is_answered() {
        let heard = Heard::default();
        heard.0.lock().at = Instant::now() - Duration::from_secs(5);
        let taking = heard.receiving();
        std::thread::sleep(Duration::from_millis(5));
        assert!(heard.at().elapsed() < Duration::from_secs(1));
        drop(taking);
        assert!(heard.at().elapsed() >= Duration::from_secs(5));
    }

    #[test]
    fn a_candidate_whose_election_failed_tries_again_after_an_election_timeout() {
        let t0 = Instant::now();
        let mut w = watch(t0);
        assert_eq!(run(&mut w, t0, 50, 900, true), vec![900]);
        // It campaigned at 900 ms and nobody won.
        w.heard(t0 + Duration::from_millis(900));
        w.set_wait(timing().retry_wait(0.0));
        assert_eq!(run(&mut w, t0, 950, 1500, true), vec![1200, 1500]);
    }

    #[test]
    fn a_silent_follower_elects_once_per_quiet_time() {
        let t0 = Instant::now();
        let mut w = watch(t0);
        assert_eq!(run(&mut w, t0, 50, 2000, true), vec![900, 1800]);
    }

    #[test]
    fn hearing_a_leader_restarts_the_silence() {
        let t0 = Instant::now();
        let mut w = watch(t0);
        assert!(run(&mut w, t0, 50, 850, true).is_empty());
        w.heard(t0 + Duration::from_millis(850));
        assert!(run(&mut w, t0, 900, 1700, true).is_empty());
        assert_eq!(run(&mut w, t0, 1750, 1750, true), vec![1750]);
    }

    #[test]
    fn an_old_contact_does_not_move_the_silence_back() {
        let t0 = Instant::now();
        let mut w = watch(t0 + Duration::from_millis(500));
        w.heard(t0);
        assert!(run(&mut w, t0, 550, 1350, true).is_empty());
        assert_eq!(run(&mut w, t0, 1400, 1400, true), vec![1400]);
    }

    #[test]
    fn a_leader_or_a_node_not_allowed_to_campaign_never_elects() {
        let t0 = Instant::now();
        let mut w = watch(t0);
        assert!(run(&mut w, t0, 50, 3000, false).is_empty());
        // Stepping down starts a fresh silence.
        assert_eq!(run(&mut w, t0, 3050, 3950, true), vec![3900]);
    }

    #[test]
    fn a_paused_node_waits_a_whole_quiet_time_after_it_resumes() {
        let t0 = Instant::now();
        let mut w = watch(t0);
        assert!(run(&mut w, t0, 50, 100, true).is_empty());
        // No tick from 100 ms to 3,000 ms: the process was stopped.
        assert!(run(&mut w, t0, 3000, 3850, true).is_empty());
        assert_eq!(run(&mut w, t0, 3900, 3900, true), vec![3900]);
    }
}
