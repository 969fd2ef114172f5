//! Cleaned segments swapped in for the ones they were cleaned from, as Kafka's log does it. The
//! cleaner writes a segment's files with [`CLEANED_SUFFIX`], syncs them and renames them with
//! [`SWAP_SUFFIX`] (the log file last); the swap, under the log's lock, removes the segments
//! replaced and renames the new files into place. Opening a log finishes what a crash left:
//! `.cleaned` files are removed (the clean had not ended), and a `.swap` log replaces the
//! segments its offsets cover.

use std::collections::HashMap;
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use super::segment::{self, cleaned::suffixed_paths, Segment};
use super::{io_err, sync_dir, LogError, PartitionLog, PendingDirSyncs};
use crate::record_batch::{self, BatchHeader, HEADER_LEN};

/// Kafka's suffix of a segment the cleaner is writing.
pub const CLEANED_SUFFIX: &str = ".cleaned";
/// Kafka's suffix of a cleaned segment ready to replace the ones it was cleaned from.
pub const SWAP_SUFFIX: &str = ".swap";

/// A segment as the cleaner reads it: its log file and what the cleaner decides by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentFiles {
    /// Its first offset.
    pub base: i64,
    /// The offset after its last batch: the next segment's base.
    pub next_offset: i64,
    /// Its bytes.
    pub size: u64,
    /// Its `.log` file.
    pub log_path: PathBuf,
    /// Its largest record timestamp (the file's modification time when none has one).
    pub largest_timestamp: i64,
    /// Its first batch's largest timestamp, when asked for and known.
    pub first_batch_timestamp: Option<i64>,
}

/// Bytes of batches a cleaned segment gathers before it writes them.
const WRITE_RUN: usize = 1 << 20;

/// A cleaned segment being written: `.cleaned` files in the log's folder.
#[derive(Debug)]
pub struct CleanedSegment {
    seg: Segment,
    dir: PathBuf,
    interval: u32,
    /// Batches appended and not written yet, and their headers.
    run: Vec<u8>,
    headers: Vec<BatchHeader>,
}

impl CleanedSegment {
    /// Starts a cleaned segment at `base` in the log folder `dir`, indexed every
    /// `index_interval_bytes` as the log's own segments are.
    pub fn create(dir: &Path, base: i64, index_interval_bytes: u32) -> Result<Self, LogError> {
        Ok(Self {
            seg: Segment::create_suffixed(&Arc::from(dir), base, CLEANED_SUFFIX)?,
            dir: dir.to_path_buf(),
            interval: index_interval_bytes,
            run: Vec::new(),
            headers: Vec::new(),
        })
    }

    /// Appends one whole batch after the last; its header is checked, its CRC is the caller's.
    pub fn append(&mut self, batch: &[u8]) -> Result<(), LogError> {
        let h = record_batch::parse_header(batch)
            .map_err(LogError::InvalidBatch)?
            .filter(|h| h.total_len == batch.len())
            .ok_or(LogError::InvalidBatch(record_batch::BatchError::Incomplete {
                needed: HEADER_LEN,
                available: batch.len(),
            }))?;
        let next = self.next_offset();
        if h.base_offset < next {
            return Err(LogError::NonContiguous {
                expected: next,
                got: h.base_offset,
            });
        }
        self.run.extend_from_slice(batch);
        self.headers.push(h);
        if self.run.len() >= WRITE_RUN {
            self.write_run()?;
        }
        Ok(())
    }

    fn write_run(&mut self) -> Result<(), LogError> {
        if !self.headers.is_empty() {
            self.seg.append_run(&self.run, &self.headers, self.interval)?;
        }
        self.run.clear();
        self.headers.clear();
        Ok(())
    }

    /// Bytes appended so far.
    pub fn size(&self) -> u64 {
        self.seg.size + self.run.len() as u64
    }

    /// The offset after the last batch appended.
    pub fn next_offset(&self) -> i64 {
        self.headers.last().map_or(self.seg.next_offset, |h| h.next_offset())
    }

