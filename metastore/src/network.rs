//! Raft traffic between nodes over gRPC: the client side openraft calls, and the server side.
//! Messages are openraft's own types, encoded by [`codec`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use proto::raft::raft_client::RaftClient;
use proto::raft::{RaftPayload, ReadIndexRequest, ReadIndexResponse};
use serde::de::DeserializeOwned;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};

use crate::codec;
use crate::read_index::{ReadIndex, ReadIndexError};
use crate::types::{Node, NodeId, Raft, TypeConfig};

/// Largest gRPC message between nodes: a big transaction is one log entry.
pub const MAX_RAFT_MESSAGE: usize = 1 << 30;

/// Opens a lazy channel to `addr` (HOST:PORT).
pub fn channel(addr: &str) -> Result<Channel, tonic::transport::Error> {
    Ok(Endpoint::from_shared(format!("http://{addr}"))?
        .connect_timeout(Duration::from_secs(2))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(10))
        .connect_lazy())
}

/// A Raft client to a peer, with message limits sized for large entries.
pub fn raft_client(addr: &str) -> Result<RaftClient<Channel>, tonic::transport::Error> {
    Ok(RaftClient::new(channel(addr)?)
        .max_decoding_message_size(MAX_RAFT_MESSAGE)
        .max_encoding_message_size(MAX_RAFT_MESSAGE))
}

/// Makes [`PeerClient`]s for openraft, sharing one HTTP/2 connection per peer: openraft asks
/// for a new client on every read-index round, and a fresh connection each time costs a handshake.
#[derive(Clone, Default)]
pub struct NetworkFactory {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> PeerClient {
        let client = {
            let mut channels = self.channels.lock();
            match channels.get(&node.addr) {
                Some(c) => Some(c.clone()),
                None => channel(&node.addr).ok().inspect(|c| {
                    channels.insert(node.addr.clone(), c.clone());
                }),
            }
        }
        .map(|c| {
            RaftClient::new(c)
                .max_decoding_message_size(MAX_RAFT_MESSAGE)
                .max_encoding_message_size(MAX_RAFT_MESSAGE)
        });
        PeerClient {
            target,
            addr: node.addr.clone(),
            client,
        }
    }
}

/// The connection to one peer.
pub struct PeerClient {
    target: NodeId,
    addr: String,
    client: Option<RaftClient<Channel>>,
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
        let raw = self
            .call_raw(rpc, data, option.hard_ttl())
            .await
            .map_err(|e| match e {
                CallError::Unreachable(_) => RPCError::Unreachable(Unreachable::new(&e)),
                CallError::Network(_) => RPCError::Network(NetworkError::new(&e)),
            })?;
        let res: Result<T, RaftError<NodeId, E>> =
            codec::decode(&raw).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        res.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn call_raw(
        &mut self,
        rpc: Rpc,
        data: Vec<u8>,
        ttl: Duration,
    ) -> Result<Vec<u8>, CallError> {
        if self.client.is_none() {
            self.client =
                Some(raft_client(&self.addr).map_err(|e| CallError::Unreachable(e.to_string()))?);
        }
        // Set just above; cloning a tonic client is cheap.
        let mut client = self.client.clone().expect("client was set above");
        let mut req = Request::new(RaftPayload { data: data.into() });
        req.set_timeout(ttl);
        let res = match rpc {
            Rpc::Append => client.append_entries(req).await,
            Rpc::Vote => client.vote(req).await,
            Rpc::Snapshot => client.install_snapshot(req).await,
        };
        match res {
            Ok(r) => Ok(r.into_inner().data.to_vec()),
            Err(s) if s.code() == tonic::Code::Unavailable => {
                Err(CallError::Unreachable(s.message().to_string()))
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
        self.call(Rpc::Append, codec::encode(&rpc), &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, Node, RaftError<NodeId, InstallSnapshotError>>,
    > {
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
}

impl RaftService {
    /// Serves `raft` and the leader's read index.
    pub fn new(raft: Raft, read_index: ReadIndex) -> Self {
        Self { raft, read_index }
    }
}

fn decode_rpc<T: DeserializeOwned>(req: Request<RaftPayload>) -> Result<T, Status> {
    codec::decode(&req.into_inner().data)
        .map_err(|e| Status::invalid_argument(format!("raft payload: {e}")))
}

fn reply<T: serde::Serialize>(value: &T) -> Result<Response<RaftPayload>, Status> {
    Ok(Response::new(RaftPayload {
        data: codec::encode(value).into(),
    }))
}

#[tonic::async_trait]
impl proto::raft::raft_server::Raft for RaftService {
    async fn append_entries(
        &self,
        req: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        let rpc: AppendEntriesRequest<TypeConfig> = decode_rpc(req)?;
        reply(&self.raft.append_entries(rpc).await)
    }

    async fn vote(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let rpc: VoteRequest<NodeId> = decode_rpc(req)?;
        reply(&self.raft.vote(rpc).await)
    }

    async fn install_snapshot(
        &self,
        req: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        let rpc: InstallSnapshotRequest<TypeConfig> = decode_rpc(req)?;
        reply(&self.raft.install_snapshot(rpc).await)
    }

    async fn read_index(
        &self,
        _req: Request<ReadIndexRequest>,
    ) -> Result<Response<ReadIndexResponse>, Status> {
        match self.read_index.read_index().await {
            Ok(index) => Ok(Response::new(ReadIndexResponse { index })),
            Err(ReadIndexError::NotLeader { .. }) => {
                Err(Status::failed_precondition("not the leader"))
            }
            Err(e) => Err(Status::unavailable(e.to_string())),
        }
    }
}
