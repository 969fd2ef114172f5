//! Kafka's znodes, as read from ZooKeeper, into typed structs. Every error names the znode.
//! A malformed znode drops the smallest unit it belongs to (a topic, a broker, one admin znode)
//! and is recorded as a problem; the caller decides whether problems stop the import.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

/// One znode's data and the parts of its stat the import uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Znode {
    /// The znode's data.
    pub data: Vec<u8>,
    /// Data version (Kafka's partition epoch for a partition state).
    pub version: i32,
    /// When the znode was created, ms since the epoch.
    pub ctime_ms: i64,
}

/// The znodes the import reads, by absolute path (below the chroot).
pub type RawSnapshot = BTreeMap<String, Znode>;

/// A znode that is malformed or contradicts another.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct Invalid {
    /// The znode.
    pub path: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Shorthand for an [`Invalid`].
pub fn invalid(path: impl Into<String>, reason: impl Into<String>) -> Invalid {
    Invalid {
        path: path.into(),
        reason: reason.into(),
    }
}

/// A problem that no `--skip-invalid` can get past.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Fatal {
    /// `/cluster/id` is missing: this is not a Kafka cluster's ZooKeeper (or the chroot is wrong).
    #[error("/cluster/id: not found; is this the ZooKeeper (and chroot) of a Kafka cluster?")]
    NoClusterId,
    /// `/cluster/id` cannot be read.
    #[error("{0}")]
    BadClusterId(Invalid),
}

/// `/brokers/ids/<id>`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ZkBroker {
    /// Listener URLs, e.g. `PLAINTEXT://h:9092`.
    pub endpoints: Vec<String>,
    /// Rack, if any.
    pub rack: Option<String>,
}

/// `/brokers/topics/<t>/partitions/<p>/state`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ZkPartitionState {
    /// Leader broker, -1 for none.
    pub leader: i32,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// The controller epoch that wrote the state.
    pub controller_epoch: i32,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// The znode's data version: Kafka's partition epoch.
    pub zk_version: i32,
}

/// `/brokers/topics/<t>` with its partition states.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ZkTopic {
    /// Znode format version, 1 to 3.
    pub version: i64,
    /// Kafka's topic id (version 3).
    pub topic_id: Option<String>,
    /// Full replica set per partition (original plus target while moving).
    pub partitions: BTreeMap<u32, Vec<i32>>,
    /// Replicas being added, for moving partitions only.
    pub adding: BTreeMap<u32, Vec<i32>>,
    /// Replicas being removed, for moving partitions only.
    pub removing: BTreeMap<u32, Vec<i32>>,
    /// Partition states by partition (a partition may have none yet).
    pub states: BTreeMap<u32, ZkPartitionState>,
    /// When the topic znode was created, ms since the epoch.
    pub ctime_ms: i64,
}

/// One partition of a reassignment znode.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ReassignmentEntry {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// Target replicas.
    pub replicas: Vec<i32>,
    /// The cancellation proposal's original replicas, in their original order.
    #[serde(default)]
    pub original_replicas: Option<Vec<i32>>,
}

/// `/admin/reassign_partitions` or one `/admin/reassignment_requests/<name>`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ZkReassignment {
    /// The znode it came from.
    pub path: String,
    /// Its partitions.
    pub partitions: Vec<ReassignmentEntry>,
    /// When it was written, ms since the epoch.
    pub ctime_ms: i64,
}

/// Everything the import reads from ZooKeeper, typed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ZkCluster {
    /// `/cluster/id`.
    pub cluster_id: String,
    /// `/controller_epoch`, when present.
    pub controller_epoch: Option<i32>,
    /// `/brokers/ids/*`.
    pub brokers: BTreeMap<i32, ZkBroker>,
    /// `/brokers/topics/*`.
    pub topics: BTreeMap<String, ZkTopic>,
    /// `/config/topics/*`.
    pub topic_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// `/config/brokers/<id>` (numeric ids only).
    pub broker_configs: BTreeMap<i32, BTreeMap<String, String>>,
    /// `/admin/reassign_partitions`.
    pub legacy_reassignment: Option<ZkReassignment>,
    /// `/admin/reassignment_requests/*`, in sequence order.
    pub requests: Vec<ZkReassignment>,
    /// `/admin/reassign_cancel` is present.
    pub cancel_all: bool,
    /// `/admin/throttled_replicas_removal`: topics whose throttled-replica lists go with their
    /// reassignments.
    pub throttled_replicas_removal: BTreeSet<String>,
    /// `/admin/throttled_rates_removal`: brokers whose throttle rates go with the reassignments.
    pub throttled_rates_removal: BTreeSet<i32>,
    /// `/admin/delete_topics/*`.
    pub delete_topics: BTreeSet<String>,
    /// ACLs and SCRAM credentials.
    pub security: ZkSecurity,
    /// Malformed znodes, dropped from the above.
    pub problems: Vec<Invalid>,
    /// Things read but not imported, for people.
    pub notes: Vec<String>,
}

