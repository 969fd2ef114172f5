//! Topic configs Ferry knows, their checks and defaults.

use std::collections::HashMap;

/// `min.insync.replicas`.
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";
/// `unclean.leader.election.enable`.
pub const UNCLEAN_LEADER_ELECTION: &str = "unclean.leader.election.enable";
/// `max.message.bytes`: the largest batch a produce may send.
pub const MAX_MESSAGE_BYTES: &str = "max.message.bytes";
/// Kafka's default for `max.message.bytes`.
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 1_048_588;

/// Configs accepted on a topic; anything else is refused, as Kafka refuses unknown configs.
const KNOWN: &[&str] = &[
    MIN_INSYNC_REPLICAS,
    UNCLEAN_LEADER_ELECTION,
    MAX_MESSAGE_BYTES,
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
];

/// Checks every config; the error names the config and the reason.
pub fn validate(config: &HashMap<String, String>) -> Result<(), String> {
    for (k, v) in config {
        if !KNOWN.contains(&k.as_str()) {
            return Err(format!("unknown topic config {k:?}"));
        }
        let positive = |v: &str| v.parse::<u64>().ok().filter(|n| *n > 0);
        let ok = match k.as_str() {
            MIN_INSYNC_REPLICAS | MAX_MESSAGE_BYTES | "segment.bytes" => positive(v).is_some(),
            UNCLEAN_LEADER_ELECTION => v == "true" || v == "false",
            "retention.ms" | "retention.bytes" => v.parse::<i64>().is_ok_and(|n| n >= -1),
            "cleanup.policy" => v.split(',').all(|p| p == "delete" || p == "compact"),
            _ => true,
        };
        if !ok {
            return Err(format!("invalid value {v:?} for topic config {k}"));
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
    }
}
