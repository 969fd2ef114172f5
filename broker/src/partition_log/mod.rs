//! On-disk log of one partition replica: a folder of segments plus a leader epoch checkpoint.
//!
//! Folder layout (`<logdir>/<topic>-<partition>/`):
//! - `<base offset, 20 digits>.log`: record batches back to back (see [`crate::record_batch`]);
//! - `<same>.index`: sparse offset index, big-endian (relative offset u32, position u32) entries,
//!   made with its first entry;
//! - `leader-epoch-checkpoint`: epochs and their start offsets, replaced atomically;
//! - `partition.metadata`: the topic id (see [`partition_metadata`]);
//! - `<name>.deleted`: a segment's file that retention deleted, removed a little later (`log_start.rs`).
//! - `<name>.cleaned`, then `<name>.swap`: a segment the log cleaner wrote, until it replaces the
//!   segments it was cleaned from (`replace.rs`).
//!
//! Invariants: segments are contiguous (each base is the previous segment's end offset), every segment
//! except the last is non-empty and fsynced (the one sealed last may still be syncing, see
//! `seal_sync`), and at least one segment always exists. The log start offset lies between the
//! first segment's base and the log end offset: retention and DeleteRecords move it up.
//! Inside a segment offsets may skip: the cleaner removes batches and keeps the offsets of the rest.

mod epoch_cache;
mod error;
mod log_start;
#[cfg(test)]
mod log_start_tests;
mod open;
pub mod partition_metadata;
pub mod producer_state;
mod read;
mod replace;
pub mod retention;
mod seal_sync;
#[cfg(test)]
mod seal_tests;
mod segment;
#[cfg(test)]
mod tests;
mod time_index;
#[cfg(test)]
mod time_tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::record_batch::{self, BatchError, BatchHeader};

pub(crate) use error::io_err;
pub use error::LogError;
pub use log_start::{remove_deleted_files, DELETED_SUFFIX};
pub use read::records_in;
pub use replace::{CleanedSegment, SegmentFiles, SwapSegment, CLEANED_SUFFIX, SWAP_SUFFIX};

use epoch_cache::EpochCache;
use producer_state::{ProducerStates, SequenceCheck};
use seal_sync::SealSync;
use segment::Segment;

/// Tuning knobs for a partition log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// Roll to a new segment when an append would make the active one larger than this (max 4 GiB - 1).
    pub segment_bytes: u64,
    /// Add an offset index entry roughly every this many bytes of log.
    pub index_interval_bytes: u32,
    /// Fsync the active segment after every append.
    pub fsync_on_append: bool,
    /// Fsync a segment when it is sealed. Only a log that is not live yet (a log dir move's
    /// future log, synced whole by [`PartitionLog::sync_all`] before it goes live) turns it off.
    pub fsync_on_roll: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 64 * 1024 * 1024,
            index_interval_bytes: 4096,
            fsync_on_append: false,
            fsync_on_roll: true,
        }
    }
}

/// Directories with new entries still to be made durable, so that a broker creating thousands
/// of replicas in one pass makes them durable together at the end rather than one fsync each.
#[derive(Debug, Default)]
pub struct PendingDirSyncs(BTreeSet<PathBuf>);

/// Up to this many pending dirs are fsynced one by one; more share one `syncfs` per file
/// system. Each fsync flushes the disk's cache, so 30,000 of them took seconds, where one
/// `syncfs` commits every creation at once. But `syncfs` also writes out every other file's
/// dirty pages, so only a pass that creates many replicas uses it.
const FSYNC_EACH_UP_TO: usize = 256;

impl PendingDirSyncs {
    fn add(&mut self, dir: &Path) {
        self.0.insert(dir.to_path_buf());
    }

