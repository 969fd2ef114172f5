//! Log compaction, as Kafka's log cleaner does it. A log whose topic's `cleanup.policy` holds
//! `compact` keeps, past its cleaned point, at least the latest record of every key: the cleaner
//! maps each key of the dirty part (sealed segments past the cleaner checkpoint) to its latest
//! offset, then rewrites the sealed segments up to there without the records a later one of the
//! same key replaced. Offsets, timestamps and producer fields stay as they were, so each replica
//! cleans its own log and replication is unaffected. A tombstone (a null value) stays for
//! `delete.retention.ms` after the clean that first kept it (its batch then carries the delete
//! horizon, as Kafka's record batch v2 does), and goes at a later clean.
//!
//! The pure core: `policy.rs` (a topic's settings), `choose.rs` (a log's cleanable range, its
//! dirty ratio, the log to clean), `offset_map.rs` (key to latest offset, bounded in memory),
//! `retain.rs` (what a clean keeps). Around it: `batch_codec.rs` (records out of and back into
//! batches, in every codec), `clean.rs` (one clean over a log's files), `checkpoint.rs`
//! (`cleaner-offset-checkpoint`), and `driver.rs` (the cleaner threads of a broker).

pub mod batch_codec;
pub mod checkpoint;
pub mod choose;
pub mod clean;
pub mod driver;
pub mod offset_map;
pub mod policy;
pub mod retain;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_recovery;

use std::path::PathBuf;

use crate::partition_log::LogError;
use crate::record_batch::BatchError;

pub use driver::start;

/// The broker's cleaner settings, under Kafka's names.
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerConfig {
    /// `log.cleaner.enable`.
    pub enable: bool,
    /// `log.cleaner.threads`: logs cleaned at once.
    pub threads: usize,
    /// `log.cleaner.dedupe.buffer.size`: bytes of offset map, shared by the threads.
    pub dedupe_buffer_size: u64,
    /// `log.cleaner.io.max.bytes.per.second`: bytes read and written per second by all the
    /// threads together; `None` is unbounded.
    pub io_max_bytes_per_second: Option<u64>,
    /// `log.cleaner.backoff.ms`: the wait when no log needs cleaning.
    pub backoff_ms: u64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        Self {
            enable: true,
            threads: 1,
            dedupe_buffer_size: 128 << 20,
            io_max_bytes_per_second: None,
            backoff_ms: 15_000,
        }
    }
}

/// Why a clean did not finish.
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    /// Reading the log or writing the cleaned segments failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// A batch of the log does not decode; the log is left as it was.
    #[error("{path} at byte {position}: {source}")]
    Corrupt {
        /// The segment's file.
        path: PathBuf,
        /// Where the batch starts.
        position: u64,
        /// What is wrong with it.
        #[source]
        source: BatchError,
    },
    /// The log changed under the clean (a truncation, a retention, a dir move): tried again later.
    #[error("the log changed while it was cleaned")]
    Aborted,
}
