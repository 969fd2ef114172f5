//! The plan's types: the values Ferry stores and the plan that holds them.

use std::collections::{BTreeMap, BTreeSet};

use prost::Message;
use proto::acl::{self, AccessControlEntry};
use proto::ferry::{
    BrokerConfigRecord, ClusterIdRecord, PartitionState, ReassignmentRecord, ScramUserRecord, TopicRecord,
};
use proto::keys;
use serde_json::json;

use crate::migrate_zk::parse::{Invalid, ZkBroker};
use crate::migrate_zk::security::mechanism_name;

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
    /// The cancel-all marker (a reassignment record, empty).
    Reassignment(ReassignmentRecord),
    /// `/config/brokers/<id>`.
    BrokerConfig(BrokerConfigRecord),
    /// One resource pattern's ACL entries, `/kafka-acl/...` or `/kafka-acl-extended/...`.
    Acl(BTreeSet<AccessControlEntry>),
    /// `/config/scram/<user>`, credentials sorted by mechanism.
    Scram(ScramUserRecord),
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
            Value::Acl(v) => acl::encode_acls(&v.iter().cloned().collect::<Vec<_>>()),
            Value::Scram(v) => v.encode_to_vec(),
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
            Value::Acl(_) => Value::Acl(acl::decode_acls(bytes).ok()?.into_iter().collect()),
            Value::Scram(_) => Value::Scram(sorted_credentials(ScramUserRecord::decode(bytes).ok()?)),
        })
    }

    /// Whether stored bytes hold this value. A partition whose leader, ISR and epochs Ferry's
    /// controller has moved on since the import (a later partition epoch, the same replicas)
    /// still counts: from the import on, those belong to the controller, which re-elects the
    /// leaders of brokers that are not up yet.
    pub fn same_as(&self, bytes: &[u8]) -> bool {
        self.decode_like(bytes).is_some_and(|v| self.agrees_with(&v))
    }

    /// See [`Value::same_as`].
    pub fn agrees_with(&self, stored: &Value) -> bool {
        match (self, stored) {
            (Value::Partition(zk), Value::Partition(ours)) if ours.partition_epoch > zk.partition_epoch => {
                let assignment = |s: &PartitionState| {
                    (
                        s.replicas.clone(),
                        s.adding.clone(),
                        s.removing.clone(),
                        s.throttle_rate,
                        s.reassignment.as_ref().map(|r| (r.original.clone(), r.target.clone())),
                    )
                };
                assignment(zk) == assignment(ours) && ours.leader_epoch >= zk.leader_epoch
            }
            _ => self == stored,
        }
    }

    /// The value as one line of JSON, for differences.
    pub fn describe(&self) -> String {
        let v = match self {
            Value::ClusterId(c) => json!({"id": c.id}),
            Value::Topic(t) => json!({"topic_id": t.topic_id, "partitions": t.partitions,
                "config": sorted(&t.config), "deleting": t.deleting}),
            Value::Partition(s) => json!({"replicas": s.replicas, "adding_replicas": s.adding,
                "removing_replicas": s.removing, "leader": s.leader, "leader_epoch": s.leader_epoch,
                "isr": s.isr, "partition_epoch": s.partition_epoch, "throttle_rate": s.throttle_rate,
                "original_replicas": s.reassignment.as_ref().map(|r| &r.original)}),
            Value::Reassignment(r) => json!({"original_replicas": r.original, "replicas": r.target,
                "throttle_rate": r.throttle_rate, "submitted_ms": r.submitted_ms}),
            Value::BrokerConfig(b) => json!({"config": sorted(&b.config)}),
            Value::Acl(entries) => {
                let list: Vec<AccessControlEntry> = entries.iter().cloned().collect();
                return String::from_utf8_lossy(&acl::encode_acls(&list)).into_owned();
            }
            // Mechanisms and iterations only: never a salt or a key.
            Value::Scram(r) => json!(r
                .credentials
                .iter()
                .map(|c| (mechanism_name(c.mechanism), json!({"iterations": c.iterations})))
                .collect::<BTreeMap<_, _>>()),
        };
        v.to_string()
    }
}

/// A user's credentials in mechanism order, so that two records compare by content.
fn sorted_credentials(mut r: ScramUserRecord) -> ScramUserRecord {
    r.credentials.sort_by_key(|c| c.mechanism);
    r
}

/// A config map in key order, for stable output.
pub(super) fn sorted(m: &std::collections::HashMap<String, String>) -> BTreeMap<&String, &String> {
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
    /// The topic records, by name.
    pub(super) fn topics(&self) -> impl Iterator<Item = (&str, &TopicRecord)> {
        self.writes
            .iter()
            .filter_map(|(k, v)| match (keys::parse_topic_key(k), v) {
                (Some(keys::TopicKey::Topic(t)), Value::Topic(r)) => Some((t, r)),
                _ => None,
            })
    }

    /// The partition states, by topic and partition.
    pub(super) fn partitions(&self) -> impl Iterator<Item = (&str, u32, &PartitionState)> {
        self.writes
            .iter()
            .filter_map(|(k, v)| match (keys::parse_topic_key(k), v) {
                (Some(keys::TopicKey::Partition(t, p)), Value::Partition(s)) => Some((t, p, s)),
                _ => None,
            })
    }

    /// The in-flight reassignments, by partition.
    pub fn reassignments(&self) -> impl Iterator<Item = (&str, u32, &ReassignmentRecord)> {
        self.partitions()
            .filter_map(|(t, p, s)| s.reassignment.as_deref().map(|r| (t, p, r)))
    }

    /// Counts for the closing line: topics, deleting topics, partitions, reassignments, owned
    /// throttles, broker configs, ACLs and SCRAM users.
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
            "cluster {}: {topics} topics ({deleting} being deleted), {partitions} partitions, {moving} reassignments in flight ({throttled} with a throttle that goes with them), {configs} broker configs, {}",
            self.cluster_id,
            self.security_summary()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(replicas: &[i32], leader: i32, leader_epoch: u32, partition_epoch: u32) -> Value {
        Value::Partition(PartitionState {
            replicas: replicas.to_vec(),
            isr: replicas.to_vec(),
            leader,
            leader_epoch,
            partition_epoch,
            ..Default::default()
        })
    }

    #[test]
    fn a_partition_agrees_once_the_controller_moved_its_leader_on_but_not_its_replicas() {
        let zk = state(&[3, 1], 3, 1, 1);
        assert!(zk.agrees_with(&zk.clone()));
        // Re-elected by Ferry's controller: later epochs, same replicas.
        assert!(zk.agrees_with(&state(&[3, 1], -1, 2, 2)));
        // The same partition epoch with another leader is a real difference.
        assert!(!zk.agrees_with(&state(&[3, 1], 1, 1, 1)));
        // Other replicas are a difference whatever the epochs.
        assert!(!zk.agrees_with(&state(&[3, 2], 3, 2, 2)));
        // Epochs that went backwards are a difference.
        assert!(!zk.agrees_with(&state(&[3, 1], 3, 0, 2)));
    }
}
