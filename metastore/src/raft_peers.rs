//! A quorum node's calls to its peers' Raft service: the shared channels of [`Peers`], each call
//! giving the node's [`PeerCredential`]. Replication, pre-votes, forwarded proposals and
//! read-index requests go through it; brokers and controllers, which make no Raft calls, use
//! the bare channel cache.

use proto::raft::raft_client::RaftClient;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::credential::PeerCredential;
use crate::peers::{Peers, MAX_MESSAGE};

/// A Raft-service client that gives the cluster credential.
pub type RaftPeerClient = RaftClient<InterceptedService<Channel, PeerCredential>>;

/// The node's channel cache, and the credential its Raft calls give.
#[derive(Clone, Default)]
pub struct RaftPeers {
    channels: Peers,
    credential: PeerCredential,
}

impl RaftPeers {
    /// Channels of their own to the same peers, on their Raft lane, with the same credential.
    /// Their connections run on the runtime that first uses them: openraft's.
    pub fn raft_lane(&self) -> RaftPeers {
        RaftPeers {
            channels: self.channels.raft_lane(),
            credential: self.credential.clone(),
        }
    }

    /// The credential this node gives its peers and asks of them.
    pub fn credential(&self) -> &PeerCredential {
        &self.credential
    }

    /// A Raft-service client to `addr`.
    pub fn raft(&self, addr: &str) -> Result<RaftPeerClient, tonic::transport::Error> {
        Ok(
            RaftClient::with_interceptor(self.channels.channel(addr)?, self.credential.clone())
                .max_decoding_message_size(MAX_MESSAGE)
                .max_encoding_message_size(MAX_MESSAGE),
        )
    }

    /// The shared channel cache (also for this node's Metastore-service calls to its peers).
    pub fn channels(&self) -> &Peers {
        &self.channels
    }
}
