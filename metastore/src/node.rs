//! Starting and stopping a metastore node: storage, Raft, gRPC server, background tasks.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::{Config, SnapshotPolicy};
use proto::metastore::metastore_server::MetastoreServer;
use proto::raft::raft_server::RaftServer;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

use crate::log_store::LogStore;
use crate::metrics::{self, MetastoreMetrics};
use crate::network::{NetworkFactory, RaftService};
use crate::node_core::{Deadlines, NodeCore};
use crate::peers::MAX_MESSAGE;
use crate::raft_lane::{self, RaftThread};
use crate::raft_peers::RaftPeers;
use crate::service::MetastoreService;
use crate::state_machine::{SmShared, StateMachine, DEFAULT_HISTORY_EVENTS};
use crate::tls::Reloading;
use crate::types::{Node, NodeId, Raft};
use crate::validate::Limits;

/// Concurrent gRPC streams allowed on one connection.
pub const MAX_STREAMS: u32 = 1 << 20;

/// Raft timing and log retention.
#[derive(Debug, Clone)]
pub struct RaftTuning {
    /// Leader heartbeat interval.
    pub heartbeat_ms: u64,
    /// Lower bound of the election timeout.
    pub election_min_ms: u64,
    /// Upper bound of the election timeout.
    pub election_max_ms: u64,
    /// Build a snapshot after this many applied entries.
    pub snapshot_every: u64,
    /// Entries kept in the log behind a snapshot.
    pub keep_behind_snapshot: u64,
}

impl Default for RaftTuning {
    /// A follower's election watch calls an election once it has heard nothing for the leader
    /// lease (openraft makes it `election_max_ms`) plus a random election timeout: 600 to 800 ms
    /// here, plus at most one 50 ms tick and a pre-vote round trip, so a dead leader is replaced
    /// within about 0.9 s.
    /// openraft gives every append, the follower's fsync included, one heartbeat interval to
    /// finish: at 50 ms, appends of big transactions timed out and were sent again on a busy
    /// machine, so the heartbeat stays at 100 ms.
    fn default() -> Self {
        Self {
            heartbeat_ms: 100,
            election_min_ms: 200,
            election_max_ms: 400,
            snapshot_every: 20_000,
            keep_behind_snapshot: 5_000,
        }
    }
}

/// Largest wait for a batch of writes forwarded to the leader: a dead or paused leader is found
/// sooner by the connection's keep-alive, so this only bounds a live leader that is slow.
const FORWARD_DEADLINE: Duration = Duration::from_secs(10);
/// Largest wait for the leader's own proposal to commit; shorter than the forward deadline, so
/// that a follower which forwarded the batch gets the leader's answer rather than its own timeout.
const COMMIT_DEADLINE: Duration = Duration::from_secs(8);

impl RaftTuning {
    /// The deadlines of this node's calls to its peers.
    pub fn deadlines(&self) -> Deadlines {
        Deadlines {
            read_index: Duration::from_millis(self.election_max_ms.max(1)),
            forward: FORWARD_DEADLINE,
            commit: COMMIT_DEADLINE,
        }
    }
}

/// How to start a node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// This node's id (> 0).
    pub id: NodeId,
    /// Where the log, vote and snapshots live.
    pub data_dir: PathBuf,
    /// Address to listen on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// The initial voters, with their addresses. Empty when joining an existing cluster.
    pub peers: BTreeMap<NodeId, String>,
    /// Join an existing cluster as a learner instead of forming one.
    pub join: bool,
    /// Raft timing.
    pub raft: RaftTuning,
    /// Request limits.
    pub limits: Limits,
    /// Events kept for watchers that resume.
    pub history_events: usize,
    /// More gRPC services served on the same port (the broker's and the admin's).
    pub extra_services: Option<tonic::service::Routes>,
    /// Where this node's metrics are registered; none keeps them unregistered.
    pub registry: Option<prometheus::Registry>,
    /// The node's clock (the system's; a test may hold it).
    pub clock: proto::clock::Clock,
    /// TLS on the gRPC port and on this process's channels (see [`crate::grpc_tls`]).
    pub grpc_tls: Option<crate::tls::TlsFiles>,
}

impl NodeConfig {
    /// A config with default tuning.
    pub fn new(id: NodeId, data_dir: PathBuf, listen: SocketAddr, peers: BTreeMap<NodeId, String>) -> Self {
        Self {
            id,
            data_dir,
            listen,
            peers,
            join: false,
            raft: RaftTuning::default(),
            limits: Limits::default(),
            history_events: DEFAULT_HISTORY_EVENTS,
            extra_services: None,
            registry: None,
            clock: proto::clock::Clock::system(),
            grpc_tls: None,
        }
    }
}

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// Bad configuration.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Disk trouble.
    #[error("storage: {0}")]
    Storage(String),
    /// Could not listen.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// Raft failed to start.
    #[error("raft: {0}")]
    Raft(String),
}