// Paths of Kafka's znodes.
/// `/cluster/id`.
pub const CLUSTER_ID: &str = "/cluster/id";
/// `/controller_epoch`.
pub const CONTROLLER_EPOCH: &str = "/controller_epoch";
/// Parent of broker registrations.
pub const BROKER_IDS: &str = "/brokers/ids";
/// Parent of topics.
pub const TOPICS: &str = "/brokers/topics";
/// Parent of topic configs.
pub const TOPIC_CONFIGS: &str = "/config/topics";
/// Parent of broker configs.
pub const BROKER_CONFIGS: &str = "/config/brokers";
/// Kafka's single reassignment znode.
pub const REASSIGN_PARTITIONS: &str = "/admin/reassign_partitions";
/// Cancel-all marker of the cancellation proposal.
pub const REASSIGN_CANCEL: &str = "/admin/reassign_cancel";
/// Parent of incremental reassignment requests.
pub const REASSIGNMENT_REQUESTS: &str = "/admin/reassignment_requests";
/// Topics whose throttled-replica configs go when their reassignments end.
pub const THROTTLED_REPLICAS_REMOVAL: &str = "/admin/throttled_replicas_removal";
/// Brokers whose throttle rates go when the reassignments end.
pub const THROTTLED_RATES_REMOVAL: &str = "/admin/throttled_rates_removal";
/// Parent of topics pending deletion.
pub const DELETE_TOPICS: &str = "/admin/delete_topics";

/// The state znode of a partition.
pub fn state_path(topic: &str, p: u32) -> String {
    format!("{TOPICS}/{topic}/partitions/{p}/state")
}

fn json<'a, T: Deserialize<'a>>(path: &str, data: &'a [u8]) -> Result<T, Invalid> {
    serde_json::from_slice(data).map_err(|e| invalid(path, format!("malformed JSON: {e}")))
}

/// The direct children of `parent` in the snapshot (their last path segment and znode).
pub fn children<'a>(raw: &'a RawSnapshot, parent: &str) -> impl Iterator<Item = (&'a str, &'a Znode)> + 'a {
    let prefix = format!("{parent}/");
    let skip = prefix.len();
    raw.range(prefix.clone()..)
        .take_while(move |(k, _)| k.starts_with(&prefix))
        .filter_map(move |(k, v)| {
            let name = &k[skip..];
            (!name.contains('/')).then_some((name, v))
        })
}

#[derive(Deserialize)]
struct ClusterIdJson {
    id: String,
}

#[derive(Deserialize)]
struct BrokerJson {
    #[serde(default)]
    endpoints: Vec<String>,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    port: Option<i64>,
    #[serde(default)]
    rack: Option<String>,
}

#[derive(Deserialize)]
struct TopicJson {
    version: i64,
    #[serde(default)]
    topic_id: Option<String>,
    partitions: BTreeMap<String, Vec<i32>>,
    #[serde(default)]
    adding_replicas: BTreeMap<String, Vec<i32>>,
    #[serde(default)]
    removing_replicas: BTreeMap<String, Vec<i32>>,
}

#[derive(Deserialize)]
struct StateJson {
    leader: i32,
    leader_epoch: i32,
    #[serde(default)]
    controller_epoch: i32,
    isr: Vec<i32>,
}

