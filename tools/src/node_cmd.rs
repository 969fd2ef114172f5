//! `ferry node`: one metastore voter as its own process.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use metastore::{NodeConfig, RaftTuning};

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
    if peers.is_empty() && !a.join {
        bail!("--peers is required unless --join is given");
    }
    let mut cfg = NodeConfig::new(a.id, a.data_dir, a.listen, peers);
    cfg.join = a.join;
    cfg.raft = RaftTuning {
        heartbeat_ms: a.heartbeat_ms,
        election_min_ms: a.election_min_ms,
        election_max_ms: a.election_max_ms,
        snapshot_every: a.snapshot_every,
        ..RaftTuning::default()
    };
    let node = metastore::start(cfg).await?;
    println!("node {} listening on {}", node.id, node.addr);
    crate::shutdown_signal().await;
    node.shutdown().await;
    Ok(())
}
