//! The Raft type configuration and the commands that the replicated log carries.

use std::io::Cursor;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

openraft::declare_raft_types!(
    /// Ferry's Raft types: a [`Proposal`] goes in, a [`ProposalResult`] comes out.
    pub TypeConfig:
        D = Proposal,
        R = ProposalResult,
);

/// What one log entry carries: the commands of concurrent clients, batched so that one append,
/// one fsync and one replication round serve them all. Each command still applies on its own.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Proposal {
    /// The commands, applied in order.
    pub commands: Vec<Command>,
}

/// The results of a [`Proposal`], one per command.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct ProposalResult {
    /// In the order of the commands.
    pub results: Vec<CommandResult>,
}

/// Node ids are plain numbers, as Kafka's broker ids are.
pub type NodeId = u64;
/// A node's address as stored in the membership.
pub type Node = openraft::BasicNode;
/// The Raft handle for this store.
pub type Raft = openraft::Raft<TypeConfig>;
/// A log entry.
pub type Entry = openraft::Entry<TypeConfig>;
/// A log id.
pub type LogId = openraft::LogId<NodeId>;
/// A storage error as openraft wants it.
pub type StorageError = openraft::StorageError<NodeId>;

impl Op {
    /// Roughly how many bytes the operation takes in the log.
    pub fn approx_size(&self) -> usize {
        16 + match self {
            Op::Put { key, value, .. } => key.len() + value.len(),
            Op::Delete { key } => key.len(),
            Op::DeletePrefix { prefix } => prefix.len(),
        }
    }
}

impl Guard {
    /// Roughly how many bytes the guard takes in the log.
    pub fn approx_size(&self) -> usize {
        16 + self.key.len()
    }
}

impl Command {
    /// Roughly how many bytes the command takes in the log.
    pub fn approx_size(&self) -> usize {
        let ops = |ops: &[Op]| ops.iter().map(Op::approx_size).sum::<usize>();
        64 + match &self.kind {
            CommandKind::Txn(t)
            | CommandKind::TxnCommit { txn: t, .. }
            | CommandKind::TxnCommitCounted { txn: t, .. } => {
                ops(&t.ops) + t.guards.iter().map(Guard::approx_size).sum::<usize>()
            }
            CommandKind::TxnStage { ops: o, guards, .. } => {
                ops(o) + guards.iter().map(Guard::approx_size).sum::<usize>()
            }
            _ => 0,
        }
    }
}

impl CommandResult {
    /// The store's revision right after the command applied (0 when it carries none).
    pub fn revision(&self) -> u64 {
        match self {
            CommandResult::Txn { revision, .. } | CommandResult::LeaseRevoked { revision, .. } => *revision,
            CommandResult::LeaseGranted { id, .. } => *id,
            CommandResult::Empty | CommandResult::Staged { .. } | CommandResult::Rejected { .. } => 0,
        }
    }
}

/// One replicated write. Every write, single key or not, is a [`Txn`] or a lease change.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Command {
    /// Client-chosen id; a retry carrying the same id is applied once.
    pub request_id: Option<String>,
    /// What to do.
    pub kind: CommandKind,
}

/// The kinds of replicated write.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum CommandKind {
    /// Guards and operations applied all or nothing.
    Txn(Txn),
    /// Create a lease; its id is the revision of this entry.
    LeaseGrant {
        /// Time to live without keep-alive.
        ttl_ms: u64,
    },
    /// Remove a lease and every key bound to it (a client revoke or a leader-decided expiry).
    LeaseRevoke {
        /// The lease.
        id: u64,
    },
    /// Part of a transaction too large for one log entry: its guards and operations are held,
    /// invisible, until [`CommandKind::TxnCommit`] checks and applies them all at once.
    TxnStage {
        /// Names the staged transaction.
        txn_id: String,
        /// This chunk's place in the transaction: chunks may be proposed concurrently and
        /// applied in any order, and are put back in this order at the commit.
        seq: u32,
        /// Guards to add (checked at the commit, before the commit's own).
        guards: Vec<Guard>,
        /// Operations to add.
        ops: Vec<Op>,
        /// Leader's wall clock when the chunk was proposed, for expiring abandoned stages.
        started_ms: u64,
    },
    /// As [`CommandKind::TxnCommitCounted`] without the chunk count: written by older nodes and
    /// kept so that their log entries still decode (variants are encoded by position).
    TxnCommit {
        /// The staged transaction.
        txn_id: String,
        /// Guards and final operations.
        txn: Txn,
    },
    /// Drops a staged transaction.
    TxnAbort {
        /// The staged transaction.
        txn_id: String,
    },
    /// Applies a staged transaction's operations followed by `txn`'s, if every chunk is there and
    /// the staged guards and then `txn`'s hold.
    TxnCommitCounted {
        /// The staged transaction.
        txn_id: String,
        /// How many chunks were staged: a commit that finds another number (some expired or
        /// were aborted) is refused rather than applying part of the transaction.
        chunks: u32,
        /// Guards and final operations.
        txn: Txn,
    },
}

/// A transaction: when every guard holds, every op is applied, in one revision.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Txn {
    /// Conditions, checked in order.
    pub guards: Vec<Guard>,
    /// Changes, applied in order.
    pub ops: Vec<Op>,
}

/// A condition on one key.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Guard {
    /// The key checked.
    pub key: String,
    /// What must hold.
    pub check: Check,
}

/// What a guard checks.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Check {
    /// The key exists.
    Exists,
    /// The key does not exist.
    Absent,
    /// The key's version equals this (0 means absent).
    Version(u64),
    /// The key's mod revision equals this (0 means absent).
    ModRevision(u64),
    /// The key exists with exactly this value.
    Value(Bytes),
    /// The log entry was proposed by the Raft leader of this term (the key is not read).
    RaftTerm(u64),
}

/// One change.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Op {
    /// Set a key, optionally bound to a lease (0 for none).
    Put {
        /// Key.
        key: String,
        /// Value.
        value: Bytes,
        /// Lease id or 0.
        lease: u64,
    },
    /// Remove a key.
    Delete {
        /// Key.
        key: String,
    },
    /// Remove every key under a prefix.
    DeletePrefix {
        /// Prefix.
        prefix: String,
    },
}

/// What applying a [`Command`] produced.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub enum CommandResult {
    /// A non-command entry (blank or membership).
    #[default]
    Empty,
    /// A transaction's outcome.
    Txn {
        /// The revision of the entry.
        revision: u64,
        /// Whether every guard held (and so the ops were applied).
        succeeded: bool,
        /// The first guard that failed and why.
        failed_guard: Option<(u32, String)>,
        /// Keys removed by delete operations.
        deleted: u64,
    },
    /// A lease was created.
    LeaseGranted {
        /// The lease id.
        id: u64,
        /// Its time to live.
        ttl_ms: u64,
    },
    /// A lease was removed, or was already gone.
    LeaseRevoked {
        /// Whether it existed.
        found: bool,
        /// The revision of the entry.
        revision: u64,
    },
    /// Operations were staged (or, for an abort, dropped).
    Staged {
        /// Operations now held for the transaction.
        ops: u64,
    },
    /// The command could not apply as a whole (for example, a put names a lease that is gone).
    Rejected {
        /// Why, for people.
        reason: String,
    },
}
