//! Helpers for tests of the brokers: topics, partition state and reading a partition whole.

use std::collections::HashMap;

use broker::ClusterClient;
use proto::ferry::*;

/// Creates a topic; `Err((code, message))` when the cluster refuses.
pub async fn create_topic(
    c: &ClusterClient,
    topic: &str,
    partitions: i32,
    rf: i32,
    config: &[(&str, &str)],
) -> Result<(), (i32, String)> {
    let req = CreateTopicsRequest {
        topics: vec![NewTopic {
            topic: topic.into(),
            partitions,
            replication_factor: rf,
            assignment: vec![],
            config: config
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<HashMap<_, _>>(),
        }],
        validate_only: false,
    };
    let r = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.create_topics(req).await }
        })
        .await
        .expect("admin reachable");
    match r.results.into_iter().next() {
        Some(r) if r.error_code != 0 => Err((r.error_code, r.error_message)),
        _ => Ok(()),
    }
}

/// The stored state of every partition of a topic, in partition order; `None` when the topic
/// cannot be described.
pub async fn partition_states(c: &ClusterClient, topic: &str) -> Option<Vec<(u32, PartitionState)>> {
    let req = DescribeTopicsRequest {
        topics: vec![topic.into()],
    };
    let r = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.describe_topics(req).await }
        })
        .await
        .ok()?;
    let mut ps: Vec<(u32, PartitionState)> = r
        .topics
        .into_iter()
        .next()?
        .partitions
        .into_iter()
        .filter_map(|p| Some((p.partition, p.state?)))
        .collect();
    ps.sort_by_key(|(p, _)| *p);
    Some(ps)
}

/// The stored state of a partition, if the topic exists.
pub async fn partition_state(c: &ClusterClient, topic: &str, partition: u32) -> Option<PartitionState> {
    partition_states(c, topic)
        .await?
        .into_iter()
        .find(|(p, _)| *p == partition)
        .map(|(_, s)| s)
}

/// Whether the partition's ISR holds exactly these brokers (any order) and it has a leader.
pub async fn isr_is(c: &ClusterClient, topic: &str, partition: u32, want: &[i32]) -> bool {
    match partition_state(c, topic, partition).await {
        Some(s) => {
            let mut isr = s.isr.clone();
            isr.sort();
            let mut want = want.to_vec();
            want.sort();
            s.leader >= 0 && isr == want
        }
        None => false,
    }
}

/// Every committed record of a partition, from offset 0 to the high watermark.
pub async fn read_all(c: &ClusterClient, topic: &str, partition: u32) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    let mut offset = 0;
    let mut attempts = 0;
    loop {
        match c.fetch(topic, partition, offset, 1 << 20, 0).await {
            Ok(r) => {
                if std::env::var("FERRY_TEST_DEBUG").is_ok() {
                    eprintln!(
                        "read_all: offset {offset} hw {} records {}",
                        r.high_watermark,
                        r.records.len()
                    );
                }
                if r.records.is_empty() && offset >= r.high_watermark {
                    return out;
                }
                for rec in r.records {
                    out.push((rec.offset, String::from_utf8_lossy(&rec.value).into_owned()));
                    offset = rec.offset + 1;
                }
            }
            Err(e) => {
                if std::env::var("FERRY_TEST_DEBUG").is_ok() {
                    eprintln!("read_all: offset {offset} error {e}");
                }
                attempts += 1;
                assert!(attempts < 100, "reading {topic}-{partition} kept failing: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
    }
}
