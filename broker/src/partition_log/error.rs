//! What can go wrong in a partition log.

use std::path::{Path, PathBuf};

use crate::record_batch::BatchError;

/// Errors from partition log operations.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A file system operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Data on disk is damaged in a way recovery cannot repair by truncating the tail.
    #[error("corrupt log file {path}: {detail}")]
    Corrupt { path: PathBuf, detail: String },
    /// The requested offset is not in the log.
    #[error("offset {offset} is out of range: the log holds offsets {start}..{end}")]
    OffsetOutOfRange { offset: i64, start: i64, end: i64 },
    /// A replicated batch does not start at the log end offset.
    #[error("replicated batch starts at offset {got} but the log ends at {expected}")]
    NonContiguous { expected: i64, got: i64 },
    /// An append had no records.
    #[error("cannot append an empty set of records")]
    Empty,
    /// The records do not fit in one batch.
    #[error("records too large for one batch: {0}")]
    TooLarge(#[source] BatchError),
    /// Replicated bytes are not a sequence of whole, valid batches.
    #[error("invalid replicated batch: {0}")]
    InvalidBatch(#[source] BatchError),
    /// A batch's leader epoch is older than the latest epoch already in the log.
    #[error("leader epoch {epoch} is older than the log's latest epoch {latest}")]
    StaleEpoch { epoch: u32, latest: u32 },
    /// An idempotent producer's batch is out of sequence or fenced.
    #[error("{0}")]
    Sequence(#[from] super::producer_state::SequenceError),
    /// The configuration cannot be used.
    #[error("invalid log config: {0}")]
    InvalidConfig(String),
}

/// Wraps an I/O error with what was being done to which file.
pub(crate) fn io_err(op: &'static str, path: &Path, source: std::io::Error) -> LogError {
    LogError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}
