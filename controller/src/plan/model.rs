//! The plan as stored: its kind, caps, state and moves. Kept compact because a plan may hold
//! 100,000 moves or more: partitions are indexes into the plan's topic table, dirs indexes into
//! its dir table, and a move's replica lists are boxed slices (a queued move is 64 bytes plus
//! two small heap slices; see the size test).

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::caps::Caps;
use super::error::PlanError;

pub use super::bounds::MAX_PLAN_MOVES;

/// Most replicas one move may name (Kafka has no limit; a bound keeps bad input small).
pub const MAX_REPLICAS: usize = 64;

/// A log dir, as an index into [`Names::dirs`]; [`DirId::ANY`] when no dir is named or known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DirId(pub u32);

impl DirId {
    /// No dir named: the broker picks one (Kafka's "any").
    pub const ANY: DirId = DirId(u32::MAX);

    /// Whether a dir is named.
    pub fn is_named(self) -> bool {
        self != DirId::ANY
    }
}

/// A partition, as an index into [`Names::topics`] and the partition number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PartitionRef {
    /// Index into [`Names::topics`].
    pub topic: u32,
    /// Partition number.
    pub partition: u32,
}

/// One replica: its broker and the dir it is (or is to be) in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Replica {
    /// Broker id.
    pub broker: i32,
    /// Log dir on that broker, [`DirId::ANY`] when not named or not known.
    pub dir: DirId,
}

impl Replica {
    /// A replica on `broker` in `dir`.
    pub fn new(broker: i32, dir: DirId) -> Self {
        Self { broker, dir }
    }
}

/// The names a plan's indexes point into.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Names {
    /// Topic names; [`PartitionRef::topic`] indexes this.
    pub topics: Vec<String>,
    /// Absolute log dir paths; [`DirId`] indexes this.
    pub dirs: Vec<String>,
}

impl Names {
    /// The topic name of `p` ("?" for an index out of range, which [`Plan::check`] refuses).
    pub fn topic(&self, p: PartitionRef) -> &str {
        self.topics.get(p.topic as usize).map_or("?", String::as_str)
    }

    /// `topic-partition`, as Kafka's tools print a partition.
    pub fn partition_name(&self, p: PartitionRef) -> String {
        format!("{}-{}", self.topic(p), p.partition)
    }

    /// The path of `dir`, "any" when none is named.
    pub fn dir(&self, dir: DirId) -> &str {
        if !dir.is_named() {
            return "any";
        }
        self.dirs.get(dir.0 as usize).map_or("?", String::as_str)
    }
}

/// Why a move waits, was skipped or failed. Small on purpose (no strings): [`Reason`]'s
/// `Display` writes the text `show` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reason {
    /// Someone else submitted a reassignment of the partition before the plan started it.
    MovedByHand,
    /// The partition's replicas changed since the plan was made.
    ChangedByHand,
    /// The plan's reassignment was cancelled by someone else.
    CancelledByHand,
    /// The plan's reassignment was replaced by another submitted by hand.
    SupersededByHand,
    /// The topic or partition was deleted.
    PartitionGone,
    /// A target broker is not registered.
    BrokerDown(i32),
    /// A target dir is offline.
    DirOffline(i32, DirId),
    /// The ISR is below `min.insync.replicas` and the move would remove replicas.
    IsrBelowMin {
        /// ISR size now.
        isr: u16,
        /// The topic's `min.insync.replicas`.
        min: u16,
    },
    /// The target has fewer replicas than `min.insync.replicas`.
    TargetBelowMin {
        /// Replicas in the target.
        replicas: u16,
        /// The topic's `min.insync.replicas`.
        min: u16,
    },
    /// Racks exist and every target replica would be in one rack.
    OneRack,
    /// The plan was cancelled before the move started.
    Cancelled,
    /// The plan was cancelled and the move in flight was rolled back.
    RolledBack,
    /// An undrain dropped the move.
    Undrained,
}

