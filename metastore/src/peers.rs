//! Connections to other nodes: one lazily opened HTTP/2 channel per address, shared by Raft
//! replication, forwarded proposals, read-index requests and forwarded admin calls. Only a
//! channel cache: a quorum node's Raft calls, which give its credential, go through `RaftPeers`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use proto::metastore::metastore_client::MetastoreClient;
use tonic::transport::{Channel, Endpoint};

/// Largest gRPC message between nodes: a big transaction is one log entry.
pub const MAX_MESSAGE: usize = 1 << 30;

/// HTTP/2 connection flow-control window of every channel and server. h2 caps the framing
/// overhead of small DATA frames buffered on one connection at half this window and closes the
/// connection past it ("too_many_data_frames"); with the default window a broker pair with more
/// than about 12,000 partitions (one small fetch request buffered on each stream) lost its
/// connection, every stream on it failed at once and the retries repeated the storm. The cost: a
/// peer may have this much unread data buffered on one connection.
pub const CONNECTION_WINDOW: u32 = 128 << 20;

/// Opens a lazy channel to `addr` (HOST:PORT).
pub fn channel(addr: &str) -> Result<Channel, tonic::transport::Error> {
    channel_with_keep_alive(addr, KEEP_ALIVE_INTERVAL, KEEP_ALIVE_TIMEOUT)
}

/// A channel for an admin client whose every call has its own timeout: its PINGs only find a
/// dead connection, and are patient with a process busy encoding or decoding a
/// million-partition request (700 ms without an answer closed such a connection mid-request,
/// and the retry found its first attempt applied).
pub fn admin_channel(addr: &str) -> Result<Channel, tonic::transport::Error> {
    channel_with_keep_alive(addr, Duration::from_secs(5), Duration::from_secs(20))
}

fn channel_with_keep_alive(
    addr: &str,
    interval: Duration,
    timeout: Duration,
) -> Result<Channel, tonic::transport::Error> {
    let endpoint = endpoint(addr, interval, timeout)?;
    Ok(match crate::grpc_tls::client() {
        Some(files) => endpoint.connect_with_connector_lazy(tower::service_fn(move |uri| {
            crate::grpc_tls::connect(uri, files.clone(), None)
        })),
        None => endpoint.connect_lazy(),
    })
}

/// Opens a lazy channel to `addr` (HOST:PORT) on the peer's Raft lane (see [`crate::raft_lane`]).
pub fn raft_lane_channel(addr: &str) -> Result<Channel, tonic::transport::Error> {
    let endpoint = endpoint(addr, KEEP_ALIVE_INTERVAL, KEEP_ALIVE_TIMEOUT)?;
    if let Some(files) = crate::grpc_tls::client() {
        return Ok(endpoint.connect_with_connector_lazy(tower::service_fn(move |uri| {
            crate::grpc_tls::connect(uri, files.clone(), Some(crate::raft_lane::PREFACE))
        })));
    }
    let connector = tower::service_fn(|uri: tonic::codegen::http::Uri| async move {
        let host = uri.host().unwrap_or_default().trim_matches(|c| c == '[' || c == ']');
        let port = uri.port_u16().unwrap_or(80);
        let addr = tokio::net::lookup_host((host, port))
            .await?
            .next()
            .ok_or_else(|| std::io::Error::other(format!("{host}: no address")))?;
        crate::raft_lane::connect(addr).await
    });
    Ok(endpoint.connect_with_connector_lazy(connector))
}

fn endpoint(addr: &str, interval: Duration, timeout: Duration) -> Result<Endpoint, tonic::transport::Error> {
    Ok(Endpoint::from_shared(format!("http://{addr}"))?
        .connect_timeout(Duration::from_secs(2))
        .initial_connection_window_size(CONNECTION_WINDOW)
        // h2 closes a connection for good after 1,024 stream resets it made itself over its whole
        // life (mostly on late frames for streams already cancelled; a guard against hostile
        // servers); a broker's fetch streams to its peers come and go by the thousand as
        // leadership moves, and the close fails all of them at once.
        .http2_max_local_error_reset_streams(None)
        .tcp_nodelay(true)
        // A peer that stops answering (SIGSTOP, a cut link) is found by its missed PINGs, which
        // fails every call on the connection so that callers retry elsewhere instead of hanging
        // until TCP gives up; a long call on a live peer is not cut short.
        .http2_keep_alive_interval(interval)
        .keep_alive_timeout(timeout)
        .keep_alive_while_idle(true))
}

/// How often an open connection PINGs its peer.
pub const KEEP_ALIVE_INTERVAL: Duration = Duration::from_millis(300);
/// How long a PING may go unanswered before the connection is closed.
pub const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_millis(700);

/// Whether a failed call surely never reached the server: the connection could not be opened.
/// A call that failed any later may have been received and acted on.
pub fn never_sent(s: &tonic::Status) -> bool {
    use std::error::Error;
    if s.code() != tonic::Code::Unavailable {
        return false;
    }
    let mut source: Option<&(dyn Error + 'static)> = s.source();
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(
                io.kind(),
                ConnectionRefused | AddrNotAvailable | HostUnreachable | NetworkUnreachable
            ) {
                return true;
            }
        }
        let text = e.to_string();
        if text.contains("tcp connect error") || text.contains("error trying to connect") {
            return true;
        }
        source = e.source();
    }
    false
}

/// The channel cache: one shared channel per peer address.
#[derive(Clone, Default)]
pub struct Peers {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    raft_lane: bool,
    /// The cluster credential that calls over these channels carry, where their caller adds it.
    credential: crate::CredentialInterceptor,
}

impl Peers {
    /// The shared channel to `addr`.
    pub fn channel(&self, addr: &str) -> Result<Channel, tonic::transport::Error> {
        let mut channels = self.channels.lock();
        if let Some(c) = channels.get(addr) {
            return Ok(c.clone());
        }
        let c = if self.raft_lane {
            raft_lane_channel(addr)?
        } else {
            channel(addr)?
        };
        channels.insert(addr.to_string(), c.clone());
        Ok(c)
    }

    /// A cache of its own whose channels go to the peers' Raft lane. Their connections run on
    /// the runtime that first uses them.
    pub fn raft_lane(&self) -> Peers {
        Peers {
            channels: Arc::default(),
            raft_lane: true,
            credential: self.credential.clone(),
        }
    }

    /// The same cache, whose callers add `credential` to their calls.
    pub fn with_credential(mut self, credential: crate::CredentialInterceptor) -> Self {
        self.credential = credential;
        self
    }

    /// The credential calls over these channels carry (empty until given and known).
    pub fn credential(&self) -> crate::CredentialInterceptor {
        self.credential.clone()
    }

    /// A Metastore-service client to `addr`.
    pub fn metastore(&self, addr: &str) -> Result<MetastoreClient<Channel>, tonic::transport::Error> {
        Ok(MetastoreClient::new(self.channel(addr)?)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE))
    }
}
