//! This process's own metastore node, as a client in the same process sees it: called directly
//! while it leads, and watched for leader changes while a call waits to be tried again.

use crate::types::{Node, NodeId, Raft};

type RaftMetrics = openraft::RaftMetrics<NodeId, Node>;

/// This process's own metastore node. While it leads, a client in the same process calls its
/// service directly: a large transaction (a 100,000-partition reassignment is tens of MB) is then
/// neither encoded, sent over loopback and decoded, nor forwarded from a follower.
#[derive(Clone)]
pub struct LocalNode {
    pub(crate) service: crate::service::MetastoreService,
    raft: Raft,
    id: NodeId,
}

impl LocalNode {
    /// The node `id` served by `service` and replicated by `raft`.
    pub fn new(service: crate::service::MetastoreService, raft: Raft, id: NodeId) -> Self {
        Self { service, raft, id }
    }

    pub(crate) fn leads(&self) -> bool {
        self.leader() == Some(self.id)
    }

    /// The leader this node knows of.
    pub(crate) fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// The leader's address when another node leads.
    pub(crate) fn remote_leader(&self) -> Option<String> {
        leader_addr(&self.raft.metrics().borrow(), Some(self.id))
    }

    /// The address of the leader once this node knows of one other than `from`: a call that
    /// failed while `from` led (a killed leader) can be tried again at once, on the new leader,
    /// rather than after its backoff. Never returns once Raft has stopped.
    pub(crate) async fn new_leader(&self, from: Option<NodeId>) -> String {
        let mut m = self.raft.metrics();
        loop {
            if let Some(addr) = leader_addr(&m.borrow_and_update(), from) {
                return addr;
            }
            if m.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// The address of the leader `m` knows of, unless it is `except`.
fn leader_addr(m: &RaftMetrics, except: Option<NodeId>) -> Option<String> {
    let leader = m.current_leader.filter(|l| Some(*l) != except)?;
    m.membership_config
        .membership()
        .get_node(&leader)
        .map(|n| n.addr.clone())
}

/// A request from this process to its own node: it may touch internal keys.
pub(crate) fn trusted<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.extensions_mut().insert(crate::credential::Trusted);
    r
}