#[derive(Deserialize)]
struct ConfigJson {
    config: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct ReassignmentJson {
    partitions: Vec<ReassignmentEntry>,
}

#[derive(Deserialize)]
struct TopicsListJson {
    topics: BTreeSet<String>,
}

#[derive(Deserialize)]
struct BrokersListJson {
    brokers: BTreeSet<i32>,
}

fn partition_map(path: &str, field: &str, m: BTreeMap<String, Vec<i32>>) -> Result<BTreeMap<u32, Vec<i32>>, Invalid> {
    m.into_iter()
        .map(|(k, v)| {
            k.parse::<u32>()
                .map(|p| (p, v))
                .map_err(|_| invalid(path, format!("{field}: {k:?} is not a partition number")))
        })
        .collect()
}

fn parse_topic(raw: &RawSnapshot, name: &str, node: &Znode) -> Result<ZkTopic, Invalid> {
    let path = format!("{TOPICS}/{name}");
    let t: TopicJson = json(&path, &node.data)?;
    if !(1..=3).contains(&t.version) {
        return Err(invalid(
            &path,
            format!("unknown version {}; versions 1 to 3 are known", t.version),
        ));
    }
    let mut topic = ZkTopic {
        version: t.version,
        topic_id: t.topic_id,
        partitions: partition_map(&path, "partitions", t.partitions)?,
        adding: partition_map(&path, "adding_replicas", t.adding_replicas)?,
        removing: partition_map(&path, "removing_replicas", t.removing_replicas)?,
        states: BTreeMap::new(),
        ctime_ms: node.ctime_ms,
    };
    let prefix = format!("{path}/partitions/");
    for (spath, state) in raw.range(prefix.clone()..).take_while(|(k, _)| k.starts_with(&prefix)) {
        let Some(p) = spath[prefix.len()..].strip_suffix("/state") else {
            continue;
        };
        let p: u32 = p
            .parse()
            .map_err(|_| invalid(spath.as_str(), format!("{p:?} is not a partition number")))?;
        let s: StateJson = json(spath, &state.data)?;
        topic.states.insert(
            p,
            ZkPartitionState {
                leader: s.leader,
                leader_epoch: s.leader_epoch,
                controller_epoch: s.controller_epoch,
                isr: s.isr,
                zk_version: state.version,
            },
        );
    }
    Ok(topic)
}

fn parse_reassignment(path: &str, node: &Znode) -> Result<ZkReassignment, Invalid> {
    let r: ReassignmentJson = json(path, &node.data)?;
    Ok(ZkReassignment {
        path: path.to_string(),
        partitions: r.partitions,
        ctime_ms: node.ctime_ms,
    })
}

/// The sequence number at the end of a sequential znode's name (`request_0000000007` -> 7).
fn sequence(name: &str) -> u64 {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    name[name.len() - digits..].parse().unwrap_or(u64::MAX)
}

/// Types every znode of the snapshot. Malformed znodes are left out and listed in `problems`;
/// only a missing or malformed `/cluster/id` is fatal.
pub fn parse(raw: &RawSnapshot) -> Result<ZkCluster, Fatal> {
    let id_node = raw.get(CLUSTER_ID).ok_or(Fatal::NoClusterId)?;
    let id: ClusterIdJson = json(CLUSTER_ID, &id_node.data).map_err(Fatal::BadClusterId)?;
    if id.id.is_empty() {
        return Err(Fatal::BadClusterId(invalid(CLUSTER_ID, "the id is empty")));
    }
    let mut c = ZkCluster {
        cluster_id: id.id,
        ..Default::default()
    };
    if let Some(n) = raw.get(CONTROLLER_EPOCH) {
        match std::str::from_utf8(&n.data).ok().and_then(|s| s.trim().parse().ok()) {
            Some(e) => c.controller_epoch = Some(e),
            None => c.problems.push(invalid(CONTROLLER_EPOCH, "not a number")),
        }
    }
    parse_brokers(raw, &mut c);
    for (name, node) in children(raw, TOPICS) {
        match parse_topic(raw, name, node) {
            Ok(t) => {
                c.topics.insert(name.to_string(), t);
            }
            Err(e) => c.problems.push(e),
        }
    }
    parse_configs(raw, &mut c);
    parse_admin(raw, &mut c);
    Ok(c)
}

/// The ACLs and credentials read from ZooKeeper (typed by `security::parse_into`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ZkSecurity {
    /// Each resource pattern's entries, by key (its znode's path, which is Ferry's key too).
    pub acls: BTreeMap<String, BTreeSet<proto::acl::AccessControlEntry>>,
    /// Each user's SCRAM credentials, sorted by mechanism as Ferry stores them.
    pub users: BTreeMap<String, proto::ferry::ScramUserRecord>,
}