impl Reason {
    /// The text `show` prints, naming dirs through `names`.
    pub fn describe(&self, names: &Names) -> String {
        match self {
            Reason::DirOffline(b, d) => format!("dir {} of broker {b} is offline", names.dir(*d)),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::MovedByHand => write!(f, "moved by hand"),
            Reason::ChangedByHand => write!(f, "replicas changed by hand since the plan was made"),
            Reason::CancelledByHand => write!(f, "reassignment cancelled by hand"),
            Reason::SupersededByHand => write!(f, "reassignment replaced by hand"),
            Reason::PartitionGone => write!(f, "partition deleted"),
            Reason::BrokerDown(b) => write!(f, "broker {b} is down"),
            Reason::DirOffline(b, d) => write!(f, "dir {} of broker {b} is offline", d.0),
            Reason::IsrBelowMin { isr, min } => {
                write!(f, "ISR of {isr} is below min.insync.replicas {min}")
            }
            Reason::TargetBelowMin { replicas, min } => {
                write!(f, "target of {replicas} replicas is below min.insync.replicas {min}")
            }
            Reason::OneRack => write!(f, "every target replica would be in one rack"),
            Reason::Cancelled => write!(f, "plan cancelled"),
            Reason::RolledBack => write!(f, "rolled back by the plan's cancel"),
            Reason::Undrained => write!(f, "dropped by undrain"),
        }
    }
}

/// Where one move stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MoveState {
    /// Not started; starts when a slot frees.
    Queued,
    /// Not started, and cannot start until the reason clears.
    Waiting(Reason),
    /// Submitted from a view of the cluster at this revision: its reassignment shows in views
    /// after it, and a view not after it cannot judge the move yet.
    Running {
        /// The revision of the view the move was started from.
        since: u64,
    },
    /// The partition reached its target.
    Done,
    /// Left out, for good.
    Skipped(Reason),
    /// Started, then stopped by a fault (its reassignment is rolled back).
    Failed(Reason),
}

impl MoveState {
    /// Whether the move will not change any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, MoveState::Done | MoveState::Skipped(_) | MoveState::Failed(_))
    }

    /// Whether the move may still start.
    pub fn is_pending(self) -> bool {
        matches!(self, MoveState::Queued | MoveState::Waiting(_))
    }
}

/// One partition's move: from its replicas when planned to the target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    /// The partition.
    pub partition: PartitionRef,
    /// Its replicas (with dirs, where known) when the plan was made, preferred leader first.
    pub from: Box<[Replica]>,
    /// The target replicas, preferred leader first; a named dir is where the replica must go.
    pub to: Box<[Replica]>,
    /// Bytes to copy: the partition's size for each replica added or moved to another dir.
    pub bytes: u64,
    /// Where it stands.
    pub state: MoveState,
}

/// The brokers a move (or a reassignment in flight) loads: it copies into `into`, removes from
/// `out`, and moves between dirs of `dir`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Load {
    /// Brokers that receive a new replica.
    pub into: Vec<i32>,
    /// Brokers that lose a replica.
    pub out: Vec<i32>,
    /// Brokers that move a replica they keep to another dir.
    pub dir: Vec<i32>,
}

impl Move {
    /// The brokers this move loads.
    pub fn load(&self) -> Load {
        let has = |set: &[Replica], b: i32| set.iter().any(|r| r.broker == b);
        let into = self
            .to
            .iter()
            .filter(|r| !has(&self.from, r.broker))
            .map(|r| r.broker)
            .collect();
        let out = self
            .from
            .iter()
            .filter(|r| !has(&self.to, r.broker))
            .map(|r| r.broker)
            .collect();
        let dir = self
            .to
            .iter()
            .filter(|t| t.dir.is_named())
            .filter(|t| self.from.iter().any(|f| f.broker == t.broker && f.dir != t.dir))
            .map(|t| t.broker)
            .collect();
        Load { into, out, dir }
    }

