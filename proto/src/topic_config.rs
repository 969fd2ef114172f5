//! Topic configs Ferry knows, their checks and defaults.

use std::collections::HashMap;

/// `min.insync.replicas`.
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";
/// `unclean.leader.election.enable`.
pub const UNCLEAN_LEADER_ELECTION: &str = "unclean.leader.election.enable";
/// `max.message.bytes`: the largest batch a produce may send.
pub const MAX_MESSAGE_BYTES: &str = "max.message.bytes";
/// Topic: replicas whose leaders are throttled, `p:broker,...` or `*`.
pub const LEADER_THROTTLED_REPLICAS: &str = "leader.replication.throttled.replicas";
/// Topic: replicas whose followers are throttled, `p:broker,...` or `*`.
pub const FOLLOWER_THROTTLED_REPLICAS: &str = "follower.replication.throttled.replicas";
/// Broker: bytes/s a leader sends to throttled followers.
pub const LEADER_THROTTLED_RATE: &str = "leader.replication.throttled.rate";
/// Broker: bytes/s a follower fetches for throttled replicas.
pub const FOLLOWER_THROTTLED_RATE: &str = "follower.replication.throttled.rate";
/// `min.cleanable.dirty.ratio`: the dirty share of a compacted log at which it is cleaned.
pub const MIN_CLEANABLE_DIRTY_RATIO: &str = "min.cleanable.dirty.ratio";
/// `min.compaction.lag.ms`: how long a record stays uncompacted at least.
pub const MIN_COMPACTION_LAG_MS: &str = "min.compaction.lag.ms";
/// `max.compaction.lag.ms`: how long a record may stay uncompacted at most.
pub const MAX_COMPACTION_LAG_MS: &str = "max.compaction.lag.ms";
/// `delete.retention.ms`: how long a tombstone stays after the clean that first kept it.
pub const DELETE_RETENTION_MS: &str = "delete.retention.ms";
/// `cleanup.policy`: `delete`, `compact`, or both.
pub const CLEANUP_POLICY: &str = "cleanup.policy";
/// `retention.ms`: records older than this go with their segment (-1: kept forever).
pub const RETENTION_MS: &str = "retention.ms";
/// `retention.bytes`: the oldest segments go while the log stays this big without them (-1: no limit).
pub const RETENTION_BYTES: &str = "retention.bytes";
/// `segment.bytes`: the size at which the active segment rolls.
pub const SEGMENT_BYTES: &str = "segment.bytes";
/// `segment.ms`: the age at which a non-empty active segment rolls.
pub const SEGMENT_MS: &str = "segment.ms";
/// `file.delete.delay.ms`: how long a deleted segment's files stay before they are removed.
pub const FILE_DELETE_DELAY_MS: &str = "file.delete.delay.ms";
/// Kafka's smallest `segment.bytes` (its oldest record's overhead).
pub const MIN_SEGMENT_BYTES: u64 = 14;
/// Broker: bytes/s of moves between the broker's own log dirs.
pub const ALTER_LOG_DIRS_RATE: &str = "replica.alter.log.dirs.io.max.bytes.per.second";
/// Broker: log dirs that take no new replica, a comma list or `*` (KIP-1066; see `cordon`).
pub const CORDONED_LOG_DIRS: &str = "cordoned.log.dirs";

/// A config Ferry knows: its name, Kafka's default, and Kafka's type code as DescribeConfigs
/// gives it (1 boolean, 3 int, 5 long, 7 list).
#[derive(Debug, Clone, Copy)]
pub struct Known {
    /// The config's name.
    pub name: &'static str,
    /// Kafka's default value.
    pub default: &'static str,
    /// Kafka's `ConfigType` code.
    pub kafka_type: i8,
}

const fn known(name: &'static str, default: &'static str, kafka_type: i8) -> Known {
    Known {
        name,
        default,
        kafka_type,
    }
}

/// Kafka's `ConfigType` code of a list.
const LIST: i8 = 7;

/// Kafka's `Long.MAX_VALUE`: an unthrottled rate.
const UNLIMITED: &str = "9223372036854775807";

/// Broker configs that may be set at run time.
pub const BROKER_CONFIGS: &[Known] = &[
    known(LEADER_THROTTLED_RATE, UNLIMITED, 5),
    known(FOLLOWER_THROTTLED_RATE, UNLIMITED, 5),
    known(ALTER_LOG_DIRS_RATE, UNLIMITED, 5),
    known(CORDONED_LOG_DIRS, "", LIST),
];

/// Checks broker dynamic configs: names Ferry acts on (Kafka refuses the others with "Cannot
/// update these configs dynamically"), rates that are whole numbers above 0, and the form of
/// `cordoned.log.dirs` (its dirs are checked against the brokers' by the controller).
pub fn validate_broker(config: &HashMap<String, String>) -> Result<(), String> {
    let mut names: Vec<&String> = config.keys().collect();
    names.sort();
    if let Some(k) = names.iter().find(|k| !is_known_broker(k)) {
        let known: Vec<&str> = BROKER_CONFIGS.iter().map(|k| k.name).collect();
        return Err(format!(
            "Cannot update these configs dynamically: {k} (the broker configs Ferry acts on: {})",
            known.join(", ")
        ));
    }
    for k in names {
        let v = &config[k];
        if k == CORDONED_LOG_DIRS {
            crate::cordon::check_form(v).map_err(|e| format!("invalid value for broker config {k}: {e}"))?;
        } else if v.parse::<u64>().ok().filter(|n| *n > 0).is_none() {
            return Err(format!(
                "invalid value {v:?} for broker config {k}: a rate in bytes/s above 0"
            ));
        }
    }
    Ok(())
}