    /// Makes every pending dir durable; returns the dirs that failed, with their errors.
    pub fn sync(self) -> Vec<(PathBuf, LogError)> {
        if self.0.len() <= FSYNC_EACH_UP_TO {
            return self
                .0
                .into_iter()
                .filter_map(|d| sync_dir(&d).err().map(|e| (d, e)))
                .collect();
        }
        let mut failed = Vec::new();
        let mut by_fs: BTreeMap<u64, Vec<PathBuf>> = BTreeMap::new();
        for d in self.0 {
            match fs::metadata(&d) {
                Ok(m) => by_fs
                    .entry(std::os::unix::fs::MetadataExt::dev(&m))
                    .or_default()
                    .push(d),
                Err(e) => failed.push((d.clone(), io_err("stat", &d, e))),
            }
        }
        for dirs in by_fs.into_values() {
            // Each group has the dir that made it.
            let synced = File::open(&dirs[0]).and_then(|f| rustix::fs::syncfs(&f).map_err(std::io::Error::from));
            if let Err(e) = synced {
                for d in dirs {
                    let err = io_err("syncfs", &d, std::io::Error::new(e.kind(), e.to_string()));
                    failed.push((d, err));
                }
            }
        }
        failed
    }
}

/// Fsyncs a directory so file creations, renames and deletions in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err("fsync", dir, e))
}

/// Folder of a partition replica inside a log dir: `<logdir>/<topic>-<partition>`.
pub fn partition_dir(logdir: &Path, topic: &str, partition: u32) -> PathBuf {
    logdir.join(format!("{topic}-{partition}"))
}

/// A sealed segment's files, as another log can adopt a copy of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedSegment {
    /// First offset in it.
    pub base: i64,
    /// The offset after its last record.
    pub next_offset: i64,
    /// Its bytes.
    pub size: u64,
    /// The `.log` file.
    pub log_path: PathBuf,
    /// The `.index` file (absent while it has no entry).
    pub index_path: PathBuf,
    /// The `.timeindex` file (absent while it has no entry).
    pub time_path: PathBuf,
}

/// The on-disk log of one partition replica. Single-threaded: callers wrap it in a mutex.
#[derive(Debug)]
pub struct PartitionLog {
    dir: Arc<Path>,
    cfg: LogConfig,
    /// Base offset -> segment; never empty, the last one is active. Boxed: a B-tree leaf has
    /// room for 11 values, so an inline segment cost every one-segment replica 11 segments'
    /// bytes (about 3 KiB).
    segments: BTreeMap<i64, Box<Segment>>,
    epochs: EpochCache,
    /// Idempotent producers' sequences, built from the batches when first needed and dropped
    /// on truncation (then built again): most partitions never need it.
    producers: Option<ProducerStates>,
    /// The fsync of the segment sealed last, while it runs.
    sealing: Option<SealSync>,
    /// The first offset readers may see (Kafka's log start offset): the first segment's base,
    /// or past it after DeleteRecords.
    log_start: i64,
}

impl PartitionLog {
    /// Folder holding this log's files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Configuration the log was opened with.
    pub fn config(&self) -> &LogConfig {
        &self.cfg
    }

