//! This process's own metastore node, as a client in the same process sees it: called directly
//! while it leads, and watched for leader changes while a call waits to be tried again.

use crate::leader_view::LeaderView;
use crate::types::NodeId;

/// This process's own metastore node. While it leads, a client in the same process calls its
/// service directly: a large transaction (a 100,000-partition reassignment is tens of MB) is then
/// neither encoded, sent over loopback and decoded, nor forwarded from a follower.
#[derive(Clone)]
pub struct LocalNode {
    pub(crate) service: crate::service::MetastoreService,
    view: LeaderView,
}

impl LocalNode {
    /// The node served by `service`, whose leader is as `view` sees it.
    pub fn new(service: crate::service::MetastoreService, view: LeaderView) -> Self {
        Self { service, view }
    }

    pub(crate) fn leads(&self) -> bool {
        self.view.leads()
    }

    /// The leader this node knows of.
    pub(crate) fn leader(&self) -> Option<NodeId> {
        self.view.leader()
    }

    /// The leader's address when another node leads.
    pub(crate) fn remote_leader(&self) -> Option<String> {
        self.view.remote_leader()
    }

    /// The address of the leader once this node knows of one other than `from`: a call that
    /// failed while `from` led (a killed leader) can be tried again at once, on the new leader,
    /// rather than after its backoff. Never returns once Raft has stopped.
    pub(crate) async fn new_leader(&self, from: Option<NodeId>) -> String {
        self.view.wait_leader(from).await.1
    }
}

/// A request from this process to its own node: it may touch internal keys.
pub(crate) fn trusted<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.extensions_mut().insert(crate::credential::Trusted);
    r
}
