//! From a typed ZooKeeper snapshot to the keys and values Ferry stores: partition states,
//! reassignments with their original replicas, owned throttles, configs, the cluster id.
//! Znodes that contradict each other are reported by path; the unit they belong to is left out.

use std::collections::{BTreeMap, BTreeSet};

use controller::reassignment;
use prost::Message;
use proto::ferry::{BrokerConfigRecord, ClusterIdRecord, PartitionState, ReassignmentRecord, TopicRecord};
use proto::{keys, topic_config};
use serde::Serialize;
use serde_json::json;

use super::parse::{self, invalid, Invalid, ReassignmentEntry, ZkBroker, ZkCluster, ZkTopic};

/// A value Ferry stores, typed so that a re-run compares decoded values, not bytes (protobuf
/// maps encode in no fixed order).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `/cluster/id`.
    ClusterId(ClusterIdRecord),
    /// `/brokers/topics/<t>`.
    Topic(TopicRecord),
    /// `/brokers/topics/<t>/partitions/<p>`.
    Partition(PartitionState),
    /// `/admin/reassignments/<t>/<p>`, and the cancel-all marker.
    Reassignment(ReassignmentRecord),
    /// `/config/brokers/<id>`.
    BrokerConfig(BrokerConfigRecord),
}

impl Value {
    /// The protobuf encoding.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Value::ClusterId(v) => v.encode_to_vec(),
            Value::Topic(v) => v.encode_to_vec(),
            Value::Partition(v) => v.encode_to_vec(),
            Value::Reassignment(v) => v.encode_to_vec(),
            Value::BrokerConfig(v) => v.encode_to_vec(),
        }
    }

    /// Decodes stored bytes as the same kind of value.
    pub fn decode_like(&self, bytes: &[u8]) -> Option<Value> {
        Some(match self {
            Value::ClusterId(_) => Value::ClusterId(ClusterIdRecord::decode(bytes).ok()?),
            Value::Topic(_) => Value::Topic(TopicRecord::decode(bytes).ok()?),
            Value::Partition(_) => Value::Partition(PartitionState::decode(bytes).ok()?),
            Value::Reassignment(_) => Value::Reassignment(ReassignmentRecord::decode(bytes).ok()?),
            Value::BrokerConfig(_) => Value::BrokerConfig(BrokerConfigRecord::decode(bytes).ok()?),
        })
    }

    /// Whether stored bytes hold this value.
    pub fn same_as(&self, bytes: &[u8]) -> bool {
        self.decode_like(bytes).is_some_and(|v| v == *self)
    }

    /// The value as one line of JSON, for differences.
    pub fn describe(&self) -> String {
        let v = match self {
            Value::ClusterId(c) => json!({"id": c.id}),
            Value::Topic(t) => json!({"topic_id": t.topic_id, "partitions": t.partitions,
                "config": sorted(&t.config), "deleting": t.deleting}),
            Value::Partition(s) => json!({"replicas": s.replicas, "adding_replicas": s.adding,
                "removing_replicas": s.removing, "leader": s.leader, "leader_epoch": s.leader_epoch,
                "isr": s.isr, "partition_epoch": s.partition_epoch, "throttle_rate": s.throttle_rate}),
            Value::Reassignment(r) => json!({"original_replicas": r.original, "replicas": r.target,
                "throttle_rate": r.throttle_rate, "submitted_ms": r.submitted_ms}),
            Value::BrokerConfig(b) => json!({"config": sorted(&b.config)}),
        };
        v.to_string()
    }
}

fn sorted(m: &std::collections::HashMap<String, String>) -> BTreeMap<&String, &String> {
    m.iter().collect()
}

/// What an import writes, and what it left out.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The cluster id from ZooKeeper.
    pub cluster_id: String,
    /// Kafka's brokers (not written: Ferry brokers register themselves with the same ids).
    pub brokers: BTreeMap<i32, ZkBroker>,
    /// Every key to write, with its value.
    pub writes: BTreeMap<String, Value>,
    /// Malformed or contradicting znodes; their units are not in `writes`.
    pub skipped: Vec<Invalid>,
    /// Things read but not imported as they were, for people.
    pub notes: Vec<String>,
}

impl Plan {
    fn topics(&self) -> impl Iterator<Item = (&str, &TopicRecord)> {
        self.writes
            .iter()
            .filter_map(|(k, v)| match (keys::parse_topic_key(k), v) {
                (Some(keys::TopicKey::Topic(t)), Value::Topic(r)) => Some((t, r)),
                _ => None,
            })
    }

