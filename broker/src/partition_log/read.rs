//! Reading a partition log: raw batches for replication and the Kafka listener, decoded
//! records for gRPC, and the offset for a timestamp.

use bytes::Bytes;

use super::{LogError, PartitionLog};
use crate::record_batch::{self, BatchError};

impl PartitionLog {
    pub(super) fn check_range(&self, offset: i64) -> Result<(), LogError> {
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if offset < start || offset > end {
            return Err(LogError::OffsetOutOfRange { offset, start, end });
        }
        Ok(())
    }

    /// Raw whole batches starting with the one containing `offset`, each ending at or before `upto`.
    ///
    /// Returns at least one batch if one qualifies, even if it is larger than `max_bytes`; otherwise stops
    /// before exceeding `max_bytes`. Empty at the log end offset.
    pub fn read(&self, offset: i64, max_bytes: usize, upto: i64) -> Result<Vec<u8>, LogError> {
        self.read_batches(offset, max_bytes, upto, true)
    }

    /// As [`read`](Self::read), but the first batch past `max_bytes` comes only when `min_one`
    /// (a fetch's later partitions, once an earlier one returned data, keep to their limit).
    pub fn read_batches(&self, offset: i64, max_bytes: usize, upto: i64, min_one: bool) -> Result<Vec<u8>, LogError> {
        self.check_range(offset)?;
        let mut out = Vec::new();
        if offset == self.log_end_offset() {
            return Ok(out);
        }
        let (&first_base, first) = self.segments.range(..=offset).next_back().expect("offset >= log start");
        let (mut pos, _) = first.find_batch(offset)?;
        for seg in self.segments.range(first_base..).map(|(_, s)| s) {
            let run_start = pos;
            let mut done = false;
            while pos < seg.size {
                let h = seg.header_at_checked(pos)?;
                let taken = out.len() + (pos - run_start) as usize;
                if h.next_offset() > upto || ((taken > 0 || !min_one) && taken + h.total_len > max_bytes) {
                    done = true;
                    break;
                }
                pos += h.total_len as u64;
            }
            seg.read_bytes(run_start, (pos - run_start) as usize, &mut out)?;
            if done {
                break;
            }
            pos = 0;
        }
        Ok(out)
    }

    /// Decoded records with offsets in `offset..upto`, from the batches [`read`](Self::read) would return.
    pub fn read_records(&self, offset: i64, max_bytes: usize, upto: i64) -> Result<Vec<(i64, Bytes)>, LogError> {
        let raw = Bytes::from(self.read(offset, max_bytes, upto)?);
        records_in(raw, offset, upto).map_err(|e| self.corrupt_read(offset, &e))
    }

    /// The error of batches read at `offset` that fail verification.
    pub fn corrupt_read(&self, offset: i64, e: &BatchError) -> LogError {
        LogError::Corrupt {
            path: self.dir.to_path_buf(),
            detail: format!("batch read at offset {offset} fails verification: {e}"),
        }
    }

    /// The first batch whose largest timestamp is at or after `timestamp_ms`: its base offset and
    /// that timestamp (Kafka's ListOffsets by time). In each segment from the oldest, the time
    /// index says where to start reading batch headers.
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> Result<Option<(i64, i64)>, LogError> {
        let start = self.log_start;
        let first = self.segments.range(..=start).next_back().map_or(start, |(b, _)| *b);
        for seg in self.segments.range(first..).map(|(_, s)| s) {
            let mut found = None;
            seg.headers_from(seg.time_scan_start(timestamp_ms)?, &mut |h| {
                if h.max_timestamp_ms >= timestamp_ms && h.next_offset() > start {
                    // Never an offset below the log start (a batch it cuts in two).
                    found = Some((h.base_offset.max(start), h.max_timestamp_ms));
                }
                found.is_none()
            })?;
            if let Some(f) = found {
                return Ok(Some(f));
            }
        }
        Ok(None)
    }

    /// The record with the largest timestamp among the batches that end before `upto`: its
    /// offset and that timestamp (Kafka's ListOffsets MAX_TIMESTAMP); the earliest on a tie, as
    /// Kafka's. Segments wholly before `upto` answer from their time index's largest entry; the
    /// one `upto` falls in is scanned batch by batch.
    pub fn max_timestamp_before(&self, upto: i64) -> Result<Option<(i64, i64)>, LogError> {
        // (timestamp, last offset of its batch)
        let mut best: Option<(i64, i64)> = None;
        let better = |best: &Option<(i64, i64)>, ts: i64| best.is_none_or(|(b, _)| ts > b);
        for seg in self.segments.values() {
            if seg.base >= upto {
                break;
            }
            if seg.next_offset <= upto {
                if let Some((ts, last)) = seg.max_timestamp() {
                    if better(&best, ts) {
                        best = Some((ts, last));
                    }
                }
                continue;
            }
            seg.headers_from(0, &mut |h| {
                if h.next_offset() > upto {
                    return false;
                }
                if better(&best, h.max_timestamp_ms) {
                    best = Some((h.max_timestamp_ms, h.last_offset()));
                }
                true
            })?;
        }
        let Some((ts, last)) = best else {
            return Ok(None);
        };
        let batch = self.read(last, 1, upto)?;
        let offset = record_batch::offset_of_max_timestamp(&batch).map_err(|e| LogError::Corrupt {
            path: self.dir.to_path_buf(),
            detail: format!("the batch holding offset {last} fails verification: {e}"),
        })?;
        Ok(Some((offset, ts)))
    }
}

/// The records with offsets in `from..upto` of whole batches read from a log.
pub fn records_in(raw: Bytes, from: i64, upto: i64) -> Result<Vec<(i64, Bytes)>, BatchError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < raw.len() {
        let h = record_batch::parse_header(&raw[pos..])?.ok_or(BatchError::Incomplete {
            needed: 0,
            available: raw.len() - pos,
        })?;
        let recs = record_batch::records_from_bytes(raw.slice(pos..pos + h.total_len))?;
        out.extend(recs.into_iter().filter(|(o, _)| *o >= from && *o < upto));
        pos += h.total_len;
    }
    Ok(out)
}
