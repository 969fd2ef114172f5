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
use proto::topic_config as tc;

use crate::partition_log::retention::{deletable, RetentionPolicy};
use crate::partition_log::{remove_deleted_files, LogConfig, LogError};
use crate::replica::Replica;
use crate::replica_manager::BrokerCore;

/// The broker's retention settings, Kafka's broker configs; topics' configs override them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionConfig {
    /// `log.retention.check.interval.ms`: how often replicas are checked.
    pub check_interval_ms: u64,
    /// `log.retention.ms` (`log.retention.hours`, 168): `retention.ms` when a topic sets none.
    pub retention_ms: i64,
    /// `log.retention.bytes`: `retention.bytes` when a topic sets none.
    pub retention_bytes: i64,
    /// `log.roll.ms` (`log.roll.hours`, 168): `segment.ms` when a topic sets none.
    pub segment_ms: i64,
    /// `log.segment.delete.delay.ms`: `file.delete.delay.ms` when a topic sets none.
    pub file_delete_delay_ms: i64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        const WEEK_MS: i64 = 7 * 24 * 60 * 60 * 1000;
        Self {
            check_interval_ms: 300_000,
            retention_ms: WEEK_MS,
            retention_bytes: -1,
            segment_ms: WEEK_MS,
            file_delete_delay_ms: 60_000,
        }
    }
}

/// One topic's retention, its configs over the broker's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRetention {
    /// What may be deleted.
    pub policy: RetentionPolicy,
    /// `segment.ms`.
    pub segment_ms: i64,
    /// `segment.bytes`, when the topic sets it.
    pub segment_bytes: Option<u64>,
    /// `file.delete.delay.ms`.
    pub file_delete_delay_ms: i64,
}

/// Resolves a topic's retention from its configs (`None`: a topic not in the view yet, which
/// gets the broker's defaults). Values the topic checks refused never reach the view.
pub fn topic_retention(config: Option<&HashMap<String, String>>, broker: &RetentionConfig) -> TopicRetention {
    let get = |k: &str| config.and_then(|c| c.get(k));
    let num = |k: &str, default: i64| get(k).and_then(|v| v.parse().ok()).unwrap_or(default);
    TopicRetention {
        policy: RetentionPolicy {
            retention_ms: num(tc::RETENTION_MS, broker.retention_ms),
            retention_bytes: num(tc::RETENTION_BYTES, broker.retention_bytes),
            delete: get(tc::CLEANUP_POLICY).is_none_or(|p| p.split(',').any(|p| p.trim() == "delete")),
        },
        segment_ms: num(tc::SEGMENT_MS, broker.segment_ms),
        segment_bytes: get(tc::SEGMENT_BYTES).and_then(|v| v.parse().ok()),
        file_delete_delay_ms: num(tc::FILE_DELETE_DELAY_MS, broker.file_delete_delay_ms),
    }
}

/// A topic's configs in the view.
fn configs<'a>(view: &'a ClusterView, topic: &str) -> Option<&'a HashMap<String, String>> {
    view.topics.get(topic)?.record.as_ref().map(|r| &r.config)
}

/// The log settings of a new replica of `topic`: the broker's, with the topic's `segment.bytes`.
pub fn topic_log_config(core: &BrokerCore, topic: &str) -> LogConfig {
    let mut cfg = core.config.log.clone();
    let t = topic_retention(configs(&core.view.read(), topic), &core.config.retention);
    cfg.segment_bytes = t.segment_bytes.unwrap_or(cfg.segment_bytes);
    cfg
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