    fn partitions(&self) -> impl Iterator<Item = (&str, u32, &PartitionState)> {
        self.writes
            .iter()
            .filter_map(|(k, v)| match (keys::parse_topic_key(k), v) {
                (Some(keys::TopicKey::Partition(t, p)), Value::Partition(s)) => Some((t, p, s)),
                _ => None,
            })
    }

    /// The in-flight reassignments, by partition.
    pub fn reassignments(&self) -> impl Iterator<Item = (&str, u32, &ReassignmentRecord)> {
        self.writes
            .iter()
            .filter_map(|(k, v)| match (keys::parse_reassignment_key(k), v) {
                (Some((t, p)), Value::Reassignment(r)) => Some((t, p, r)),
                _ => None,
            })
    }

    /// Counts for the closing line: topics, deleting topics, partitions, reassignments, owned
    /// throttles, broker configs.
    pub fn summary(&self) -> String {
        let topics = self.topics().count();
        let deleting = self.topics().filter(|(_, r)| r.deleting).count();
        let partitions = self.partitions().count();
        let moving = self.reassignments().count();
        let throttled = self.reassignments().filter(|(_, _, r)| r.throttle_rate > 0).count();
        let configs = self
            .writes
            .keys()
            .filter(|k| k.starts_with(keys::BROKER_CONFIGS))
            .count();
        format!(
            "cluster {}: {topics} topics ({deleting} being deleted), {partitions} partitions, {moving} reassignments in flight ({throttled} with a throttle that goes with them), {configs} broker configs",
            self.cluster_id
        )
    }

    /// What `--dry-run` prints: Kafka's JSON for each kind of znode, as Ferry will hold it.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut line = |s: String| {
            out.push_str(&s);
            out.push('\n');
        };
        line(format!("Cluster id: {}", self.cluster_id));
        line(format!(
            "Brokers in ZooKeeper (Ferry brokers register themselves with these ids): {}",
            join(self.brokers.keys())
        ));
        let mut states: BTreeMap<&str, BTreeMap<u32, &PartitionState>> = BTreeMap::new();
        for (t, p, s) in self.partitions() {
            states.entry(t).or_default().insert(p, s);
        }
        line("Topics".into());
        for (t, r) in self.topics() {
            let ps = states.get(t).cloned().unwrap_or_default();
            let pick = |f: fn(&PartitionState) -> &Vec<i32>| -> BTreeMap<u32, &Vec<i32>> {
                ps.iter()
                    .map(|(p, s)| (*p, f(s)))
                    .filter(|(_, l)| !l.is_empty())
                    .collect()
            };
            let znode = TopicZnode {
                version: 3,
                topic_id: &r.topic_id,
                partitions: pick(|s| &s.replicas),
                adding_replicas: pick(|s| &s.adding),
                removing_replicas: pick(|s| &s.removing),
            };
            line(format!("{}/{t} {}", parse::TOPICS, to_json(&znode)));
        }
        line("Partition states".into());
        for (t, p, s) in self.partitions() {
            let st = StateZnode {
                version: 1,
                leader: s.leader,
                leader_epoch: s.leader_epoch,
                isr: &s.isr,
            };
            line(format!("{} {}", parse::state_path(t, p), to_json(&st)));
        }
        line("Topic configs".into());
        for (t, r) in self.topics().filter(|(_, r)| !r.config.is_empty()) {
            let cfg = ConfigZnode {
                version: 1,
                config: sorted(&r.config),
            };
            line(format!("{}/{t} {}", parse::TOPIC_CONFIGS, to_json(&cfg)));
        }
        line("Broker configs".into());
        for (k, v) in &self.writes {
            if let (Some(id), Value::BrokerConfig(b)) = (k.strip_prefix(keys::BROKER_CONFIGS), v) {
                let cfg = ConfigZnode {
                    version: 1,
                    config: sorted(&b.config),
                };
                line(format!("{}/{id} {}", parse::BROKER_CONFIGS, to_json(&cfg)));
            }
        }
        let moving = ReassignmentFile {
            version: 1,
            partitions: self
                .reassignments()
                .map(|(topic, partition, r)| MovingPartition {
                    topic,
                    partition,
                    replicas: &r.target,
                    original_replicas: &r.original,
                })
                .collect(),
        };
        line("Reassignments in flight (cancelling one restores its original_replicas)".into());
        line(to_json(&moving));
        let owned: Vec<String> = self
            .reassignments()
            .filter(|(_, _, r)| r.throttle_rate > 0)
            .map(|(t, p, r)| format!("{t}-{p}: {} B/s", r.throttle_rate))
            .collect();
        if !owned.is_empty() {
            line(format!(
                "Throttles owned by reassignments (removed when each ends): {}",
                owned.join(", ")
            ));
        }
        let deleting: Vec<&str> = self.topics().filter(|(_, r)| r.deleting).map(|(t, _)| t).collect();
        if !deleting.is_empty() {
            line(format!("Topics being deleted: {}", deleting.join(",")));
        }
        if self.writes.contains_key(keys::REASSIGN_CANCEL) {
            line("A cancel-all is in force: new reassignments are refused until --remove-cancel.".into());
        }
        for n in &self.notes {
            line(format!("Note: {n}"));
        }
        for s in &self.skipped {
            line(format!("Skipped: {s}"));
        }
        out
    }
}

