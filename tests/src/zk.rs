//! A real ZooKeeper server for migration tests (the Debian `zookeeper` package), and a loader
//! that writes znodes into it the way Kafka lays them out.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use zookeeper_client as zkc;

/// Where the Debian package puts the server script.
pub const ZK_SERVER: &str = "/usr/share/zookeeper/bin/zkServer.sh";

/// One standalone ZooKeeper server on a loopback port; killed on drop.
pub struct ZkServer {
    /// HOST:PORT of the client port.
    pub addr: String,
    child: Child,
    _dir: tempfile::TempDir,
}

impl ZkServer {
    /// Starts a server on a free loopback port and waits until it opens sessions. Panics with
    /// a clear message when ZooKeeper is not installed.
    pub async fn start() -> Self {
        assert!(
            Path::new(ZK_SERVER).exists(),
            "ZooKeeper is not installed ({ZK_SERVER} is missing): install the Debian `zookeeper` package \
             (apt-get install -y zookeeper); .ci/run does this"
        );
        for attempt in 0..5 {
            let dir = tempfile::tempdir().expect("temp dir");
            let port = crate::free_port();
            let cfg = dir.path().join("zoo.cfg");
            std::fs::write(
                &cfg,
                format!(
                    "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
                     admin.enableServer=false\nmaxClientCnxns=0\n",
                    dir.path().join("data").display()
                ),
            )
            .expect("writing zoo.cfg");
            let log = std::fs::File::create(dir.path().join("server.log")).expect("server log");
            // start-foreground execs the JVM, so the child is the server itself.
            let child = Command::new(ZK_SERVER)
                .args(["start-foreground", &cfg.display().to_string()])
                .env("ZOO_LOG_DIR", dir.path())
                .stdout(Stdio::from(log.try_clone().expect("log handle")))
                .stderr(Stdio::from(log))
                .spawn()
                .expect("spawning zkServer.sh");
            let mut server = Self {
                addr: format!("127.0.0.1:{port}"),
                child,
                _dir: dir,
            };
            if server.wait_ready().await {
                return server;
            }
            let log = std::fs::read_to_string(server._dir.path().join("server.log")).unwrap_or_default();
            eprintln!("ZooKeeper did not start (attempt {attempt}); its output:\n{log}");
        }
        panic!("ZooKeeper did not start after 5 attempts");
    }

    async fn wait_ready(&mut self) -> bool {
        for _ in 0..120 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            let connecting = zkc::Client::connect(&self.addr);
            if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(2), connecting).await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        false
    }

    /// A session on the server's root.
    pub async fn client(&self) -> zkc::Client {
        zkc::Client::connect(&self.addr).await.expect("ZooKeeper session")
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `nodes` (path, data) under `root` ("" for the top), creating the parents as empty
/// znodes, one tree level at a time with every create of a level in flight at once.
pub async fn write_tree(zk: &zkc::Client, root: &str, nodes: &[(String, Vec<u8>)]) {
    let mut all: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (path, data) in nodes {
        let full = format!("{root}{path}");
        let mut at = 0;
        while let Some(i) = full[at + 1..].find('/') {
            at += i + 1;
            all.entry(full[..at].to_string()).or_default();
        }
        all.insert(full, data.clone());
    }
    let mut by_depth: BTreeMap<usize, Vec<(&String, &Vec<u8>)>> = BTreeMap::new();
    for (p, d) in &all {
        by_depth.entry(p.matches('/').count()).or_default().push((p, d));
    }
    let opts = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    for level in by_depth.values() {
        for chunk in level.chunks(4096) {
            let creates: Vec<_> = chunk.iter().map(|(p, d)| zk.create(p, d, &opts)).collect();
            for (r, (p, _)) in futures::future::join_all(creates).await.into_iter().zip(chunk) {
                match r {
                    Ok(_) | Err(zkc::Error::NodeExists) => {}
                    Err(e) => panic!("creating {p}: {e}"),
                }
            }
        }
    }
}

/// Every znode under `root` with its data, to show that a migration only read ZooKeeper.
pub async fn dump(zk: &zkc::Client, root: &str) -> BTreeMap<String, (Vec<u8>, i32)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![if root.is_empty() {
        "/".to_string()
    } else {
        root.to_string()
    }];
    while let Some(p) = stack.pop() {
        let (data, stat) = zk.get_data(&p).await.expect("reading a znode");
        let children = zk.list_children(&p).await.expect("listing a znode");
        for c in children {
            stack.push(if p == "/" { format!("/{c}") } else { format!("{p}/{c}") });
        }
        out.insert(p, (data, stat.version));
    }
    out
}

