//! `ferry dev`: a local cluster of three nodes in one process, on loopback, with no set-up. Each
//! node is a quorum member and a broker with two log dirs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use metastore::RaftTuning;
use serde::{Deserialize, Serialize};

/// Flags of `ferry dev`.
#[derive(Args)]
pub struct DevArgs {
    /// Where the nodes keep their data; a second start reuses it.
    #[arg(long, default_value = "ferry-dev")]
    data_dir: PathBuf,
    /// First port; nodes listen on consecutive ports from here (0 = any free ports).
    #[arg(long, default_value_t = 7701)]
    base_port: u16,
}

/// What a dev cluster remembers between starts: the ports its nodes were given.
#[derive(Serialize, Deserialize)]
struct DevLayout {
    nodes: BTreeMap<u64, String>,
}

const NODES: u64 = 3;

fn layout(dir: &Path, base_port: u16) -> anyhow::Result<DevLayout> {
    let path = dir.join("dev.json");
    if let Ok(bytes) = std::fs::read(&path) {
        return serde_json::from_slice(&bytes).with_context(|| format!("{} is malformed", path.display()));
    }
    let mut nodes = BTreeMap::new();
    for id in 1..=NODES {
        let port = if base_port == 0 {
            // Reserve a free port by binding and releasing it.
            std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port()
        } else {
            base_port + (id - 1) as u16
        };
        nodes.insert(id, format!("127.0.0.1:{port}"));
    }
    std::fs::create_dir_all(dir)?;
    let layout = DevLayout { nodes };
    std::fs::write(&path, serde_json::to_vec_pretty(&layout)?)?;
    Ok(layout)
}

/// Runs the dev cluster until Ctrl-C or SIGTERM.
pub async fn run(a: DevArgs) -> anyhow::Result<()> {
    let layout = layout(&a.data_dir, a.base_port)?;
    let mut nodes = Vec::new();
    for (id, addr) in &layout.nodes {
        let listen: SocketAddr = addr.parse()?;
        let dir = a.data_dir.join(format!("node-{id}"));
        let node = crate::cluster_node::start(crate::cluster_node::NodeOptions {
            id: *id,
            data_dir: dir.clone(),
            listen,
            peers: layout.nodes.clone(),
            join: false,
            raft: RaftTuning::default(),
            roles: crate::cluster_node::Roles {
                quorum: true,
                broker: true,
            },
            quorum: Vec::new(),
            log_dirs: vec![dir.join("logs-1"), dir.join("logs-2")],
            rack: None,
            session_timeout_ms: 6000,
            data: broker::DataConfig::default(),
            controller: Default::default(),
        })
        .await
        .with_context(|| format!("starting node {id} on {addr}"))?;
        nodes.push(node);
    }
    let bootstrap = layout.nodes.values().cloned().collect::<Vec<_>>().join(",");
    let first = layout.nodes.values().next().cloned().unwrap_or_default();
    println!("ferry dev: {} nodes, data in {}", nodes.len(), a.data_dir.display());
    for (id, addr) in &layout.nodes {
        println!("  node {id}: {addr}");
    }
    println!("bootstrap: {first}");
    println!();
    println!("Try next (in another terminal):");
    println!(
        "  ferry topics --create --topic demo --partitions 3 --replication-factor 3 --bootstrap-server {bootstrap}"
    );
    println!("  seq 1 5 | ferry produce --topic demo --bootstrap-server {first}");
    println!("  ferry consume --topic demo --from-beginning --max-records 5 --bootstrap-server {first}");
    println!("  ferry topics --describe --topic demo --bootstrap-server {first}");
    println!("  ferry kv put /hello world --bootstrap-server {bootstrap}");
    println!("  ferry kv get /hello --bootstrap-server {first}");
    println!("  ferry kv watch / --bootstrap-server {first}");
    println!("  ferry metastore members list --bootstrap-server {first}");
    println!("Stop with Ctrl-C; a second start reuses the data.");
    crate::shutdown_signal().await;
    println!("stopping...");
    for n in nodes {
        n.shutdown().await;
    }
    Ok(())
}