/// Kafka's topic znode, as Ferry will hold the topic.
#[derive(Serialize)]
struct TopicZnode<'a> {
    version: u32,
    topic_id: &'a str,
    partitions: BTreeMap<u32, &'a Vec<i32>>,
    adding_replicas: BTreeMap<u32, &'a Vec<i32>>,
    removing_replicas: BTreeMap<u32, &'a Vec<i32>>,
}

/// Kafka's partition state znode.
#[derive(Serialize)]
struct StateZnode<'a> {
    version: u32,
    leader: i32,
    leader_epoch: u32,
    isr: &'a [i32],
}

/// Kafka's config znode.
#[derive(Serialize)]
struct ConfigZnode<'a> {
    version: u32,
    config: BTreeMap<&'a String, &'a String>,
}

/// Kafka's reassignment JSON, with the cancellation proposal's `original_replicas`.
#[derive(Serialize)]
struct ReassignmentFile<'a> {
    version: u32,
    partitions: Vec<MovingPartition<'a>>,
}

#[derive(Serialize)]
struct MovingPartition<'a> {
    topic: &'a str,
    partition: u32,
    replicas: &'a [i32],
    original_replicas: &'a [i32],
}

fn to_json(v: &impl Serialize) -> String {
    // Serializing plain structs of strings and numbers cannot fail.
    serde_json::to_string(v).unwrap_or_default()
}

fn join<T: ToString>(it: impl IntoIterator<Item = T>) -> String {
    it.into_iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")
}

