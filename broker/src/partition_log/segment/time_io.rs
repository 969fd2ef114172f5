//! The segment's `.timeindex` file: loading, rebuilding and writing it, and the lookups by
//! time it serves (the entries themselves are `time_index.rs`'s).

use std::os::unix::fs::FileExt;

use crate::record_batch::{BatchHeader, HEADER_LEN};

use super::super::time_index::{TimeIndex, TIME_ENTRY_LEN};
use super::super::{io_err, LogError};
use super::{maybe_index, Segment};

impl Segment {
    /// Reads the time index file's valid prefix; true if that was the whole file. Kafka
    /// preallocates the file, so only as many bytes as the segment could index are read.
    pub(super) fn load_time_index(&self) -> Result<(TimeIndex, bool), LogError> {
        let len = match std::fs::metadata(self.time_path()) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((TimeIndex::default(), true)),
            Err(e) => return Err(io_err("stat", &self.time_path(), e)),
        };
        let max_len = (self.size / HEADER_LEN as u64 + 1) * TIME_ENTRY_LEN as u64;
        let mut buf = vec![0u8; len.min(max_len) as usize];
        self.time_file
            .get(|| self.time_path())
            .and_then(|f| f.read_exact_at(&mut buf, 0))
            .map_err(|e| io_err("read", &self.time_path(), e))?;
        let (time, clean) = TimeIndex::decode(&buf, self.next_offset - self.base);
        Ok((time, clean && len <= max_len))
    }

    /// Rebuilds the time index from the batch headers, with entries where the offset index
    /// has them (and, for a sealed segment, a last one for its largest timestamp).
    pub(super) fn rebuild_time_index(&mut self, interval: u32, sealed: bool) -> Result<(), LogError> {
        let (base, mut time, mut marks, mut pos) = (self.base, TimeIndex::default(), Vec::new(), 0u64);
        self.for_each_header(&mut |h| {
            time.observe(h, base);
            let before = marks.len();
            maybe_index(&mut marks, base, pos, h.last_offset(), interval);
            if marks.len() > before {
                time.maybe_append();
            }
            pos += h.total_len as u64;
        })?;
        if sealed {
            time.maybe_append();
        }
        self.time = time;
        self.write_time_file()
    }

    /// Replaces the time index file's content with the in-memory one.
    pub(super) fn write_time_file(&self) -> Result<(), LogError> {
        let buf = self.time.encode();
        if buf.is_empty() && !self.time_file.is_open() && !self.time_path().exists() {
            return Ok(());
        }
        let f = self
            .time_file
            .get(|| self.time_path())
            .map_err(|e| io_err("open", &self.time_path(), e))?;
        f.write_all_at(&buf, 0)
            .map_err(|e| io_err("write", &self.time_path(), e))?;
        f.set_len(buf.len() as u64)
            .map_err(|e| io_err("truncate", &self.time_path(), e))
    }

    /// Adds the time index entry due now, if the largest timestamp grew since the last one.
    pub(super) fn append_time_entry(&mut self) {
        let Some(e) = self.time.maybe_append() else {
            return;
        };
        let at = ((self.time.entries().len() - 1) * TIME_ENTRY_LEN) as u64;
        if let Err(err) = self
            .time_file
            .get(|| self.time_path())
            .and_then(|f| f.write_all_at(&e.encode(), at))
        {
            // A lookup aid like the offset index: a lost entry costs a longer scan.
            tracing::warn!(path = %self.time_path().display(), error = %err, "failed to write time index entry");
            self.time.pop();
        }
    }

    /// Reads the batches after the last time index entry into its largest timestamp, so that no
    /// later entry claims less than a batch before it holds (after a truncation or a restart).
    pub(super) fn observe_tail(&mut self) -> Result<(), LogError> {
        let start = self.time.entries().last().map(|e| self.base + i64::from(e.rel));
        let pos = match start {
            Some(o) if o < self.next_offset => self.find_batch(o)?.0,
            _ => 0,
        };
        let (base, mut seen) = (self.base, TimeIndex::default());
        self.headers_from(pos, &mut |h| {
            seen.observe(h, base);
            true
        })?;
        self.time.merge_max(&seen);
        Ok(())
    }

    /// Seals the segment (it stops being the active one): its time index gets its last entry.
    pub fn seal(&mut self) {
        self.append_time_entry();
    }

    /// Position of the first batch at or after `offset`'s batch that may hold a timestamp at or
    /// after `ts`, by the time index; from there a scan finds the batch.
    pub fn time_scan_start(&self, ts: i64) -> Result<u64, LogError> {
        match self.time.all_before(ts) {
            Some(rel) => self.find_batch(self.base + i64::from(rel)).map(|(pos, _)| pos),
            None => Ok(0),
        }
    }

    /// The segment's largest timestamp and the last offset of the first batch that reached it.
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        self.time.max_entry().map(|m| (m.ts, self.base + i64::from(m.rel)))
    }

    /// The largest record timestamp, as Kafka's retention reads it: the file's modification
    /// time when no record has one.
    pub fn largest_timestamp(&self) -> i64 {
        match self.max_timestamp() {
            Some((ts, _)) if ts >= 0 => ts,
            _ => std::fs::metadata(self.log_path())
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                // Unknown: not taken for old.
                .map_or(i64::MAX, |d| d.as_millis() as i64),
        }
    }

    /// The first batch's largest timestamp, from which `segment.ms` counts (Kafka's rolling
    /// basis); `None` when the segment is empty or the batch has no timestamp.
    pub fn rolling_timestamp(&self) -> Result<Option<i64>, LogError> {
        if self.size == 0 {
            return Ok(None);
        }
        let h = self.header_at_checked(0)?;
        Ok((h.max_timestamp_ms >= 0).then_some(h.max_timestamp_ms))
    }

    /// Calls `f` for every batch header from position `pos` (a batch boundary) on, until it
    /// returns false.
    pub fn headers_from(&self, pos: u64, f: &mut dyn FnMut(&BatchHeader) -> bool) -> Result<(), LogError> {
        let mut pos = pos;
        while pos < self.size {
            let h = self.header_at_checked(pos)?;
            if !f(&h) {
                break;
            }
            pos += h.total_len as u64;
        }
        Ok(())
    }
}