/// A running node.
pub struct NodeHandle {
    /// This node's id.
    pub id: NodeId,
    /// The address the server listens on.
    pub addr: SocketAddr,
    /// The Raft handle.
    pub raft: Raft,
    /// The state machine, for in-process inspection.
    pub sm: Arc<SmShared>,
    core: Arc<NodeCore>,
    shutdown: Option<oneshot::Sender<()>>,
    server: JoinHandle<()>,
    accept: JoinHandle<()>,
    leader_watch: JoinHandle<()>,
    raft_thread: Option<RaftThread>,
    tls_watch: Option<JoinHandle<()>>,
}

impl NodeHandle {
    /// This node, for a client in the same process to call directly while it leads.
    pub fn local(&self) -> crate::client::LocalNode {
        crate::client::LocalNode::new(
            crate::service::MetastoreService::new(self.core.clone()),
            self.core.leader.clone(),
        )
    }

    /// The leader this node knows of (see [`crate::leader_view`]).
    pub fn known_leader(&self) -> Option<NodeId> {
        self.core.leader.leader()
    }

    /// The cluster credential, once the cluster has one (the first leader creates it).
    pub async fn cluster_credential(&self) -> String {
        crate::credential::wait(&self.sm).await
    }

    /// Read-index batches taken by this node so far (each is one quorum round on a leader).
    pub fn read_index_rounds(&self) -> u64 {
        self.core.read_index.rounds()
    }

    /// Stops the server and Raft, and waits for both.
    pub async fn shutdown(mut self) {
        self.core.close();
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let _ = self.raft.shutdown().await;
        self.leader_watch.abort();
        if let Some(w) = &self.tls_watch {
            w.abort();
        }
        self.accept.abort();
        self.server.abort();
        let _ = (&mut self.accept).await;
        let _ = (&mut self.server).await;
        // Its runtime ends with it, and with that the Raft lane's connections.
        drop(self.raft_thread.take());
    }
}

fn raft_config(t: &RaftTuning) -> Result<Config, NodeError> {
    let c = Config {
        cluster_name: "ferry".into(),
        heartbeat_interval: t.heartbeat_ms,
        election_timeout_min: t.election_min_ms,
        election_timeout_max: t.election_max_ms,
        install_snapshot_timeout: 10_000,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(t.snapshot_every),
        max_in_snapshot_log_to_keep: t.keep_behind_snapshot,
        snapshot_max_chunk_size: 4 << 20,
        max_payload_entries: 1000,
        // Every election is called by the election watch after a pre-vote (pre_vote.rs):
        // openraft's own timer would raise the term of a node cut off from its peers.
        enable_elect: false,
        ..Default::default()
    };
    c.validate().map_err(|e| NodeError::Config(e.to_string()))
}

