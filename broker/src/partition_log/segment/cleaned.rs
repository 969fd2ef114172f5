//! A segment written under a suffix (Kafka's `.cleaned`): the log cleaner's output, built by the
//! same appends, offset index and time index as the log's own segments, then renamed into place
//! (`replace.rs`).

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::record_batch::BatchHeader;

use super::super::{io_err, LogError};
use super::{file_path, open_rw, Segment};

/// The `.log`, `.index` and `.timeindex` paths of the segment at `base`, each followed by `suffix`.
pub(in crate::partition_log) fn suffixed_paths(dir: &Path, base: i64, suffix: &str) -> [PathBuf; 3] {
    ["log", "index", "timeindex"].map(|ext| file_path(dir, base, ext, suffix))
}

impl Segment {
    /// Creates an empty segment at `base` whose files carry `suffix` after their usual names
    /// (stray files of those names are emptied; the time index is made with its first entry).
    pub fn create_suffixed(dir: &Arc<Path>, base: i64, suffix: &'static str) -> Result<Self, LogError> {
        let seg = Segment::empty(dir.clone(), base, suffix);
        let [log_path, index_path, time_path] = seg.paths();
        drop(open_rw(&log_path, true)?);
        drop(open_rw(&index_path, true)?);
        match std::fs::remove_file(&time_path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_err("remove", &time_path, e)),
            _ => {}
        }
        Ok(seg)
    }

    /// Appends `run`, whole batches back to back whose headers are `headers`, with one write:
    /// the cleaner's output comes in many small batches.
    pub fn append_run(&mut self, run: &[u8], headers: &[BatchHeader], interval: u32) -> Result<(), LogError> {
        let start = self.size;
        let f = self
            .log
            .get(|| self.log_path())
            .map_err(|e| io_err("open", &self.log_path(), e))?;
        if let Err(e) = f.write_all_at(run, start) {
            let _ = f.set_len(start);
            return Err(io_err("write", &self.log_path(), e));
        }
        let mut pos = start;
        for h in headers {
            self.note_batch(pos, h, interval);
            pos += h.total_len as u64;
        }
        debug_assert_eq!(pos, start + run.len() as u64);
        Ok(())
    }
}