/// Whether a throttled-replicas list (`*` or `p:broker,...`) names this replica.
pub fn lists_replica(list: &str, partition: u32, broker: i32) -> bool {
    list.trim() == "*"
        || list
            .split(',')
            .filter_map(|e| e.trim().split_once(':'))
            .any(|(p, b)| p.parse() == Ok(partition) && b.parse() == Ok(broker))
}

fn valid_replica_list(v: &str) -> bool {
    v.trim() == "*"
        || v.is_empty()
        || v.split(',').all(|e| {
            e.trim()
                .split_once(':')
                .is_some_and(|(p, b)| p.parse::<u32>().is_ok() && b.parse::<i32>().is_ok())
        })
}

/// Kafka's default for `max.message.bytes`.
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 1_048_588;

/// Configs accepted on a topic; anything else is refused, as Kafka refuses unknown configs.
pub const TOPIC_CONFIGS: &[Known] = &[
    known(MIN_INSYNC_REPLICAS, "1", 3),
    known(UNCLEAN_LEADER_ELECTION, "false", 1),
    known(MAX_MESSAGE_BYTES, "1048588", 3),
    known("cleanup.policy", "delete", LIST),
    known("retention.ms", "604800000", 5),
    known("retention.bytes", "-1", 5),
    known("segment.bytes", "1073741824", 3),
    known(SEGMENT_MS, "604800000", 5),
    known(FILE_DELETE_DELAY_MS, "60000", 5),
    known(MIN_CLEANABLE_DIRTY_RATIO, "0.5", 6),
    known(MIN_COMPACTION_LAG_MS, "0", 5),
    known(MAX_COMPACTION_LAG_MS, UNLIMITED, 5),
    known(DELETE_RETENTION_MS, "86400000", 5),
    known(LEADER_THROTTLED_REPLICAS, "", LIST),
    known(FOLLOWER_THROTTLED_REPLICAS, "", LIST),
];

/// Whether Ferry knows (and checks) this topic config.
pub fn is_known(key: &str) -> bool {
    TOPIC_CONFIGS.iter().any(|k| k.name == key)
}

/// Whether a config holds a comma-separated list, which Kafka's APPEND and SUBTRACT change
/// element by element.
pub fn is_list(key: &str) -> bool {
    TOPIC_CONFIGS
        .iter()
        .chain(BROKER_CONFIGS)
        .any(|k| k.name == key && k.kafka_type == LIST)
}

/// Whether Ferry knows (and checks) this broker config.
pub fn is_known_broker(key: &str) -> bool {
    BROKER_CONFIGS.iter().any(|k| k.name == key)
}

/// Checks every config; the error names the config and the reason.
pub fn validate(config: &HashMap<String, String>) -> Result<(), String> {
    for (k, v) in config {
        if !is_known(k) {
            return Err(format!("unknown topic config {k:?}"));
        }
        let positive = |v: &str| v.parse::<u64>().ok().filter(|n| *n > 0);
        let ok = match k.as_str() {
            MIN_INSYNC_REPLICAS | MAX_MESSAGE_BYTES => positive(v).is_some(),
            SEGMENT_BYTES => v
                .parse::<u64>()
                .is_ok_and(|n| (MIN_SEGMENT_BYTES..=i32::MAX as u64).contains(&n)),
            SEGMENT_MS => v.parse::<i64>().is_ok_and(|n| n >= 1),
            FILE_DELETE_DELAY_MS => v.parse::<i64>().is_ok_and(|n| n >= 0),
            UNCLEAN_LEADER_ELECTION => v == "true" || v == "false",
            "retention.ms" | "retention.bytes" => v.parse::<i64>().is_ok_and(|n| n >= -1),
            "cleanup.policy" => v.split(',').all(|p| p == "delete" || p == "compact"),
            MIN_CLEANABLE_DIRTY_RATIO => v.parse::<f64>().is_ok_and(|r| (0.0..=1.0).contains(&r)),
            MIN_COMPACTION_LAG_MS | DELETE_RETENTION_MS => v.parse::<i64>().is_ok_and(|n| n >= 0),
            MAX_COMPACTION_LAG_MS => v.parse::<i64>().is_ok_and(|n| n >= 1),
            LEADER_THROTTLED_REPLICAS | FOLLOWER_THROTTLED_REPLICAS => valid_replica_list(v),
            _ => true,
        };
        if !ok {
            return Err(format!("invalid value {v:?} for topic config {k}"));
        }
    }
    let lag = |k: &str| config.get(k).and_then(|v| v.parse::<i64>().ok());
    if let (Some(min), Some(max)) = (lag(MIN_COMPACTION_LAG_MS), lag(MAX_COMPACTION_LAG_MS)) {
        if max < min {
            return Err(format!(
                "{MAX_COMPACTION_LAG_MS} ({max}) is below {MIN_COMPACTION_LAG_MS} ({min})"
            ));
        }
    }
    Ok(())
}

