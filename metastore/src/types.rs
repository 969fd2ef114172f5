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
/// A [`SEGMENT_VERSION`] segment's encoding, without its version byte, compressed with zstd.
const SEGMENT_ZSTD: u8 = 3;
/// Segments from this size up are compressed: a large transaction's staged chunks repeat key
/// prefixes, and every node writes, sends and keeps them in its log.
const COMPRESS_FROM: usize = 64 << 10;
/// Most bytes a compressed segment may expand to. Larger segments (a single value over it) are
/// not compressed, so a compressed one that expands past this is malformed, not an allocation.
const COMPRESSED_MAX: usize = 8 << 20;

/// Encodes one caller's commands as a [`Proposal`] segment, compressed from [`COMPRESS_FROM`].
pub fn encode_segment(commands: &[Command]) -> Bytes {
    let mut out = vec![SEGMENT_VERSION];
    crate::codec::encode_into(&commands, &mut out);
    if (COMPRESS_FROM..=COMPRESSED_MAX).contains(&out.len()) {
        let mut packed = vec![SEGMENT_ZSTD];
        // Level 1: the chunks are on the write path of the request that made them.
        if zstd::stream::copy_encode(&out[1..], &mut packed, 1).is_ok() && packed.len() < out.len() {
            return packed.into();
        }
    }
    out.into()
}

/// Decodes a [`Proposal`] segment. Every node decodes the same bytes alike, so a segment that
/// does not decode is refused the same way everywhere.
pub fn decode_segment(segment: &[u8]) -> Result<Vec<Command>, crate::codec::CodecError> {
    use std::io::Read;
    let Some((&SEGMENT_ZSTD, packed)) = segment.split_first() else {
        return crate::codec::decode_versions(segment, &[SEGMENT_VERSION]);
    };
    let malformed = |e: std::io::Error| crate::codec::CodecError::Malformed(format!("compressed segment: {e}"));
    let mut plain = vec![SEGMENT_VERSION];
    zstd::stream::read::Decoder::new(packed)
        .map_err(malformed)?
        .take(COMPRESSED_MAX as u64)
        .read_to_end(&mut plain)
        .map_err(malformed)?;
    if plain.len() > COMPRESSED_MAX {
        return Err(crate::codec::CodecError::Malformed(format!(
            "compressed segment expands past {COMPRESSED_MAX} bytes"
        )));
    }
    crate::codec::decode_versions(&plain, &[SEGMENT_VERSION])
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

#[cfg(test)]
mod tests {
    use super::*;

    fn puts(n: usize) -> Command {
        let ops = (0..n)
            .map(|i| Op::Put {
                key: format!("/brokers/topics/t/partitions/{i}"),
                value: Bytes::from(vec![8, 1, 8, 2, 32, 1]),
                lease: 0,
            })
            .collect();
        Command {
            request_id: Some("r".into()),
            kind: CommandKind::Txn(Txn { guards: vec![], ops }),
        }
    }

    #[test]
    fn a_large_segment_is_compressed_and_reads_back() {
        let small = encode_segment(&[puts(3)]);
        assert_eq!(small[0], SEGMENT_VERSION);
        let big = vec![puts(20_000)];
        let segment = encode_segment(&big);
        assert_eq!(segment[0], SEGMENT_ZSTD);
        let mut plain = vec![SEGMENT_VERSION];
        crate::codec::encode_into(&big, &mut plain);
        assert!(
            segment.len() * 4 < plain.len(),
            "{} of {} bytes",
            segment.len(),
            plain.len()
        );
        assert_eq!(decode_segment(&segment).expect("decodes"), big);
        assert_eq!(decode_segment(&small).expect("decodes"), vec![puts(3)]);
    }

    #[test]
    fn a_compressed_segment_that_expands_too_far_is_malformed() {
        let mut bomb = vec![SEGMENT_ZSTD];
        zstd::stream::copy_encode(&vec![0u8; COMPRESSED_MAX + 1][..], &mut bomb, 1).expect("compresses");
        assert!(bomb.len() < 4096);
        assert!(matches!(
            decode_segment(&bomb),
            Err(crate::codec::CodecError::Malformed(_))
        ));
        assert!(matches!(
            decode_segment(&[SEGMENT_ZSTD, 1, 2, 3]),
            Err(crate::codec::CodecError::Malformed(_))
        ));
    }
}
