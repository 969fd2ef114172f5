//! One partition's read, the same for every edge: the offset checked against the log, the
//! batches up to what the isolation makes visible, within the read's limit.

use bytes::Bytes;
use proto::errors::ErrorCode;

use super::plan::{Found, Isolation, ReadLimit};
use crate::produce::storage_error;
use crate::replica::{Replica, ReplicaError};
use crate::replica_manager::BrokerCore;

/// What one read of a partition saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogRead {
    /// The high watermark before the read.
    pub high_watermark: i64,
    /// The log start offset.
    pub log_start: i64,
    /// The log end offset.
    pub log_end: i64,
    /// Whole batches from the fetch offset.
    pub batches: Bytes,
}

impl LogRead {
    /// What the read means for the wait.
    pub fn found(&self) -> Found {
        Found::Bytes(self.batches.len())
    }
}

/// Reads `r` from `offset` within `limit`, up to where `isolation` lets it: OFFSET_OUT_OF_RANGE
/// outside the log, nothing at or past the visible end, KAFKA_STORAGE_ERROR (and the dir
/// reported) when the disk fails.
pub fn read_log(
    core: &BrokerCore,
    r: &Replica,
    offset: i64,
    isolation: Isolation,
    limit: ReadLimit,
) -> Result<LogRead, ReplicaError> {
    // One lock at a time, `state` before `log`, as everywhere.
    let hw = r.state().high_watermark;
    let log = r.log();
    let (start, leo) = (log.log_start_offset(), log.log_end_offset());
    if offset < start || offset > leo {
        return Err(ReplicaError::new(
            ErrorCode::OFFSET_OUT_OF_RANGE,
            format!(
                "{}: fetch offset {offset} is outside the log ({start}..{leo})",
                r.name()
            ),
        ));
    }
    let end = isolation.end(hw, leo);
    // Past the visible end, or with no room left, there is nothing to read.
    let batches = if offset >= end || (limit.max_bytes == 0 && !limit.min_one) {
        Bytes::new()
    } else {
        let raw = log
            .read_batches(offset, limit.max_bytes, end, limit.min_one)
            .map_err(|e| storage_error(core, r, e))?;
        Bytes::from(raw)
    };
    Ok(LogRead {
        high_watermark: hw,
        log_start: start,
        log_end: leo,
        batches,
    })
}