/// `min.insync.replicas`, 1 when unset.
pub fn min_insync_replicas(config: &HashMap<String, String>) -> usize {
    config
        .get(MIN_INSYNC_REPLICAS)
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

/// Whether a replica outside the ISR may be elected.
pub fn unclean_election_allowed(config: &HashMap<String, String>) -> bool {
    config.get(UNCLEAN_LEADER_ELECTION).is_some_and(|v| v == "true")
}

/// `max.message.bytes`, Kafka's default when unset.
pub fn max_message_bytes(config: &HashMap<String, String>) -> u64 {
    config
        .get(MAX_MESSAGE_BYTES)
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_MAX_MESSAGE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(k: &str, v: &str) -> HashMap<String, String> {
        HashMap::from([(k.to_string(), v.to_string())])
    }

    #[test]
    fn every_default_is_a_valid_value() {
        for k in TOPIC_CONFIGS {
            assert!(validate(&cfg(k.name, k.default)).is_ok(), "{}", k.name);
        }
        for k in BROKER_CONFIGS {
            assert!(validate_broker(&cfg(k.name, k.default)).is_ok(), "{}", k.name);
        }
        let max = TOPIC_CONFIGS.iter().find(|k| k.name == MAX_MESSAGE_BYTES).unwrap();
        assert_eq!(max.default, DEFAULT_MAX_MESSAGE_BYTES.to_string());
    }

    #[test]
    fn checks_known_configs() {
        assert!(validate(&cfg("min.insync.replicas", "2")).is_ok());
        assert!(validate(&cfg("min.insync.replicas", "0"))
            .unwrap_err()
            .contains("min.insync.replicas"));
        assert!(validate(&cfg("bogus", "1")).unwrap_err().contains("unknown"));
        assert!(validate(&cfg(UNCLEAN_LEADER_ELECTION, "yes")).is_err());
        assert_eq!(min_insync_replicas(&cfg("min.insync.replicas", "2")), 2);
        assert!(unclean_election_allowed(&cfg(UNCLEAN_LEADER_ELECTION, "true")));
        assert_eq!(max_message_bytes(&HashMap::new()), DEFAULT_MAX_MESSAGE_BYTES);
        assert!(validate(&cfg(LEADER_THROTTLED_REPLICAS, "0:1,1:2")).is_ok());
        assert!(validate(&cfg(MIN_CLEANABLE_DIRTY_RATIO, "0.01")).is_ok());
        assert!(validate(&cfg(MIN_CLEANABLE_DIRTY_RATIO, "1.5")).is_err());
        assert!(validate(&cfg(MAX_COMPACTION_LAG_MS, "0")).is_err());
        let lags = HashMap::from([
            (MIN_COMPACTION_LAG_MS.to_string(), "10".to_string()),
            (MAX_COMPACTION_LAG_MS.to_string(), "5".to_string()),
        ]);
        assert!(validate(&lags).unwrap_err().contains(MAX_COMPACTION_LAG_MS));
        assert!(validate(&cfg(LEADER_THROTTLED_REPLICAS, "0-1")).is_err());
        assert!(validate(&cfg(SEGMENT_BYTES, "10000")).is_ok());
        assert!(validate(&cfg(SEGMENT_BYTES, "13")).is_err());
        assert!(validate(&cfg(SEGMENT_BYTES, "2147483648")).is_err());
        assert!(validate(&cfg(SEGMENT_MS, "0")).is_err());
        assert!(validate(&cfg(FILE_DELETE_DELAY_MS, "0")).is_ok());
        assert!(validate(&cfg(RETENTION_MS, "-2")).is_err());
        assert!(validate(&cfg(CLEANUP_POLICY, "compact,delete")).is_ok());
        assert!(lists_replica("0:1,1:2", 1, 2) && lists_replica("*", 9, 9) && !lists_replica("0:1", 1, 1));
        assert!(validate_broker(&cfg(LEADER_THROTTLED_RATE, "1000")).is_ok());
        assert!(validate_broker(&cfg(LEADER_THROTTLED_RATE, "0")).is_err());
        assert!(validate_broker(&cfg("x", "1"))
            .unwrap_err()
            .starts_with("Cannot update these configs dynamically: x"));
        assert!(validate_broker(&cfg(CORDONED_LOG_DIRS, "*")).is_ok());
        assert!(validate_broker(&cfg(CORDONED_LOG_DIRS, "/a,d/b")).is_ok());
        assert!(validate_broker(&cfg(CORDONED_LOG_DIRS, "*,/a"))
            .unwrap_err()
            .contains(CORDONED_LOG_DIRS));
        assert!(is_list(CORDONED_LOG_DIRS) && is_list(CLEANUP_POLICY) && !is_list(LEADER_THROTTLED_RATE));
    }
}
