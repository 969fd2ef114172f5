//! Who leads, as this node sees it: where it forwards requests, what it tells clients, and what
//! a client in the same process waits for.
//!
//! openraft names a follower's leader until the follower votes in a new election. Every election
//! is called by the election watch after a pre-vote ([`crate::pre_vote`]), so a follower left
//! without a majority never votes and would go on naming a dead leader: writes forwarded there
//! would end "maybe applied" rather than "not applied", and clients would be sent to it. This
//! view forgets the leader once the node has heard from none for the silence after which the
//! watch asks for an election, when openraft's own timer would have campaigned.

use std::time::Duration;

use openraft::ServerState;

use crate::heard::Heard;
use crate::types::{Node, NodeId, Raft};

type RaftMetrics = openraft::RaftMetrics<NodeId, Node>;

/// How often a wait for a leader looks again: forgetting and hearing again move no metrics.
const RECHECK: Duration = Duration::from_millis(20);

/// The leader a node knows of: its own id while it leads, openraft's `current` leader while it
/// heard from one within `forget_after` (it was `silent_for`), and none after that.
pub fn known(leads: bool, current: Option<NodeId>, silent_for: Duration, forget_after: Duration) -> Option<NodeId> {
    if leads || silent_for < forget_after {
        current
    } else {
        None
    }
}

/// A node's view of its leader (see the module's doc).
#[derive(Clone)]
pub struct LeaderView {
    id: NodeId,
    raft: Raft,
    heard: Heard,
    forget_after: Duration,
}

impl LeaderView {
    /// The view of node `id`, which forgets its leader after `forget_after` without word from
    /// one (as recorded in `heard`).
    pub fn new(id: NodeId, raft: Raft, heard: Heard, forget_after: Duration) -> Self {
        Self {
            id,
            raft,
            heard,
            forget_after,
        }
    }

    /// The leader this node knows of.
    pub fn leader(&self) -> Option<NodeId> {
        self.leader_in(&self.raft.metrics().borrow())
    }

    /// Whether this node leads.
    pub fn leads(&self) -> bool {
        self.leader() == Some(self.id)
    }

    /// The leader and its address, unless no leader is known or it is `except`.
    pub fn leader_addr(&self, except: Option<NodeId>) -> Option<(NodeId, String)> {
        let rx = self.raft.metrics();
        let m = rx.borrow();
        let leader = self.leader_in(&m).filter(|l| Some(*l) != except)?;
        let node = m.membership_config.membership().get_node(&leader)?;
        Some((leader, node.addr.clone()))
    }

    /// The leader's address when another node leads.
    pub fn remote_leader(&self) -> Option<String> {
        self.leader_addr(Some(self.id)).map(|(_, addr)| addr)
    }

    /// Waits until a leader other than `except` is known; never returns once Raft has stopped.
    pub async fn wait_leader(&self, except: Option<NodeId>) -> (NodeId, String) {
        let mut rx = self.raft.metrics();
        loop {
            rx.borrow_and_update();
            if let Some(found) = self.leader_addr(except) {
                return found;
            }
            tokio::select! {
                changed = rx.changed() => {
                    if changed.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                _ = tokio::time::sleep(RECHECK) => {}
            }
        }
    }

    fn leader_in(&self, m: &RaftMetrics) -> Option<NodeId> {
        let leads = m.state == ServerState::Leader;
        known(leads, m.current_leader, self.heard.at().elapsed(), self.forget_after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORGET: Duration = Duration::from_millis(600);

    #[test]
    fn a_follower_names_its_leader_while_it_hears_from_it() {
        assert_eq!(known(false, Some(2), Duration::from_millis(150), FORGET), Some(2));
        assert_eq!(known(false, None, Duration::ZERO, FORGET), None);
    }

    #[test]
    fn a_follower_forgets_a_silent_leader() {
        assert_eq!(known(false, Some(2), FORGET, FORGET), None);
        assert_eq!(known(false, Some(2), Duration::from_secs(60), FORGET), None);
    }

    #[test]
    fn a_leader_hears_no_one_and_still_leads() {
        assert_eq!(known(true, Some(1), Duration::from_secs(60), FORGET), Some(1));
    }
}
