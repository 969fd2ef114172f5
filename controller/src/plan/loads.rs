//! Bytes and replica counts per broker and per dir as a planner changes them, and the choices
//! every planner shares: the dir a new replica goes to, whether a target keeps rack diversity,
//! and the move one partition's new replicas make.

use std::collections::HashMap;

use super::cluster::{ClusterModel, PartitionInfo};
use super::model::{DirId, Move, MoveState, Replica};

/// What each broker and dir holds.
#[derive(Debug, Clone, Default)]
pub struct Loads {
    /// Bytes per broker.
    pub bytes: HashMap<i32, u64>,
    /// Replicas per broker.
    pub count: HashMap<i32, u64>,
    /// Bytes per known dir.
    pub dir_bytes: HashMap<(i32, DirId), u64>,
}

impl Loads {
    /// The loads of every partition's replicas.
    pub fn of(model: &ClusterModel) -> Loads {
        let mut l = Loads::default();
        for p in &model.partitions {
            for r in &p.replicas {
                l.add(*r, p.bytes);
            }
        }
        l
    }

    /// Counts one replica of `bytes` on `r`.
    pub fn add(&mut self, r: Replica, bytes: u64) {
        *self.bytes.entry(r.broker).or_default() += bytes;
        *self.count.entry(r.broker).or_default() += 1;
        if r.dir.is_named() {
            *self.dir_bytes.entry((r.broker, r.dir)).or_default() += bytes;
        }
    }

    /// Takes one replica of `bytes` off `r`.
    pub fn remove(&mut self, r: Replica, bytes: u64) {
        let sub = |v: &mut u64, by: u64| *v = v.saturating_sub(by);
        sub(self.bytes.entry(r.broker).or_default(), bytes);
        sub(self.count.entry(r.broker).or_default(), 1);
        if r.dir.is_named() {
            sub(self.dir_bytes.entry((r.broker, r.dir)).or_default(), bytes);
        }
    }

    /// Bytes on a broker.
    pub fn broker_bytes(&self, b: i32) -> u64 {
        self.bytes.get(&b).copied().unwrap_or(0)
    }

    /// Replicas on a broker.
    pub fn broker_count(&self, b: i32) -> u64 {
        self.count.get(&b).copied().unwrap_or(0)
    }

    /// Bytes in a dir.
    pub fn dir(&self, b: i32, d: DirId) -> u64 {
        self.dir_bytes.get(&(b, d)).copied().unwrap_or(0)
    }

    /// The open dir of `broker` holding the fewest bytes (lowest id on a tie), other than
    /// `except`; [`DirId::ANY`] when the broker's dirs are not known; `None` when it may take
    /// nothing.
    pub fn pick_dir(&self, model: &ClusterModel, broker: i32, except: Option<DirId>) -> Option<DirId> {
        let open = model.open_dirs(broker)?;
        if open.is_empty() {
            return Some(DirId::ANY);
        }
        open.into_iter()
            .filter(|d| Some(*d) != except)
            .min_by_key(|d| (self.dir(broker, *d), *d))
    }
}

/// Whether replacing the replica on `out` by one on `into` keeps as many racks as before;
/// always when racks do not exist (`racks`, [`ClusterModel::racks_exist`], taken once).
pub fn keeps_racks(model: &ClusterModel, racks: bool, replicas: &[Replica], out: i32, into: i32) -> bool {
    if !racks {
        return true;
    }
    let before = model.distinct_racks(replicas.iter().map(|r| r.broker));
    let after = model.distinct_racks(replicas.iter().map(|r| r.broker).filter(|b| *b != out).chain([into]));
    after >= before
}

/// The move from `p`'s replicas to `to`: its bytes are the partition's size for each replica
/// added or sent to another dir.
pub fn move_to(p: &PartitionInfo, to: Vec<Replica>) -> Move {
    let copies = to
        .iter()
        .filter(|t| match p.replicas.iter().find(|r| r.broker == t.broker) {
            None => true,
            Some(r) => t.dir.is_named() && r.dir != t.dir,
        })
        .count() as u64;
    Move {
        partition: p.partition,
        from: p.replicas.clone().into(),
        to: to.into(),
        bytes: p.bytes.saturating_mul(copies),
        state: MoveState::Queued,
    }
}
