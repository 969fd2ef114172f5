//! Connections to other nodes: one lazily opened HTTP/2 channel per address, shared by Raft
//! replication, forwarded proposals, read-index requests and forwarded admin calls.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use proto::metastore::metastore_client::MetastoreClient;
use proto::raft::raft_client::RaftClient;
use tonic::transport::{Channel, Endpoint};

/// Largest gRPC message between nodes: a big transaction is one log entry.
pub const MAX_MESSAGE: usize = 1 << 30;

/// Opens a lazy channel to `addr` (HOST:PORT).
pub fn channel(addr: &str) -> Result<Channel, tonic::transport::Error> {
    Ok(Endpoint::from_shared(format!("http://{addr}"))?
        .connect_timeout(Duration::from_secs(2))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(10))
        .connect_lazy())
}

/// The channel cache.
#[derive(Clone, Default)]
pub struct Peers {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
}

impl Peers {
    /// The shared channel to `addr`.
    pub fn channel(&self, addr: &str) -> Result<Channel, tonic::transport::Error> {
        let mut channels = self.channels.lock();
        if let Some(c) = channels.get(addr) {
            return Ok(c.clone());
        }
        let c = channel(addr)?;
        channels.insert(addr.to_string(), c.clone());
        Ok(c)
    }

    /// A Raft-service client to `addr`.
    pub fn raft(&self, addr: &str) -> Result<RaftClient<Channel>, tonic::transport::Error> {
        Ok(RaftClient::new(self.channel(addr)?)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE))
    }

    /// A Metastore-service client to `addr`.
    pub fn metastore(&self, addr: &str) -> Result<MetastoreClient<Channel>, tonic::transport::Error> {
        Ok(MetastoreClient::new(self.channel(addr)?)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE))
    }
}