/// The registered brokers, under `/brokers/ids`.
fn parse_brokers(raw: &RawSnapshot, c: &mut ZkCluster) {
    for (name, node) in children(raw, BROKER_IDS) {
        let path = format!("{BROKER_IDS}/{name}");
        let parsed = name
            .parse::<i32>()
            .map_err(|_| invalid(&path, "the name is not a broker id"))
            .and_then(|id| Ok((id, json::<BrokerJson>(&path, &node.data)?)));
        match parsed {
            Ok((id, b)) => {
                let mut endpoints = b.endpoints;
                if endpoints.is_empty() {
                    if let (Some(h), Some(p)) = (b.host, b.port) {
                        endpoints.push(format!("PLAINTEXT://{h}:{p}"));
                    }
                }
                c.brokers.insert(
                    id,
                    ZkBroker {
                        endpoints,
                        rack: b.rack,
                    },
                );
            }
            Err(e) => c.problems.push(e),
        }
    }
}

/// The topic and broker configs; cluster-wide broker defaults are only noted.
fn parse_configs(raw: &RawSnapshot, c: &mut ZkCluster) {
    for (name, node) in children(raw, TOPIC_CONFIGS) {
        match json::<ConfigJson>(&format!("{TOPIC_CONFIGS}/{name}"), &node.data) {
            Ok(cfg) => {
                c.topic_configs.insert(name.to_string(), cfg.config);
            }
            Err(e) => c.problems.push(e),
        }
    }
    for (name, node) in children(raw, BROKER_CONFIGS) {
        let path = format!("{BROKER_CONFIGS}/{name}");
        let Ok(id) = name.parse::<i32>() else {
            c.notes.push(format!(
                "{path}: cluster-wide broker defaults are not imported; Ferry has none"
            ));
            continue;
        };
        match json::<ConfigJson>(&path, &node.data) {
            Ok(cfg) => {
                c.broker_configs.insert(id, cfg.config);
            }
            Err(e) => c.problems.push(e),
        }
    }
}

