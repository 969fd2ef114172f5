//! A fresh 4-broker cluster of `ferry node` processes on loopback, with its data in a folder:
//! nodes 1-3 are quorum members and brokers, node 4 a broker only. Its processes' ids give the
//! controller's CPU time; its folders give broker 4's log dir for the disk's own figure.

use std::collections::{BTreeMap, HashSet};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use broker::ClusterClient;
use proto::ferry::DescribeClusterRequest;

/// The broker every drain empties.
pub const DRAINED: i32 = 4;

/// A running cluster; dropping it kills what still runs.
pub struct BenchCluster {
    nodes: BTreeMap<i32, Child>,
    root: PathBuf,
    /// Admin and data client of the quorum nodes.
    pub client: ClusterClient,
    /// Metastore client of the quorum nodes.
    pub meta: metastore::Client,
}

/// Loopback ports free a moment ago, none given twice in this process.
fn free_port() -> anyhow::Result<u16> {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) {
            given.push(port);
            return Ok(port);
        }
    }
}

/// The arguments of node `id` (1-3 quorum and broker, 4 broker only).
fn node_args(id: i32, dir: &Path, addr: &str, peers: &str, quorum: &str, credential: &Path) -> Vec<String> {
    let mut args = vec![
        "node".to_string(),
        "--id".into(),
        id.to_string(),
        "--data-dir".into(),
        dir.display().to_string(),
        "--listen".into(),
        addr.to_string(),
    ];
    if id == DRAINED {
        args.extend([
            "--roles".into(),
            "broker".into(),
            "--quorum".into(),
            quorum.to_string(),
            "--cluster-credential-file".into(),
            credential.display().to_string(),
        ]);
    } else {
        args.extend(["--peers".into(), peers.to_string()]);
    }
    args
}

impl BenchCluster {
    /// Starts the four nodes under `root` and waits until all four brokers registered.
    pub async fn start(ferry: &Path, root: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
        let addrs: BTreeMap<i32, String> = (1..=DRAINED)
            .map(|id| Ok((id, format!("127.0.0.1:{}", free_port()?))))
            .collect::<anyhow::Result<_>>()?;
        let quorum: Vec<String> = (1..DRAINED).map(|id| addrs[&id].clone()).collect();
        let peers = (1..DRAINED)
            .map(|id| format!("{id}={}", addrs[&id]))
            .collect::<Vec<_>>()
            .join(",");
        let credential = root.join("n1").join(metastore::credential::CREDENTIAL_FILE);
        let mut nodes = BTreeMap::new();
        for (id, addr) in &addrs {
            let dir = root.join(format!("n{id}"));
            let log = std::fs::File::create(root.join(format!("n{id}.log")))?;
            let mut cmd = Command::new(ferry);
            cmd.args(node_args(*id, &dir, addr, &peers, &quorum.join(","), &credential))
                .env(
                    "RUST_LOG",
                    std::env::var("FERRY_BENCH_NODE_LOG").unwrap_or_else(|_| "warn".into()),
                )
                .stdout(Stdio::null())
                .stderr(log);
            // SAFETY: the closure runs in the child between fork and exec and only calls
            // prctl, which is async-signal-safe. The node gets SIGTERM when the bench's thread
            // that started it ends, so an interrupted bench (Ctrl-C) leaves no node behind.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let child = cmd.spawn().with_context(|| format!("starting {}", ferry.display()))?;
            nodes.insert(*id, child);
        }
        let c = Self {
            nodes,
            root: root.to_path_buf(),
            client: ClusterClient::new(&quorum)?.with_timeout(Duration::from_secs(600)),
            meta: metastore::Client::new(&quorum)?,
        };
        c.wait_brokers().await?;
        Ok(c)
    }

    async fn wait_brokers(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            // Not answering yet only means the quorum is still forming.
            let ids: HashSet<String> = match self.meta.range("/brokers/ids/", 0).await {
                Ok(r) => r.kvs.into_iter().map(|kv| kv.key).collect(),
                Err(_) => HashSet::new(),
            };
            if ids.len() >= DRAINED as usize {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "only {} brokers registered after 120 s (see {})",
                    ids.len(),
                    self.root.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The log dir of broker `id` (a node's default: `<data dir>/logs`).
    pub fn logs_dir(&self, id: i32) -> PathBuf {
        self.root.join(format!("n{id}")).join("logs")
    }

    /// The process id of node `id`.
    pub fn pid(&self, id: i32) -> Option<u32> {
        self.nodes.get(&id).map(Child::id)
    }

    /// The process ids of every node.
    pub fn pids(&self) -> Vec<u32> {
        self.nodes.values().map(Child::id).collect()
    }

    /// The active controller's node id.
    pub async fn controller_id(&self) -> anyhow::Result<i32> {
        for _ in 0..300 {
            let r = self
                .client
                .admin_call(|mut a| async move { a.describe_cluster(DescribeClusterRequest {}).await })
                .await;
            if let Some(id) = r.ok().map(|r| r.controller_id as i32).filter(|id| *id != 0) {
                return Ok(id);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("no active controller after 30 s")
    }

    /// Stops every node with SIGTERM (SIGKILL after 20 s), then removes the data unless `keep`.
    pub fn stop(mut self, keep: bool) -> anyhow::Result<()> {
        for child in self.nodes.values() {
            let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for child in self.nodes.values_mut() {
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if !keep {
            std::fs::remove_dir_all(&self.root).with_context(|| format!("removing {}", self.root.display()))?;
        }
        Ok(())
    }
}

impl Drop for BenchCluster {
    fn drop(&mut self) {
        // After `stop` every child is reaped and these do nothing; after an error they end the
        // nodes this process started, so none outlives the bench.
        for child in self.nodes.values_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// CPU seconds (user and system) a process has used, from `/proc/<pid>/stat`.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let ticks = parse_cpu_ticks(&stat)?;
    // SAFETY: sysconf reads a constant of the system and touches no memory of ours.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| ticks as f64 / hz as f64)
}

/// utime + stime in clock ticks from the text of `/proc/<pid>/stat`. The command name (field
/// 2) may hold spaces and parentheses, so the fields are counted from after its last `)`.
pub fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (state) is the first after the name; utime and stime are fields 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Resident memory of a process in MiB (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_mib(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_read_past_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (ferry (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 25 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_cpu_ticks(stat), Some(175));
        assert_eq!(parse_cpu_ticks("4242 (ferry) S 1"), None);
    }

    #[test]
    fn node_four_is_a_broker_of_the_other_three_quorum() {
        let a = node_args(
            4,
            Path::new("/d/n4"),
            "127.0.0.1:5",
            "1=a",
            "a,b,c",
            Path::new("/d/n1/c"),
        );
        assert!(a.windows(2).any(|w| w == ["--roles", "broker"]), "{a:?}");
        assert!(a.windows(2).any(|w| w == ["--quorum", "a,b,c"]), "{a:?}");
        let a = node_args(
            1,
            Path::new("/d/n1"),
            "127.0.0.1:5",
            "1=a",
            "a,b,c",
            Path::new("/d/n1/c"),
        );
        assert!(a.windows(2).any(|w| w == ["--peers", "1=a"]), "{a:?}");
        assert!(!a.contains(&"--roles".to_string()), "{a:?}");
    }
}