/// A Kafka cluster's znodes, in Kafka's exact JSON: 3 brokers, topics of znode versions 1, 2
/// and 3, a reassignment in flight through `adding_replicas`/`removing_replicas` (`events-0`,
/// owning a throttle through the removal lists), a legacy `/admin/reassign_partitions` with
/// `original_replicas` (`legacy-0`), a topic pending deletion, and configs.
///
/// Broker 3 joined last: every replica it should hold is still being added, so no ISR names it.
pub fn kafka_fixture(cluster_id: &str) -> Vec<(String, Vec<u8>)> {
    let broker = |id: i32| {
        (
            format!("/brokers/ids/{id}"),
            format!(
                r#"{{"features":{{}},"listener_security_protocol_map":{{"PLAINTEXT":"PLAINTEXT"}},"endpoints":["PLAINTEXT://kafka{id}:9092"],"jmx_port":-1,"port":9092,"host":"kafka{id}","version":5,"timestamp":"1700000000000","rack":null}}"#
            ),
        )
    };
    let state = |t: &str, p: u32, leader: i32, epoch: i32, isr: &str| {
        (
            format!("/brokers/topics/{t}/partitions/{p}/state"),
            format!(r#"{{"controller_epoch":7,"leader":{leader},"version":1,"leader_epoch":{epoch},"isr":[{isr}]}}"#),
        )
    };
    let nodes: Vec<(String, String)> = vec![
        ("/cluster/id".into(), format!(r#"{{"version":"1","id":"{cluster_id}"}}"#)),
        ("/controller_epoch".into(), "7".into()),
        ("/controller".into(), r#"{"version":2,"brokerid":1,"timestamp":"1700000000000","kraftControllerEpoch":-1}"#.into()),
        broker(1),
        broker(2),
        broker(3),
        // Version 3, with a topic id, nothing moving.
        (
            "/brokers/topics/orders".into(),
            r#"{"partitions":{"0":[1,2],"1":[2,1]},"topic_id":"b6yjn7dvSGaQ1JYDkG9B7w","adding_replicas":{},"removing_replicas":{},"version":3}"#.into(),
        ),
        state("orders", 0, 1, 3, "1,2"),
        state("orders", 1, 2, 0, "2,1"),
        // Version 2, partition 0 moving from {1,2} to [2,3] (the znode keeps no original order).
        (
            "/brokers/topics/events".into(),
            r#"{"partitions":{"0":[2,3,1],"1":[1,2]},"adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]},"version":2}"#.into(),
        ),
        state("events", 0, 2, 5, "1,2"),
        state("events", 1, 1, 0, "1,2"),
        // Version 1, moved by a pre-2.4 controller from [2,1] to [1,3]: RS = target + rest.
        ("/brokers/topics/legacy".into(), r#"{"version":1,"partitions":{"0":[1,3,2]}}"#.into()),
        state("legacy", 0, 1, 2, "2,1"),
        ("/brokers/topics/old".into(), r#"{"version":1,"partitions":{"0":[1,2]}}"#.into()),
        state("old", 0, 1, 0, "1,2"),
        (
            "/admin/reassign_partitions".into(),
            r#"{"version":1,"partitions":[{"topic":"legacy","partition":0,"replicas":[1,3],"original_replicas":[2,1]}]}"#.into(),
        ),
        ("/admin/delete_topics/old".into(), String::new()),
        (
            "/config/topics/orders".into(),
            r#"{"version":1,"config":{"min.insync.replicas":"1","retention.ms":"604800000","compression.type":"producer"}}"#.into(),
        ),
        (
            "/config/topics/events".into(),
            r#"{"version":1,"config":{"leader.replication.throttled.replicas":"0:1,0:2","follower.replication.throttled.replicas":"0:3"}}"#.into(),
        ),
        (
            "/config/brokers/1".into(),
            r#"{"version":1,"config":{"leader.replication.throttled.rate":"50000","follower.replication.throttled.rate":"50000"}}"#.into(),
        ),
        (
            "/config/brokers/2".into(),
            r#"{"version":1,"config":{"leader.replication.throttled.rate":"50000","follower.replication.throttled.rate":"50000","replica.alter.log.dirs.io.max.bytes.per.second":"9000"}}"#.into(),
        ),
        (
            "/config/brokers/3".into(),
            r#"{"version":1,"config":{"leader.replication.throttled.rate":"40000","follower.replication.throttled.rate":"40000"}}"#.into(),
        ),
        ("/config/brokers/<default>".into(), r#"{"version":1,"config":{}}"#.into()),
        ("/admin/throttled_replicas_removal".into(), r#"{"version":1,"topics":["events"]}"#.into()),
        ("/admin/throttled_rates_removal".into(), r#"{"version":1,"brokers":[1,2,3]}"#.into()),
    ];
    nodes.into_iter().map(|(p, d)| (p, d.into_bytes())).collect()
}