/// The admin znodes: reassignments (Kafka's and the requests, in sequence order), a cancel-all,
/// the throttles due for removal and the topics being deleted.
fn parse_admin(raw: &RawSnapshot, c: &mut ZkCluster) {
    if let Some(n) = raw.get(REASSIGN_PARTITIONS) {
        match parse_reassignment(REASSIGN_PARTITIONS, n) {
            Ok(r) => c.legacy_reassignment = Some(r),
            Err(e) => c.problems.push(e),
        }
    }
    let mut requests: Vec<(u64, &str, &Znode)> = children(raw, REASSIGNMENT_REQUESTS)
        .map(|(name, n)| (sequence(name), name, n))
        .collect();
    requests.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    for (_, name, n) in requests {
        match parse_reassignment(&format!("{REASSIGNMENT_REQUESTS}/{name}"), n) {
            Ok(r) => c.requests.push(r),
            Err(e) => c.problems.push(e),
        }
    }
    c.cancel_all = raw.contains_key(REASSIGN_CANCEL);
    if let Some(n) = raw.get(THROTTLED_REPLICAS_REMOVAL) {
        match json::<TopicsListJson>(THROTTLED_REPLICAS_REMOVAL, &n.data) {
            Ok(l) => c.throttled_replicas_removal = l.topics,
            Err(e) => c.problems.push(e),
        }
    }
    if let Some(n) = raw.get(THROTTLED_RATES_REMOVAL) {
        match json::<BrokersListJson>(THROTTLED_RATES_REMOVAL, &n.data) {
            Ok(l) => c.throttled_rates_removal = l.brokers,
            Err(e) => c.problems.push(e),
        }
    }
    c.delete_topics = children(raw, DELETE_TOPICS).map(|(n, _)| n.to_string()).collect();
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A snapshot from (path, JSON) pairs.
    pub fn snapshot(nodes: &[(&str, &str)]) -> RawSnapshot {
        nodes
            .iter()
            .map(|(p, d)| {
                (
                    p.to_string(),
                    Znode {
                        data: d.as_bytes().to_vec(),
                        version: 0,
                        ctime_ms: 1000,
                    },
                )
            })
            .collect()
    }

    const ID: (&str, &str) = ("/cluster/id", r#"{"version":"1","id":"abc"}"#);

    #[test]
    fn reads_kafkas_formats() {
        let raw = snapshot(&[
            ID,
            ("/controller_epoch", "7"),
            (
                "/brokers/ids/1",
                r#"{"version":5,"host":"h","port":9092,"jmx_port":-1,"timestamp":"1","endpoints":["PLAINTEXT://h:9092"],"rack":"r1"}"#,
            ),
            (
                "/brokers/topics/foo",
                r#"{"version":3,"topic_id":"x","partitions":{"0":[1,2,3,4],"1":[2,3,1]},"adding_replicas":{"0":[3]},"removing_replicas":{"0":[4]}}"#,
            ),
            (
                "/brokers/topics/foo/partitions/0/state",
                r#"{"version":1,"leader":1,"leader_epoch":5,"controller_epoch":7,"isr":[1,2]}"#,
            ),
            ("/brokers/topics/old", r#"{"version":1,"partitions":{"0":[1]}}"#),
            ("/config/topics/foo", r#"{"version":1,"config":{"retention.ms":"1"}}"#),
            ("/config/brokers/<default>", r#"{"version":1,"config":{}}"#),
            (
                "/admin/reassign_partitions",
                r#"{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,2],"original_replicas":[2,3,1]}]}"#,
            ),
            (
                "/admin/reassignment_requests/request_0000000010",
                r#"{"version":1,"partitions":[]}"#,
            ),
            (
                "/admin/reassignment_requests/request_0000000002",
                r#"{"version":1,"partitions":[]}"#,
            ),
            ("/admin/throttled_rates_removal", r#"{"version":1,"brokers":[1,2]}"#),
            ("/admin/delete_topics/old", ""),
        ]);
        let c = parse(&raw).unwrap();
        assert_eq!(c.cluster_id, "abc");
        assert_eq!(c.controller_epoch, Some(7));
        assert_eq!(c.brokers[&1].rack.as_deref(), Some("r1"));
        let foo = &c.topics["foo"];
        assert_eq!(foo.partitions[&0], vec![1, 2, 3, 4]);
        assert_eq!((foo.adding[&0].clone(), foo.removing[&0].clone()), (vec![3], vec![4]));
        assert_eq!(foo.states[&0].isr, vec![1, 2]);
        assert_eq!(c.topics["old"].version, 1);
        let legacy = c.legacy_reassignment.unwrap();
        assert_eq!(legacy.partitions[0].original_replicas, Some(vec![2, 3, 1]));
        let order: Vec<&str> = c.requests.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(
            order,
            [
                "/admin/reassignment_requests/request_0000000002",
                "/admin/reassignment_requests/request_0000000010"
            ]
        );
        assert_eq!(c.throttled_rates_removal, BTreeSet::from([1, 2]));
        assert!(c.delete_topics.contains("old"));
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(c.notes.len(), 1);
    }

    #[test]
    fn malformed_znodes_are_named() {
        let raw = snapshot(&[
            ID,
            ("/brokers/topics/bad", r#"{"version":2,"partitions":{"0":[1,2]"#),
            ("/brokers/topics/v9", r#"{"version":9,"partitions":{}}"#),
            ("/brokers/topics/ok", r#"{"version":1,"partitions":{"0":[1]}}"#),
            ("/brokers/topics/ok/partitions/0/state", r#"{"leader":"one"}"#),
            ("/config/topics/c", "not json"),
        ]);
        let c = parse(&raw).unwrap();
        let paths: Vec<&str> = c.problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/brokers/topics/bad",
                "/brokers/topics/ok/partitions/0/state",
                "/brokers/topics/v9",
                "/config/topics/c"
            ]
        );
        assert!(c.problems[0].reason.starts_with("malformed JSON"), "{}", c.problems[0]);
        assert!(c.topics.is_empty());
    }

    #[test]
    fn cluster_id_is_required() {
        assert_eq!(parse(&snapshot(&[])).unwrap_err(), Fatal::NoClusterId);
        assert!(matches!(
            parse(&snapshot(&[("/cluster/id", "{")])).unwrap_err(),
            Fatal::BadClusterId(_)
        ));
    }
}