/// Starts a node; it forms the cluster with its peers on a first start, or rejoins from its data.
pub async fn start(cfg: NodeConfig) -> Result<NodeHandle, NodeError> {
    check_config(&cfg)?;
    let config = Arc::new(raft_config(&cfg.raft)?);
    // Before any channel opens: they take this process's TLS setting when they are made.
    let tls = match &cfg.grpc_tls {
        Some(files) => Some(crate::grpc_tls::start_node(files).map_err(|e| NodeError::Config(e.to_string()))?),
        None => None,
    };
    let (log_store, sm) = open_storage(&cfg)?;
    // Raft's pre-vote reads the log's last entry; openraft's lease is the longest timeout.
    let voter = crate::pre_vote::Voter::new(log_store.clone(), Duration::from_millis(cfg.raft.election_max_ms));
    let shared = sm.shared.clone();
    let bind_err = |source| NodeError::Listen {
        addr: cfg.listen,
        source,
    };
    let listener = TcpListener::bind(cfg.listen).await.map_err(bind_err)?;
    let addr = listener.local_addr().map_err(bind_err)?;

    // One channel cache: Raft replication and the node's own forwarding share connections.
    let peers = RaftPeers::default();
    let timing = crate::election_watch::Timing::from_raft(cfg.raft.election_min_ms, cfg.raft.election_max_ms);
    let credential_file = cfg.data_dir.join(crate::credential::CREDENTIAL_FILE);
    peers.credential().load(&credential_file);
    let id = cfg.id;
    let raft_thread = RaftThread::start(cfg.id).map_err(|e| NodeError::Raft(format!("starting its thread: {e}")))?;
    // Made on the Raft thread, so that openraft's tasks and its connections to peers run there.
    let acks = crate::follower_acks::FollowerAcks::new(cfg.clock.clone());
    let network = NetworkFactory::new(peers.raft_lane(), acks.clone());
    let raft = raft_thread
        .handle()
        .spawn(async move { Raft::new(id, config, network, log_store, sm).await })
        .await
        .map_err(|e| NodeError::Raft(e.to_string()))?
        .map_err(|e| NodeError::Raft(e.to_string()))?;
    acks.watch(&raft);
    let metrics = MetastoreMetrics::new();
    if let Some(registry) = &cfg.registry {
        metrics
            .register(registry, &shared)
            .map_err(|e| NodeError::Config(format!("metrics: {e}")))?;
    }
    let leader_watch = metrics::watch_leader(&raft, metrics.leader_changes.clone());
    let core = Arc::new(NodeCore::start(
        cfg.id,
        raft.clone(),
        shared.clone(),
        peers,
        acks,
        metrics.commit_latency.clone(),
        crate::node_core::CoreConfig {
            limits: cfg.limits.clone(),
            deadlines: cfg.raft.deadlines(),
            clock: cfg.clock.clone(),
            forget_leader_after: timing.quiet,
        },
    ));
    let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
    let (client_conns, client_rx) = mpsc::channel(64);
    let (raft_conns, raft_rx) = mpsc::channel(64);
    let listener = listener.into_std().map_err(bind_err)?;
    let accept = raft_thread
        .handle()
        .spawn(raft_lane::route(listener, client_conns, raft_conns));
    let reloaded = tls.clone();
    serve_raft_lane(raft_thread.handle(), &core, &voter, raft_rx, tls.clone());
    let server = serve(client_rx, &core, &voter, cfg.extra_services.clone(), tls, shutdown_rx).await?;
    if !cfg.join && !cfg.peers.is_empty() {
        initialize(&raft, &cfg.peers).await?;
    }
    spawn_credential_file(shared.clone(), credential_file, core.peers.credential().clone());
    let (watched, peers, heard) = (raft.clone(), core.peers.clone(), core.heard.clone());
    // On the Raft thread: a node busy serving clients must still notice a silent leader.
    raft_thread
        .handle()
        .spawn(async move { crate::election_watch::start(watched, peers, heard, voter, timing) });
    // Started last of all: a start that fails leaves no task behind.
    let tls_watch = reloaded.map(|t| tokio::spawn(t.watch(crate::tls::RELOAD_EVERY)));
    tracing::info!(id = cfg.id, %addr, "metastore node started");
    Ok(NodeHandle {
        id: cfg.id,
        addr,
        raft,
        sm: shared,
        core,
        shutdown: Some(shutdown_tx),
        server,
        accept,
        leader_watch,
        raft_thread: Some(raft_thread),
        tls_watch,
    })
}

/// Refuses a config no node can start with.
fn check_config(cfg: &NodeConfig) -> Result<(), NodeError> {
    if cfg.id == 0 {
        return Err(NodeError::Config("--id must be greater than 0".into()));
    }
    if !cfg.join && !cfg.peers.is_empty() && !cfg.peers.contains_key(&cfg.id) {
        return Err(NodeError::Config(format!(
            "--peers does not name this node's id {}",
            cfg.id
        )));
    }
    Ok(())
}

/// Opens the Raft log (sled) and the state machine (snapshots) in the data dir.
fn open_storage(cfg: &NodeConfig) -> Result<(LogStore, StateMachine), NodeError> {
    let storage = |e: &dyn std::fmt::Display| NodeError::Storage(e.to_string());
    std::fs::create_dir_all(&cfg.data_dir).map_err(|e| storage(&e))?;
    let db = sled::Config::new()
        .path(cfg.data_dir.join("raft"))
        .cache_capacity(64 << 20)
        .mode(sled::Mode::HighThroughput)
        .flush_every_ms(None)
        .open()
        .map_err(|e| storage(&e))?;
    let log_store = LogStore::open(db).map_err(|e| storage(&e))?;
    let sm = StateMachine::open(&cfg.data_dir.join("snapshots"), cfg.history_events).map_err(|e| storage(&e))?;
    Ok((log_store, sm))
}

/// Serves the Raft service on the Raft thread, to the peers' Raft-lane connections.
fn serve_raft_lane(
    rt: &tokio::runtime::Handle,
    core: &Arc<NodeCore>,
    voter: &crate::pre_vote::Voter,
    conns: mpsc::Receiver<std::net::TcpStream>,
    tls: Option<Arc<Reloading>>,
) {
    let raft_svc = raft_service(core, voter);
    rt.spawn(async move {
        // Registered with the Raft thread's reactor here, where the server polls them.
        let incoming = ReceiverStream::new(conns).map(tokio::net::TcpStream::from_std);
        let router = tonic::transport::Server::builder()
            .tcp_nodelay(true)
            .initial_connection_window_size(crate::peers::CONNECTION_WINDOW)
            .add_service(raft_svc);
        let res = crate::grpc_tls::serve(router, incoming, tls, std::future::pending()).await;
        if let Err(e) = res {
            tracing::error!(error = %e, "Raft-lane gRPC server stopped");
        }
    });
}