    /// First offset in the log that readers may see.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start
    }

    /// The offset up to which the log is known synced: the active segment's base, or the base
    /// of the segment sealed last while its fsync runs; Kafka's recovery point.
    pub fn recovery_point(&self) -> i64 {
        self.sealing.as_ref().map_or(self.active().base, SealSync::base)
    }

    /// Next offset to be written.
    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset
    }

    /// Total size of all segment files in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(|s| s.size).sum()
    }

    /// Number of segments (including the active one).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    fn active(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has at least one segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log always has at least one segment")
    }

    /// Appends `records` as one batch at the log end offset; returns (base offset, new log end offset).
    pub fn append_as_leader(
        &mut self,
        records: &[impl AsRef<[u8]>],
        leader_epoch: u32,
        timestamp_ms: i64,
    ) -> Result<(i64, i64), LogError> {
        if records.is_empty() {
            return Err(LogError::Empty);
        }
        let batch =
            record_batch::try_encode_batch(0, leader_epoch, timestamp_ms, records).map_err(LogError::TooLarge)?;
        self.append_batch_as_leader(batch, leader_epoch)
    }

    /// Appends one batch a client produced: it is checked whole, then given the next offsets and
    /// `leader_epoch` (outside its CRC), and written as it came. Returns (base offset, new log
    /// end offset).
    pub fn append_batch_as_leader(&mut self, mut batch: Vec<u8>, leader_epoch: u32) -> Result<(i64, i64), LogError> {
        let produced = record_batch::verify(&batch).map_err(LogError::InvalidBatch)?;
        if produced.record_count == 0 {
            // Only the cleaner leaves empty batches; a client's must hold records, as Kafka's must.
            return Err(LogError::InvalidBatch(BatchError::NoRecords(0)));
        }
        self.check_epoch(leader_epoch, self.latest_epoch())?;
        if produced.producer_id >= 0 {
            if let SequenceCheck::Duplicate(base) = self.producer_states()?.check(&produced)? {
                // A retry of a batch already written: its offsets, and nothing written again.
                return Ok((base, self.log_end_offset()));
            }
        }
        let base = self.log_end_offset();
        record_batch::set_offsets(&mut batch, base, leader_epoch);
        // The fields just set lie outside the CRC: the batch checked above is still whole.
        let header = BatchHeader {
            base_offset: base,
            leader_epoch,
            ..produced
        };
        if base.checked_add(i64::from(header.last_offset_delta) + 1).is_none() {
            return Err(LogError::InvalidBatch(BatchError::OffsetOverflow {
                base,
                delta: header.last_offset_delta,
            }));
        }
        debug_assert_eq!(record_batch::peek_header(&batch).ok().flatten(), Some(header));
        self.append_batch(&batch, &header)?;
        self.after_append()?;
        Ok((base, self.log_end_offset()))
    }

    /// The producers' sequences, built from every batch header on first use.
    fn producer_states(&mut self) -> Result<&mut ProducerStates, LogError> {
        if self.producers.is_none() {
            let mut states = ProducerStates::default();
            for seg in self.segments.values() {
                seg.for_each_header(&mut |h| states.record(h))?;
            }
            self.producers = Some(states);
        }
        // Set just above when it was missing.
        Ok(self.producers.get_or_insert_with(ProducerStates::default))
    }

    /// Follower path: appends whole batches copied from the leader verbatim; returns the new log end offset.
    ///
    /// All batches are checked (CRC, contiguity from the log end offset, epoch order) before any is written.
    pub fn append_replicated(&mut self, raw: &[u8]) -> Result<i64, LogError> {
        let batches = record_batch::split_batches(raw).map_err(LogError::InvalidBatch)?;
        if let Some((h, _)) = batches.first() {
            let end = self.log_end_offset();
            if self.size_bytes() == 0 && h.base_offset < end && h.next_offset() > end {
                // An empty log copying from a log start inside a batch (after DeleteRecords)
                // begins at that batch's base, as Kafka's follower does; its start stays put.
                let start = self.log_start;
                self.reset_to(h.base_offset)?;
                self.log_start = start;
            }
        }
        let mut expected = self.log_end_offset();
        let mut latest = self.latest_epoch();
        for (h, _) in &batches {
            // Past the log end is fine: the leader's cleaner may have removed the batches between.
            if h.base_offset < expected {
                return Err(LogError::NonContiguous {
                    expected,
                    got: h.base_offset,
                });
            }
            self.check_epoch(h.leader_epoch, latest)?;
            expected = h.next_offset();
            latest = Some(h.leader_epoch);
        }
        for (h, batch) in &batches {
            self.append_batch(batch, h)?;
        }
        if !batches.is_empty() {
            self.after_append()?;
        }
        Ok(self.log_end_offset())
    }

    fn check_epoch(&self, epoch: u32, latest: Option<u32>) -> Result<(), LogError> {
        match latest {
            Some(latest) if epoch < latest => Err(LogError::StaleEpoch { epoch, latest }),
            _ => Ok(()),
        }
    }

    fn after_append(&mut self) -> Result<(), LogError> {
        if self.cfg.fsync_on_append {
            self.active().sync()?;
        }
        Ok(())
    }

    /// Writes one checked batch whose base is the log end offset, rolling first if needed.
    fn append_batch(&mut self, batch: &[u8], h: &BatchHeader) -> Result<(), LogError> {
        let active = self.active();
        let too_big = active.size + batch.len() as u64 > self.cfg.segment_bytes;
        // Index entries store offsets relative to the segment base as u32.
        let rel_overflow = h.next_offset() - active.base > i64::from(u32::MAX);
        if active.size > 0 && (too_big || rel_overflow) {
            // At the log end, not the batch's base: a gap the cleaner left stays inside a segment,
            // and segments stay contiguous.
            let end = self.log_end_offset();
            self.roll(end)?;
        }
        // Checkpoint before data: after a crash an epoch entry past the log end is dropped, a missing one is not
        // noticed.
        let new_epoch = self.latest_epoch().is_none_or(|latest| h.leader_epoch > latest);
        if new_epoch {
            self.epochs.assign(h.leader_epoch, h.base_offset)?;
        }
        let interval = self.cfg.index_interval_bytes;
        let res = self.active_mut().append(batch, h, interval);
        if res.is_ok() {
            if let Some(p) = self.producers.as_mut() {
                p.record(h);
            }
        }
        if res.is_err() && new_epoch {
            // Best effort: do not advertise an epoch with no data; a leftover entry is dropped on reopen anyway.
            let _ = self.epochs.truncate_from_end(h.base_offset);
        }
        res
    }

    /// Seals the active segment and starts a new one at `base`.
    fn roll(&mut self, base: i64) -> Result<(), LogError> {
        self.finish_sealing()?;
        self.active_mut().seal();
        if self.cfg.fsync_on_roll {
            let active = self.active();
            self.sealing = SealSync::start(active.base, active.sync_handles()?)?;
        }
        let seg = Segment::create(&self.dir, base)?;
        sync_dir(&self.dir)?;
        tracing::debug!(dir = %self.dir.display(), base, "rolled to a new segment");
        self.segments.insert(base, Box::new(seg));
        Ok(())
    }

    /// Removes every record at or after `offset`; a batch containing `offset` is dropped whole.
    ///
    /// No-op if `offset` is at or past the log end offset. Below the first segment the log starts
    /// over empty at `offset`; the log start offset comes down to the new end if above it, as
    /// Kafka's does.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        if offset >= self.log_end_offset() {
            return Ok(());
        }
        if offset < self.first_segment_base() {
            return self.reset_to(offset);
        }
        self.finish_sealing()?;
        // Truncated batches may have been any producer's last: rebuilt when next needed.
        self.producers = None;
        let keep_base = *self
            .segments
            .range(..=offset)
            .next_back()
            .expect("offset >= log start")
            .0;
        // Newest first, so a crash part-way leaves a shorter but valid log.
        let doomed: Vec<i64> = self.segments.range(keep_base + 1..).map(|(b, _)| *b).rev().collect();
        for base in &doomed {
            self.segments.remove(base).expect("listed above").remove_files()?;
        }
        if !doomed.is_empty() {
            sync_dir(&self.dir)?;
        }
        let new_end = self.active_mut().truncate_to_batch_of(offset)?;
        self.epochs.truncate_from_end(new_end)?;
        self.log_start = self.log_start.min(new_end);
        tracing::info!(dir = %self.dir.display(), requested = offset, log_end_offset = new_end, "truncated log");
        Ok(())
    }

    /// Latest leader epoch in the log, if any batch has been written.
    pub fn latest_epoch(&self) -> Option<u32> {
        self.epochs.latest().map(|e| e.epoch)
    }

    /// OffsetsForLeaderEpoch: the largest cached epoch <= `epoch` and its end offset (start of the next
    /// cached epoch, or the log end offset for the latest). `None` if no cached epoch is <= `epoch`.
    pub fn end_offset_for_epoch(&self, epoch: u32) -> Option<(u32, i64)> {
        self.epochs.end_offset_for(epoch, self.log_end_offset())
    }

    /// Fsyncs the active segment and its index (after the sealed one still syncing, if any).
    pub fn flush(&mut self) -> Result<(), LogError> {
        self.finish_sealing()?;
        self.active().sync()
    }

    /// The sealed (not active) segment starting at `base`, if there is one.
    pub fn sealed_segment_at(&self, base: i64) -> Option<SealedSegment> {
        let seg = self.segments.get(&base)?;
        if seg.base == self.active().base {
            return None;
        }
        Some(SealedSegment {
            base,
            next_offset: seg.next_offset,
            size: seg.size,
            log_path: seg.log_path(),
            index_path: seg.index_path(),
            time_path: seg.time_path(),
        })
    }

    /// Appends a copy of another log's sealed segment, file by file (the kernel copies the bytes,
    /// as `cp` does). Only at a segment boundary: this log must end at `src.base` with an empty
    /// active segment there. On any error the log is left as it was.
    pub fn adopt_segment_copy(&mut self, src: &SealedSegment) -> Result<(), LogError> {
        self.producers = None;
        let active = self.active();
        if active.base != src.base || active.size != 0 {
            return Err(LogError::NonContiguous {
                expected: self.log_end_offset(),
                got: src.base,
            });
        }
        let empty = self.segments.remove(&src.base).expect("the active segment exists");
        let (log_path, index_path, time_path) = (empty.log_path(), empty.index_path(), empty.time_path());
        drop(empty);
        let adopted = (|| {
            fs::copy(&src.log_path, &log_path).map_err(|e| io_err("copy", &src.log_path, e))?;
            // Without one (a segment with no entry yet), the recovery below builds it.
            for (from, to) in [(&src.index_path, &index_path), (&src.time_path, &time_path)] {
                match fs::copy(from, to) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    r => drop(r.map_err(|e| io_err("copy", from, e))?),
                }
            }
            let mut seg = Segment::open(&self.dir, src.base)?;
            seg.recover_sealed(self.cfg.index_interval_bytes)?;
            if seg.next_offset != src.next_offset {
                return Err(LogError::Corrupt {
                    path: seg.log_path(),
                    detail: format!("copy ends at offset {} instead of {}", seg.next_offset, src.next_offset),
                });
            }
            let mut epochs = Vec::new();
            seg.for_each_header(&mut |h| epochs.push((h.leader_epoch, h.base_offset)))?;
            Ok((seg, epochs))
        })();
        match adopted {
            Ok((seg, epochs)) => {
                let next = seg.next_offset;
                self.segments.insert(src.base, Box::new(seg));
                let mut changed = false;
                for (epoch, start) in epochs {
                    if self.latest_epoch().is_none_or(|latest| epoch > latest) {
                        changed |= self.epochs.assign_in_memory(epoch, start);
                    }
                }
                if changed {
                    self.epochs.persist()?;
                }
                self.segments.insert(next, Box::new(Segment::create(&self.dir, next)?));
                Ok(())
            }
            Err(e) => {
                self.segments
                    .insert(src.base, Box::new(Segment::create(&self.dir, src.base)?));
                Err(e)
            }
        }
    }

    /// Fsyncs every segment, its index, and the folder.
    pub fn sync_all(&mut self) -> Result<(), LogError> {
        self.finish_sealing()?;
        for seg in self.segments.values() {
            seg.sync()?;
        }
        sync_dir(&self.dir)
    }

    /// Waits for the fsync of the segment sealed last, if one runs; its error, if it failed.
    fn finish_sealing(&mut self) -> Result<(), LogError> {
        self.sealing.take().map_or(Ok(()), SealSync::finish)
    }

    /// Closes the log and removes its whole folder.
    pub fn delete_files(self) -> Result<(), LogError> {
        let dir = self.dir.clone();
        drop(self);
        fs::remove_dir_all(&dir).map_err(|e| io_err("remove directory", &dir, e))
    }
}
