//! Raft traffic between nodes over gRPC: the client side openraft calls, and the server side.
//! Messages are openraft's own types, encoded by [`codec`].

use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use proto::raft::{PreVoteRequest, PreVoteResponse, RaftPayload, ReadIndexRequest, ReadIndexResponse};
use serde::de::DeserializeOwned;
use tonic::{Request, Response, Status};

use crate::codec;
use crate::credential::PeerCredential;
use crate::follower_acks::FollowerAcks;
use crate::heard::Heard;
use crate::log_store::REPLICATION_BATCH_BYTES;
use crate::pre_vote::Voter;
use crate::proposer::Proposer;
use crate::raft_peers::RaftPeers;
use crate::read_index::{ReadIndex, ReadIndexError};
use crate::types::{Node, NodeId, Proposal, ProposalResult, Raft, TypeConfig};

/// Makes [`PeerClient`]s for openraft over the shared [`RaftPeers`] channels: openraft asks for a
/// new client on every read-index round, and a fresh connection each time costs a handshake.
#[derive(Clone, Default)]
pub struct NetworkFactory {
    peers: RaftPeers,
    acks: Option<FollowerAcks>,
}

impl NetworkFactory {
    /// A factory over `peers` that notes the followers' answers in `acks`.
    pub fn new(peers: RaftPeers, acks: FollowerAcks) -> Self {
        Self {
            peers,
            acks: Some(acks),
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> PeerClient {
        PeerClient {
            target,
            addr: node.addr.clone(),
            peers: self.peers.clone(),
            acks: self.acks.clone(),
        }
    }
}

/// The connection to one peer.
pub struct PeerClient {
    target: NodeId,
    addr: String,
    peers: RaftPeers,
    acks: Option<FollowerAcks>,
}

#[derive(Debug, thiserror::Error)]
enum CallError {
    #[error("peer unreachable: {0}")]
    Unreachable(String),
    #[error("network: {0}")]
    Network(String),
}

#[derive(Clone, Copy)]
enum Rpc {
    Append,
    Vote,
    Snapshot,
}

impl PeerClient {
    async fn call<T, E>(
        &mut self,
        rpc: Rpc,
        data: Vec<u8>,
        option: &RPCOption,
    ) -> Result<T, RPCError<NodeId, Node, RaftError<NodeId, E>>>
    where
        T: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let raw = self.call_raw(rpc, data, option.hard_ttl()).await.map_err(|e| match e {
            CallError::Unreachable(_) => RPCError::Unreachable(Unreachable::new(&e)),
            CallError::Network(_) => RPCError::Network(NetworkError::new(&e)),
        })?;
        let res: Result<T, RaftError<NodeId, E>> =
            codec::decode(&raw).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        res.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn call_raw(&mut self, rpc: Rpc, data: Vec<u8>, ttl: Duration) -> Result<Vec<u8>, CallError> {
        let mut client = self
            .peers
            .raft(&self.addr)
            .map_err(|e| CallError::Unreachable(e.to_string()))?;
        let mut req = Request::new(RaftPayload { data: data.into() });
        req.set_timeout(ttl);
        let res = match rpc {
            Rpc::Append => client.append_entries(req).await,
            Rpc::Vote => client.vote(req).await,
            Rpc::Snapshot => client.install_snapshot(req).await,
        };
        match res {
            Ok(r) => Ok(r.into_inner().data.to_vec()),
            Err(s) if s.code() == tonic::Code::Unavailable => Err(CallError::Unreachable(s.message().to_string())),
            Err(s) if s.code() == tonic::Code::Unauthenticated => {
                self.peers.credential().note_refused();
                Err(CallError::Network(format!("{}: {}", s.code(), s.message())))
            }
            Err(s) => Err(CallError::Network(format!("{}: {}", s.code(), s.message()))),
        }
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId>>> {
        let data = codec::encode(&rpc);
        // openraft gives each append one heartbeat interval to finish, follower fsync included:
        // a follower far behind gets its entries in bounded slices, not all in one message.
        if data.len() > REPLICATION_BATCH_BYTES && rpc.entries.len() > 1 {
            let hint = (rpc.entries.len() * REPLICATION_BATCH_BYTES / data.len()).max(1);
            return Err(RPCError::PayloadTooLarge(PayloadTooLarge::new_entries_hint(
                hint as u64,
            )));
        }
        let sent = self.acks.as_ref().map(FollowerAcks::sending);
        // What the follower holds once it takes the whole request.
        let sent_up_to = rpc
            .entries
            .last()
            .map(|e| e.log_id.index)
            .or(rpc.prev_log_id.map(|l| l.index));
        let res = self.call(Rpc::Append, data, &option).await;
        if let (Some(acks), Some(sent)) = (&self.acks, sent) {
            match &res {
                Ok(AppendEntriesResponse::Success) => acks.acked(self.target, sent, sent_up_to),
                Ok(AppendEntriesResponse::PartialSuccess(l)) => acks.acked(self.target, sent, l.map(|l| l.index)),
                _ => {}
            }
        }
        res
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId, InstallSnapshotError>>> {
        self.call(Rpc::Snapshot, codec::encode(&rpc), &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId>>> {
        self.call(Rpc::Vote, codec::encode(&rpc), &option).await
    }
}

/// The server side of the internal Raft service.
pub struct RaftService {
    raft: Raft,
    read_index: ReadIndex,
    proposer: Proposer,
    credential: PeerCredential,
    heard: Heard,
    voter: Voter,
}

impl RaftService {
    /// Serves `raft`, the leader's read index and followers' forwarded proposals to the peers
    /// that give `credential`, recording in `heard` each leader or candidate it accepts.
    pub fn new(
        raft: Raft,
        read_index: ReadIndex,
        proposer: Proposer,
        credential: PeerCredential,
        heard: Heard,
        voter: Voter,
    ) -> Self {
        Self {
            raft,
            read_index,
            proposer,
            credential,
            heard,
            voter,
        }
    }

    /// The request's payload, from a caller that gave the cluster credential.
    fn decode_rpc<T: DeserializeOwned>(&self, req: Request<RaftPayload>) -> Result<T, Status> {
        self.credential.check(&req)?;
        decode_rpc(req)
    }
}

fn decode_rpc<T: DeserializeOwned>(req: Request<RaftPayload>) -> Result<T, Status> {
    codec::decode(&req.into_inner().data).map_err(|e| Status::invalid_argument(format!("raft payload: {e}")))
}

fn reply<T: serde::Serialize>(value: &T) -> Result<Response<RaftPayload>, Status> {
    Ok(Response::new(RaftPayload {
        data: codec::encode(value).into(),
    }))
}

#[tonic::async_trait]
impl proto::raft::raft_server::Raft for RaftService {
    async fn append_entries(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let rpc: AppendEntriesRequest<TypeConfig> = self.decode_rpc(req)?;
        let _taking = self.heard.receiving();
        let res = self.raft.append_entries(rpc).await;
        if matches!(&res, Ok(r) if !matches!(r, AppendEntriesResponse::HigherVote(_))) {
            self.heard.touch();
        }
        reply(&res)
    }

    async fn vote(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let rpc: VoteRequest<NodeId> = self.decode_rpc(req)?;
        let res = self.raft.vote(rpc).await;
        if matches!(&res, Ok(r) if r.vote_granted) {
            self.heard.touch();
        }
        reply(&res)
    }

    async fn install_snapshot(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let rpc: InstallSnapshotRequest<TypeConfig> = self.decode_rpc(req)?;
        let vote = rpc.vote;
        let _taking = self.heard.receiving();
        let res = self.raft.install_snapshot(rpc).await;
        if matches!(&res, Ok(r) if r.vote == vote) {
            self.heard.touch();
        }
        reply(&res)
    }

    async fn pre_vote(&self, req: Request<PreVoteRequest>) -> Result<Response<PreVoteResponse>, Status> {
        self.credential.check(&req)?;
        let leads = self.raft.metrics().borrow().state == openraft::ServerState::Leader;
        let since = self.heard.at().elapsed();
        Ok(Response::new(self.voter.answer(req.get_ref(), leads, since).await))
    }

    async fn read_index(&self, req: Request<ReadIndexRequest>) -> Result<Response<ReadIndexResponse>, Status> {
        self.credential.check(&req)?;
        match self.read_index.read_index_as_leader().await {
            Ok(index) => Ok(Response::new(ReadIndexResponse { index })),
            Err(ReadIndexError::NotLeader) => Err(Status::failed_precondition("not the leader")),
            Err(e) => Err(Status::unavailable(e.to_string())),
        }
    }

    async fn propose(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let proposal: Proposal = self.decode_rpc(req)?;
        // Checked here, as any input from the network: a segment is otherwise first decoded
        // when every node applies it.
        for (i, segment) in proposal.segments.iter().enumerate() {
            if let Err(e) = crate::types::decode_segment(segment) {
                return Err(Status::invalid_argument(format!("proposal segment {i}: {e}")));
            }
        }
        let res = self
            .proposer
            .propose_forwarded(proposal.segments)
            .await
            .map(|results| ProposalResult { results });
        reply(&res)
    }
}
