//! `ferry node`: one node (quorum member, broker, or both) as its own process.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use metastore::RaftTuning;

use crate::cluster_node::{self, NodeOptions, Roles};

/// Flags of `ferry node`.
#[derive(Args)]
pub struct NodeArgs {
    /// This node's id (> 0).
    #[arg(long)]
    id: u64,
    /// Where the node keeps its log, vote and snapshots.
    #[arg(long)]
    data_dir: PathBuf,
    /// Address to serve gRPC on, HOST:PORT.
    #[arg(long)]
    listen: SocketAddr,
    /// The founding voters: 1=HOST:PORT,2=HOST:PORT,...
    #[arg(long, default_value = "")]
    peers: String,
    /// Join an existing cluster (added with `ferry metastore members add-learner`) instead of forming one.
    #[arg(long)]
    join: bool,
    /// Worker threads of the node's async runtime (0 = one per core).
    #[arg(long, default_value_t = 1, env = "FERRY_NODE_THREADS")]
    pub threads: usize,
    /// Raft heartbeat interval in ms.
    #[arg(long, default_value_t = RaftTuning::default().heartbeat_ms)]
    heartbeat_ms: u64,
    /// Minimum election timeout in ms.
    #[arg(long, default_value_t = RaftTuning::default().election_min_ms)]
    election_min_ms: u64,
    /// Maximum election timeout in ms.
    #[arg(long, default_value_t = RaftTuning::default().election_max_ms)]
    election_max_ms: u64,
    /// Build a snapshot every this many log entries.
    #[arg(long, default_value_t = RaftTuning::default().snapshot_every)]
    snapshot_every: u64,
    /// Roles of this node: quorum, broker, or quorum,broker.
    #[arg(long, default_value = "quorum,broker")]
    roles: Roles,
    /// The quorum's addresses, for a broker-only node: HOST:PORT,...
    #[arg(long, default_value = "")]
    quorum: String,
    /// Broker log dirs, comma-separated (default: <data dir>/logs).
    #[arg(long, value_delimiter = ',')]
    log_dirs: Vec<PathBuf>,
    /// Broker rack.
    #[arg(long)]
    rack: Option<String>,
    /// A broker silent this long loses its registration and its leaderships.
    #[arg(long, default_value_t = 6000)]
    session_timeout_ms: u64,
    /// `replica.lag.time.max.ms`: an in-sync follower not caught up for this long leaves the ISR.
    #[arg(long, default_value_t = broker::DataConfig::default().replica_lag_max_ms)]
    replica_lag_time_max_ms: u64,
    /// Segment size of partition logs in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    segment_bytes: u64,
    /// Move leadership back to preferred replicas (auto.leader.rebalance.enable).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    auto_leader_rebalance: bool,
    /// How often preferred leaders are checked, in ms.
    #[arg(long, default_value_t = 5000)]
    leader_imbalance_check_interval_ms: u64,
    /// How often each log dir is probed with a small synced write, in ms; a dir that fails goes
    /// offline.
    #[arg(long, default_value_t = broker::DataConfig::default().dir_probe_interval_ms)]
    log_dir_probe_interval_ms: u64,
    /// How many log dir moves copy at once (num.replica.alter.log.dirs.threads).
    #[arg(long, default_value_t = broker::DataConfig::default().dir_move_parallelism)]
    num_replica_alter_log_dirs_threads: usize,
}

/// Parses `1=HOST:PORT,2=HOST:PORT`.
pub fn parse_peers(s: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    let mut peers = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, addr) = part
            .split_once('=')
            .with_context(|| format!("--peers: {part:?} is not ID=HOST:PORT"))?;
        let id: u64 = id
            .parse()
            .with_context(|| format!("--peers: {id:?} is not a node id"))?;
        if id == 0 {
            bail!("--peers: node ids start at 1");
        }
        if !addr.contains(':') {
            bail!("--peers: {addr:?} is not HOST:PORT");
        }
        if peers.insert(id, addr.to_string()).is_some() {
            bail!("--peers: node {id} is named twice");
        }
    }
    Ok(peers)
}

/// Runs the node until Ctrl-C or SIGTERM.
pub async fn run(a: NodeArgs) -> anyhow::Result<()> {
    let peers = parse_peers(&a.peers)?;
    if a.roles.quorum && peers.is_empty() && !a.join {
        bail!("--peers is required for a quorum node unless --join is given");
    }
    let mut data = broker::DataConfig {
        replica_lag_max_ms: a.replica_lag_time_max_ms,
        dir_probe_interval_ms: a.log_dir_probe_interval_ms,
        dir_move_parallelism: a.num_replica_alter_log_dirs_threads,
        ..Default::default()
    };
    data.log.segment_bytes = a.segment_bytes;
    let node = cluster_node::start(NodeOptions {
        id: a.id,
        data_dir: a.data_dir,
        listen: a.listen,
        peers,
        join: a.join,
        raft: RaftTuning {
            heartbeat_ms: a.heartbeat_ms,
            election_min_ms: a.election_min_ms,
            election_max_ms: a.election_max_ms,
            snapshot_every: a.snapshot_every,
            ..RaftTuning::default()
        },
        roles: a.roles,
        quorum: a
            .quorum
            .split(',')
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .map(String::from)
            .collect(),
        log_dirs: a.log_dirs,
        rack: a.rack,
        session_timeout_ms: a.session_timeout_ms,
        data,
        controller: controller::active::ControllerConfig {
            auto_leader_rebalance: a.auto_leader_rebalance,
            rebalance_interval: std::time::Duration::from_millis(a.leader_imbalance_check_interval_ms.max(100)),
        },
    })
    .await?;
    println!("node {} listening on {}", a.id, node.addr);
    crate::shutdown_signal().await;
    node.shutdown().await;
    Ok(())
}
