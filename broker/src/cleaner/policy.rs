//! A topic's compaction settings, read from its configs with Kafka's defaults (the names and
//! their checks live in `proto::topic_config`).

use std::collections::HashMap;

use proto::topic_config::{
    DELETE_RETENTION_MS, MAX_COMPACTION_LAG_MS, MIN_CLEANABLE_DIRTY_RATIO, MIN_COMPACTION_LAG_MS,
};

/// `cleanup.policy`.
const CLEANUP_POLICY: &str = "cleanup.policy";

/// What the cleaner reads of a topic's configs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionPolicy {
    /// `cleanup.policy` holds `compact`.
    pub compact: bool,
    /// `min.cleanable.dirty.ratio`: the dirty share above which the log is cleaned.
    pub min_cleanable_ratio: f64,
    /// `min.compaction.lag.ms`: a segment with a record younger than this is not cleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a log with a dirty record older than this is cleaned whatever
    /// its ratio.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long a tombstone stays after the clean that first kept it.
    pub delete_retention_ms: i64,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        Self {
            compact: false,
            min_cleanable_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 86_400_000,
        }
    }
}

impl CompactionPolicy {
    /// The settings of a topic with `config`; a value that does not parse (the controller checks
    /// them) keeps Kafka's default.
    pub fn of(config: &HashMap<String, String>) -> Self {
        let d = Self::default();
        let num = |k: &str, default: i64| config.get(k).and_then(|v| v.parse().ok()).unwrap_or(default);
        Self {
            compact: config
                .get(CLEANUP_POLICY)
                .is_some_and(|v| v.split(',').any(|p| p.trim() == "compact")),
            min_cleanable_ratio: config
                .get(MIN_CLEANABLE_DIRTY_RATIO)
                .and_then(|v| v.parse().ok())
                .unwrap_or(d.min_cleanable_ratio),
            min_compaction_lag_ms: num(MIN_COMPACTION_LAG_MS, d.min_compaction_lag_ms),
            max_compaction_lag_ms: num(MAX_COMPACTION_LAG_MS, d.max_compaction_lag_ms),
            delete_retention_ms: num(DELETE_RETENTION_MS, d.delete_retention_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_defaults_and_a_compacted_topics_settings() {
        let d = CompactionPolicy::of(&HashMap::new());
        assert_eq!(d, CompactionPolicy::default());
        assert!(!d.compact);
        let cfg: HashMap<String, String> = [
            ("cleanup.policy", "delete,compact"),
            ("min.cleanable.dirty.ratio", "0.01"),
            ("min.compaction.lag.ms", "5"),
            ("max.compaction.lag.ms", "100"),
            ("delete.retention.ms", "7"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let p = CompactionPolicy::of(&cfg);
        assert!(p.compact);
        assert_eq!(p.min_cleanable_ratio, 0.01);
        assert_eq!(
            (p.min_compaction_lag_ms, p.max_compaction_lag_ms, p.delete_retention_ms),
            (5, 100, 7)
        );
        let delete_only = HashMap::from([("cleanup.policy".to_string(), "delete".to_string())]);
        assert!(!CompactionPolicy::of(&delete_only).compact);
    }
}
