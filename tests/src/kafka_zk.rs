//! A real ZooKeeper-mode Apache Kafka 3.9 cluster for the migration tests: brokers started from
//! Kafka's Maven jars (`tools/kafka-jars.sh`) on loopback, each with two log dirs, Kafka's own
//! tools of the same version, and Ferry's quorum and brokers taking the cluster over.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use zookeeper_client as zkc;

use crate::ProcNode;

/// The last Kafka line with ZooKeeper mode.
pub const VERSION: &str = "3.9.1";

/// The folder of Kafka `VERSION`'s jars, fetched once (`tools/test.sh` fetches it beforehand).
pub fn jars() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/kafka-jars.sh");
    let out = Command::new(script)
        .env("KAFKA_VERSION", VERSION)
        .stderr(Stdio::inherit())
        .output()
        .expect("running tools/kafka-jars.sh");
    assert!(out.status.success(), "fetching Kafka {VERSION}'s jars failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(
        stdout
            .lines()
            .last()
            .expect("kafka-jars.sh prints the jar folder")
            .trim(),
    )
}

/// Runs a Kafka `VERSION` tool; whether it succeeded, and its stdout (and stderr on failure).
pub fn run_tool(name: &str, args: &[&str], input: &str) -> (bool, String) {
    crate::kafka::tool_of(Some(VERSION), name, args, input)
}

/// One Kafka broker process in ZooKeeper mode; SIGKILLed on drop if still running.
pub struct ZkBroker {
    /// Its broker id.
    pub id: i32,
    /// Its PLAINTEXT listener.
    pub addr: String,
    /// Its two log dirs.
    pub log_dirs: [PathBuf; 2],
    child: Option<Child>,
}

impl ZkBroker {
    /// Starts broker `id` under `dir`, registering in ZooKeeper at `zookeeper` (with chroot).
    pub fn start(jars: &Path, dir: &Path, id: i32, zookeeper: &str) -> Self {
        Self::start_with(jars, dir, id, zookeeper, "")
    }

