//! The cluster as the planners see it: brokers with racks and dirs, partitions with replicas,
//! leader and bytes, and the cordons in force. Plain data a driver fills from the cluster view,
//! the brokers' dir reports and the cordon configs; no I/O here.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::model::{DirId, Names, PartitionRef, Replica};

/// One log dir of a broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirInfo {
    /// The dir.
    pub dir: DirId,
    /// Whether it failed.
    pub offline: bool,
}

/// One broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// Broker id.
    pub id: i32,
    /// Its rack, if it reported one.
    pub rack: Option<String>,
    /// Whether it is registered now.
    pub live: bool,
    /// Its log dirs; empty when not known (a replica then goes to any dir).
    pub dirs: Vec<DirInfo>,
}

/// One partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Which.
    pub partition: PartitionRef,
    /// Its replicas, preferred leader first, with their dirs where known.
    pub replicas: Vec<Replica>,
    /// The leader, -1 for none.
    pub leader: i32,
    /// Its size: what copying one replica moves.
    pub bytes: u64,
    /// Whether a reassignment is in flight (planners leave it out).
    pub moving: bool,
}

/// What no new replica may be placed on (`cordoned.log.dirs`): whole brokers and single dirs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cordons {
    /// Brokers cordoned whole (`*`).
    pub brokers: BTreeSet<i32>,
    /// Single dirs.
    pub dirs: BTreeSet<(i32, DirId)>,
}

impl Cordons {
    /// Whether `dir` of `broker` may take a new replica as far as cordons go.
    pub fn dir_open(&self, broker: i32, dir: DirId) -> bool {
        !self.brokers.contains(&broker) && !self.dirs.contains(&(broker, dir))
    }
}

/// The planners' input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterModel {
    /// What the indexes point into.
    pub names: Names,
    /// Brokers by id.
    pub brokers: BTreeMap<i32, BrokerInfo>,
    /// Every partition.
    pub partitions: Vec<PartitionInfo>,
    /// Cordons in force.
    pub cordons: Cordons,
}

impl ClusterModel {
    /// The dirs of `broker` a new replica may go to: online and not cordoned. `Some(vec![])`
    /// when the broker's dirs are not known but it is open (the replica goes to any dir);
    /// `None` when it may take nothing.
    pub fn open_dirs(&self, broker: i32) -> Option<Vec<DirId>> {
        let b = self.brokers.get(&broker)?;
        if !b.live || self.cordons.brokers.contains(&broker) {
            return None;
        }
        if b.dirs.is_empty() {
            return Some(vec![]);
        }
        let open: Vec<DirId> = b
            .dirs
            .iter()
            .filter(|d| !d.offline && self.cordons.dir_open(broker, d.dir))
            .map(|d| d.dir)
            .collect();
        (!open.is_empty()).then_some(open)
    }

    /// The rack of a broker.
    pub fn rack(&self, broker: i32) -> Option<&str> {
        self.brokers.get(&broker)?.rack.as_deref()
    }

    /// Whether racks count: at least two distinct racks among the brokers.
    pub fn racks_exist(&self) -> bool {
        let racks: BTreeSet<&str> = self.brokers.values().filter_map(|b| b.rack.as_deref()).collect();
        racks.len() >= 2
    }

    /// Distinct racks among `brokers` (a broker with no rack counts as its own).
    pub fn distinct_racks(&self, brokers: impl IntoIterator<Item = i32>) -> usize {
        let mut racks = BTreeSet::new();
        let mut no_rack = 0;
        for b in brokers {
            match self.rack(b) {
                Some(r) => {
                    racks.insert(r);
                }
                None => no_rack += 1,
            }
        }
        racks.len() + no_rack
    }

    /// Bytes held per dir, from the partitions' sizes (replicas in a dir not known are left
    /// out).
    pub fn dir_bytes(&self) -> HashMap<(i32, DirId), u64> {
        let mut out = HashMap::new();
        for p in &self.partitions {
            for r in &p.replicas {
                if r.dir.is_named() {
                    *out.entry((r.broker, r.dir)).or_default() += p.bytes;
                }
            }
        }
        out
    }

