//! The Raft type configuration and the commands that the replicated log carries.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

openraft::declare_raft_types!(
    /// Ferry's Raft types: a [`Proposal`] goes in, a [`ProposalResult`] comes out.
    pub TypeConfig:
        D = Proposal,
        R = ProposalResult,
        SnapshotData = crate::snapshot_store::SnapshotFile,
);

/// What one log entry carries: the commands of concurrent clients, batched so that one append,
/// one fsync and one replication round serve them all. Each caller's commands are encoded once,
/// by the node that takes the call, into a segment; the log, replication and forwarding move the
/// segments as bytes, and each node decodes them once, to apply. Each command still applies on
/// its own.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Proposal {
    /// Encoded command lists, applied in order.
    pub segments: Vec<Bytes>,
}

/// The layout of a [`Proposal`] segment. Committed segments are decoded again on every replay,
/// so a segment layout, once written, stays decodable: a new layout gets a new number.
const SEGMENT_VERSION: u8 = 2;

/// Encodes one caller's commands as a [`Proposal`] segment.
pub fn encode_segment(commands: &[Command]) -> Bytes {
    let mut out = vec![SEGMENT_VERSION];
    crate::codec::encode_into(&commands, &mut out);
    out.into()
}

/// Decodes a [`Proposal`] segment. Every node decodes the same bytes alike, so a segment that
/// does not decode is refused the same way everywhere.
pub fn decode_segment(segment: &[u8]) -> Result<Vec<Command>, crate::codec::CodecError> {
    crate::codec::decode_versions(segment, &[SEGMENT_VERSION])
}

/// The results of a [`Proposal`]: per segment, one per command (or one refusal for a segment
/// that does not decode).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct ProposalResult {
    /// In the order of the segments.
    pub results: Vec<Vec<CommandResult>>,
}

pub use crate::node_id::{Node, NodeId};
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
