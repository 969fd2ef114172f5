//! Test harness: real clusters on loopback, in this process or as `ferry node` processes.

pub mod browser;
pub mod data;
pub mod dev;
pub mod fault_client;
pub mod history;
pub mod java_stores;
pub mod kafka;
pub mod kafka_zk;
pub mod linearizable;
pub mod metrics;
pub mod netns;
pub mod plans;
pub mod reassign;
pub mod zk;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use metastore::{Client, NodeConfig, NodeHandle, RaftTuning};

/// Logs to the test output when `RUST_LOG` is set.
pub fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A loopback port that was free a moment ago, for a node a test starts.
///
/// The port is released before the node binds it. An ephemeral port (the kernel's range, 32768
/// and up on Linux) may meanwhile become the local end of some outgoing connection, or be handed
/// to another test process, and the node then cannot listen. So ports come from below that
/// range, where the kernel hands out none, and each is reserved across the test processes of a
/// run by a file (`<temp>/ferry-test-ports/<port>`, taken over after [`PORT_RESERVED_FOR`]).
pub fn free_port() -> u16 {
    // Never give one port twice in a process (two nodes of one cluster on one port fail in
    // confusing ways).
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_000;
    let dir = std::env::temp_dir().join("ferry-test-ports");
    let _ = std::fs::create_dir_all(&dir);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let seed = std::process::id().wrapping_mul(2_654_435_761) ^ nanos;
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    for i in 0..SPAN {
        // In range: FIRST + SPAN stays below 32768.
        let port = (FIRST + seed.wrapping_add(i) % SPAN) as u16;
        if given.contains(&port) || !reserve_port(&dir, port) {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.push(port);
            return port;
        }
    }
    // Every port of the span is reserved: an ephemeral one, as before.
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("binding an ephemeral loopback port");
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// How long a port stays reserved for the test process that took it.
pub const PORT_RESERVED_FOR: std::time::Duration = std::time::Duration::from_secs(600);

/// Reserves `port` for this test process, unless another holds it (a reservation older than
/// [`PORT_RESERVED_FOR`] is taken over). A dir that cannot be written reserves nothing and
/// refuses nothing.
fn reserve_port(dir: &Path, port: u16) -> bool {
    let path = dir.join(port.to_string());
    let create = || std::fs::OpenOptions::new().write(true).create_new(true).open(&path);
    match create() {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let stale = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > PORT_RESERVED_FOR);
            // Of two processes taking over one stale reservation, one creates the file anew.
            stale && std::fs::remove_file(&path).is_ok() && create().is_ok()
        }
        Err(_) => true,
    }
}

/// The cluster credential file that a quorum node with data dir `data_dir` writes, as a flag
/// value for broker-only nodes and repair commands.
pub fn credential_file(data_dir: &Path) -> String {
    data_dir
        .join(metastore::credential::CREDENTIAL_FILE)
        .display()
        .to_string()
}

