//! The topics a drain moves: the data topic (every partition with a replica on broker 4), the
//! steady producer's topic, and the scale run's empty partitions; writing the data; what a
//! broker holds.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use broker::ClusterClient;
use bytes::Bytes;
use futures::StreamExt;
use proto::ferry::*;

use crate::cluster::DRAINED;

/// The topic holding the data the drains move.
pub const DATA_TOPIC: &str = "bench-data";
/// The topic the steady producer writes to.
pub const PRODUCE_TOPIC: &str = "bench-produce";
/// Bytes of one record of the data load.
const LOAD_RECORD: usize = 16 << 10;
/// Records of one batch of the data load: 512 KiB, under Kafka's default `max.message.bytes`
/// (1,048,588 bytes) with its framing.
const LOAD_BATCH: u64 = 32;
/// Tries of one batch before the load gives up (a leader still starting answers errors).
const LOAD_TRIES: u32 = 100;
/// Partitions loaded at once.
const LOAD_PARALLEL: usize = 4;

/// The data topic's replicas: each partition on broker 4 and `rf - 1` of brokers 1-3 in turn,
/// broker 4 the preferred leader of every other partition.
pub fn data_assignment(partitions: u32, rf: u32) -> Vec<Vec<i32>> {
    let others = [1, 2, 3];
    (0..partitions)
        .map(|p| {
            let rest = (0..rf.saturating_sub(1) as usize).map(|i| others[(p as usize + i) % others.len()]);
            if p % 2 == 0 {
                std::iter::once(DRAINED).chain(rest).collect()
            } else {
                let mut r: Vec<i32> = rest.collect();
                r.push(DRAINED);
                r
            }
        })
        .collect()
}

/// The steady producer's topic: three partitions, replication factor 3, each with a replica on
/// broker 4 (which leads one of them).
pub fn produce_assignment() -> Vec<Vec<i32>> {
    vec![vec![DRAINED, 1, 2], vec![1, DRAINED, 3], vec![2, 3, DRAINED]]
}

/// Creates `topic` with an explicit assignment, retrying while the cluster settles.
pub async fn create_topic(c: &ClusterClient, topic: &str, assignment: Vec<Vec<i32>>) -> anyhow::Result<()> {
    let req = CreateTopicsRequest {
        topics: vec![NewTopic {
            topic: topic.into(),
            partitions: -1,
            replication_factor: -1,
            assignment: assignment.into_iter().map(|brokers| Replicas { brokers }).collect(),
            config: Default::default(),
        }],
        validate_only: false,
    };
    let mut last = String::new();
    for _ in 0..100 {
        let r = c
            .admin_call(|mut a| {
                let req = req.clone();
                async move { a.create_topics(req).await }
            })
            .await;
        match r {
            Ok(r) if r.results.iter().all(|t| t.error_code == 0) => return Ok(()),
            Ok(r) => last = format!("{:?}", r.results),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    bail!("creating {topic} failed: {last}")
}

/// Writes `bytes` into each of `partitions` partitions of the data topic at acks=all, in
/// batches of 512 KiB, a few partitions at once.
pub async fn load(c: &ClusterClient, partitions: u32, bytes: u64, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let record = Bytes::from(vec![0x5a; LOAD_RECORD]);
    let records_each = bytes.div_ceil(LOAD_RECORD as u64);
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(0..partitions)
        .map(|p| {
            let record = record.clone();
            async move {
                let mut left = records_each;
                while left > 0 {
                    let n = left.min(LOAD_BATCH);
                    let batch = vec![record.clone(); n as usize];
                    // A leader still starting answers an error: ask again, a bounded number of
                    // times and until the deadline.
                    let mut tries = 0;
                    while let Err(e) = c.produce_once(DATA_TOPIC, p, batch.clone(), -1).await {
                        tries += 1;
                        if tries >= LOAD_TRIES || Instant::now() > deadline {
                            bail!("loading {DATA_TOPIC}-{p}: {e} ({tries} tries)");
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    left -= n;
                }
                Ok(())
            }
        })
        .buffer_unordered(LOAD_PARALLEL)
        .collect()
        .await;
    results.into_iter().collect()
}

/// The replicas (not future logs) `broker` holds of `topics` and their bytes.
pub async fn held(c: &ClusterClient, broker: i32, topics: &[&str]) -> anyhow::Result<(usize, u64)> {
    let req = AdminDescribeLogDirsRequest {
        brokers: vec![broker],
        topics: topics.iter().map(|t| t.to_string()).collect(),
    };
    let r = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.describe_log_dirs(req).await }
        })
        .await
        .context("DescribeLogDirs")?;
    if let Some(b) = r.brokers.iter().find(|b| b.error_code != 0) {
        bail!("DescribeLogDirs of broker {}: {}", b.broker, b.error_message);
    }
    let replicas: Vec<&LogDirReplica> = r
        .brokers
        .iter()
        .filter_map(|b| b.log_dirs.as_ref())
        .flat_map(|l| &l.dirs)
        .flat_map(|d| &d.replicas)
        .filter(|r| !r.is_future)
        .collect();
    Ok((replicas.len(), replicas.iter().map(|r| r.size).sum()))
}

/// Waits until `broker` holds `want` replicas of `topics`.
pub async fn wait_held(
    c: &ClusterClient,
    broker: i32,
    topics: &[&str],
    want: usize,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        // A failed call only means asking again.
        let n = held(c, broker, topics).await.map_or(0, |h| h.0);
        if n == want {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "broker {broker} holds {n} replicas, not {want}, after {} s",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Writes every dirty page back (`sync`), so that one step's writeback is not timed in the next.
pub fn sync() -> anyhow::Result<()> {
    let status = std::process::Command::new("sync").status().context("running sync")?;
    if !status.success() {
        bail!("sync failed: {status}");
    }
    Ok(())
}

/// The disk's own figure: `cp -r` of `from` to a new folder beside it, then `sync`; the seconds
/// of both together. The copy is removed afterwards.
pub fn cp_and_sync(from: &std::path::Path) -> anyhow::Result<f64> {
    let to = from.with_extension("cp");
    sync()?;
    let started = Instant::now();
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(from)
        .arg(&to)
        .status()
        .context("running cp")?;
    if !status.success() {
        bail!("cp -r failed: {status}");
    }
    sync()?;
    let took = started.elapsed().as_secs_f64();
    std::fs::remove_dir_all(&to)?;
    Ok(took)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_data_partition_has_a_replica_on_broker_four_and_distinct_replicas() {
        for rf in [2, 3] {
            let a = data_assignment(12, rf);
            assert_eq!(a.len(), 12);
            for r in &a {
                assert_eq!(r.len(), rf as usize, "{r:?}");
                assert!(r.contains(&DRAINED), "{r:?}");
                let mut d = r.clone();
                d.sort();
                d.dedup();
                assert_eq!(d.len(), r.len(), "{r:?}");
            }
            // Broker 4 leads half, and the others take turns.
            assert_eq!(a.iter().filter(|r| r[0] == DRAINED).count(), 6);
            for b in 1..=3 {
                assert_eq!(a.iter().filter(|r| r.contains(&b)).count(), 4 * (rf as usize - 1));
            }
        }
        assert!(produce_assignment()
            .iter()
            .all(|r| r.contains(&DRAINED) && r.len() == 3));
    }
}