    /// Whether the move removes a replica from some broker.
    pub fn removes(&self) -> bool {
        self.from.iter().any(|f| !self.to.iter().any(|t| t.broker == f.broker))
    }
}

/// What a plan does, with the brokers or dirs it was made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PlanKind {
    /// Every replica off one broker.
    DrainBroker {
        /// The broker drained.
        broker: i32,
    },
    /// Every replica off one dir, onto the broker's other dirs.
    DrainDir {
        /// The broker.
        broker: i32,
        /// The dir drained.
        dir: DirId,
    },
    /// Brokers within a tolerance by replica count and bytes.
    Balance {
        /// Allowed distance from the mean, in percent.
        tolerance_pct: u32,
    },
    /// The dirs of one broker within a tolerance by bytes.
    BalanceDirs {
        /// The broker.
        broker: i32,
        /// Allowed distance from the mean, in percent.
        tolerance_pct: u32,
    },
}

/// Where a plan stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PlanState {
    /// Starting moves as slots free.
    Running,
    /// Starting nothing; moves in flight go on.
    Paused,
    /// Rolling back the moves in flight; nothing starts.
    Cancelling,
    /// Every move done or skipped.
    Done,
    /// Cancelled, and every move it started rolled back or done.
    Cancelled,
    /// Every move ended, and some failed.
    Failed,
}

impl PlanState {
    /// Whether the plan has ended.
    pub fn is_terminal(self) -> bool {
        matches!(self, PlanState::Done | PlanState::Cancelled | PlanState::Failed)
    }
}

/// A plan: its moves and how they run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Chosen by whoever stores it; unique among stored plans.
    pub id: u64,
    /// What it does.
    pub kind: PlanKind,
    /// Concurrency caps.
    pub caps: Caps,
    /// Replication throttle in bytes/s the plan's moves carry; 0 for none.
    pub throttle_rate: u64,
    /// Where it stands.
    pub state: PlanState,
    /// What its indexes point into.
    pub names: Names,
    /// The moves, in the order they start.
    pub moves: Vec<Move>,
}

impl Plan {
    /// The plan's bytes, behind the store's format byte (bincode, as the metastore encodes).
    pub fn encode(&self) -> Vec<u8> {
        metastore::codec::encode(self)
    }

    /// A stored plan, checked with [`Plan::check`].
    pub fn decode(bytes: &[u8]) -> Result<Plan, PlanError> {
        let plan: Plan = metastore::codec::decode_stored(bytes).map_err(|e| PlanError::Malformed(e.to_string()))?;
        plan.check()?;
        Ok(plan)
    }