/// The internal Raft service of `core`'s node.
fn raft_service(core: &Arc<NodeCore>, voter: &crate::pre_vote::Voter) -> RaftServer<RaftService> {
    RaftServer::new(RaftService::new(
        core.raft.clone(),
        core.read_index.clone(),
        core.proposer.clone(),
        core.peers.credential().clone(),
        core.heard.clone(),
        voter.clone(),
    ))
    .max_decoding_message_size(MAX_MESSAGE)
    .max_encoding_message_size(MAX_MESSAGE)
}

/// Serves the metastore, Raft, health and reflection services (and `extra`) to the connections
/// of `conns` until `shutdown` fires.
async fn serve(
    conns: mpsc::Receiver<std::net::TcpStream>,
    core: &Arc<NodeCore>,
    voter: &crate::pre_vote::Voter,
    extra: Option<tonic::service::Routes>,
    tls: Option<Arc<Reloading>>,
    shutdown: oneshot::Receiver<()>,
) -> Result<tokio::task::JoinHandle<()>, NodeError> {
    let (health_reporter, health) = tonic_health::server::health_reporter();
    health_reporter.set_serving::<MetastoreServer<MetastoreService>>().await;
    // Both versions of reflection: grpcurl and grpcui speak v1, Python's grpcio-reflection and
    // older tools only v1alpha.
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| NodeError::Config(e.to_string()))?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .map_err(|e| NodeError::Config(e.to_string()))?;
    let metastore = MetastoreServer::new(MetastoreService::new(core.clone()))
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    let raft_svc = raft_service(core, voter);
    // The accept loop sets TCP_NODELAY: without it, Nagle and delayed ACKs add 40 ms to small
    // request/response exchanges.
    let incoming = ReceiverStream::new(conns).map(tokio::net::TcpStream::from_std);
    Ok(tokio::spawn(async move {
        // A follower broker keeps one replication stream per partition open on its leader's
        // connection; hyper's default of 200 concurrent streams would stall the rest.
        let mut builder = tonic::transport::Server::builder()
            .tcp_nodelay(true)
            .max_concurrent_streams(MAX_STREAMS)
            .initial_connection_window_size(crate::peers::CONNECTION_WINDOW);
        let router = match extra {
            Some(routes) => builder.add_routes(routes).add_service(health),
            None => builder.add_service(health),
        };
        let router = router
            .add_service(reflection)
            .add_service(reflection_v1alpha)
            .add_service(metastore)
            .add_service(raft_svc);
        let shutdown = async {
            let _ = shutdown.await;
        };
        let res = crate::grpc_tls::serve(router, incoming, tls, shutdown).await;
        if let Err(e) = res {
            tracing::error!(error = %e, "gRPC server stopped");
        }
    }))
}

/// Forms the cluster from `peers` on a founding node's first start.
async fn initialize(raft: &Raft, peers: &BTreeMap<NodeId, String>) -> Result<(), NodeError> {
    let initialized = raft
        .is_initialized()
        .await
        .map_err(|e| NodeError::Raft(e.to_string()))?;
    if !initialized {
        // Every founding node proposes the same membership; openraft accepts that.
        let members: BTreeMap<NodeId, Node> = peers.iter().map(|(id, a)| (*id, Node::new(a.clone()))).collect();
        if let Err(e) = raft.initialize(members).await {
            tracing::info!(error = %e, "not initializing: cluster already formed");
        }
    }
    Ok(())
}

/// Once this node knows the cluster credential: gives it to its Raft calls and asks it of its
/// peers, and writes it to `path` (readable by its owner only) for the operator's repair
/// commands and for broker-only nodes.
fn spawn_credential_file(sm: Arc<SmShared>, path: PathBuf, peers: crate::credential::PeerCredential) {
    tokio::spawn(async move {
        let token = crate::credential::wait(&sm).await;
        peers.set(&token);
        if std::fs::read_to_string(&path).is_ok_and(|t| t.trim() == token) {
            return;
        }
        if let Err(e) = write_private(&path, &token) {
            tracing::warn!(path = %path.display(), error = %e, "cannot write the cluster credential file");
        }
    });
}

fn write_private(path: &std::path::Path, token: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(token.as_bytes())?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}
