//! One topic's record and partition states from its znodes, or the znode that contradicts.

use std::collections::BTreeSet;

use proto::ferry::{PartitionState, TopicRecord};
use proto::topic_config;

use crate::migrate_zk::parse::{self, invalid, Invalid, ZkCluster, ZkPartitionState, ZkTopic};

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

/// The first broker that appears twice in the list.
pub(super) fn duplicate(list: &[i32]) -> Option<i32> {
    let mut seen = BTreeSet::new();
    list.iter().copied().find(|b| !seen.insert(*b))
}

/// One topic's record and partition states, or what contradicts.
pub(super) fn plan_topic(
    c: &ZkCluster,
    name: &str,
    t: &ZkTopic,
) -> Result<(TopicRecord, Vec<PartitionState>), Invalid> {
    let path = format!("{}/{name}", parse::TOPICS);
    controller::topic_name::validate_topic_name(name).map_err(|e| invalid(&path, e.message))?;
    let n = t.partitions.len() as u32;
    check_numbering(name, t, &path, n)?;
    let mut states = Vec::new();
    for (p, rs) in &t.partitions {
        states.push(partition_state(c, name, t, &path, *p, rs)?);
    }
    let record = topic_record(c, name, t, n)?;
    Ok((record, states))
}

/// The partitions are 0..n, and the moves and states name only those.
fn check_numbering(name: &str, t: &ZkTopic, path: &str, n: u32) -> Result<(), Invalid> {
    if t.partitions.keys().copied().ne(0..n) {
        return Err(invalid(
            path,
            format!("the partitions are not numbered 0 to {}", n.saturating_sub(1)),
        ));
    }
    for (field, m) in [("adding_replicas", &t.adding), ("removing_replicas", &t.removing)] {
        if let Some(p) = m.keys().find(|p| **p >= n) {
            return Err(invalid(
                path,
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
    Ok(())
}

/// Partition `p`'s state from its replicas `rs`, its move and its state znode.
fn partition_state(
    c: &ZkCluster,
    name: &str,
    t: &ZkTopic,
    path: &str,
    p: u32,
    rs: &[i32],
) -> Result<PartitionState, Invalid> {
    let tp = format!("{name}-{p}");
    let adding = t.adding.get(&p).cloned().unwrap_or_default();
    let removing = t.removing.get(&p).cloned().unwrap_or_default();
    check_replicas(path, &tp, rs, &adding, &removing)?;
    let (leader, leader_epoch, isr, epoch) = match t.states.get(&p) {
        Some(s) => started(c, &parse::state_path(name, p), &tp, rs, s)?,
        // A partition no controller has started yet: every replica may lead, as for a new
        // partition in Kafka; Ferry's controller elects the leader.
        None => (-1, 0, rs.to_vec(), 0),
    };
    Ok(PartitionState {
        replicas: rs.to_vec(),
        adding,
        removing,
        leader,
        leader_epoch,
        isr,
        partition_epoch: epoch,
        log_dirs: vec![String::new(); rs.len()],
        throttle_rate: 0,
        dir_pending: vec![],
        // Given by `Partitions::adopt` to a move in flight.
        reassignment: None,
    })
}

/// The replica set is a list of distinct brokers and the move's sets are parts of it.
fn check_replicas(path: &str, tp: &str, rs: &[i32], adding: &[i32], removing: &[i32]) -> Result<(), Invalid> {
    if rs.is_empty() {
        return Err(invalid(path, format!("{tp} has no replicas")));
    }
    if let Some(b) = duplicate(rs) {
        return Err(invalid(
            path,
            format!("broker {b} appears twice in the replicas of {tp}"),
        ));
    }
    for (field, list) in [("adding_replicas", adding), ("removing_replicas", removing)] {
        if let Some(b) = list.iter().find(|b| !rs.contains(b)) {
            return Err(invalid(path, format!("{field}: replica {b} is not assigned to {tp}")));
        }
    }
    if let Some(b) = adding.iter().find(|b| removing.contains(b)) {
        return Err(invalid(path, format!("replica {b} of {tp} is both added and removed")));
    }
    if adding.len() == rs.len() {
        return Err(invalid(
            path,
            format!("every replica of {tp} is being added: none is original"),
        ));
    }
    Ok(())
}

/// Leader, leader epoch, ISR and partition epoch of a started partition, from its state znode.
fn started(
    c: &ZkCluster,
    spath: &str,
    tp: &str,
    rs: &[i32],
    s: &ZkPartitionState,
) -> Result<(i32, u32, Vec<i32>, u32), Invalid> {
    let assigned = |b: &i32| rs.contains(b);
    if s.leader != -1 && !assigned(&s.leader) {
        return Err(invalid(spath, format!("replica {} is not assigned to {tp}", s.leader)));
    }
    if let Some(b) = s.isr.iter().find(|b| !assigned(b)) {
        return Err(invalid(spath, format!("replica {b} is not assigned to {tp}")));
    }
    if let Some(b) = duplicate(&s.isr) {
        return Err(invalid(spath, format!("replica {b} appears twice in the ISR")));
    }
    if s.leader_epoch < 0 {
        return Err(invalid(spath, format!("leader_epoch {} is negative", s.leader_epoch)));
    }
    if let Some(e) = c.controller_epoch.filter(|e| s.controller_epoch > *e) {
        return Err(invalid(
            spath,
            format!(
                "written by controller epoch {}, later than {} in {}",
                s.controller_epoch,
                e,
                parse::CONTROLLER_EPOCH
            ),
        ));
    }
    Ok((
        s.leader,
        s.leader_epoch as u32,
        s.isr.clone(),
        s.zk_version.max(0) as u32,
    ))
}

/// The topic's record, with its validated config and a stable id.
fn topic_record(c: &ZkCluster, name: &str, t: &ZkTopic, n: u32) -> Result<TopicRecord, Invalid> {
    let config = c.topic_configs.get(name).cloned().unwrap_or_default();
    let known: std::collections::HashMap<String, String> = config
        .iter()
        .filter(|(k, _)| topic_config::is_known(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    topic_config::validate(&known).map_err(|e| invalid(format!("{}/{name}", parse::TOPIC_CONFIGS), e))?;
    Ok(TopicRecord {
        // ZooKeeper holds Kafka's form of the id; Ferry stores the hyphenated one, so that the
        // id Kafka wrote into each partition.metadata is the topic's id here too.
        topic_id: t
            .topic_id
            .as_deref()
            .and_then(proto::kafka_uuid::canonical)
            .unwrap_or_else(|| derived_topic_id(&c.cluster_id, name)),
        partitions: n,
        config: config.into_iter().collect(),
        deleting: c.delete_topics.contains(name),
        // Kafka has no auto-remove throttles: imported configs are the operator's.
        auto_remove: None,
    })
}
