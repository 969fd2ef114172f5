//! The metadata keyspace: one function per key shape, so a path is spelled in one place.

/// Prefix of broker registrations.
pub const BROKER_IDS: &str = "/brokers/ids/";
/// Prefix of topics and their partitions.
pub const TOPICS: &str = "/brokers/topics/";
/// The active controller.
pub const CONTROLLER: &str = "/controller";
/// The cluster's id ([`crate::ferry::ClusterIdRecord`]), written by a ZooKeeper import.
pub const CLUSTER_ID: &str = "/cluster/id";
/// The next producer id block to hand out (`ProducerIdBlockRecord`).
pub const PRODUCER_IDS: &str = "/cluster/producer_ids";
/// Present while a cancel-all is in force.
pub const REASSIGN_CANCEL: &str = "/admin/reassign_cancel";
/// Rewritten by every reassignment submit, so that a write can be guarded against submits made
/// since it looked (the removal of auto-remove throttles).
pub const REASSIGN_EPOCH: &str = "/admin/reassign_epoch";
/// Prefix of the move plans the controller runs (`/admin/plans/<id>`).
pub const PLANS: &str = "/admin/plans/";

/// Prefix of brokers' dynamic configs.
pub const BROKER_CONFIGS: &str = "/config/brokers/";
/// Prefix of client-id quota entities (`/config/clients/<c>`; see `client_quota`).
pub const CLIENT_QUOTAS: &str = "/config/clients/";
/// Prefix of user quota entities (`/config/users/<u>`, `/config/users/<u>/clients/<c>`).
pub const USER_QUOTAS: &str = "/config/users/";
/// Prefix of users' SCRAM credentials (`/config/scram/<u>`, the name sanitized as quota
/// entities' are; `ScramUserRecord`).
pub const SCRAM_USERS: &str = "/config/scram/";
/// Prefix of every ACL key: literal ones at `/kafka-acl/<type>/<name>`, prefixed ones at
/// `/kafka-acl-extended/prefixed/<type>/<name>`, ZooKeeper's layout (`acl::zk`).
pub const ACLS: &str = "/kafka-acl";

/// `/config/scram/<user>`.
pub fn scram_user(user: &str) -> String {
    format!("{SCRAM_USERS}{}", sanitize(user))
}

/// The user a `/config/scram/<u>` key names.
pub fn parse_scram_user(key: &str) -> Option<String> {
    desanitize(key.strip_prefix(SCRAM_USERS)?)
}

/// The cluster-wide default of brokers' dynamic configs (Kafka's entity `<default>`, resource
/// name ""), beneath each broker's own.
pub const BROKER_DEFAULT_CONFIG: &str = "/config/brokers/<default>";

/// `/config/brokers/<id>`.
pub fn broker_config(id: i32) -> String {
    format!("{BROKER_CONFIGS}{id}")
}

/// `/brokers/ids/<id>`.
pub fn broker(id: i32) -> String {
    format!("{BROKER_IDS}{id}")
}

/// `/brokers/topics/<topic>`.
pub fn topic(topic: &str) -> String {
    format!("{TOPICS}{topic}")
}

/// `/brokers/topics/<topic>/` — the prefix of the topic's partitions (and nothing of another
/// topic whose name starts with this one).
pub fn topic_children(topic: &str) -> String {
    format!("{TOPICS}{topic}/")
}

/// `/brokers/topics/<topic>/partitions/<p>`.
pub fn partition(topic: &str, partition: u32) -> String {
    format!("{TOPICS}{topic}/partitions/{partition}")
}

/// Where partition `p`'s key sorts among its topic's partition keys: the keys spell `p` in
/// decimal, so they sort as strings ("10" before "2"), not as numbers. Writers order a large
/// batch by it: the store's tree then takes neighbouring keys one after another, from cache,
/// where numeric order sent each key to a different leaf.
pub fn partition_key_rank(p: u32) -> u64 {
    // Each digit as 1..=10 in base 11, left-aligned over the 10 places a u32 can need; a shorter
    // number ends in 0s, below any digit, as a shorter string sorts first.
    let len = p.checked_ilog10().map_or(1, |l| l + 1);
    (0..10u32).fold(0u64, |rank, place| {
        let d = if place < len {
            u64::from(p / 10u32.pow(len - 1 - place) % 10) + 1
        } else {
            0
        };
        rank * 11 + d
    })
}

/// What a key under [`TOPICS`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicKey<'a> {
    /// A topic record.
    Topic(&'a str),
    /// A partition state.
    Partition(&'a str, u32),
}

/// Parses a key under [`TOPICS`]; `None` for anything else.
pub fn parse_topic_key(key: &str) -> Option<TopicKey<'_>> {
    let rest = key.strip_prefix(TOPICS)?;
    match rest.split_once('/') {
        None if !rest.is_empty() => Some(TopicKey::Topic(rest)),
        None => None,
        Some((topic, tail)) => {
            let p = tail.strip_prefix("partitions/")?.parse().ok()?;
            Some(TopicKey::Partition(topic, p))
        }
    }
}

/// Parses `/brokers/ids/<id>`.
pub fn parse_broker_key(key: &str) -> Option<i32> {
    key.strip_prefix(BROKER_IDS)?.parse().ok()
}

/// `/admin/plans/<id>`, the id zero-padded so that keys sort as the ids do.
pub fn plan(id: u64) -> String {
    format!("{PLANS}{id:020}")
}

/// The id of a plan key.
pub fn parse_plan_key(key: &str) -> Option<u64> {
    key.strip_prefix(PLANS)?.parse().ok()
}

/// Kafka's `Sanitizer.sanitize`: URL encoding of the UTF-8 bytes, with `*` and space encoded too,
/// so a name never holds `/` or `<` in a key.
pub fn sanitize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The inverse of [`sanitize`]; `None` for text it cannot have made.
pub fn desanitize(s: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(s.len());
    let mut it = s.bytes();
    while let Some(b) = it.next() {
        if b == b'%' {
            let hex = [it.next()?, it.next()?];
            bytes.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
        } else if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_') {
            bytes.push(b);
        } else {
            return None;
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        assert_eq!(parse_topic_key(&topic("a.b")), Some(TopicKey::Topic("a.b")));
        assert_eq!(parse_topic_key(&partition("t", 7)), Some(TopicKey::Partition("t", 7)));
        assert_eq!(parse_topic_key("/brokers/topics/t/other"), None);
        assert_eq!(parse_broker_key(&broker(3)), Some(3));
        assert_eq!(parse_broker_key("/brokers/ids/x"), None);
    }

    #[test]
    fn partition_key_rank_orders_as_the_keys_do() {
        let mut ps: Vec<u32> = (0..2000)
            .chain([99_999, 100_000, 999_999, u32::MAX, u32::MAX - 1])
            .collect();
        let mut by_key = ps.clone();
        by_key.sort_by_key(|p| partition("t", *p));
        ps.sort_by_key(|p| partition_key_rank(*p));
        assert_eq!(ps, by_key);
    }
}
