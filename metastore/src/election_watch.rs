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
//! When a node campaigns is decided in one place, [`Watch::step`], from what [`start`] reads at
//! each tick: the node's Raft state and membership, how its vote moved, whether the credential
//! rule lets it campaign ([`crate::credential::may_campaign`]), and the last leader or
//! candidate its Raft service heard ([`Heard`]). When the step says so, the driver asks for
//! pre-votes ([`Voter::ask`]) and calls the election only on a majority.

use std::time::{Duration, Instant};

use openraft::ServerState;

use crate::heard::Heard;
use crate::pre_vote::Voter;
use crate::raft_peers::RaftPeers;
use crate::types::Raft;

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

/// How the node's vote moved since the watch's last tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteMove {
    /// It did not move.
    Same,
    /// To itself: the node's own candidacy.
    OwnCandidacy,
    /// Anywhere else: it voted for a rival, or a rival's rejected request moved its term.
    Other,
}

/// What the watch reads at one tick.
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    /// The tick's time.
    pub now: Instant,
    /// The node's Raft state.
    pub state: ServerState,
    /// Whether the node is a voter of the current membership.
    pub voter: bool,
    /// Whether the credential rule lets it campaign ([`crate::credential::may_campaign`]).
    pub credential_allows: bool,
    /// How its vote moved since the last tick.
    pub vote: VoteMove,
    /// When its Raft service last heard a leader or candidate ([`Heard::at`]).
    pub heard_at: Instant,
}

