//! The produce workload: batches of records to the brokers' partition leaders.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use broker::ClusterClient;
use bytes::Bytes;

use crate::args::{Args, Workload};
use crate::meter::{Meter, ProduceShape, Report, Window};

/// The topic's description, or an error that says how to create it.
pub async fn describe_topic(client: &ClusterClient, topic: &str) -> anyhow::Result<proto::ferry::TopicDescription> {
    client
        .refresh(topic)
        .await
        .with_context(|| format!("describing topic {topic:?} (create it with `ferry topics --create`)"))
}

/// Partitions 0..`partitions` of the topic that lack a leader or have replicas outside the ISR.
pub fn unsynced(t: &proto::ferry::TopicDescription, partitions: u32) -> Vec<String> {
    t.partitions
        .iter()
        .filter(|p| p.partition < partitions)
        .filter_map(|p| {
            let s = p.state.clone().unwrap_or_default();
            (s.leader < 0 || s.isr.len() < s.replicas.len()).then(|| {
                format!(
                    "{}-{} (leader {}, isr {:?} of {:?})",
                    t.topic, p.partition, s.leader, s.isr, s.replicas
                )
            })
        })
        .collect()
}

/// The number of partitions to produce to, once they all have a leader and a full ISR (or after
/// 30 s, with a warning).
pub async fn prepare_topic(args: &Args, endpoints: &[String]) -> anyhow::Result<u32> {
    let client = ClusterClient::new(endpoints)?;
    let count = describe_topic(&client, &args.topic).await?.partitions.len() as u32;
    let n = args.partitions.unwrap_or(count);
    if n == 0 || n > count {
        bail!("--partitions {n}: topic {:?} has {count} partitions", args.topic);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let lagging = unsynced(&describe_topic(&client, &args.topic).await?, n);
        if lagging.is_empty() {
            return Ok(n);
        }
        if Instant::now() >= deadline {
            eprintln!("ferry-bench: producing although not in sync: {}", lagging.join(", "));
            return Ok(n);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `clients` producers, each with its own connections, sending batches round-robin over
/// partitions 0..`partitions`.
pub async fn run_produce(
    args: &Args,
    endpoints: &[String],
    clients: usize,
    acks: i32,
    partitions: u32,
) -> anyhow::Result<Report> {
    let batch = vec![Bytes::from(vec![b'r'; args.record_bytes]); args.batch_records];
    let window = Window::starting_now(args);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = ClusterClient::new(endpoints)?;
        let (topic, batch) = (args.topic.clone(), batch.clone());
        tasks.push(tokio::spawn(async move {
            let mut m = Meter::new(window);
            let mut partition = c as u32 % partitions;
            while let Some(started) = m.next() {
                let res = client.produce_once(&topic, partition, batch.clone(), acks).await;
                m.record(started, res.map(drop));
                partition = (partition + 1) % partitions;
            }
            m
        }));
    }
    Ok(Report {
        workload: Workload::Produce,
        clients,
        produce: Some(ProduceShape {
            acks,
            batch_records: args.batch_records,
            record_bytes: args.record_bytes,
        }),
        meter: Meter::join(window, tasks).await?,
        secs: args.duration,
    })
}