    /// Checks what a stored or submitted plan may not hold: too many moves, indexes out of
    /// range, a replica list empty, too long or naming a broker twice, a partition twice.
    pub fn check(&self) -> Result<(), PlanError> {
        if self.moves.len() > MAX_PLAN_MOVES {
            return Err(PlanError::TooManyMoves {
                moves: self.moves.len(),
            });
        }
        self.caps.check()?;
        let mut seen = BTreeSet::new();
        for m in &self.moves {
            let name = || self.names.partition_name(m.partition);
            if m.partition.topic as usize >= self.names.topics.len() {
                return Err(PlanError::BadMove {
                    partition: name(),
                    reason: "topic index out of range".into(),
                });
            }
            if !seen.insert(m.partition) {
                return Err(PlanError::BadMove {
                    partition: name(),
                    reason: "the partition has two moves".into(),
                });
            }
            for (what, list) in [("from", &m.from), ("to", &m.to)] {
                if list.is_empty() || list.len() > MAX_REPLICAS {
                    return Err(PlanError::BadMove {
                        partition: name(),
                        reason: format!("{what}: {} replicas (1 to {MAX_REPLICAS} allowed)", list.len()),
                    });
                }
                let mut brokers = BTreeSet::new();
                for r in list.iter() {
                    if !brokers.insert(r.broker) {
                        return Err(PlanError::BadMove {
                            partition: name(),
                            reason: format!("{what}: broker {} appears twice", r.broker),
                        });
                    }
                    if r.dir.is_named() && r.dir.0 as usize >= self.names.dirs.len() {
                        return Err(PlanError::BadMove {
                            partition: name(),
                            reason: format!("{what}: dir index {} out of range", r.dir.0),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// How many moves are in each state: (queued or waiting, running, done, skipped or failed).
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let mut c = (0, 0, 0, 0);
        for m in &self.moves {
            match m.state {
                MoveState::Queued | MoveState::Waiting(_) => c.0 += 1,
                MoveState::Running { .. } => c.1 += 1,
                MoveState::Done => c.2 += 1,
                MoveState::Skipped(_) | MoveState::Failed(_) => c.3 += 1,
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Plan {
        Plan {
            id: 7,
            kind: PlanKind::DrainBroker { broker: 3 },
            caps: Caps::default(),
            throttle_rate: 1 << 20,
            state: PlanState::Running,
            names: Names {
                topics: vec!["t".into()],
                dirs: vec!["/d1".into()],
            },
            moves: vec![Move {
                partition: PartitionRef { topic: 0, partition: 1 },
                from: vec![Replica::new(3, DirId(0)), Replica::new(1, DirId::ANY)].into(),
                to: vec![Replica::new(2, DirId::ANY), Replica::new(1, DirId::ANY)].into(),
                bytes: 100,
                state: MoveState::Waiting(Reason::BrokerDown(2)),
            }],
        }
    }

    #[test]
    fn a_queued_move_is_small() {
        // 64 bytes inline, plus two boxed replica slices of 8 bytes per replica: about 112 bytes
        // for a replication factor of 3, so 100,000 queued moves take about 11 MiB.
        assert!(std::mem::size_of::<Move>() <= 64, "{}", std::mem::size_of::<Move>());
        assert_eq!(std::mem::size_of::<Replica>(), 8);
        assert!(std::mem::size_of::<MoveState>() <= 16);
    }

    #[test]
    fn a_plan_reads_back_as_written() {
        let plan = sample();
        assert_eq!(Plan::decode(&plan.encode()).expect("decodes"), plan);
        assert!(matches!(Plan::decode(&[]), Err(PlanError::Malformed(_))));
    }

    #[test]
    fn a_stored_plan_with_bad_indexes_or_lists_is_refused() {
        let mut plan = sample();
        plan.moves[0].partition.topic = 5;
        assert!(plan.check().unwrap_err().to_string().contains("topic index"));
        let mut plan = sample();
        plan.moves[0].to = vec![Replica::new(1, DirId::ANY), Replica::new(1, DirId::ANY)].into();
        assert!(plan.check().unwrap_err().to_string().contains("broker 1 appears twice"));
        let mut plan = sample();
        plan.moves[0].to = vec![Replica::new(1, DirId(9))].into();
        assert!(plan.check().unwrap_err().to_string().contains("dir index 9"));
        let mut plan = sample();
        plan.moves.push(plan.moves[0].clone());
        assert!(plan.check().unwrap_err().to_string().contains("two moves"));
    }

    #[test]
    fn a_move_loads_the_brokers_it_adds_removes_and_moves_between_dirs() {
        let m = Move {
            partition: PartitionRef { topic: 0, partition: 0 },
            from: vec![Replica::new(1, DirId(0)), Replica::new(2, DirId(1))].into(),
            to: vec![Replica::new(3, DirId::ANY), Replica::new(2, DirId(2))].into(),
            bytes: 0,
            state: MoveState::Queued,
        };
        assert_eq!(
            m.load(),
            Load {
                into: vec![3],
                out: vec![1],
                dir: vec![2]
            }
        );
        assert!(m.removes());
        assert_eq!(
            Reason::DirOffline(2, DirId(0)).describe(&Names {
                topics: vec![],
                dirs: vec!["/a".into()]
            }),
            "dir /a of broker 2 is offline"
        );
    }
}
