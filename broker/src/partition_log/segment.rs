//! One segment: a `.log` file of batches plus its sparse `.index` of (relative offset, position)
//! entries and its `.timeindex` (`time_index.rs`), written beside each `.index` entry.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::record_batch::{self, BatchHeader, HEADER_LEN};

use super::time_index::TimeIndex;
use super::{io_err, LogError};

pub(super) mod cleaned;
mod time_io;

/// Bytes per index entry: relative offset u32 + file position u32, big-endian as in Kafka's `.index`.
const INDEX_ENTRY_LEN: usize = 8;

/// File name stem for a segment: the base offset, zero-padded to 20 digits.
pub(super) fn file_stem(base: i64) -> String {
    format!("{base:020}")
}

/// The path of the segment file at `base` with extension `ext`, its name followed by `suffix`.
pub(super) fn file_path(dir: &Path, base: i64, ext: &str, suffix: &str) -> PathBuf {
    dir.join(format!("{}.{ext}{suffix}", file_stem(base)))
}

/// Parses a segment file stem; `None` for anything that is not exactly 20 digits.
pub(super) fn parse_stem(stem: &str) -> Option<i64> {
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// Index entry, as in Kafka's `.index`: the batch whose last offset is `base + rel` begins at
/// byte `pos` of the log file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct IndexEntry {
    pub rel: u32,
    pub pos: u32,
}

/// Outcome of scanning a run of batches.
struct Scan {
    /// Position after the last good batch.
    pos: u64,
    /// Offset after the last good batch.
    next_offset: i64,
    index: Vec<IndexEntry>,
    /// Why the scan stopped before the end of the file, if it did.
    stop: Option<String>,
}

/// A file opened on first use, so that a segment nobody writes or reads (an empty partition)
/// holds no file descriptor: a broker can then host many more idle replicas than its
/// descriptor limit.
#[derive(Debug)]
struct LazyFile {
    file: std::sync::OnceLock<File>,
    /// Created on first use rather than with the segment (the time index: an empty partition
    /// then costs no file for it).
    create: bool,
}

impl LazyFile {
    fn new() -> Self {
        Self {
            file: std::sync::OnceLock::new(),
            create: false,
        }
    }

    fn created_on_use() -> Self {
        Self {
            create: true,
            ..Self::new()
        }
    }

    /// The open file, opening it at `path` now if needed (the path is only made then).
    fn get(&self, path: impl FnOnce() -> PathBuf) -> std::io::Result<&File> {
        if let Some(f) = self.file.get() {
            return Ok(f);
        }
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(self.create)
            .open(path())?;
        Ok(self.file.get_or_init(|| f))
    }

    fn is_open(&self) -> bool {
        self.file.get().is_some()
    }
}

/// A segment; all sizes are in bytes of the `.log` file. Its file paths are made when needed
/// from the log's folder, which its segments share: a broker holds one segment per idle replica,
/// and three paths each would cost it more than the rest of the segment.
#[derive(Debug)]
pub(super) struct Segment {
    pub base: i64,
    pub next_offset: i64,
    pub size: u64,
    dir: Arc<Path>,
    /// After each file's usual name: "" for the log's own segments, the cleaner's suffix for its.
    suffix: &'static str,
    log: LazyFile,
    index_file: LazyFile,
    index: Vec<IndexEntry>,
    time_file: LazyFile,
    time: TimeIndex,
}

fn open_rw(path: &Path, truncate: bool) -> Result<File, LogError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(truncate)
        .open(path)
        .map_err(|e| io_err("open", path, e))
}