    /// Seals and syncs it, gives its log file `modified` as its modification time (Kafka keeps
    /// the replaced segments' time), and renames its files with [`SWAP_SUFFIX`], the log file
    /// last, durably: from here a crash completes the swap when the log opens.
    pub fn into_swap(mut self, modified: Option<SystemTime>) -> Result<SwapSegment, LogError> {
        self.write_run()?;
        self.seg.seal();
        self.seg.sync()?;
        if let Some(t) = modified {
            let f = File::options()
                .write(true)
                .open(self.seg.log_path())
                .map_err(|e| io_err("open", &self.seg.log_path(), e))?;
            f.set_modified(t)
                .map_err(|e| io_err("set time of", &self.seg.log_path(), e))?;
        }
        let (base, next_offset, size) = (self.seg.base, self.seg.next_offset, self.seg.size);
        let from = [self.seg.log_path(), self.seg.index_path(), self.seg.time_path()];
        drop(self.seg);
        let to = suffixed_paths(&self.dir, base, SWAP_SUFFIX);
        for i in [1, 2, 0] {
            rename_if_there(&from[i], &to[i], i > 0)?;
        }
        sync_dir(&self.dir)?;
        Ok(SwapSegment {
            base,
            next_offset,
            size,
            dir: self.dir,
        })
    }

    /// Removes its files: the clean was abandoned.
    pub fn discard(self) {
        let paths = suffixed_paths(&self.dir, self.seg.base, CLEANED_SUFFIX);
        drop(self.seg);
        remove_quietly(&paths);
    }
}

/// A cleaned segment renamed `.swap`, ready to replace the segments it was cleaned from.
#[derive(Debug)]
pub struct SwapSegment {
    /// Its first offset: the first replaced segment's base.
    pub base: i64,
    /// The offset after its last batch: the last replaced segment's end.
    pub next_offset: i64,
    /// Its bytes.
    pub size: u64,
    dir: PathBuf,
}

impl SwapSegment {
    /// Removes its files: the log changed under the clean, which is abandoned.
    pub fn discard(self) {
        remove_quietly(&suffixed_paths(&self.dir, self.base, SWAP_SUFFIX));
    }
}

/// Removes files, ignoring errors: leftovers of an abandoned clean, which opening the log removes.
fn remove_quietly(paths: &[PathBuf]) {
    for p in paths {
        let _ = fs::remove_file(p);
    }
}

/// Renames `from` to `to`; a missing `from` is an error unless `optional` (a time index, made
/// only with its first entry).
fn rename_if_there(from: &Path, to: &Path, optional: bool) -> Result<(), LogError> {
    match fs::rename(from, to) {
        Err(e) if optional && e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r.map_err(|e| io_err("rename", from, e)),
    }
}

/// Removes the three files of the segment at `base` (a time index may be missing).
fn remove_segment_files(dir: &Path, base: i64) -> Result<(), LogError> {
    for (i, p) in suffixed_paths(dir, base, "").iter().enumerate() {
        match fs::remove_file(p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && i > 0 => {}
            r => r.map_err(|e| io_err("remove", p, e))?,
        }
    }
    Ok(())
}

impl PartitionLog {
    /// Every segment, the active one last, as the cleaner reads them; with
    /// `first_batch_timestamps`, each sealed one's first batch timestamp too (one read each).
    pub fn segment_files(&self, first_batch_timestamps: bool) -> Result<Vec<SegmentFiles>, LogError> {
        let active = self.active().base;
        self.segments
            .values()
            .map(|s| {
                let first = if first_batch_timestamps && s.base != active {
                    s.rolling_timestamp()?
                } else {
                    None
                };
                Ok(SegmentFiles {
                    base: s.base,
                    next_offset: s.next_offset,
                    size: s.size,
                    log_path: s.log_path(),
                    largest_timestamp: s.largest_timestamp(),
                    first_batch_timestamp: first,
                })
            })
            .collect()
    }

    /// Each idempotent producer's last offset (see `ProducerStates::last_offsets`); the first
    /// call reads every batch header.
    pub fn producer_last_offsets(&mut self) -> Result<HashMap<i64, i64>, LogError> {
        Ok(self.producer_states()?.last_offsets())
    }

    /// Replaces `old`, a run of sealed segments as [`Self::segment_files`] listed them, with
    /// `new`, cleaned from them. False, and `new` removed, if the log changed meanwhile (a
    /// truncation, a retention, a roll into them, a dir move): the clean is then abandoned.
    pub fn replace_segments(&mut self, old: &[SegmentFiles], new: SwapSegment) -> Result<bool, LogError> {
        let active = self.active().base;
        let same = |o: &SegmentFiles| {
            o.base != active
                && self
                    .segments
                    .get(&o.base)
                    .is_some_and(|s| s.next_offset == o.next_offset && s.size == o.size)
        };
        // Same folder: a dir move may have put another copy of the log in this one's place.
        let unchanged = *new.dir == *self.dir
            && old.first().is_some_and(|f| f.base == new.base)
            && old.last().is_some_and(|l| l.next_offset == new.next_offset)
            && old.windows(2).all(|w| w[0].next_offset == w[1].base)
            && old.iter().all(same);
        if !unchanged {
            new.discard();
            return Ok(false);
        }
        // The segment sealed last may be among them and still syncing.
        self.finish_sealing()?;
        for o in old {
            drop(self.segments.remove(&o.base));
            remove_segment_files(&self.dir, o.base)?;
        }
        let (base, dir) = (new.base, new.dir.clone());
        let from = suffixed_paths(&dir, base, SWAP_SUFFIX);
        let to = suffixed_paths(&dir, base, "");
        for i in [1, 2, 0] {
            rename_if_there(&from[i], &to[i], i > 0)?;
        }
        sync_dir(&self.dir)?;
        let mut seg = Segment::open(&self.dir, base)?;
        seg.recover_sealed(self.cfg.index_interval_bytes)?;
        self.segments.insert(base, Box::new(seg));
        tracing::info!(dir = %self.dir.display(), base, replaced = old.len(), size = new.size, "swapped in a cleaned segment");
        Ok(true)
    }
}