/// A stable topic id for a topic that has none in ZooKeeper (znode versions 1 and 2), so that a
/// re-run computes the same one: FNV-1a over the cluster id and the topic name, twice seeded.
fn derived_topic_id(cluster: &str, topic: &str) -> String {
    let fnv = |seed: u64| {
        let mut h = seed;
        for b in cluster.bytes().chain([0]).chain(topic.bytes()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h
    };
    uuid::Uuid::from_u64_pair(fnv(0xcbf2_9ce4_8422_2325), fnv(0x6c62_272e_07bb_0142)).to_string()
}

fn duplicate(list: &[i32]) -> Option<i32> {
    let mut seen = BTreeSet::new();
    list.iter().copied().find(|b| !seen.insert(*b))
}

/// One topic's record and partition states, or what contradicts.
fn plan_topic(c: &ZkCluster, name: &str, t: &ZkTopic) -> Result<(TopicRecord, Vec<PartitionState>), Invalid> {
    let path = format!("{}/{name}", parse::TOPICS);
    controller::topic_name::validate_topic_name(name).map_err(|e| invalid(&path, e.message))?;
    let n = t.partitions.len() as u32;
    if t.partitions.keys().copied().ne(0..n) {
        return Err(invalid(
            &path,
            format!("the partitions are not numbered 0 to {}", n.saturating_sub(1)),
        ));
    }
    for (field, m) in [("adding_replicas", &t.adding), ("removing_replicas", &t.removing)] {
        if let Some(p) = m.keys().find(|p| **p >= n) {
            return Err(invalid(
                &path,
                format!("{field} names partition {p}, which the topic does not have"),
            ));
        }
    }
    if let Some(p) = t.states.keys().find(|p| **p >= n) {
        return Err(invalid(
            parse::state_path(name, *p),
            format!("partition {p} is not in the assignment of {name}"),
        ));
    }
    let mut states = Vec::new();
    for (p, rs) in &t.partitions {
        let tp = format!("{name}-{p}");
        if rs.is_empty() {
            return Err(invalid(&path, format!("{tp} has no replicas")));
        }
        if let Some(b) = duplicate(rs) {
            return Err(invalid(
                &path,
                format!("broker {b} appears twice in the replicas of {tp}"),
            ));
        }
        let adding = t.adding.get(p).cloned().unwrap_or_default();
        let removing = t.removing.get(p).cloned().unwrap_or_default();
        for (field, list) in [("adding_replicas", &adding), ("removing_replicas", &removing)] {
            if let Some(b) = list.iter().find(|b| !rs.contains(b)) {
                return Err(invalid(&path, format!("{field}: replica {b} is not assigned to {tp}")));
            }
        }
        if let Some(b) = adding.iter().find(|b| removing.contains(b)) {
            return Err(invalid(&path, format!("replica {b} of {tp} is both added and removed")));
        }
        if adding.len() == rs.len() {
            return Err(invalid(
                &path,
                format!("every replica of {tp} is being added: none is original"),
            ));
        }
        let spath = parse::state_path(name, *p);
        let (leader, leader_epoch, isr, epoch) = match t.states.get(p) {
            Some(s) => {
                let assigned = |b: &i32| rs.contains(b);
                if s.leader != -1 && !assigned(&s.leader) {
                    return Err(invalid(&spath, format!("replica {} is not assigned to {tp}", s.leader)));
                }
                if let Some(b) = s.isr.iter().find(|b| !assigned(b)) {
                    return Err(invalid(&spath, format!("replica {b} is not assigned to {tp}")));
                }
                if let Some(b) = duplicate(&s.isr) {
                    return Err(invalid(&spath, format!("replica {b} appears twice in the ISR")));
                }
                if s.leader_epoch < 0 {
                    return Err(invalid(&spath, format!("leader_epoch {} is negative", s.leader_epoch)));
                }
                if let Some(e) = c.controller_epoch.filter(|e| s.controller_epoch > *e) {
                    return Err(invalid(
                        &spath,
                        format!(
                            "written by controller epoch {}, later than {} in {}",
                            s.controller_epoch,
                            e,
                            parse::CONTROLLER_EPOCH
                        ),
                    ));
                }
                (
                    s.leader,
                    s.leader_epoch as u32,
                    s.isr.clone(),
                    s.zk_version.max(0) as u32,
                )
            }
            // A partition no controller has started yet: every replica may lead, as for a new
            // partition in Kafka; Ferry's controller elects the leader.
            None => (-1, 0, rs.clone(), 0),
        };
        states.push(PartitionState {
            replicas: rs.clone(),
            adding,
            removing,
            leader,
            leader_epoch,
            isr,
            partition_epoch: epoch,
            log_dirs: vec![String::new(); rs.len()],
            throttle_rate: 0,
            dir_pending: vec![],
        });
    }
    let config = c.topic_configs.get(name).cloned().unwrap_or_default();
    let known: std::collections::HashMap<String, String> = config
        .iter()
        .filter(|(k, _)| topic_config::is_known(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    topic_config::validate(&known).map_err(|e| invalid(format!("{}/{name}", parse::TOPIC_CONFIGS), e))?;
    let record = TopicRecord {
        topic_id: t
            .topic_id
            .clone()
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| derived_topic_id(&c.cluster_id, name)),
        partitions: n,
        config: config.into_iter().collect(),
        deleting: c.delete_topics.contains(name),
        // Kafka has no auto-remove throttles: imported configs are the operator's.
        auto_remove: None,
    };
    Ok((record, states))
}

/// The partitions being planned, with their reassignments.
#[derive(Default)]
struct Partitions {
    states: BTreeMap<(String, u32), PartitionState>,
    records: BTreeMap<(String, u32), ReassignmentRecord>,
}

/// Applies one entry of a reassignment znode (Kafka's, or a request) the way a Ferry submit
/// does, keeping the original replicas the entry names.
fn apply_entry(
    ps: &mut Partitions,
    e: &ReassignmentEntry,
    path: &str,
    submitted_ms: u64,
    live: &BTreeSet<i32>,
) -> Result<(), Invalid> {
    let tp = format!("{}-{}", e.topic, e.partition);
    let key = (e.topic.clone(), e.partition);
    let Some(state) = ps.states.get(&key).cloned() else {
        return Err(invalid(path, format!("{tp}: no such partition is imported")));
    };
    if e.replicas.is_empty() {
        return Err(invalid(path, format!("{tp}: the replica list is empty")));
    }
    if let Some(b) = duplicate(&e.replicas) {
        return Err(invalid(
            path,
            format!("{tp}: broker {b} appears twice in the replica list"),
        ));
    }
    let mut existing = ps.records.get(&key).cloned();
    let mut base = state.clone();
    match (&mut existing, &e.original_replicas) {
        (Some(r), Some(o)) => {
            let (a, b): (BTreeSet<_>, BTreeSet<_>) = (o.iter().collect(), r.original.iter().collect());
            if a != b || o.len() != r.original.len() {
                return Err(invalid(
                    path,
                    format!(
                        "{tp}: original_replicas {o:?} are not the replicas {:?} the running move started from",
                        r.original
                    ),
                ));
            }
            r.original = o.clone();
        }
        (None, Some(o)) => {
            if o.is_empty() || duplicate(o).is_some() {
                return Err(invalid(
                    path,
                    format!("{tp}: original_replicas {o:?} is not a replica list"),
                ));
            }
            let (started, _, _) = reassignment::replica_sets(o, o, &e.replicas);
            if state.replicas == started {
                base.replicas = o.clone();
                base.log_dirs = vec![String::new(); o.len()];
            } else if state.replicas != *o {
                return Err(invalid(
                    path,
                    format!(
                        "{tp}: the assigned replicas {:?} are neither original_replicas {o:?} nor the target followed by them {started:?}",
                        state.replicas
                    ),
                ));
            }
        }
        (_, None) => {}
    }
    if existing.is_none() && base.replicas == e.replicas {
        // Already where the entry wants it: nothing is moving.
        return Ok(());
    }
    if let Some(r) = &existing {
        if reassignment::target_of(&state) == e.replicas {
            // The same move as the running one: only the original order may have been learnt.
            ps.records.insert(key, r.clone());
            return Ok(());
        }
    }
    let sub = reassignment::submit(&base, existing.as_ref(), &e.replicas, &[], 0, submitted_ms, live);
    ps.states.insert(key.clone(), sub.state);
    match sub.record {
        Some(r) => ps.records.insert(key, r),
        None => ps.records.remove(&key),
    };
    Ok(())
}

/// The lowest throttle rate set on the listed brokers of a move, from their configs.
fn owned_rate(c: &ZkCluster, brokers: &BTreeSet<i32>) -> Option<u64> {
    brokers
        .iter()
        .filter(|b| c.throttled_rates_removal.contains(b))
        .filter_map(|b| c.broker_configs.get(b))
        .flat_map(|cfg| {
            [
                topic_config::LEADER_THROTTLED_RATE,
                topic_config::FOLLOWER_THROTTLED_RATE,
            ]
            .into_iter()
            .filter_map(|k| cfg.get(k)?.parse::<u64>().ok().filter(|r| *r > 0))
        })
        .min()
}

/// Plans the import of a typed snapshot. Problems (from parsing and from here) are in
/// `skipped`; the caller refuses to write unless it was asked to skip them.
pub fn plan(c: &ZkCluster) -> Plan {
    let mut out = Plan {
        cluster_id: c.cluster_id.clone(),
        brokers: c.brokers.clone(),
        skipped: c.problems.clone(),
        notes: c.notes.clone(),
        ..Default::default()
    };
    let live: BTreeSet<i32> = c.brokers.keys().copied().collect();
    let mut topics: BTreeMap<String, TopicRecord> = BTreeMap::new();
    let mut ps = Partitions::default();
    for (name, t) in &c.topics {
        match plan_topic(c, name, t) {
            Ok((record, states)) => {
                let mut unstarted = 0;
                for (p, s) in states.into_iter().enumerate() {
                    if !t.states.contains_key(&(p as u32)) {
                        unstarted += 1;
                    }
                    let key = (name.clone(), p as u32);
                    if reassignment::is_moving(&s) {
                        // Kafka (2.4+) keeps RS = target followed by the rest of the originals.
                        let original: Vec<i32> = s.replicas.iter().copied().filter(|r| !s.adding.contains(r)).collect();
                        ps.records.insert(
                            key.clone(),
                            ReassignmentRecord {
                                original,
                                target: reassignment::target_of(&s),
                                throttle_rate: 0,
                                submitted_ms: t.ctime_ms.max(0) as u64,
                                target_log_dirs: vec![],
                                original_log_dirs: vec![],
                            },
                        );
                    }
                    ps.states.insert(key, s);
                }
                if unstarted > 0 {
                    out.notes.push(format!(
                        "{}/{name}: {unstarted} partition(s) have no state yet; Ferry's controller elects their leaders",
                        parse::TOPICS
                    ));
                }
                topics.insert(name.clone(), record);
            }
            Err(e) => out.skipped.push(e),
        }
    }
    for name in c.topic_configs.keys().filter(|t| !c.topics.contains_key(*t)) {
        out.notes.push(format!(
            "{}/{name}: the topic does not exist; its config is not imported",
            parse::TOPIC_CONFIGS
        ));
    }
    for name in c.delete_topics.iter().filter(|t| !c.topics.contains_key(*t)) {
        out.notes
            .push(format!("{}/{name}: the topic is already gone", parse::DELETE_TOPICS));
    }
    for r in c.legacy_reassignment.iter().chain(&c.requests) {
        let mut seen = BTreeSet::new();
        for e in &r.partitions {
            let res = if seen.insert((e.topic.as_str(), e.partition)) {
                apply_entry(&mut ps, e, &r.path, r.ctime_ms.max(0) as u64, &live)
            } else {
                Err(invalid(
                    &r.path,
                    format!("{}-{}: the partition appears twice", e.topic, e.partition),
                ))
            };
            if let Err(e) = res {
                out.skipped.push(e);
            }
        }
    }
    // Throttles due for removal become owned by the reassignments that use them.
    let mut owners: BTreeSet<String> = BTreeSet::new();
    for ((t, p), r) in ps.records.iter_mut() {
        if !c.throttled_replicas_removal.contains(t) {
            continue;
        }
        let brokers: BTreeSet<i32> = r.original.iter().chain(&r.target).copied().collect();
        if let (Some(rate), Some(s)) = (owned_rate(c, &brokers), ps.states.get_mut(&(t.clone(), *p))) {
            r.throttle_rate = rate;
            s.throttle_rate = rate;
            owners.insert(t.clone());
        }
    }
    for t in &c.throttled_replicas_removal {
        if let Some(rec) = topics.get_mut(t) {
            rec.config.remove(topic_config::LEADER_THROTTLED_REPLICAS);
            rec.config.remove(topic_config::FOLLOWER_THROTTLED_REPLICAS);
        }
        if !owners.contains(t) {
            out.notes.push(format!(
                "{}: the throttled replicas of {t} were due for removal and no reassignment in flight owns them: not imported",
                parse::THROTTLED_REPLICAS_REMOVAL
            ));
        }
    }
    if c.cancel_all {
        let keys: Vec<(String, u32)> = ps.records.keys().cloned().collect();
        for key in keys {
            let (Some(r), Some(s)) = (ps.records.get(&key), ps.states.get(&key)) else {
                continue;
            };
            let unclean = topics
                .get(&key.0)
                .is_some_and(|t| topic_config::unclean_election_allowed(&t.config));
            match reassignment::cancel(s, r, &live, unclean) {
                Ok(state) => {
                    ps.states.insert(key.clone(), state);
                    ps.records.remove(&key);
                }
                Err(e) => out.skipped.push(invalid(
                    parse::REASSIGN_CANCEL,
                    format!("{}-{}: {}", key.0, key.1, e.message),
                )),
            }
        }
        out.writes.insert(
            keys::REASSIGN_CANCEL.into(),
            Value::Reassignment(ReassignmentRecord::default()),
        );
    }
    for (id, cfg) in &c.broker_configs {
        let path = format!("{}/{id}", parse::BROKER_CONFIGS);
        let mut cfg = cfg.clone();
        if c.throttled_rates_removal.contains(id) {
            cfg.remove(topic_config::LEADER_THROTTLED_RATE);
            cfg.remove(topic_config::FOLLOWER_THROTTLED_RATE);
        }
        let known: std::collections::HashMap<String, String> = cfg
            .iter()
            .filter(|(k, _)| topic_config::is_known_broker(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Err(e) = topic_config::validate_broker(&known) {
            out.skipped.push(invalid(path, e));
            continue;
        }
        if !cfg.is_empty() {
            out.writes.insert(
                keys::broker_config(*id),
                Value::BrokerConfig(BrokerConfigRecord {
                    config: cfg.into_iter().collect(),
                    auto_remove: None,
                }),
            );
        }
    }
    for b in &c.throttled_rates_removal {
        let used = ps
            .records
            .values()
            .any(|r| r.throttle_rate > 0 && (r.original.contains(b) || r.target.contains(b)));
        if !used {
            out.notes.push(format!(
                "{}: the throttle rates of broker {b} were due for removal and no reassignment in flight owns them: not imported",
                parse::THROTTLED_RATES_REMOVAL
            ));
        }
    }
    // A topic left out leaves out what refers to it.
    let kept: BTreeSet<&String> = topics.keys().collect();
    out.writes.insert(
        keys::CLUSTER_ID.into(),
        Value::ClusterId(ClusterIdRecord {
            id: c.cluster_id.clone(),
        }),
    );
    for (t, r) in &topics {
        out.writes.insert(keys::topic(t), Value::Topic(r.clone()));
    }
    for ((t, p), s) in ps.states {
        if kept.contains(&t) {
            out.writes.insert(keys::partition(&t, p), Value::Partition(s));
        }
    }
    for ((t, p), r) in ps.records {
        if kept.contains(&t) {
            out.writes.insert(keys::reassignment(&t, p), Value::Reassignment(r));
        }
    }
    out.skipped.sort();
    out.skipped.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::migrate_zk::parse::tests::snapshot;
    use crate::migrate_zk::parse::{parse, RawSnapshot};

    const BASE: &[(&str, &str)] = &[
        ("/cluster/id", r#"{"version":"1","id":"kc"}"#),
        ("/controller_epoch", "7"),
        (
            "/brokers/ids/1",
            r#"{"version":5,"host":"a","port":9092,"endpoints":["PLAINTEXT://a:9092"],"rack":null}"#,
        ),
        (
            "/brokers/ids/2",
            r#"{"version":5,"host":"b","port":9092,"endpoints":["PLAINTEXT://b:9092"],"rack":null}"#,
        ),
        (
            "/brokers/ids/3",
            r#"{"version":5,"host":"c","port":9092,"endpoints":["PLAINTEXT://c:9092"],"rack":null}"#,
        ),
    ];

    fn with(extra: &[(&str, &str)]) -> RawSnapshot {
        let mut all = BASE.to_vec();
        all.extend_from_slice(extra);
        snapshot(&all)
    }

    fn planned(extra: &[(&str, &str)]) -> Plan {
        plan(&parse(&with(extra)).unwrap())
    }

    fn state(p: &Plan, t: &str, n: u32) -> PartitionState {
        match &p.writes[&keys::partition(t, n)] {
            Value::Partition(s) => s.clone(),
            v => panic!("{v:?}"),
        }
    }

    fn record(p: &Plan, t: &str, n: u32) -> Option<ReassignmentRecord> {
        match p.writes.get(&keys::reassignment(t, n)) {
            Some(Value::Reassignment(r)) => Some(r.clone()),
            None => None,
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn in_flight_move_keeps_kafkas_sets_and_learns_the_original_order() {
        let p = planned(&[
            (
                "/brokers/topics/foo",
                r#"{"version":2,"partitions":{"0":[2,3,1],"1":[1,2]},"adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]}}"#,
            ),
            (
                "/brokers/topics/foo/partitions/0/state",
                r#"{"version":1,"leader":2,"leader_epoch":4,"controller_epoch":7,"isr":[1,2]}"#,
            ),
            (
                "/brokers/topics/foo/partitions/1/state",
                r#"{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":7,"isr":[1,2]}"#,
            ),
            (
                "/admin/reassign_partitions",
                r#"{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[2,3],"original_replicas":[2,1]}]}"#,
            ),
        ]);
        assert!(p.skipped.is_empty(), "{:?}", p.skipped);
        let s = state(&p, "foo", 0);
        assert_eq!(
            (s.replicas, s.adding, s.removing, s.leader),
            (vec![2, 3, 1], vec![3], vec![1], 2)
        );
        let r = record(&p, "foo", 0).unwrap();
        assert_eq!((r.original, r.target), (vec![2, 1], vec![2, 3]));
        assert!(record(&p, "foo", 1).is_none());
    }

    #[test]
    fn legacy_move_with_original_replicas_is_started_as_ferry_would() {
        let p = planned(&[
            ("/brokers/topics/leg", r#"{"version":1,"partitions":{"0":[1,3,2]}}"#),
            (
                "/brokers/topics/leg/partitions/0/state",
                r#"{"version":1,"leader":1,"leader_epoch":2,"controller_epoch":7,"isr":[2,1]}"#,
            ),
            (
                "/admin/reassign_partitions",
                r#"{"version":1,"partitions":[{"topic":"leg","partition":0,"replicas":[1,3],"original_replicas":[2,1]}]}"#,
            ),
        ]);
        assert!(p.skipped.is_empty(), "{:?}", p.skipped);
        let s = state(&p, "leg", 0);
        assert_eq!(
            (s.replicas.clone(), s.adding.clone(), s.removing.clone()),
            (vec![1, 3, 2], vec![3], vec![2])
        );
        let r = record(&p, "leg", 0).unwrap();
        assert_eq!(r.original, vec![2, 1], "the order comes from original_replicas");
        let back = reassignment::cancel(&s, &r, &BTreeSet::from([1, 2, 3]), false).unwrap();
        assert_eq!(back.replicas, vec![2, 1]);
    }

    #[test]
    fn throttles_due_for_removal_become_owned() {
        let p = planned(&[
            (
                "/brokers/topics/foo",
                r#"{"version":2,"partitions":{"0":[2,3,1]},"adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]}}"#,
            ),
            (
                "/brokers/topics/foo/partitions/0/state",
                r#"{"version":1,"leader":2,"leader_epoch":4,"controller_epoch":7,"isr":[1,2]}"#,
            ),
            (
                "/config/topics/foo",
                r#"{"version":1,"config":{"leader.replication.throttled.replicas":"0:1,0:2","follower.replication.throttled.replicas":"0:3","retention.ms":"100"}}"#,
            ),
            (
                "/config/brokers/1",
                r#"{"version":1,"config":{"leader.replication.throttled.rate":"5000","follower.replication.throttled.rate":"5000"}}"#,
            ),
            (
                "/config/brokers/3",
                r#"{"version":1,"config":{"leader.replication.throttled.rate":"3000","follower.replication.throttled.rate":"3000"}}"#,
            ),
            ("/admin/throttled_replicas_removal", r#"{"version":1,"topics":["foo"]}"#),
            ("/admin/throttled_rates_removal", r#"{"version":1,"brokers":[1,3]}"#),
        ]);
        assert!(p.skipped.is_empty(), "{:?}", p.skipped);
        assert_eq!(record(&p, "foo", 0).unwrap().throttle_rate, 3000);
        assert_eq!(state(&p, "foo", 0).throttle_rate, 3000);
        let Value::Topic(t) = &p.writes["/brokers/topics/foo"] else {
            panic!()
        };
        assert_eq!(t.config.len(), 1, "only retention.ms stays: {:?}", t.config);
        assert!(
            !p.writes.contains_key("/config/brokers/1"),
            "the rates were owned, nothing else was set"
        );
    }

    #[test]
    fn contradictions_name_the_znode() {
        let p = planned(&[
            ("/brokers/topics/foo", r#"{"version":1,"partitions":{"0":[1,2]}}"#),
            (
                "/brokers/topics/foo/partitions/0/state",
                r#"{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":7,"isr":[1,7]}"#,
            ),
            ("/brokers/topics/bar", r#"{"version":1,"partitions":{"0":[1,2]}}"#),
            (
                "/brokers/topics/bar/partitions/0/state",
                r#"{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":9,"isr":[1]}"#,
            ),
            ("/brokers/topics/gap", r#"{"version":1,"partitions":{"1":[1]}}"#),
            ("/brokers/topics/ok", r#"{"version":1,"partitions":{"0":[1,2]}}"#),
            (
                "/admin/reassign_partitions",
                r#"{"version":1,"partitions":[{"topic":"nope","partition":0,"replicas":[1]},{"topic":"ok","partition":0,"replicas":[3,2],"original_replicas":[3,1]}]}"#,
            ),
        ]);
        let msgs: Vec<String> = p.skipped.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            msgs,
            [
                "/admin/reassign_partitions: nope-0: no such partition is imported",
                "/admin/reassign_partitions: ok-0: the assigned replicas [1, 2] are neither original_replicas [3, 1] nor the target followed by them [3, 2, 1]",
                "/brokers/topics/bar/partitions/0/state: written by controller epoch 9, later than 7 in /controller_epoch",
                "/brokers/topics/foo/partitions/0/state: replica 7 is not assigned to foo-0",
                "/brokers/topics/gap: the partitions are not numbered 0 to 0",
            ]
        );
        assert!(p.writes.contains_key("/brokers/topics/ok") && !p.writes.contains_key("/brokers/topics/foo"));
    }

    #[test]
    fn requests_supersede_and_cancel_all_rolls_back() {
        let base = [
            (
                "/brokers/topics/foo",
                r#"{"version":3,"topic_id":"tid","partitions":{"0":[1,2]}}"#,
            ),
            (
                "/brokers/topics/foo/partitions/0/state",
                r#"{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":7,"isr":[1,2]}"#,
            ),
            (
                "/admin/reassignment_requests/request_0000000001",
                r#"{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[2,3]}]}"#,
            ),
            (
                "/admin/reassignment_requests/request_0000000002",
                r#"{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[3,1]}]}"#,
            ),
        ];
        let p = planned(&base);
        let r = record(&p, "foo", 0).unwrap();
        assert_eq!((r.original, r.target), (vec![1, 2], vec![3, 1]));
        let mut cancelled = base.to_vec();
        cancelled.push(("/admin/reassign_cancel", ""));
        let p = planned(&cancelled);
        assert!(record(&p, "foo", 0).is_none());
        assert_eq!(state(&p, "foo", 0).replicas, vec![1, 2]);
        assert!(p.writes.contains_key(keys::REASSIGN_CANCEL));
    }

    #[test]
    fn deleting_topics_and_stable_ids() {
        let extra = [
            ("/brokers/topics/old", r#"{"version":1,"partitions":{"0":[1]}}"#),
            ("/admin/delete_topics/old", ""),
            ("/admin/delete_topics/gone", ""),
        ];
        let (a, b) = (planned(&extra), planned(&extra));
        let Value::Topic(t) = &a.writes["/brokers/topics/old"] else {
            panic!()
        };
        assert!(t.deleting);
        assert_eq!(a.writes, b.writes, "a re-run plans the same values");
        assert_eq!(
            state(&a, "old", 0).isr,
            vec![1],
            "a partition without state starts with every replica"
        );
        assert!(a.notes.iter().any(|n| n.contains("/admin/delete_topics/gone")));
        assert!(a.render().contains("Topics being deleted: old"));
    }
}