impl Segment {
    /// Creates a new empty segment (replacing any stray files of the same name).
    pub fn create(dir: &Arc<Path>, base: i64) -> Result<Self, LogError> {
        let seg = Segment::empty(dir.clone(), base, "");
        let [log_path, index_path, time_path] = seg.paths();
        drop(open_rw(&log_path, true)?);
        // Stray indexes are emptied; none is created until its first entry (a new replica
        // then costs one file fewer).
        for path in [&index_path, &time_path] {
            match OpenOptions::new().write(true).truncate(true).open(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_err("open", path, e)),
                _ => {}
            }
        }
        Ok(seg)
    }

    /// An empty segment at `base` in `dir` over files just made empty (their names followed by
    /// `suffix`); its index files are created with their first entries.
    pub(in crate::partition_log) fn empty(dir: Arc<Path>, base: i64, suffix: &'static str) -> Self {
        Segment {
            base,
            next_offset: base,
            size: 0,
            dir,
            suffix,
            log: LazyFile::new(),
            index_file: LazyFile::created_on_use(),
            index: Vec::new(),
            time_file: LazyFile::created_on_use(),
            time: TimeIndex::default(),
        }
    }

    /// Opens an existing segment's files; the caller must then run one of the `recover_*` methods.
    pub fn open(dir: &Arc<Path>, base: i64) -> Result<Self, LogError> {
        let mut seg = Segment::empty(dir.clone(), base, "");
        let log_path = seg.log_path();
        seg.size = std::fs::metadata(&log_path)
            .map_err(|e| io_err("stat", &log_path, e))?
            .len();
        Ok(seg)
    }

    /// The `.log` file's path.
    pub fn log_path(&self) -> PathBuf {
        file_path(&self.dir, self.base, "log", self.suffix)
    }

    /// The `.index` file's path.
    pub fn index_path(&self) -> PathBuf {
        file_path(&self.dir, self.base, "index", self.suffix)
    }

    /// The `.timeindex` file's path.
    pub fn time_path(&self) -> PathBuf {
        file_path(&self.dir, self.base, "timeindex", self.suffix)
    }

    /// The `.log`, `.index` and `.timeindex` paths.
    pub fn paths(&self) -> [PathBuf; 3] {
        [self.log_path(), self.index_path(), self.time_path()]
    }

    /// Reads the index file, keeping the longest prefix of plausible entries; true if the file was fully valid.
    fn load_index(&mut self) -> Result<(Vec<IndexEntry>, bool), LogError> {
        // A missing index is an empty one: it is made with its first entry.
        let len = match std::fs::metadata(self.index_path()) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            r => r.map_err(|e| io_err("stat", &self.index_path(), e))?.len(),
        };
        if len == 0 {
            return Ok((Vec::new(), true));
        }
        // A valid index is far smaller than this; anything bigger is garbage, not worth reading.
        let max_len = (self.size / HEADER_LEN as u64 + 1) * INDEX_ENTRY_LEN as u64;
        if len > max_len {
            return Ok((Vec::new(), false));
        }
        let mut buf = vec![0u8; len as usize];
        self.index_file
            .get(|| self.index_path())
            .and_then(|f| f.read_exact_at(&mut buf, 0))
            .map_err(|e| io_err("read", &self.index_path(), e))?;
        let mut entries: Vec<IndexEntry> = Vec::with_capacity(buf.len() / INDEX_ENTRY_LEN);
        let mut clean = buf.len().is_multiple_of(INDEX_ENTRY_LEN);
        for chunk in buf.chunks_exact(INDEX_ENTRY_LEN) {
            let rel = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            let pos = u32::from_be_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]);
            let ordered = entries.last().is_none_or(|l| rel > l.rel && pos > l.pos);
            if !ordered || u64::from(pos) >= self.size {
                clean = false;
                break;
            }
            entries.push(IndexEntry { rel, pos });
        }
        Ok((entries, clean))
    }

    /// Reads and checks the header of the batch at `pos`, which must lie wholly within `limit`.
    fn header_at(&self, pos: u64, limit: u64) -> Result<BatchHeader, String> {
        let n = (limit - pos).min(HEADER_LEN as u64) as usize;
        let mut buf = [0u8; HEADER_LEN];
        self.log
            .get(|| self.log_path())
            .and_then(|f| f.read_exact_at(&mut buf[..n], pos))
            .map_err(|e| format!("read failed: {e}"))?;
        let h = record_batch::peek_header(&buf[..n])
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("incomplete header ({n} bytes)"))?;
        if pos + h.total_len as u64 > limit {
            return Err(format!(
                "incomplete batch: {} bytes declared, {} present",
                h.total_len,
                limit - pos
            ));
        }
        Ok(h)
    }

    /// Walks batches from `pos` (expected to start at offset `next_offset`) to the end of the file.
    ///
    /// With `full`, every batch is CRC-verified. Index entries are added past `index`'s last entry
    /// every `interval` bytes, the same rule `append` uses.
    fn scan(
        &self,
        mut pos: u64,
        mut next_offset: i64,
        mut index: Vec<IndexEntry>,
        interval: u32,
        full: bool,
        on_batch: &mut dyn FnMut(&BatchHeader),
    ) -> Scan {
        let limit = self.size;
        let mut stop = None;
        while pos < limit {
            let h = match self.header_at(pos, limit) {
                Ok(h) => h,
                Err(e) => {
                    stop = Some(e);
                    break;
                }
            };
            // Offsets may skip (the cleaner removed batches), never go back.
            if h.base_offset < next_offset {
                stop = Some(format!(
                    "batch base offset {} where at least {next_offset} was expected",
                    h.base_offset
                ));
                break;
            }
            if full {
                let mut buf = vec![0u8; h.total_len];
                if let Err(e) = self
                    .log
                    .get(|| self.log_path())
                    .and_then(|f| f.read_exact_at(&mut buf, pos))
                {
                    stop = Some(format!("read failed: {e}"));
                    break;
                }
                if let Err(e) = record_batch::verify(&buf) {
                    stop = Some(e.to_string());
                    break;
                }
            }
            maybe_index(&mut index, self.base, pos, h.last_offset(), interval);
            on_batch(&h);
            pos += h.total_len as u64;
            next_offset = h.next_offset();
        }
        Scan {
            pos,
            next_offset,
            index,
            stop,
        }
    }

    /// Where a scan may start from index entry `e`: its position and the base offset of the
    /// batch there, if that batch is whole and ends at the entry's offset.
    fn entry_start(&self, e: &IndexEntry) -> Option<(u64, i64)> {
        let h = self.header_at(e.pos.into(), self.size).ok()?;
        (h.last_offset() == self.base + i64::from(e.rel)).then_some((e.pos.into(), h.base_offset))
    }

    /// Recovers a sealed (non-active) segment: checks its tail from the last index entry and finds its end
    /// offset, rebuilding the index from scratch if it is missing or does not match the data.
    pub fn recover_sealed(&mut self, interval: u32) -> Result<(), LogError> {
        let (entries, clean) = self.load_index()?;
        let loaded = entries.len();
        let start = entries.last().map_or(Some((0, self.base)), |e| self.entry_start(e));
        let (pos, offset) = start.unwrap_or((0, self.base));
        let mut scan = self.scan(pos, offset, entries, interval, false, &mut |_| {});
        let mut rewrite = !clean || scan.index.len() != loaded;
        if !clean || start.is_none() || scan.stop.is_some() {
            tracing::warn!(path = %self.index_path().display(), "offset index does not match the log; rebuilding it");
            scan = self.scan(0, self.base, Vec::new(), interval, false, &mut |_| {});
            if let Some(why) = &scan.stop {
                return Err(self.corrupt(scan.pos, &format!("sealed segment is damaged: {why}")));
            }
            rewrite = true;
        }
        self.next_offset = scan.next_offset;
        self.index = scan.index;
        if rewrite {
            self.write_index_file()?;
            if self.index_file.is_open() {
                self.index_file
                    .get(|| self.index_path())
                    .and_then(File::sync_all)
                    .map_err(|e| io_err("fsync", &self.index_path(), e))?;
            }
        }
        // A sealed segment's time index ends with its largest timestamp; one missing (an older
        // Ferry's) or damaged (Kafka's preallocated file after an unclean stop) is rebuilt.
        let (time, clean) = self.load_time_index()?;
        if clean && (self.size == 0 || !time.entries().is_empty()) {
            self.time = time;
        } else {
            self.rebuild_time_index(interval, true)?;
        }
        Ok(())
    }

    /// Recovers the active segment: CRC-checks batches from the last trustworthy index entry and truncates
    /// the file at the first torn, corrupt or out-of-sequence batch. Returns the number of bytes dropped.
    pub fn recover_active(&mut self, interval: u32, on_batch: &mut dyn FnMut(&BatchHeader)) -> Result<u64, LogError> {
        let (entries, _) = self.load_index()?;
        // Start from the last index entry whose batch checks out; a bad entry falls back to the one before.
        let mut keep = entries.len();
        let scan = loop {
            let prefix = entries[..keep].to_vec();
            let Some((pos, offset)) = prefix.last().map_or(Some((0, self.base)), |e| self.entry_start(e)) else {
                keep -= 1;
                continue;
            };
            let scan = self.scan(pos, offset, prefix, interval, true, on_batch);
            if keep > 0 && scan.stop.is_some() && scan.pos == pos {
                keep -= 1;
                continue;
            }
            break scan;
        };
        let dropped = self.size - scan.pos;
        if let Some(why) = &scan.stop {
            tracing::warn!(
                path = %self.log_path().display(),
                position = scan.pos,
                bytes_dropped = dropped,
                reason = %why,
                "truncating damaged tail of the active segment"
            );
            let f = self
                .log
                .get(|| self.log_path())
                .map_err(|e| io_err("open", &self.log_path(), e))?;
            f.set_len(scan.pos)
                .map_err(|e| io_err("truncate", &self.log_path(), e))?;
            f.sync_all().map_err(|e| io_err("fsync", &self.log_path(), e))?;
        }
        self.size = scan.pos;
        self.next_offset = scan.next_offset;
        self.index = scan.index;
        self.write_index_file()?;
        // A whole file covers every batch up to its last entry; `observe_tail` reads the rest.
        // A damaged one is rebuilt.
        let (mut time, clean) = self.load_time_index()?;
        if clean {
            time.truncate(self.next_offset - self.base);
            self.time = time;
            self.observe_tail()?;
            self.write_time_file()?;
        } else {
            self.rebuild_time_index(interval, false)?;
        }
        Ok(dropped)
    }

    /// Calls `f` for every batch header in the segment, in order.
    pub fn for_each_header(&self, f: &mut dyn FnMut(&BatchHeader)) -> Result<(), LogError> {
        let scan = self.scan(0, self.base, Vec::new(), u32::MAX, false, f);
        match scan.stop {
            None => Ok(()),
            Some(why) => Err(self.corrupt(scan.pos, &why)),
        }
    }

    fn corrupt(&self, pos: u64, why: &str) -> LogError {
        LogError::Corrupt {
            path: self.log_path(),
            detail: format!("at byte {pos}: {why}"),
        }
    }

    /// Replaces the index file's content with the in-memory index.
    fn write_index_file(&self) -> Result<(), LogError> {
        let mut buf = Vec::with_capacity(self.index.len() * INDEX_ENTRY_LEN);
        for e in &self.index {
            buf.extend_from_slice(&e.rel.to_be_bytes());
            buf.extend_from_slice(&e.pos.to_be_bytes());
        }
        if buf.is_empty() && !self.index_file.is_open() {
            // Nothing to write; only clear a stale file, without keeping it open.
            let len = std::fs::metadata(self.index_path()).map_or(0, |m| m.len());
            if len == 0 {
                return Ok(());
            }
        }
        let f = self
            .index_file
            .get(|| self.index_path())
            .map_err(|e| io_err("open", &self.index_path(), e))?;
        f.write_all_at(&buf, 0)
            .map_err(|e| io_err("write", &self.index_path(), e))?;
        f.set_len(buf.len() as u64)
            .map_err(|e| io_err("truncate", &self.index_path(), e))
    }

    /// Header of the batch starting at `pos`, which must be a batch boundary.
    pub fn header_at_checked(&self, pos: u64) -> Result<BatchHeader, LogError> {
        self.header_at(pos, self.size).map_err(|why| self.corrupt(pos, &why))
    }

    /// Position and header of the batch containing `offset` (or the first after it, if the cleaner
    /// removed that one), found via the index then a forward scan.
    pub fn find_batch(&self, offset: i64) -> Result<(u64, BatchHeader), LogError> {
        let rel = offset - self.base;
        let i = self.index.partition_point(|e| i64::from(e.rel) <= rel);
        let mut pos = i.checked_sub(1).map_or(0, |i| u64::from(self.index[i].pos));
        while pos < self.size {
            let h = self.header_at_checked(pos)?;
            // A batch past `offset` stands for it when the cleaner removed the one it was in.
            if h.next_offset() > offset {
                return Ok((pos, h));
            }
            pos += h.total_len as u64;
        }
        Err(self.corrupt(pos, &format!("offset {offset} is past the end of the segment")))
    }

    /// Whether the segment starts with a whole, checksummed batch of the format Ferry wrote
    /// before Kafka's (little-endian header: length at 8, CRC32C at 16 over bytes 20 on). Such
    /// a segment is another format, not a torn write, and must not be cut.
    pub fn starts_in_old_ferry_format(&self) -> Result<bool, LogError> {
        let mut head = [0u8; 20];
        if self.size < 32 {
            return Ok(false);
        }
        let f = self
            .log
            .get(|| self.log_path())
            .map_err(|e| io_err("open", &self.log_path(), e))?;
        f.read_exact_at(&mut head, 0)
            .map_err(|e| io_err("read", &self.log_path(), e))?;
        let len = u64::from(u32::from_le_bytes([head[8], head[9], head[10], head[11]]));
        if !(20..=64 << 20).contains(&len) || 12 + len > self.size {
            return Ok(false);
        }
        let mut rest = vec![0u8; (len - 8) as usize];
        f.read_exact_at(&mut rest, 20)
            .map_err(|e| io_err("read", &self.log_path(), e))?;
        Ok(crc32c::crc32c(&rest) == u32::from_le_bytes([head[16], head[17], head[18], head[19]]))
    }

    /// Reads `len` bytes at `pos`.
    pub fn read_bytes(&self, pos: u64, len: usize, out: &mut Vec<u8>) -> Result<(), LogError> {
        let start = out.len();
        out.resize(start + len, 0);
        self.log
            .get(|| self.log_path())
            .and_then(|f| f.read_exact_at(&mut out[start..], pos))
            .map_err(|e| io_err("read", &self.log_path(), e))
    }

    /// Appends one verified batch at the end of the file and indexes it if due.
    pub fn append(&mut self, batch: &[u8], h: &BatchHeader, interval: u32) -> Result<(), LogError> {
        let pos = self.size;
        let f = self
            .log
            .get(|| self.log_path())
            .map_err(|e| io_err("open", &self.log_path(), e))?;
        if let Err(e) = f.write_all_at(batch, pos) {
            // Drop any partial write so the file keeps matching our in-memory size.
            let _ = f.set_len(pos);
            return Err(io_err("write", &self.log_path(), e));
        }
        self.note_batch(pos, h, interval);
        Ok(())
    }

    /// Takes in the batch just written at `pos`: its index and time index entries if due, and the
    /// segment's new size and end.
    fn note_batch(&mut self, pos: u64, h: &BatchHeader, interval: u32) {
        let before = self.index.len();
        maybe_index(&mut self.index, self.base, pos, h.last_offset(), interval);
        self.time.observe(h, self.base);
        if self.index.len() > before {
            self.append_time_entry();
            let e = self.index[before];
            let mut buf = [0u8; INDEX_ENTRY_LEN];
            buf[..4].copy_from_slice(&e.rel.to_be_bytes());
            buf[4..].copy_from_slice(&e.pos.to_be_bytes());
            let at = (before * INDEX_ENTRY_LEN) as u64;
            if let Err(err) = self
                .index_file
                .get(|| self.index_path())
                .and_then(|f| f.write_all_at(&buf, at))
            {
                // The index is only a lookup aid; losing an entry costs a longer scan, not data.
                tracing::warn!(path = %self.index_path().display(), error = %err, "failed to write index entry");
                self.index.truncate(before);
            }
        }
        self.size = pos + h.total_len as u64;
        self.next_offset = h.next_offset();
    }

    /// Cuts the segment so it ends right before the batch containing `offset`; returns the new end offset.
    pub fn truncate_to_batch_of(&mut self, offset: i64) -> Result<i64, LogError> {
        let (pos, h) = if offset <= self.base {
            (0, None)
        } else {
            self.find_batch(offset).map(|(p, h)| (p, Some(h)))?
        };
        let f = self
            .log
            .get(|| self.log_path())
            .map_err(|e| io_err("open", &self.log_path(), e))?;
        f.set_len(pos).map_err(|e| io_err("truncate", &self.log_path(), e))?;
        f.sync_all().map_err(|e| io_err("fsync", &self.log_path(), e))?;
        self.size = pos;
        self.next_offset = h.map_or(self.base, |h| h.base_offset);
        let keep = self.index.partition_point(|e| u64::from(e.pos) < pos);
        self.index.truncate(keep);
        self.write_index_file()?;
        self.time.truncate(self.next_offset - self.base);
        self.observe_tail()?;
        self.write_time_file()?;
        if self.index_file.is_open() {
            self.index_file
                .get(|| self.index_path())
                .and_then(File::sync_all)
                .map_err(|e| io_err("fsync", &self.index_path(), e))?;
        }
        Ok(self.next_offset)
    }

    /// Handles to the files [`Self::sync`] would fsync, to fsync them on another thread.
    pub fn sync_handles(&self) -> Result<Vec<(PathBuf, File)>, LogError> {
        let mut out = Vec::new();
        for (lazy, path) in [
            (&self.log, &self.log_path()),
            (&self.index_file, &self.index_path()),
            (&self.time_file, &self.time_path()),
        ] {
            if let Some(f) = lazy.file.get() {
                out.push((path.clone(), f.try_clone().map_err(|e| io_err("dup", path, e))?));
            }
        }
        Ok(out)
    }

    /// Removes the segment's files (the indexes may never have been made).
    pub fn remove_files(self) -> Result<(), LogError> {
        for path in [&self.log_path(), &self.index_path(), &self.time_path()] {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && path != &self.log_path() => {}
                r => r.map_err(|e| io_err("remove", path, e))?,
            }
        }
        Ok(())
    }

    /// Fsyncs the log and index files; a file never opened has nothing unsynced (it was created
    /// empty, and its folder is synced by the log).
    pub fn sync(&self) -> Result<(), LogError> {
        if let Some(f) = self.log.file.get() {
            f.sync_data().map_err(|e| io_err("fsync", &self.log_path(), e))?;
        }
        if let Some(f) = self.index_file.file.get() {
            f.sync_data().map_err(|e| io_err("fsync", &self.index_path(), e))?;
        }
        if let Some(f) = self.time_file.file.get() {
            f.sync_data().map_err(|e| io_err("fsync", &self.time_path(), e))?;
        }
        Ok(())
    }

    /// Number of index entries (for tests).
    #[cfg(test)]
    pub fn index_len(&self) -> usize {
        self.index.len()
    }
}

/// Adds an index entry for the batch at `pos` (ending at `batch_last`) if at least `interval`
/// bytes were written since the last entry.
fn maybe_index(index: &mut Vec<IndexEntry>, seg_base: i64, pos: u64, batch_last: i64, interval: u32) {
    let last_pos = index.last().map_or(0, |e| u64::from(e.pos));
    if pos.saturating_sub(last_pos) < u64::from(interval) || (!index.is_empty() && pos <= last_pos) {
        return;
    }
    // Entries that do not fit the u32 fields are skipped; lookups then just scan further.
    if let (Ok(rel), Ok(pos)) = (u32::try_from(batch_last - seg_base), u32::try_from(pos)) {
        index.push(IndexEntry { rel, pos });
    }
}