/// The offset after the last batch of the log file at `path`, reading only batch headers.
fn end_of(path: &Path, base: i64) -> Result<i64, LogError> {
    let f = File::open(path).map_err(|e| io_err("open", path, e))?;
    let len = f.metadata().map_err(|e| io_err("stat", path, e))?.len();
    let (mut pos, mut next) = (0u64, base);
    let mut buf = [0u8; HEADER_LEN];
    while pos < len {
        let corrupt = |detail: String| LogError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("at byte {pos}: {detail}"),
        };
        if len - pos < HEADER_LEN as u64 {
            return Err(corrupt("a torn batch header".into()));
        }
        f.read_exact_at(&mut buf, pos).map_err(|e| io_err("read", path, e))?;
        let h = record_batch::peek_header(&buf)
            .map_err(|e| corrupt(e.to_string()))?
            .ok_or_else(|| corrupt("a torn batch header".into()))?;
        pos += h.total_len as u64;
        next = h.next_offset();
    }
    if pos != len {
        return Err(LogError::Corrupt {
            path: path.to_path_buf(),
            detail: "the last batch is torn".into(),
        });
    }
    Ok(next)
}

/// Finishes or undoes the swaps a crash interrupted in the log folder `dir`, before it is
/// opened: `.cleaned` files go, and each `.swap` log replaces the segments its offsets cover
/// (a `.swap` index without its log is a leftover of the renames before it, and goes). No
/// `.cleaned` or `.swap` name is left after it.
pub(super) fn recover_swaps(dir: &Path, syncs: &mut PendingDirSyncs) -> Result<(), LogError> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| io_err("list", dir, e))? {
        let entry = entry.map_err(|e| io_err("list", dir, e))?;
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_string());
        }
    }
    let stem_of = |name: &str, ext: &str| name.strip_suffix(ext).and_then(segment::parse_stem);
    let swapped_logs: Vec<i64> = names
        .iter()
        .filter_map(|n| n.strip_suffix(SWAP_SUFFIX).and_then(|n| stem_of(n, ".log")))
        .collect();
    let mut changed = false;
    for name in &names {
        let path = dir.join(name);
        // Every other `.cleaned` or `.swap` name goes, so that none is left when the log opens.
        let leftover = name.ends_with(CLEANED_SUFFIX)
            || name.strip_suffix(SWAP_SUFFIX).is_some_and(|n| {
                let index = stem_of(n, ".index").or_else(|| stem_of(n, ".timeindex"));
                stem_of(n, ".log").is_none() && index.is_none_or(|b| !swapped_logs.contains(&b))
            });
        if leftover {
            tracing::warn!(path = %path.display(), "removing a cleaned segment's file left by an unfinished clean");
            fs::remove_file(&path).map_err(|e| io_err("remove", &path, e))?;
            changed = true;
        }
    }
    for &base in &swapped_logs {
        let swap = suffixed_paths(dir, base, SWAP_SUFFIX);
        let end = end_of(&swap[0], base)?;
        let covered: Vec<i64> = names
            .iter()
            .filter_map(|n| stem_of(n, ".log"))
            .filter(|b| (base..end).contains(b))
            .collect();
        tracing::warn!(dir = %dir.display(), base, end, replaced = covered.len(), "finishing the swap of a cleaned segment");
        for b in covered {
            remove_segment_files(dir, b)?;
        }
        let to = suffixed_paths(dir, base, "");
        for i in [1, 2, 0] {
            // An index renamed before the crash is gone with the segments above; the log's
            // opening rebuilds it.
            rename_if_there(&swap[i], &to[i], i > 0)?;
        }
        changed = true;
    }
    if changed {
        syncs.add(dir);
    }
    Ok(())
}
