//! `ferry-zk-load`: fills a ZooKeeper with a synthetic Kafka cluster in Kafka's znode formats,
//! for the `ferry migrate-zk` benchmark. Creates are pipelined, a tree level at a time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clap::Parser;
use zookeeper_client as zkc;

/// Flags.
#[derive(Parser)]
struct Args {
    /// ZooKeeper: HOST:PORT[/chroot] (the chroot must exist).
    #[arg(long)]
    zookeeper: String,
    /// Topics to create.
    #[arg(long, default_value_t = 10_000)]
    topics: u32,
    /// Partitions per topic.
    #[arg(long, default_value_t = 10)]
    partitions: u32,
    /// Brokers (ids 1..=n); replicas are spread over them.
    #[arg(long, default_value_t = 6)]
    brokers: i32,
    /// Replicas per partition.
    #[arg(long, default_value_t = 3)]
    replication_factor: i32,
    /// Every n-th topic has partition 0 moving onto the next broker.
    #[arg(long, default_value_t = 100)]
    moving_every: u32,
    /// Cluster id written to /cluster/id.
    #[arg(long, default_value = "bench-cluster")]
    cluster_id: String,
}

/// Creates in flight at once (ZooKeeper's default globalOutstandingLimit is 1000).
const IN_FLIGHT: usize = 1000;

fn topic_nodes(a: &Args, t: u32, out: &mut Vec<(String, String)>) {
    let name = format!("topic-{t:05}");
    let rf = a.replication_factor.min(a.brokers);
    let moving = a.moving_every > 0 && t.is_multiple_of(a.moving_every) && rf < a.brokers;
    let mut parts = Vec::new();
    let mut adding = String::new();
    let mut removing = String::new();
    for p in 0..a.partitions {
        let first = ((t + p) as i32) % a.brokers;
        let mut rs: Vec<i32> = (0..rf).map(|i| (first + i) % a.brokers + 1).collect();
        let isr = rs.clone();
        if moving && p == 0 {
            // Target: the last replica replaced by the next broker; RS = target + the rest.
            let new = (first + rf) % a.brokers + 1;
            let old = rs[rs.len() - 1];
            let mut target = rs[..rs.len() - 1].to_vec();
            target.push(new);
            rs = target.into_iter().chain([old]).collect();
            adding = format!(r#""0":[{new}]"#);
            removing = format!(r#""0":[{old}]"#);
        }
        let list = |v: &[i32]| v.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
        parts.push(format!(r#""{p}":[{}]"#, list(&rs)));
        out.push((
            format!("/brokers/topics/{name}/partitions/{p}/state"),
            format!(
                r#"{{"controller_epoch":3,"leader":{},"version":1,"leader_epoch":1,"isr":[{}]}}"#,
                isr[0],
                list(&isr)
            ),
        ));
    }
    let id = uuid::Uuid::new_v4().simple().to_string();
    out.push((
        format!("/brokers/topics/{name}"),
        format!(
            r#"{{"partitions":{{{}}},"topic_id":"{}","adding_replicas":{{{adding}}},"removing_replicas":{{{removing}}},"version":3}}"#,
            parts.join(","),
            &id[..22]
        ),
    ));
    out.push((
        format!("/config/topics/{name}"),
        r#"{"version":1,"config":{"retention.ms":"604800000"}}"#.to_string(),
    ));
}

async fn create_all(zk: &zkc::Client, nodes: Vec<(String, String)>) -> anyhow::Result<usize> {
    let mut all: BTreeMap<String, String> = BTreeMap::new();
    for (path, data) in nodes {
        let mut at = 0;
        while let Some(i) = path[at + 1..].find('/') {
            at += i + 1;
            all.entry(path[..at].to_string()).or_default();
        }
        all.insert(path, data);
    }
    let mut by_depth: BTreeMap<usize, Vec<(&String, &String)>> = BTreeMap::new();
    for (p, d) in &all {
        by_depth.entry(p.matches('/').count()).or_default().push((p, d));
    }
    let opts = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    for level in by_depth.values() {
        for chunk in level.chunks(IN_FLIGHT) {
            let creates: Vec<_> = chunk.iter().map(|(p, d)| zk.create(p, d.as_bytes(), &opts)).collect();
            for (r, (p, _)) in futures::future::join_all(creates).await.into_iter().zip(chunk) {
                match r {
                    Ok(_) | Err(zkc::Error::NodeExists) => {}
                    Err(e) => anyhow::bail!("creating {p}: {e}"),
                }
            }
        }
    }
    Ok(all.len())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let connecting = zkc::Client::connector()
        .with_session_timeout(Duration::from_secs(60))
        .connect(&a.zookeeper);
    let zk = tokio::time::timeout(Duration::from_secs(30), connecting).await??;
    let started = Instant::now();
    let mut nodes = vec![
        (
            "/cluster/id".to_string(),
            format!(r#"{{"version":"1","id":"{}"}}"#, a.cluster_id),
        ),
        ("/controller_epoch".to_string(), "3".to_string()),
    ];
    for b in 1..=a.brokers {
        nodes.push((
            format!("/brokers/ids/{b}"),
            format!(
                r#"{{"endpoints":["PLAINTEXT://kafka{b}:9092"],"jmx_port":-1,"port":9092,"host":"kafka{b}","version":5,"timestamp":"1700000000000","rack":null}}"#
            ),
        ));
    }
    for t in 0..a.topics {
        topic_nodes(&a, t, &mut nodes);
    }
    let n = create_all(&zk, nodes).await?;
    println!(
        "loaded {} topics x {} partitions ({n} znodes) in {:.1} s",
        a.topics,
        a.partitions,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