    /// [`ZkBroker::start`] with `extra` lines appended to its `server.properties`.
    pub fn start_with(jars: &Path, dir: &Path, id: i32, zookeeper: &str, extra: &str) -> Self {
        let addr = format!("127.0.0.1:{}", crate::free_port());
        let log_dirs = [dir.join(format!("kafka{id}-a")), dir.join(format!("kafka{id}-b"))];
        let props = dir.join(format!("kafka{id}.properties"));
        // Small and quick: one-replica internal topics, and a controlled shutdown that gives up
        // fast when no controller answers.
        std::fs::write(
            &props,
            format!(
                "broker.id={id}\nzookeeper.connect={zookeeper}\nlisteners=PLAINTEXT://{addr}\n\
                 log.dirs={},{}\noffsets.topic.replication.factor=1\nauto.create.topics.enable=false\n\
                 zookeeper.session.timeout.ms=6000\ncontrolled.shutdown.max.retries=1\n\
                 controlled.shutdown.retry.backoff.ms=500\nnum.network.threads=2\nnum.io.threads=2\n{extra}",
                log_dirs[0].display(),
                log_dirs[1].display()
            ),
        )
        .expect("writing the broker's properties");
        let log = std::fs::File::create(dir.join(format!("kafka{id}.log"))).expect("broker log file");
        let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools");
        let child = Command::new("java")
            .args(["-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .arg(format!(
                "-Dlog4j.configuration=file:{}",
                tools.join("kafka-log4j.properties").display()
            ))
            .arg("-Dferry.log.level=WARN")
            .arg("-cp")
            .arg(format!("{}/*", jars.display()))
            .arg("kafka.Kafka")
            .arg(&props)
            .stdout(Stdio::from(log.try_clone().expect("log handle")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("starting a Kafka broker (java)");
        Self {
            id,
            addr,
            log_dirs,
            child: Some(child),
        }
    }

    /// Stops the broker with SIGTERM (a controlled shutdown) and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill").args(["-TERM", &c.id().to_string()]).status();
            for _ in 0..600 {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = c.kill();
            let _ = c.wait();
            panic!("Kafka broker {} did not stop within 60 s of SIGTERM", self.id);
        }
    }
}

impl Drop for ZkBroker {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits until `n` brokers are registered under `chroot` and one of them is the controller;
/// returns the controller's id.
pub async fn wait_registered(zk: &zkc::Client, chroot: &str, n: usize) -> i32 {
    for _ in 0..1200 {
        let ids = zk
            .list_children(&format!("{chroot}/brokers/ids"))
            .await
            .unwrap_or_default();
        if ids.len() == n {
            if let Ok((data, _)) = zk.get_data(&format!("{chroot}/controller")).await {
                let v: serde_json::Value = serde_json::from_slice(&data).expect("/controller is JSON");
                return v["brokerid"].as_i64().expect("/controller names a broker") as i32;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{n} Kafka brokers did not register in ZooKeeper within 120 s");
}

/// Ferry taking over a stopped ZooKeeper-mode Kafka cluster: its quorum (nodes 11 to 13, as
/// processes) and then brokers with the Kafka brokers' ids on their log dirs.
pub struct Takeover {
    /// The quorum nodes' addresses by id.
    pub peers: BTreeMap<u64, String>,
    /// The quorum as a `--bootstrap-server` / `--quorum` list.
    pub quorum: String,
    /// The cluster credential file the first quorum node writes.
    pub credential: String,
    /// The quorum nodes, then the brokers.
    pub nodes: Vec<ProcNode>,
}

impl Takeover {
    /// Starts the quorum with data dirs `n11`.. under `root` and waits for its credential file.
    /// Blocks: call it from a blocking context.
    pub fn start_quorum(root: &Path) -> Self {
        let peers: BTreeMap<u64, String> = (11..=13)
            .map(|id| (id, format!("127.0.0.1:{}", crate::free_port())))
            .collect();
        let quorum = peers.values().cloned().collect::<Vec<_>>().join(",");
        let credential = crate::credential_file(&root.join("n11"));
        let mut nodes: Vec<ProcNode> = peers
            .iter()
            .map(|(id, addr)| {
                ProcNode::new(*id, addr, &root.join(format!("n{id}")), &peers, false).with_args(&["--roles", "quorum"])
            })
            .collect();
        nodes.iter_mut().for_each(ProcNode::spawn);
        crate::wait_for_file(&credential);
        Self {
            peers,
            quorum,
            credential,
            nodes,
        }
    }

    /// Runs `ferry migrate-zk` from `zookeeper` (with chroot) into the quorum, plus `extra`
    /// flags: (exit code, stdout, stderr). Blocks.
    pub fn migrate(&self, zookeeper: &str, extra: &[&str]) -> (i32, String, String) {
        let mut args = vec![
            "migrate-zk",
            "--zookeeper",
            zookeeper,
            "--bootstrap-server",
            &self.quorum,
            "--cluster-credential-file",
            &self.credential,
        ];
        args.extend_from_slice(extra);
        crate::run_ferry(&args)
    }

    /// Starts a Ferry broker for each Kafka broker, with its id and on its log dirs (data dirs
    /// `b<id>` under `root`); their Kafka listeners as a bootstrap list.
    pub fn start_brokers(&mut self, root: &Path, kafka: &[ZkBroker]) -> String {
        let mut listeners = Vec::new();
        for b in kafka {
            let dirs = format!("{},{}", b.log_dirs[0].display(), b.log_dirs[1].display());
            let kafka_addr = format!("127.0.0.1:{}", crate::free_port());
            let addr = format!("127.0.0.1:{}", crate::free_port());
            let mut n = ProcNode::new(
                b.id as u64,
                &addr,
                &root.join(format!("b{}", b.id)),
                &Default::default(),
                false,
            )
            .with_args(&[
                "--roles",
                "broker",
                "--quorum",
                &self.quorum,
                "--cluster-credential-file",
                &self.credential,
            ])
            .with_args(&["--log-dirs", &dirs, "--kafka-listen", &kafka_addr])
            .with_args(&["--replica-lag-time-max-ms", "2000"]);
            n.spawn();
            self.nodes.push(n);
            listeners.push(kafka_addr);
        }
        listeners.join(",")
    }
}
