//! The log start offset and the deletion of whole segments, as Kafka's log does them:
//! retention and DeleteRecords move the start up, a follower follows its leader's, and the
//! segments wholly below it go. A deleted segment's files are first renamed with the
//! [`DELETED_SUFFIX`] (the log no longer sees them: a crash then loses nothing it needs), and
//! removed later by [`remove_deleted_files`] (Kafka's `file.delete.delay.ms` lets reads that
//! already hold them finish). Opening a log removes leftover ones.

use std::fs;
use std::path::{Path, PathBuf};

use super::retention::{self, SegmentInfo};
use super::segment::Segment;
use super::{io_err, sync_dir, LogError, PartitionLog};

/// Kafka's suffix of a deleted segment's files.
pub const DELETED_SUFFIX: &str = ".deleted";

/// Removes deleted segments' files; files already gone (their folder deleted) are skipped.
pub fn remove_deleted_files(paths: &[PathBuf]) -> Result<(), LogError> {
    for p in paths {
        match fs::remove_file(p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_err("remove", p, e)),
            _ => {}
        }
    }
    Ok(())
}

/// `path` with [`DELETED_SUFFIX`] added.
fn deleted_name(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(DELETED_SUFFIX);
    PathBuf::from(name)
}

impl PartitionLog {
    /// The base offset of the oldest segment.
    pub(super) fn first_segment_base(&self) -> i64 {
        *self
            .segments
            .keys()
            .next()
            .expect("a log always has at least one segment")
    }

    /// Moves the log start offset up to `offset` (Kafka's `maybeIncrementLogStartOffset`);
    /// returns whether it moved. Past the log end offset it is refused; the caller bounds it by
    /// the high watermark. The segments wholly below it stay until [`Self::delete_oldest_segments`].
    pub fn increment_log_start(&mut self, offset: i64) -> Result<bool, LogError> {
        if offset <= self.log_start {
            return Ok(false);
        }
        let end = self.log_end_offset();
        if offset > end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                start: self.log_start,
                end,
            });
        }
        self.log_start = offset;
        self.epochs.truncate_from_start(offset)?;
        tracing::info!(dir = %self.dir.display(), log_start_offset = offset, "log start offset moved");
        Ok(true)
    }

    /// The sealed segments, oldest first, as [`retention::deletable`] takes them.
    pub fn sealed_segment_infos(&self) -> Vec<SegmentInfo> {
        let active = self.active().base;
        self.segments
            .values()
            .filter(|s| s.base != active)
            .map(|s| SegmentInfo {
                base: s.base,
                next_offset: s.next_offset,
                size: s.size,
                largest_timestamp: s.largest_timestamp(),
            })
            .collect()
    }

    /// Deletes the `count` oldest sealed segments (never the active one): for each, oldest
    /// first, the log start moves to the next segment's base, then its files are renamed with
    /// [`DELETED_SUFFIX`]. Returns the renamed files, for [`remove_deleted_files`] later.
    pub fn delete_oldest_segments(&mut self, count: usize) -> Result<Vec<PathBuf>, LogError> {
        let sealed = self.segments.len() - 1;
        let doomed: Vec<i64> = self.segments.keys().take(count.min(sealed)).copied().collect();
        if doomed.is_empty() {
            return Ok(Vec::new());
        }
        // The segment sealed last may still be syncing: let it end before its files go.
        self.finish_sealing()?;
        let mut renamed = Vec::new();
        for base in doomed {
            let seg = self.segments.remove(&base).expect("listed above");
            let next = self.first_segment_base();
            if next > self.log_start {
                self.log_start = next;
                self.epochs.truncate_from_start(next)?;
            }
            renamed.extend(retire(*seg)?);
        }
        sync_dir(&self.dir)?;
        tracing::info!(dir = %self.dir.display(), log_start_offset = self.log_start, files = renamed.len(), "deleted old segments");
        Ok(renamed)
    }

    /// Rolls the active segment when `segment.ms` says so ([`retention::roll_due`]), so that
    /// time retention can delete its records once it is sealed; returns whether it rolled.
    pub fn roll_if_due(&mut self, segment_ms: i64, now_ms: i64) -> Result<bool, LogError> {
        let active = self.active();
        if !retention::roll_due(active.size, active.rolling_timestamp()?, segment_ms, now_ms) {
            return Ok(false);
        }
        let end = self.log_end_offset();
        self.roll(end)?;
        Ok(true)
    }

    /// Sets the size at which the active segment rolls (a topic's `segment.bytes`).
    pub fn set_segment_bytes(&mut self, bytes: u64) -> Result<(), LogError> {
        if bytes == 0 || bytes > u64::from(u32::MAX) {
            return Err(LogError::InvalidConfig(format!(
                "segment_bytes must be in 1..={}, got {bytes}",
                u32::MAX
            )));
        }
        self.cfg.segment_bytes = bytes;
        Ok(())
    }

    /// Drops every segment and starts over empty at `offset` (Kafka's `truncateFullyAndStartAt`):
    /// a follower whose log ends below its leader's log start, or one truncated below its own.
    pub fn reset_to(&mut self, offset: i64) -> Result<(), LogError> {
        if offset < 0 {
            return Err(LogError::OffsetOutOfRange {
                offset,
                start: self.log_start,
                end: self.log_end_offset(),
            });
        }
        self.finish_sealing()?;
        self.producers = None;
        // Newest first, as a truncation removes them.
        let all: Vec<i64> = self.segments.keys().rev().copied().collect();
        for base in all {
            self.segments.remove(&base).expect("listed above").remove_files()?;
        }
        self.epochs.clear()?;
        self.segments
            .insert(offset, Box::new(Segment::create(&self.dir, offset)?));
        sync_dir(&self.dir)?;
        self.log_start = offset;
        tracing::info!(dir = %self.dir.display(), offset, "log started over empty");
        Ok(())
    }

    /// Applies the log start offset a checkpoint remembers (read at start): above the first
    /// segment's base it moves the start there; past the log end (the records after it were
    /// lost with an unclean stop) the log starts over empty there, as Kafka's does.
    pub fn restore_log_start(&mut self, checkpoint: i64) -> Result<(), LogError> {
        if checkpoint > self.log_end_offset() {
            tracing::warn!(dir = %self.dir.display(), checkpoint, log_end_offset = self.log_end_offset(), "the log ends before its checkpointed start; starting it over there");
            return self.reset_to(checkpoint);
        }
        self.increment_log_start(checkpoint).map(drop)
    }
}

/// Renames a removed segment's files with [`DELETED_SUFFIX`]; returns the new names.
fn retire(seg: Segment) -> Result<Vec<PathBuf>, LogError> {
    let paths = [seg.log_path(), seg.index_path(), seg.time_path()];
    // Its open files close first.
    drop(seg);
    let mut out = Vec::new();
    for p in paths {
        let to = deleted_name(&p);
        match fs::rename(&p, &to) {
            Ok(()) => out.push(to),
            // A segment with no index entry has no index file.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && p.extension().is_none_or(|x| x != "log") => {}
            Err(e) => return Err(io_err("rename", &p, e)),
        }
    }
    Ok(out)
}
