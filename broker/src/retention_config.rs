//! Retention settings: the broker's (Kafka's `log.retention.*` broker configs) and one topic's,
//! its configs over the broker's. Plain data, read by the retention driver and by the replica
//! manager when it creates a replica.

use std::collections::HashMap;

use proto::topic_config as tc;

use crate::partition_log::retention::RetentionPolicy;
use crate::partition_log::LogConfig;

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

/// The log settings of a new replica of a topic with `config`: the broker's, with the
/// topic's `segment.bytes`.
pub fn log_config(
    base: &LogConfig,
    config: Option<&HashMap<String, String>>,
    retention: &RetentionConfig,
) -> LogConfig {
    let mut cfg = base.clone();
    cfg.segment_bytes = topic_retention(config, retention)
        .segment_bytes
        .unwrap_or(cfg.segment_bytes);
    cfg
}