/// Waits (up to a minute) until the file at `path` exists; a cluster writes its credential file
/// a moment after it forms.
pub fn wait_for_file(path: &str) {
    for _ in 0..600 {
        if Path::new(path).exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{path} did not appear within a minute");
}

/// Raft timing for tests: quick elections, but slack enough for a loaded 2-core machine.
pub fn test_tuning() -> RaftTuning {
    RaftTuning {
        heartbeat_ms: 100,
        election_min_ms: 600,
        election_max_ms: 1200,
        ..RaftTuning::default()
    }
}

/// A cluster of nodes running in this process, each with its own data dir and gRPC port.
pub struct Cluster {
    /// The running nodes by position (None once stopped).
    pub nodes: Vec<Option<NodeHandle>>,
    /// Each node's address.
    pub addrs: Vec<String>,
    /// The data dirs live as long as the cluster.
    pub dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts `n` voters that form a cluster, and waits for a leader.
    pub async fn start(n: u64) -> Self {
        Self::start_with(n, |_| {}).await
    }

    /// Like [`Cluster::start`], with a chance to change each node's config.
    pub async fn start_with(n: u64, tweak: impl Fn(&mut NodeConfig)) -> Self {
        init_logging();
        // A port found free can be taken by a concurrently running test before a node binds
        // it; then start again on other ports.
        for attempt in 0.. {
            let dir = tempfile::tempdir().expect("temp dir");
            let peers: BTreeMap<u64, String> = (1..=n).map(|id| (id, format!("127.0.0.1:{}", free_port()))).collect();
            let mut nodes = Vec::new();
            let mut failed = None;
            for (id, addr) in &peers {
                let mut cfg = NodeConfig::new(*id, dir.path().join(format!("n{id}")), sock(addr), peers.clone());
                cfg.raft = test_tuning();
                tweak(&mut cfg);
                match metastore::start(cfg).await {
                    Ok(node) => nodes.push(Some(node)),
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            let c = Self {
                nodes,
                addrs: peers.values().cloned().collect(),
                dir,
            };
            match failed {
                None => {
                    c.wait_leader().await;
                    return c;
                }
                Some(e) if attempt < 5 => {
                    eprintln!("cluster start failed ({e}); retrying on other ports");
                    c.shutdown().await;
                }
                Some(e) => panic!("cluster did not start: {e}"),
            }
        }
        unreachable!("the loop returns or panics")
    }

    /// A client of every node.
    pub fn client(&self) -> Client {
        Client::new(&self.addrs).expect("client")
    }

    /// The cluster credential file of the first node (see [`wait_for_file`] before use).
    pub fn credential_file(&self) -> String {
        credential_file(&self.dir.path().join("n1"))
    }

    /// A client of every node that carries the cluster credential (it may write the cluster's
    /// own keys), once the cluster has one.
    pub async fn trusted_client(&self) -> Client {
        let node = self.nodes.iter().flatten().next().expect("a running node");
        let token = node.cluster_credential().await;
        let c = self.client();
        c.set_credential(&token).expect("a printable credential");
        c
    }

    /// A client that talks to node `i` first.
    pub fn client_at(&self, i: usize) -> Client {
        Client::new(&[self.addrs[i].clone()]).expect("client")
    }

    /// The index of the leader, waiting for one.
    pub async fn wait_leader(&self) -> usize {
        for _ in 0..600 {
            for (i, n) in self.nodes.iter().enumerate() {
                if let Some(n) = n {
                    let m = n.raft.metrics().borrow().clone();
                    if m.current_leader == Some(n.id) {
                        return i;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no leader within 30 s");
    }

    /// The index of the leader once every running node follows it (a cluster just formed can
    /// still change leaders while its founding nodes' first elections settle).
    pub async fn wait_settled_leader(&self) -> usize {
        for _ in 0..600 {
            let leader = self.wait_leader().await;
            let id = self.nodes[leader].as_ref().map(|n| n.id);
            if (0..self.nodes.len()).all(|i| self.nodes[i].is_none() || self.leader_seen_by(i) == id) {
                return leader;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no leader followed by every node within 30 s");
    }

    /// Whether node `i` is running and in the leader state now.
    pub fn leads(&self, i: usize) -> bool {
        self.nodes[i]
            .as_ref()
            .is_some_and(|n| n.raft.metrics().borrow().state == openraft::ServerState::Leader)
    }

    /// The leader node `i` knows of, if it runs and knows one.
    pub fn leader_seen_by(&self, i: usize) -> Option<u64> {
        self.nodes[i].as_ref().and_then(|n| n.known_leader())
    }

    /// Stops node `i` (its data stays).
    pub async fn stop(&mut self, i: usize) {
        if let Some(n) = self.nodes[i].take() {
            n.shutdown().await;
        }
    }

    /// Starts stopped node `i` again on its data dir and address.
    pub async fn restart(&mut self, i: usize) {
        assert!(self.nodes[i].is_none(), "node {i} still runs");
        let id = i as u64 + 1;
        let peers: BTreeMap<u64, String> = (1..).zip(self.addrs.iter().cloned()).collect();
        let mut cfg = NodeConfig::new(id, self.dir.path().join(format!("n{id}")), sock(&self.addrs[i]), peers);
        cfg.raft = test_tuning();
        // A stopped node's log flusher lets go of the files a moment after it ends.
        for tries in 0.. {
            match metastore::start(cfg.clone()).await {
                Ok(node) => {
                    self.nodes[i] = Some(node);
                    return;
                }
                Err(e) if tries < 100 => {
                    tracing::debug!(error = %e, "restart not yet possible");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("restarting node {id}: {e}"),
            }
        }
    }

    /// Waits until every running node's store has reached `revision`.
    pub async fn wait_revision(&self, revision: u64) {
        for n in self.nodes.iter().flatten() {
            let mut tries = 0;
            while n.sm.inner.read().revision() < revision {
                assert!(
                    tries < 600,
                    "node {} did not reach revision {revision} within 30 s",
                    n.id
                );
                tries += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// Stops every node.
    pub async fn shutdown(mut self) {
        for i in 0..self.nodes.len() {
            self.stop(i).await;
        }
    }
}

/// The `ferry` binary, built once per test process (a no-op when it is up to date) with the
/// workspace's other binaries (`ferry-bench`, `ferry-plan-bench`).
pub fn ferry_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        // target/<profile>/deps/<test> -> target/<profile>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target profile dir")
            .to_path_buf();
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        // The same packages and targets as the test build (`cargo nextest run --workspace`), so
        // that every dependency resolves the same features and is reused, not built again.
        cmd.current_dir(workspace)
            .args(["build", "-q", "--workspace", "--bins", "--tests"]);
        // Without the variables cargo gives a test process about its own crate: a build sees
        // them as a change of what the crates read with `env!`, and builds every test again.
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            let injected = ["CARGO_PKG_", "CARGO_BIN_EXE_", "CARGO_MANIFEST_", "CARGO_CRATE_"]
                .iter()
                .any(|p| k.starts_with(p))
                || ["CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR", "OUT_DIR"].contains(&k.as_ref());
            if injected {
                cmd.env_remove(&key);
            }
        }
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("running cargo build for the ferry binary");
        assert!(status.success(), "building the ferry binary failed");
        profile_dir.join("ferry")
    })
    .clone()
}

/// Runs the `ferry` binary to its end: (exit code, stdout, stderr).
pub fn run_ferry(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(ferry_bin()).args(args).output().expect("running ferry");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `ferry node` as node 1 of a one-node quorum with its data in `data_dir` and the flags
/// `extra`, which must make it refuse to start; its stderr.
pub fn refused_node(data_dir: &Path, extra: &[&str]) -> String {
    let data = data_dir.display().to_string();
    let peers = loopback_peers(1);
    let p = format!("1={}", peers[&1]);
    let mut args = vec![
        "node",
        "--id",
        "1",
        "--data-dir",
        &data,
        "--listen",
        &peers[&1],
        "--peers",
        &p,
    ];
    args.extend_from_slice(extra);
    let (code, _, err) = run_ferry(&args);
    assert_ne!(code, 0, "{extra:?} started a node");
    err
}

/// The `ferry-bench` binary, next to `ferry`.
pub fn ferry_bench_bin() -> PathBuf {
    ferry_bin().with_file_name("ferry-bench")
}

/// A `ferry node` running as its own process.
pub struct ProcNode {
    /// The node id.
    pub id: u64,
    /// Its address.
    pub addr: String,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    netns: Option<String>,
    log: Option<PathBuf>,
    child: Option<Child>,
}

impl ProcNode {
    /// Describes a node with the tests' Raft timing ([`test_tuning`]); call [`ProcNode::spawn`]
    /// to run it.
    pub fn new(id: u64, addr: &str, data_dir: &Path, peers: &BTreeMap<u64, String>, join: bool) -> Self {
        Self::tuned(id, addr, data_dir, peers, join, test_tuning())
    }

    /// Describes a node with the Raft timing `t`.
    pub fn tuned(
        id: u64,
        addr: &str,
        data_dir: &Path,
        peers: &BTreeMap<u64, String>,
        join: bool,
        t: RaftTuning,
    ) -> Self {
        let peers_s = peers
            .iter()
            .map(|(i, a)| format!("{i}={a}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut args = vec![
            "node".to_string(),
            "--id".into(),
            id.to_string(),
            "--data-dir".into(),
            data_dir.display().to_string(),
            "--listen".into(),
            addr.to_string(),
            "--peers".into(),
            peers_s,
            "--heartbeat-ms".into(),
            t.heartbeat_ms.to_string(),
            "--election-min-ms".into(),
            t.election_min_ms.to_string(),
            "--election-max-ms".into(),
            t.election_max_ms.to_string(),
            "--snapshot-every".into(),
            "500".into(),
        ];
        if join {
            args.push("--join".into());
        }
        Self {
            id,
            addr: addr.to_string(),
            args,
            envs: Vec::new(),
            netns: None,
            log: None,
            child: None,
        }
    }

    /// Appends the process's stderr (its log) to `path` instead of the test's output.
    pub fn log_to(mut self, path: &Path) -> Self {
        self.log = Some(path.to_path_buf());
        self
    }

    /// Runs the process inside network namespace `ns` (`ip netns exec` execs in place, so
    /// signals still reach the node itself).
    pub fn in_netns(mut self, ns: &str) -> Self {
        self.netns = Some(ns.to_string());
        self
    }

    /// Adds command-line arguments (for example `--roles broker`).
    pub fn with_args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// Sets (`Some`) or clears (`None`) an environment variable for the next [`ProcNode::spawn`].
    pub fn set_env(&mut self, key: &str, value: Option<&str>) {
        self.envs.retain(|(k, _)| k != key);
        if let Some(v) = value {
            self.envs.push((key.to_string(), v.to_string()));
        }
    }

    /// Freezes the process (SIGSTOP): it holds its sockets but answers nothing.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a paused process (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        if let Some(c) = &self.child {
            let status = Command::new("kill")
                .args([sig, &c.id().to_string()])
                .status()
                .expect("running kill");
            assert!(status.success(), "kill {sig} failed");
        }
    }

    /// Starts the process.
    pub fn spawn(&mut self) {
        let mut cmd = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(ferry_bin());
                c
            }
            None => Command::new(ferry_bin()),
        };
        let stderr = match &self.log {
            Some(p) => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map(Stdio::from)
                .expect("opening the node's log file"),
            None => Stdio::inherit(),
        };
        let child = cmd
            .args(&self.args)
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .env(
                "RUST_LOG",
                std::env::var("FERRY_TEST_NODE_LOG").unwrap_or_else(|_| "error".into()),
            )
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawning ferry node");
        self.child = Some(child);
    }

    /// SIGKILLs the process and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            // A paused process dies on SIGKILL too; resume anyway so nothing lingers stopped.
            let _ = Command::new("kill").args(["-CONT", &c.id().to_string()]).status();
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends SIGTERM and waits for the process to exit, at most `bound`; how long it took, or
    /// `None` if it still ran (it is then killed).
    pub fn terminate(&mut self, bound: Duration) -> Option<Duration> {
        let mut c = self.child.take()?;
        let started = Instant::now();
        let _ = Command::new("kill").args(["-TERM", &c.id().to_string()]).status();
        while started.elapsed() < bound {
            if let Ok(Some(_)) = c.try_wait() {
                return Some(started.elapsed());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        let _ = c.wait();
        None
    }

    /// Whether the process runs.
    pub fn running(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for ProcNode {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Addresses for `n` nodes on free loopback ports, by id from 1.
pub fn loopback_peers(n: u64) -> BTreeMap<u64, String> {
    (1..=n).map(|id| (id, format!("127.0.0.1:{}", free_port()))).collect()
}

/// Parses HOST:PORT.
pub fn sock(addr: &str) -> SocketAddr {
    addr.parse().expect("HOST:PORT")
}

/// Polls `cond` every 100 ms until it holds; panics with `what` after `timeout`.
pub async fn wait_until<F, Fut>(timeout: std::time::Duration, what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if cond().await {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
