//! The cluster metadata as one in-memory view, built from the keyspace under `/brokers/` and
//! kept current by watch events. The controller and the brokers share it.

use std::collections::{BTreeMap, BTreeSet};

use prost::Message;

use crate::ferry::{BrokerRegistration, PartitionState, TopicRecord};
use crate::keys::{self, TopicKey};

/// A partition's state and the revision it was written at (the guard for the next change).
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionEntry {
    /// The stored state.
    pub state: PartitionState,
    /// Mod revision of its key.
    pub mod_revision: u64,
}

/// A topic with its partitions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopicEntry {
    /// The topic record, `None` while only partition keys have been seen.
    pub record: Option<TopicRecord>,
    /// Mod revision of the topic key.
    pub mod_revision: u64,
    /// Partitions by number.
    pub partitions: BTreeMap<u32, PartitionEntry>,
}

impl TopicEntry {
    /// A topic config value, if set.
    pub fn config(&self, key: &str) -> Option<&str> {
        self.record.as_ref()?.config.get(key).map(String::as_str)
    }
}

/// Brokers and topics as stored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterView {
    /// Registered (live) brokers by id.
    pub brokers: BTreeMap<i32, BrokerRegistration>,
    /// Topics by name.
    pub topics: BTreeMap<String, TopicEntry>,
    /// Values that failed to decode, by key; kept so that nobody acts on them silently.
    pub undecodable: BTreeSet<String>,
}

impl ClusterView {
    /// Applies one stored key: `Some(value)` for a put, `None` for a delete. Keys outside the
    /// brokers' keyspace are ignored.
    pub fn apply(&mut self, key: &str, value: Option<&[u8]>, mod_revision: u64) {
        self.undecodable.remove(key);
        if let Some(id) = keys::parse_broker_key(key) {
            match value.map(BrokerRegistration::decode) {
                Some(Ok(reg)) => {
                    self.brokers.insert(id, reg);
                }
                Some(Err(_)) => {
                    self.undecodable.insert(key.to_string());
                    self.brokers.remove(&id);
                }
                None => {
                    self.brokers.remove(&id);
                }
            }
            return;
        }
        match keys::parse_topic_key(key) {
            Some(TopicKey::Topic(t)) => match value.map(TopicRecord::decode) {
                Some(Ok(rec)) => {
                    let e = self.topics.entry(t.to_string()).or_default();
                    e.record = Some(rec);
                    e.mod_revision = mod_revision;
                }
                Some(Err(_)) => {
                    self.undecodable.insert(key.to_string());
                }
                None => {
                    self.topics.remove(t);
                }
            },
            Some(TopicKey::Partition(t, p)) => match value.map(PartitionState::decode) {
                Some(Ok(state)) => {
                    let e = self.topics.entry(t.to_string()).or_default();
                    e.partitions.insert(p, PartitionEntry { state, mod_revision });
                }
                Some(Err(_)) => {
                    self.undecodable.insert(key.to_string());
                }
                None => {
                    if let Some(e) = self.topics.get_mut(t) {
                        e.partitions.remove(&p);
                        if e.record.is_none() && e.partitions.is_empty() {
                            self.topics.remove(t);
                        }
                    }
                }
            },
            None => {}
        }
    }

    /// Applies a batch of changes, after dropping everything held when `reset` is set.
    pub fn apply_all<'a>(&mut self, reset: bool, changes: impl IntoIterator<Item = (&'a str, Option<&'a [u8]>, u64)>) {
        if reset {
            *self = ClusterView::default();
        }
        for (key, value, rev) in changes {
            self.apply(key, value, rev);
        }
    }

    /// Ids of registered brokers.
    pub fn live_brokers(&self) -> BTreeSet<i32> {
        self.brokers.keys().copied().collect()
    }

    /// The brokers that hold each partition's replica in a failed log dir.
    pub fn offline_replicas(&self) -> BTreeMap<(String, u32), BTreeSet<i32>> {
        let mut out: BTreeMap<(String, u32), BTreeSet<i32>> = BTreeMap::new();
        for (id, b) in &self.brokers {
            for tp in &b.offline_replicas {
                out.entry((tp.topic.clone(), tp.partition)).or_default().insert(*id);
            }
        }
        out
    }

    /// One partition, if it exists.
    pub fn partition(&self, topic: &str, partition: u32) -> Option<&PartitionEntry> {
        self.topics.get(topic)?.partitions.get(&partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_follows_puts_and_deletes() {
        let mut v = ClusterView::default();
        let reg = BrokerRegistration {
            id: 1,
            endpoint: "h:1".into(),
            ..Default::default()
        };
        v.apply(&keys::broker(1), Some(&reg.encode_to_vec()), 3);
        let st = PartitionState {
            replicas: vec![1],
            leader: 1,
            isr: vec![1],
            ..Default::default()
        };
        v.apply(&keys::topic("t"), Some(&TopicRecord::default().encode_to_vec()), 4);
        v.apply(&keys::partition("t", 0), Some(&st.encode_to_vec()), 4);
        assert_eq!(v.live_brokers(), BTreeSet::from([1]));
        assert_eq!(v.partition("t", 0).map(|p| p.mod_revision), Some(4));
        v.apply(&keys::partition("t", 0), None, 5);
        v.apply(&keys::topic("t"), None, 5);
        v.apply(&keys::broker(1), None, 6);
        assert!(v.topics.is_empty() && v.brokers.is_empty());
        v.apply(&keys::broker(2), Some(b"\xff\xff"), 7);
        assert!(v.undecodable.contains(&keys::broker(2)));
    }
}
