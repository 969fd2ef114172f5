//! Delete retention's driver: every `log.retention.check.interval.ms` each hosted replica,
//! leader or follower alike (as in Kafka, each applies retention to its own log), takes its
//! topic's configs from the broker's view, rolls its active segment when `segment.ms` says so,
//! and deletes the oldest sealed segments the pure rules pick
//! ([`crate::partition_log::retention`]). The renamed files are removed after
//! `file.delete.delay.ms`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use proto::cluster_view::ClusterView;

use crate::partition_log::retention::deletable;
use crate::partition_log::{remove_deleted_files, LogError};
use crate::replica::Replica;
use crate::replica_manager::BrokerCore;

pub use crate::retention_config::{topic_retention, RetentionConfig, TopicRetention};

/// A topic's configs in the view.
fn configs<'a>(view: &'a ClusterView, topic: &str) -> Option<&'a HashMap<String, String>> {
    view.topics.get(topic)?.record.as_ref().map(|r| &r.config)
}

/// One replica's pass: its topic's `segment.bytes`, a roll if `segment.ms` is due, then the
/// deletion the rules pick. Returns the renamed files.
pub fn apply(
    r: &Replica,
    t: &TopicRetention,
    broker_segment_bytes: u64,
    now_ms: i64,
) -> Result<Vec<PathBuf>, LogError> {
    let hw = r.state().high_watermark;
    let mut log = r.log();
    let bytes = t.segment_bytes.unwrap_or(broker_segment_bytes);
    if log.config().segment_bytes != bytes {
        log.set_segment_bytes(bytes)?;
    }
    // Compacted topics roll too: the cleaner works on sealed segments only.
    log.roll_if_due(t.segment_ms, now_ms)?;
    let sealed = log.sealed_segment_infos();
    let Some((count, why)) = deletable(&sealed, log.size_bytes(), log.log_start_offset(), hw, &t.policy, now_ms) else {
        return Ok(Vec::new());
    };
    tracing::info!(replica = %r.name(), segments = count, reason = ?why, "deleting old segments");
    log.delete_oldest_segments(count)
}

/// Checks every hosted replica once; returns the renamed files with the delay each waits.
fn pass(core: &BrokerCore) -> Vec<(Duration, Vec<PathBuf>)> {
    let replicas: Vec<Arc<Replica>> = core.replicas.read().values().cloned().collect();
    let mut topics: HashMap<String, TopicRetention> = HashMap::new();
    {
        let view = core.view.read();
        for r in &replicas {
            if !topics.contains_key(&r.topic) {
                let t = topic_retention(configs(&view, &r.topic), &core.config.retention);
                topics.insert(r.topic.clone(), t);
            }
        }
    }
    let now = core.config.clock.wall_ms() as i64;
    let mut out = Vec::new();
    for r in replicas {
        let t = &topics[&r.topic];
        match apply(&r, t, core.config.log.segment_bytes, now) {
            Ok(files) if !files.is_empty() => {
                r.notify();
                let delay = Duration::from_millis(u64::try_from(t.file_delete_delay_ms).unwrap_or(0));
                out.push((delay, files));
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(replica = %r.name(), error = %e, "retention failed");
                core.report_log_error(&e);
            }
        }
    }
    out
}

/// Runs retention every `log.retention.check.interval.ms` until the task is aborted.
pub async fn run(core: Arc<BrokerCore>) {
    let every = Duration::from_millis(core.config.retention.check_interval_ms.max(10));
    loop {
        tokio::time::sleep(every).await;
        let c = core.clone();
        // File-system work over every replica: off the async workers.
        let deleted = tokio::task::spawn_blocking(move || pass(&c)).await.unwrap_or_default();
        for (delay, files) in deleted {
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let removed = tokio::task::spawn_blocking(move || remove_deleted_files(&files)).await;
                if let Ok(Err(e)) = removed {
                    tracing::warn!(error = %e, "removing deleted segment files");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::topic_config as tc;

    fn cfg(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_topic_takes_its_own_configs_over_the_brokers_defaults() {
        let broker = RetentionConfig::default();
        let none = topic_retention(None, &broker);
        assert_eq!(none.policy.retention_ms, 168 * 3600 * 1000);
        assert_eq!((none.policy.retention_bytes, none.policy.delete), (-1, true));
        assert_eq!(
            (none.segment_ms, none.segment_bytes, none.file_delete_delay_ms),
            (604_800_000, None, 60_000)
        );
        let c = cfg(&[
            (tc::RETENTION_MS, "5000"),
            (tc::RETENTION_BYTES, "100000"),
            (tc::SEGMENT_MS, "2000"),
            (tc::SEGMENT_BYTES, "10000"),
            (tc::FILE_DELETE_DELAY_MS, "0"),
        ]);
        let t = topic_retention(Some(&c), &broker);
        assert_eq!((t.policy.retention_ms, t.policy.retention_bytes), (5000, 100_000));
        assert_eq!(
            (t.segment_ms, t.segment_bytes, t.file_delete_delay_ms),
            (2000, Some(10_000), 0)
        );
    }

    #[test]
    fn only_a_policy_with_delete_deletes_by_retention() {
        let broker = RetentionConfig::default();
        let delete = |p: &str| {
            topic_retention(Some(&cfg(&[(tc::CLEANUP_POLICY, p)])), &broker)
                .policy
                .delete
        };
        assert!(delete("delete"));
        assert!(delete("compact,delete"));
        assert!(!delete("compact"));
    }
}