    /// The broker's dir known by `path`, if it has one.
    pub fn dir_id(&self, broker: i32, path: &str) -> Option<DirId> {
        let b = self.brokers.get(&broker)?;
        b.dirs
            .iter()
            .map(|d| d.dir)
            .find(|d| self.names.dirs.get(d.0 as usize).is_some_and(|p| p == path))
    }
}

/// Builds a [`ClusterModel`] from names, interning topics and dirs.
#[derive(Debug, Default)]
pub struct ClusterBuilder {
    model: ClusterModel,
    topics: HashMap<String, u32>,
    dirs: HashMap<String, DirId>,
}

impl ClusterBuilder {
    /// An empty cluster.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of a dir path, added if new.
    pub fn dir(&mut self, path: &str) -> DirId {
        if path.is_empty() || path == "any" {
            return DirId::ANY;
        }
        if let Some(d) = self.dirs.get(path) {
            return *d;
        }
        let d = DirId(self.model.names.dirs.len() as u32);
        self.model.names.dirs.push(path.to_string());
        self.dirs.insert(path.to_string(), d);
        d
    }

    /// The index of a topic, added if new.
    pub fn topic(&mut self, name: &str) -> u32 {
        if let Some(t) = self.topics.get(name) {
            return *t;
        }
        let t = self.model.names.topics.len() as u32;
        self.model.names.topics.push(name.to_string());
        self.topics.insert(name.to_string(), t);
        t
    }

    /// Adds a broker with its dirs as `(path, offline)`.
    pub fn broker(&mut self, id: i32, rack: Option<&str>, live: bool, dirs: &[(&str, bool)]) -> &mut Self {
        let dirs = dirs
            .iter()
            .map(|(path, offline)| DirInfo {
                dir: self.dir(path),
                offline: *offline,
            })
            .collect();
        self.model.brokers.insert(
            id,
            BrokerInfo {
                id,
                rack: rack.map(String::from),
                live,
                dirs,
            },
        );
        self
    }

    /// Adds a partition with replicas as `(broker, dir path or "")`, preferred leader first.
    pub fn partition(
        &mut self,
        topic: &str,
        partition: u32,
        leader: i32,
        bytes: u64,
        replicas: &[(i32, &str)],
    ) -> &mut Self {
        let topic = self.topic(topic);
        let replicas = replicas.iter().map(|(b, d)| Replica::new(*b, self.dir(d))).collect();
        self.model.partitions.push(PartitionInfo {
            partition: PartitionRef { topic, partition },
            replicas,
            leader,
            bytes,
            moving: false,
        });
        self
    }

    /// Marks the last partition added as moving.
    pub fn moving(&mut self) -> &mut Self {
        if let Some(p) = self.model.partitions.last_mut() {
            p.moving = true;
        }
        self
    }

    /// Cordons a whole broker.
    pub fn cordon_broker(&mut self, id: i32) -> &mut Self {
        self.model.cordons.brokers.insert(id);
        self
    }

    /// Cordons one dir.
    pub fn cordon_dir(&mut self, id: i32, path: &str) -> &mut Self {
        let d = self.dir(path);
        self.model.cordons.dirs.insert((id, d));
        self
    }

    /// The model.
    pub fn build(&self) -> ClusterModel {
        self.model.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_dirs_leave_out_cordoned_offline_and_down() {
        let mut b = ClusterBuilder::new();
        b.broker(1, Some("a"), true, &[("/d1", false), ("/d2", false), ("/d3", true)])
            .broker(2, Some("b"), true, &[])
            .broker(3, Some("b"), false, &[("/d1", false)])
            .broker(4, None, true, &[("/d1", false)])
            .cordon_dir(1, "/d2")
            .cordon_broker(4);
        let m = b.build();
        let d1 = m.dir_id(1, "/d1").expect("known");
        assert_eq!(m.open_dirs(1), Some(vec![d1]));
        assert_eq!(m.open_dirs(2), Some(vec![]));
        assert_eq!(m.open_dirs(3), None);
        assert_eq!(m.open_dirs(4), None);
        assert_eq!(m.open_dirs(9), None);
        assert!(m.racks_exist());
        assert_eq!(m.distinct_racks([1, 2, 3, 4]), 3);
    }
}
