//! Raft's pre-vote: before a node raises its term to campaign, it asks its peers whether they
//! would vote for it. openraft 0.9 has no pre-vote, so a node cut off from its peers campaigned
//! every few hundred milliseconds, raising its term each time; once the link was back, the
//! leader's appends met that higher term and the leader stepped down, and the cluster stopped
//! serving until the up-to-date nodes elected again above it (1.9 s in a fault-suite run).
//!
//! With pre-vote, every election is called by the election watch (`election_watch.rs`, which
//! asks here; openraft's own election timer is off) and only once a majority of voters, this
//! node included, granted a pre-vote ([`majority`]). A peer grants one when it has heard from no
//! leader for the lease and the candidate's log is at least as up to date as its own
//! ([`grant`]); nothing is written, and no term changes.

use std::time::Duration;

use openraft::storage::RaftLogStorage;
use proto::raft::{PreVoteRequest, PreVoteResponse};

use crate::log_store::LogStore;
use crate::raft_peers::RaftPeers;
use crate::types::NodeId;

/// A log position as Raft compares them: the last entry's term, then its index; `None` for an
/// empty log.
pub type LogPos = Option<(u64, u64)>;

/// Whether a node grants a pre-vote: it does not lead, has heard from no leader (nor granted a
/// vote) within the lease, and the candidate's log is at least as up to date as its own.
pub fn grant(leads: bool, heard_within_lease: bool, own: LogPos, candidate: LogPos) -> bool {
    !leads && !heard_within_lease && candidate >= own
}

/// Whether `granted` pre-votes from peers, plus the candidate's own, are a majority of `voters`.
pub fn majority(granted: usize, voters: usize) -> bool {
    2 * (granted + 1) > voters
}

/// What a node needs to answer and to ask for pre-votes: its log, and the leader lease.
#[derive(Clone)]
pub struct Voter {
    log: LogStore,
    lease: Duration,
}

impl Voter {
    /// A voter over `log` with the leader lease `lease` (openraft's: the longest election
    /// timeout).
    pub fn new(log: LogStore, lease: Duration) -> Self {
        Self { log, lease }
    }

    /// This node's last log position; `None` also when the log cannot be read (the node then
    /// asks and grants as if empty, which only makes it less likely to be elected).
    pub async fn own(&self) -> LogPos {
        let mut log = self.log.clone();
        match log.get_log_state().await {
            Ok(s) => s.last_log_id.map(|l| (l.leader_id.term, l.index)),
            Err(e) => {
                tracing::warn!(error = %e, "pre-vote: reading the last log id failed");
                None
            }
        }
    }

    /// The answer to `req` of a node that leads when `leads` and last heard a leader or candidate
    /// `since` ago.
    pub async fn answer(&self, req: &PreVoteRequest, leads: bool, since: Duration) -> PreVoteResponse {
        let candidate = req.has_log.then_some((req.last_log_term, req.last_log_index));
        let granted = grant(leads, since < self.lease, self.own().await, candidate);
        PreVoteResponse { granted }
    }

    /// Asks every peer at `addrs` for a pre-vote, each within `deadline`; true when a majority of
    /// the `voters` (this node counted) would vote for it.
    pub async fn ask(
        &self,
        peers: &RaftPeers,
        candidate: NodeId,
        addrs: &[String],
        voters: usize,
        deadline: Duration,
    ) -> bool {
        let own = self.own().await;
        let req = PreVoteRequest {
            candidate,
            has_log: own.is_some(),
            last_log_term: own.map_or(0, |p| p.0),
            last_log_index: own.map_or(0, |p| p.1),
        };
        let mut asks: futures::stream::FuturesUnordered<_> = addrs
            .iter()
            .map(|addr| async move {
                let mut client = peers.raft(addr).ok()?;
                let mut r = tonic::Request::new(req);
                r.set_timeout(deadline);
                let answer = tokio::time::timeout(deadline, client.pre_vote(r)).await.ok()?.ok()?;
                Some(answer.into_inner().granted)
            })
            .collect();
        // Done at the first majority: a paused peer's silence is not waited out.
        let mut granted = 0;
        while let Some(answer) = futures::StreamExt::next(&mut asks).await {
            granted += usize::from(answer == Some(true));
            if majority(granted, voters) {
                return true;
            }
        }
        majority(granted, voters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_that_hears_a_leader_or_leads_refuses() {
        assert!(!grant(false, true, Some((1, 5)), Some((1, 9))));
        assert!(!grant(true, false, Some((1, 5)), Some((1, 9))));
        assert!(grant(false, false, Some((1, 5)), Some((1, 9))));
    }

    #[test]
    fn logs_compare_by_last_term_then_index() {
        // A later term wins over a longer log of an earlier term.
        assert!(grant(false, false, Some((4, 102)), Some((5, 100))));
        assert!(!grant(false, false, Some((5, 100)), Some((4, 102))));
        assert!(grant(false, false, Some((5, 100)), Some((5, 100))));
        assert!(!grant(false, false, Some((5, 101)), Some((5, 100))));
        assert!(grant(false, false, None, None));
        assert!(!grant(false, false, Some((1, 1)), None));
    }

    #[test]
    fn the_candidate_counts_itself() {
        assert!(majority(0, 1));
        assert!(!majority(0, 2));
        assert!(majority(1, 2));
        assert!(!majority(0, 3));
        assert!(majority(1, 3));
        assert!(!majority(1, 4));
        assert!(majority(2, 5));
    }
}
