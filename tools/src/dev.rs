//! `ferry dev`: a local cluster in one process, on loopback, with no set-up: by default three
//! nodes, each a quorum member and a broker; `--nodes` and `--brokers` change the count and add
//! broker-only nodes. Every broker has two log dirs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use broker::auth::SecurityProtocol;
use clap::Args;
use metastore::RaftTuning;
use serde::{Deserialize, Serialize};

use crate::cluster_node::RunningNode;

/// Flags of `ferry dev`.
#[derive(Args)]
pub struct DevArgs {
    /// Where the nodes keep their data; a second start reuses it.
    #[arg(long, default_value = "ferry-dev")]
    data_dir: PathBuf,
    /// First port; nodes listen on consecutive ports from here (0 = any free ports).
    #[arg(long, default_value_t = 7701)]
    base_port: u16,
    /// Nodes that are both quorum members and brokers, 1 to 7 [default: 3, or what the data
    /// dir was made with].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_NODES))]
    nodes: Option<u64>,
    /// Extra broker-only nodes, 0 to 16, with ids after the quorum's [default: 0, or what the
    /// data dir was made with].
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=MAX_BROKERS))]
    brokers: Option<u64>,
    /// First port of the nodes' HTTP servers (`/metrics` and the web console), one a node on
    /// consecutive ports (0 = any free ports) [default: 9101, or 0 with --base-port 0].
    #[arg(long, alias = "http-base-port")]
    metrics_base_port: Option<u16>,
    /// Security on: TLS with a throwaway CA, SASL_SSL with SCRAM-SHA-512, the authorizer and a
    /// super user `admin`; prints the Kafka client config for it.
    #[arg(long)]
    secure: bool,
}

/// The first metrics port when `--metrics-base-port` is not given.
const METRICS_BASE_PORT: u16 = 9101;
/// The first node's Kafka listener; node i gets this port plus i (Kafka's own default port).
const KAFKA_BASE_PORT: u16 = 9092;

/// Where node `id` (counted from 1) serves its metrics. A default port found in use is
/// replaced by any free one (the address is printed); a port given with the flag is not.
fn metrics_listen(base: u16, explicit: bool, id: u64) -> anyhow::Result<SocketAddr> {
    let port = if base == 0 {
        0
    } else {
        u16::try_from(id - 1)
            .ok()
            .and_then(|i| base.checked_add(i))
            .with_context(|| format!("--metrics-base-port {base}: node {id} would need a port above 65535"))?
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    if !explicit && port != 0 && std::net::TcpListener::bind(addr).is_err() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], 0)));
    }
    Ok(addr)
}

/// What a dev cluster remembers between starts: the ports its nodes were given.
#[derive(Serialize, Deserialize)]
struct DevLayout {
    /// Quorum-and-broker nodes.
    nodes: BTreeMap<u64, String>,
    /// Broker-only nodes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    brokers: BTreeMap<u64, String>,
}

const NODES: u64 = 3;
const MAX_NODES: u64 = 7;
const MAX_BROKERS: u64 = 16;

fn layout(dir: &Path, base_port: u16, nodes: Option<u64>, brokers: Option<u64>) -> anyhow::Result<DevLayout> {
    let path = dir.join("dev.json");
    if let Ok(bytes) = std::fs::read(&path) {
        let l: DevLayout =
            serde_json::from_slice(&bytes).with_context(|| format!("{} is malformed", path.display()))?;
        let (n, m) = (l.nodes.len() as u64, l.brokers.len() as u64);
        if nodes.is_some_and(|x| x != n) || brokers.is_some_and(|x| x != m) {
            bail!(
                "{} holds a cluster of {n} nodes and {m} broker-only nodes; start it without \
                 --nodes/--brokers, or use another --data-dir",
                dir.display()
            );
        }
        return Ok(l);
    }
    let nodes = nodes.unwrap_or(NODES);
    let brokers = brokers.unwrap_or(0);
    let mut addrs = BTreeMap::new();
    // Held until every port is chosen: a port released at once may be handed out again by the
    // next bind, and two nodes on one port fail to start.
    let mut reserved = Vec::new();
    for id in 1..=nodes + brokers {
        let port = if base_port == 0 {
            let l = reserve_port()?;
            let port = l.local_addr()?.port();
            reserved.push(l);
            port
        } else {
            u16::try_from(id - 1)
                .ok()
                .and_then(|i| base_port.checked_add(i))
                .with_context(|| format!("--base-port {base_port}: node {id} would need a port above 65535"))?
        };
        addrs.insert(id, format!("127.0.0.1:{port}"));
    }
    drop(reserved);
    let brokers = addrs.split_off(&(nodes + 1));
    std::fs::create_dir_all(dir)?;
    let layout = DevLayout { nodes: addrs, brokers };
    std::fs::write(&path, serde_json::to_vec_pretty(&layout)?)?;
    Ok(layout)
}