/// Whether a node may campaign at all: a voting follower or candidate that the credential rule
/// allows. A leader, a learner and a node shutting down never do.
pub fn eligible(state: ServerState, voter: bool, credential_allows: bool) -> bool {
    matches!(state, ServerState::Follower | ServerState::Candidate) && voter && credential_allows
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

    /// The campaign decision, once per tick: true when the node should ask for pre-votes (and,
    /// granted by a majority, call an election). `draw` gives a random fraction in 0..=1 for
    /// each new wait.
    ///
    /// Its own candidacy restarts the silence, and the next round waits only an election timeout
    /// ([`Timing::retry_wait`]), should this election come to nothing. A vote moved anywhere
    /// else draws a fresh [`Timing::wait`] but does not restart the silence: a rival's rejected
    /// request also moves the vote (to its term), and counting it would let nodes with shorter
    /// logs, campaigning in turn, keep the one with the longest log from asking. Contact heard
    /// by the Raft service restarts the silence; an ineligible tick ([`eligible`]) or a pause of
    /// the process starts it again from now. Once the silence reaches this round's wait, the
    /// node asks, and the next round waits a fresh [`Timing::wait`].
    pub fn step(&mut self, seen: &Seen, t: &Timing, mut draw: impl FnMut() -> f64) -> bool {
        match seen.vote {
            VoteMove::Same => {}
            VoteMove::OwnCandidacy => {
                self.heard(seen.now);
                self.set_wait(t.retry_wait(draw()));
            }
            VoteMove::Other => self.set_wait(t.wait(draw())),
        }
        self.heard(seen.heard_at);
        let ask = self.tick(seen.now, eligible(seen.state, seen.voter, seen.credential_allows), t);
        if ask {
            self.set_wait(t.wait(draw()));
        }
        ask
    }

    /// Time spent at `now` asking for pre-votes is not a pause of the process.
    pub fn resume(&mut self, now: Instant) {
        self.last_tick = now;
    }

    /// The silence the current round waits for.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// The silence the next round waits for (a fresh draw of [`Timing::wait`]).
    fn set_wait(&mut self, wait: Duration) {
        self.wait = wait;
    }

    /// Something was heard at `at` (a leader's append, a vote it granted, its own candidacy):
    /// the silence starts again from there.
    fn heard(&mut self, at: Instant) {
        self.quiet_since = self.quiet_since.max(at);
    }

    /// One tick at `now`; `eligible` when the node is a voting follower or candidate allowed to
    /// campaign. True when it should ask for an election.
    fn tick(&mut self, now: Instant, eligible: bool, t: &Timing) -> bool {
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
/// leaves free), fed by what its Raft service `heard`; pre-votes go to the peers on their Raft
/// lane, with the credential of `peers`. Ends when Raft shuts down.
pub fn start(raft: Raft, peers: RaftPeers, heard: Heard, voter: Voter, timing: Timing) {
    tokio::spawn(async move {
        let credential = peers.credential();
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
            let (state, is_voter, moved) = {
                let m = metrics.borrow_and_update();
                let moved = if m.vote == vote {
                    VoteMove::Same
                } else {
                    vote = m.vote;
                    if vote.leader_id().voted_for() == Some(m.id) {
                        VoteMove::OwnCandidacy
                    } else {
                        VoteMove::Other
                    }
                };
                let is_voter = m.membership_config.membership().voter_ids().any(|v| v == m.id);
                (m.state, is_voter, moved)
            };
            let seen = Seen {
                now,
                state,
                voter: is_voter,
                credential_allows: credential.may_campaign(),
                vote: moved,
                heard_at: heard.at(),
            };
            if !watch.step(&seen, &timing, rand::random::<f64>) {
                continue;
            }
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
                quiet_ms = watch.wait().as_millis() as u64,
                "no leader heard from and a majority would vote: calling an election"
            );
            if raft.trigger().elect().await.is_err() {
                return;
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

    /// What a voting follower that last heard from a leader at `heard_at` sees at `ms`.
    fn seen(t0: Instant, ms: u64, heard_at: Instant) -> Seen {
        Seen {
            now: t0 + Duration::from_millis(ms),
            state: ServerState::Follower,
            voter: true,
            credential_allows: true,
            vote: VoteMove::Same,
            heard_at,
        }
    }

    /// Steps every 50 ms from `from_ms` to `to_ms` with `seen` as `at` makes it; the offsets
    /// (ms) at which the node asks for pre-votes. Every draw is 0.
    fn steps(w: &mut Watch, from_ms: u64, to_ms: u64, at: impl Fn(u64) -> Seen) -> Vec<u64> {
        (from_ms / 50..=to_ms / 50)
            .map(|i| i * 50)
            .filter(|&ms| w.step(&at(ms), &timing(), || 0.0))
            .collect()
    }

    #[test]
    fn only_a_voting_follower_or_candidate_the_credential_allows_may_campaign() {
        assert!(eligible(ServerState::Follower, true, true));
        assert!(eligible(ServerState::Candidate, true, true));
        assert!(!eligible(ServerState::Leader, true, true));
        assert!(!eligible(ServerState::Learner, true, true));
        assert!(!eligible(ServerState::Shutdown, true, true));
        assert!(!eligible(ServerState::Follower, false, true), "a learner by membership");
        assert!(
            !eligible(ServerState::Follower, true, false),
            "refused for its credential"
        );
    }

    #[test]
    fn a_silent_voter_asks_for_pre_votes_after_the_wait_and_then_waits_a_fresh_draw() {
        let t0 = Instant::now();
        let mut w = watch(t0);
        assert!(steps(&mut w, 50, 850, |ms| seen(t0, ms, t0)).is_empty());
        // The next round's wait is drawn when it asks: here the whole spread.
        assert!(w.step(&seen(t0, 900, t0), &timing(), || 1.0));
        assert_eq!(w.wait(), timing().wait(1.0));
        assert!(steps(&mut w, 950, 1950, |ms| seen(t0, ms, t0)).is_empty());
        assert_eq!(steps(&mut w, 2000, 2000, |ms| seen(t0, ms, t0)), vec![2000]);
    }

    #[test]
    fn contact_heard_by_the_raft_service_keeps_the_node_from_asking() {
        let t0 = Instant::now();
        let mut w = watch(t0);
        let fired = steps(&mut w, 50, 2000, |ms| seen(t0, ms, t0 + Duration::from_millis(ms)));
        assert!(fired.is_empty());
    }

    #[test]
    fn a_node_the_credential_rule_holds_back_never_asks() {
        let t0 = Instant::now();
        let mut w = watch(t0);
        let held = |ms| Seen {
            credential_allows: false,
            ..seen(t0, ms, t0)
        };
        assert!(steps(&mut w, 50, 3000, held).is_empty());
        // Allowed again, it waits a whole quiet time from then.
        assert_eq!(steps(&mut w, 3050, 3950, |ms| seen(t0, ms, t0)), vec![3900]);
    }

    #[test]
    fn its_own_candidacy_restarts_the_silence_and_retries_after_an_election_timeout() {
        let t0 = Instant::now();
        let mut w = watch(t0);
        assert!(steps(&mut w, 50, 500, |ms| seen(t0, ms, t0)).is_empty());
        let campaigned = Seen {
            state: ServerState::Candidate,
            vote: VoteMove::OwnCandidacy,
            ..seen(t0, 550, t0)
        };
        assert!(!w.step(&campaigned, &timing(), || 0.0));
        assert_eq!(w.wait(), timing().retry_wait(0.0));
        let candidate = |ms| Seen {
            state: ServerState::Candidate,
            ..seen(t0, ms, t0)
        };
        assert_eq!(steps(&mut w, 600, 850, candidate), vec![850]);
    }

    #[test]
    fn a_vote_moved_by_a_rival_draws_a_new_wait_but_keeps_the_silence() {
        let t0 = Instant::now();
        let mut w = watch(t0);
        assert!(steps(&mut w, 50, 500, |ms| seen(t0, ms, t0)).is_empty());
        let rival = Seen {
            vote: VoteMove::Other,
            ..seen(t0, 550, t0)
        };
        assert!(!w.step(&rival, &timing(), || 0.5));
        assert_eq!(w.wait(), timing().wait(0.5));
        // Silent since 0 ms, it asks at 1,000 ms (900 ms quiet plus half the 200 ms spread).
        assert_eq!(steps(&mut w, 600, 1000, |ms| seen(t0, ms, t0)), vec![1000]);
    }
}