/// Where `--base-port 0` chooses ports: below Linux's default ephemeral range (32768–60999),
/// from which the kernel takes the local port of every outgoing connection and every port-0
/// bind. A port chosen there and released for its node to bind could be taken meanwhile by any
/// process's connection (a `ferry dev` among parallel tests failed to start that way).
const CHOSEN_PORTS: std::ops::Range<u16> = 20_000..32_768;

/// A listener on a random free port of [`CHOSEN_PORTS`] (any free port if none was found).
fn reserve_port() -> std::io::Result<std::net::TcpListener> {
    use rand::Rng;
    let mut rng = rand::rng();
    for _ in 0..1_000 {
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", rng.random_range(CHOSEN_PORTS))) {
            return Ok(l);
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
}

/// Runs the dev cluster until Ctrl-C or SIGTERM.
pub async fn run(a: DevArgs) -> anyhow::Result<()> {
    let layout = layout(&a.data_dir, a.base_port, a.nodes, a.brokers)?;
    // Broker-only nodes read the credential that the first quorum node writes to its data dir.
    let first_quorum = layout.nodes.keys().next().copied().unwrap_or(1);
    let credential_file = a
        .data_dir
        .join(format!("node-{first_quorum}"))
        .join(metastore::credential::CREDENTIAL_FILE);
    let secure = a.secure.then(|| crate::dev_secure::prepare(&a.data_dir)).transpose()?;
    let mut nodes = start_nodes(&a, &layout, &credential_file, secure.as_ref()).await?;
    let stop = crate::shutdown_signal();
    wait_registered(&layout, &credential_file).await;
    if let Some(s) = &secure {
        let first = layout.nodes.values().next().cloned().unwrap_or_default();
        s.create_admin(&first, &credential_file)
            .await
            .context("creating the admin user")?;
    }
    print_banner(&a, &layout, &nodes, &credential_file);
    if let Some(s) = &secure {
        println!("client config: {}", s.client_config.display());
        println!(
            "  (Kafka's tools: --bootstrap-server <kafka bootstrap> --command-config {}; ferry's commands take the same --command-config)",
            s.client_config.display()
        );
    }
    stop.await;
    println!("stopping...");
    // Broker-only nodes first: they deregister through the quorum.
    let broker_only = nodes.split_off(layout.nodes.len());
    for n in broker_only.into_iter().chain(nodes) {
        n.shutdown().await;
    }
    Ok(())
}

/// Waits until every broker of the layout is registered, so that the ready lines come when
/// the whole cluster takes requests naming any broker (at most a minute; then it says so).
async fn wait_registered(layout: &DevLayout, credential_file: &Path) {
    let quorum: Vec<String> = layout.nodes.values().cloned().collect();
    let want = layout.nodes.len() + layout.brokers.len();
    // Calls as the cluster: a secure cluster's admin service admits nobody else yet.
    let Ok(meta) = metastore::Client::new(&quorum) else {
        return;
    };
    let identity = broker::auth::call_identity::CallIdentity::credential(meta.credential_interceptor());
    let Ok(client) = broker::ClusterClient::new(&quorum).map(|c| c.with_identity(identity)) else {
        return;
    };
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        // The first quorum node writes the file once the cluster has a credential.
        let _ = meta.set_credential_file(credential_file);
        if client.brokers().await.is_ok_and(|b| b.len() >= want) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    eprintln!("warning: not every broker registered within a minute; the cluster may not be whole yet");
}

/// Starts the quorum-and-broker nodes, then the broker-only ones, in id order.
async fn start_nodes(
    a: &DevArgs,
    layout: &DevLayout,
    credential_file: &Path,
    secure: Option<&crate::dev_secure::Secure>,
) -> anyhow::Result<Vec<RunningNode>> {
    let quorum: Vec<String> = layout.nodes.values().cloned().collect();
    let metrics_base = a
        .metrics_base_port
        .unwrap_or(if a.base_port == 0 { 0 } else { METRICS_BASE_PORT });
    let mut nodes = Vec::new();
    for (i, (id, addr)) in layout.nodes.iter().chain(&layout.brokers).enumerate() {
        let broker_only = layout.brokers.contains_key(id);
        let listen: SocketAddr = addr.parse()?;
        let kafka_port = if a.base_port == 0 {
            0
        } else {
            u16::try_from(i)
                .ok()
                .and_then(|i| KAFKA_BASE_PORT.checked_add(i))
                .with_context(|| format!("node {id}: no Kafka port left above {KAFKA_BASE_PORT}"))?
        };
        let dir = a.data_dir.join(format!("node-{id}"));
        let node = crate::cluster_node::start(crate::cluster_node::NodeOptions {
            id: *id,
            data_dir: dir.clone(),
            listen,
            peers: if broker_only {
                BTreeMap::new()
            } else {
                layout.nodes.clone()
            },
            join: false,
            raft: RaftTuning::default(),
            roles: crate::cluster_node::Roles {
                quorum: !broker_only,
                broker: true,
            },
            quorum: if broker_only { quorum.clone() } else { Vec::new() },
            log_dirs: vec![dir.join("logs-1"), dir.join("logs-2")],
            rack: None,
            session_timeout_ms: 6000,
            data: broker::DataConfig::default(),
            controller: Default::default(),
            limits: Default::default(),
            http_listen: Some(metrics_listen(metrics_base, a.metrics_base_port.is_some(), *id)?),
            credential_file: broker_only.then(|| credential_file.to_path_buf()),
            kafka_listeners: vec![crate::listeners::single(
                SocketAddr::new(listen.ip(), kafka_port),
                None,
                secure.map_or(SecurityProtocol::Plaintext, |_| SecurityProtocol::SaslSsl),
            )],
            kafka_security: secure.map(|s| s.listener()).unwrap_or_default(),
            grpc_tls: secure.map(|s| s.grpc_tls()),
            http_tls: secure.map(|s| s.grpc_tls().certificate_only()),
        })
        .await
        .with_context(|| format!("starting node {id} on {addr}"))?;
        nodes.push(node);
    }
    Ok(nodes)
}

/// The nodes' addresses, the credential file and commands to try next.
fn print_banner(a: &DevArgs, layout: &DevLayout, nodes: &[RunningNode], credential_file: &Path) {
    let bootstrap = layout.nodes.values().cloned().collect::<Vec<_>>().join(",");
    let first = layout.nodes.values().next().cloned().unwrap_or_default();
    if layout.brokers.is_empty() {
        println!("ferry dev: {} nodes, data in {}", nodes.len(), a.data_dir.display());
    } else {
        println!(
            "ferry dev: {} nodes ({} quorum and broker, {} broker only), data in {}",
            nodes.len(),
            layout.nodes.len(),
            layout.brokers.len(),
            a.data_dir.display()
        );
    }
    let metrics_line = |i: usize| {
        if let Some(m) = nodes.get(i).and_then(|n| n.http_url()) {
            println!("    metrics: {m}/metrics");
            println!("    console: {m}/");
        }
    };
    for (i, (id, addr)) in layout.nodes.iter().enumerate() {
        println!("  node {id}: {addr}");
        metrics_line(i);
    }
    for (i, (id, addr)) in layout.brokers.iter().enumerate() {
        println!("  node {id}: {addr} (broker only)");
        metrics_line(layout.nodes.len() + i);
    }
    println!("bootstrap: {first}");
    let kafka: Vec<String> = nodes.iter().filter_map(|n| n.kafka_addr().map(String::from)).collect();
    if !kafka.is_empty() {
        println!(
            "kafka bootstrap: {} (Kafka's clients, consumer groups and admin tools; no transactions yet)",
            kafka.join(",")
        );
    }
    println!(
        "cluster credential: {} (ferry kv writes under /brokers, /admin, /config, /controller, /cluster, /kafka-acl need --cluster-credential-file)",
        credential_file.display()
    );
    println!();
    print_next_steps(nodes.len(), &bootstrap, &first);
}

/// Commands to try against the new cluster.
fn print_next_steps(nodes: usize, bootstrap: &str, first: &str) {
    println!("Try next (in another terminal):");
    let rf = nodes.min(3);
    println!(
        "  ferry topics --create --topic demo --partitions 3 --replication-factor {rf} --bootstrap-server {bootstrap}"
    );
    println!("  seq 1 5 | ferry produce --topic demo --bootstrap-server {first}");
    println!("  ferry consume --topic demo --from-beginning --max-records 5 --bootstrap-server {first}");
    println!("  ferry topics --describe --topic demo --bootstrap-server {first}");
    println!("  ferry kv put /hello world --bootstrap-server {bootstrap}");
    println!("  ferry kv get /hello --bootstrap-server {first}");
    println!("  ferry kv watch / --bootstrap-server {first}");
    println!("  ferry metastore members list --bootstrap-server {first}");
    println!(
        "(`ferry` not on the PATH? `cargo install --path tools --locked`, or `cargo run --bin ferry --` in its place.)"
    );
    println!("Stop with Ctrl-C; a second start reuses the data.");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_ports_follow_the_base_port() {
        let port = |base, id| metrics_listen(base, true, id).map(|a| a.port());
        assert_eq!(port(9101, 1).unwrap(), 9101);
        assert_eq!(port(9101, 3).unwrap(), 9103);
        assert_eq!(port(0, 5).unwrap(), 0);
        assert!(port(65535, 2).is_err());
        // A default port in use gives way to any free port.
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = taken.local_addr().unwrap().port();
        assert_eq!(metrics_listen(p, false, 1).unwrap().port(), 0);
        assert_eq!(metrics_listen(p, true, 1).unwrap().port(), p);
    }
}
