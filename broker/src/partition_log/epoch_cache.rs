//! Leader epoch cache: which epoch started at which offset, persisted in `leader-epoch-checkpoint`.
//!
//! File format (text, one entry per line, like Kafka's):
//! ```text
//! 0                  <- format version
//! 3                  <- entry count
//! 1 0                <- epoch start_offset
//! 2 4
//! 4 6
//! ```

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{io_err, sync_dir, LogError};

/// Name of the checkpoint file inside a partition folder.
pub(super) const CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";
const CHECKPOINT_TMP: &str = "leader-epoch-checkpoint.tmp";
const VERSION: u32 = 0;

/// One epoch and the first offset written in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct EpochEntry {
    pub epoch: u32,
    pub start_offset: i64,
}

/// In-memory cache; entries are strictly increasing in both epoch and start offset.
#[derive(Debug)]
pub(super) struct EpochCache {
    /// The partition's folder, shared with its log; the file paths are made when used.
    dir: Arc<Path>,
    entries: Vec<EpochEntry>,
}

impl EpochCache {
    /// Loads the checkpoint in `dir`; the flag is false if it was missing or corrupt (the caller rebuilds it).
    pub fn load(dir: &Arc<Path>) -> Result<(Self, bool), LogError> {
        let mut cache = EpochCache {
            dir: dir.clone(),
            entries: Vec::new(),
        };
        let (path, tmp_path) = (cache.path(), dir.join(CHECKPOINT_TMP));
        // A leftover temp file is a write that never got renamed; the old file is authoritative.
        match fs::remove_file(&tmp_path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("remove", &tmp_path, e)),
        }
        let text = match fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((cache, false)),
            Err(e) => return Err(io_err("read", &path, e)),
        };
        // Kafka creates the file empty with a new replica; like a missing one, it is rebuilt
        // from the log, without a warning.
        if text.is_empty() {
            return Ok((cache, false));
        }
        match parse(&text) {
            Some(entries) => {
                cache.entries = entries;
                Ok((cache, true))
            }
            None => {
                tracing::warn!(path = %path.display(), "leader epoch checkpoint is corrupt; rebuilding it from the log");
                Ok((cache, false))
            }
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.join(CHECKPOINT_FILE)
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// In-memory only; used while rebuilding from the log. Ignores epochs that do not move forward.
    pub fn assign_in_memory(&mut self, epoch: u32, start_offset: i64) -> bool {
        match self.entries.last() {
            Some(last) if epoch <= last.epoch || start_offset <= last.start_offset => false,
            _ => {
                self.entries.push(EpochEntry { epoch, start_offset });
                true
            }
        }
    }

    /// Records that `epoch` starts at `start_offset` and persists it; the caller has checked monotonicity.
    pub fn assign(&mut self, epoch: u32, start_offset: i64) -> Result<(), LogError> {
        let mut next = self.entries.clone();
        next.push(EpochEntry { epoch, start_offset });
        self.write(&next)?;
        self.entries = next;
        Ok(())
    }

    /// Drops entries starting at or after `end_offset` (in memory only); true if anything changed.
    pub fn truncate_from_end_in_memory(&mut self, end_offset: i64) -> bool {
        let keep = self.entries.partition_point(|e| e.start_offset < end_offset);
        let changed = keep != self.entries.len();
        self.entries.truncate(keep);
        changed
    }

    /// Drops entries starting at or after `end_offset` and persists the result if it changed.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<(), LogError> {
        let keep = self.entries.partition_point(|e| e.start_offset < end_offset);
        if keep != self.entries.len() {
            let next = self.entries[..keep].to_vec();
            self.write(&next)?;
            self.entries = next;
        }
        Ok(())
    }

    /// Forgets epochs wholly below a new log start `start`: the last entry starting at or before
    /// it now starts there (Kafka's `truncateFromStart`); persists the result if it changed.
    pub fn truncate_from_start(&mut self, start: i64) -> Result<(), LogError> {
        let covering = self.entries.partition_point(|e| e.start_offset <= start);
        let Some(i) = covering.checked_sub(1) else {
            return Ok(());
        };
        if i == 0 && self.entries[0].start_offset == start {
            return Ok(());
        }
        let mut next = vec![EpochEntry {
            epoch: self.entries[i].epoch,
            start_offset: start,
        }];
        next.extend_from_slice(&self.entries[covering..]);
        self.write(&next)?;
        self.entries = next;
        Ok(())
    }

    /// Forgets every entry (the log starts over empty) and persists that.
    pub fn clear(&mut self) -> Result<(), LogError> {
        if self.entries.is_empty() {
            return Ok(());
        }
        self.write(&[])?;
        self.entries.clear();
        Ok(())
    }

    /// Writes the current entries to disk.
    pub fn persist(&self) -> Result<(), LogError> {
        self.write(&self.entries)
    }

    /// Atomic replace: temp file, fsync, rename, fsync the folder.
    fn write(&self, entries: &[EpochEntry]) -> Result<(), LogError> {
        let mut text = format!("{VERSION}\n{}\n", entries.len());
        for e in entries {
            text.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
        }
        let (tmp, path) = (&self.dir.join(CHECKPOINT_TMP), self.path());
        let mut f = File::create(tmp).map_err(|e| io_err("create", tmp, e))?;
        f.write_all(text.as_bytes()).map_err(|e| io_err("write", tmp, e))?;
        f.sync_all().map_err(|e| io_err("fsync", tmp, e))?;
        drop(f);
        fs::rename(tmp, &path).map_err(|e| io_err("rename", &path, e))?;
        sync_dir(&self.dir)
    }

    /// Kafka OffsetsForLeaderEpoch: the largest cached epoch <= `epoch` and where it ends.
    pub fn end_offset_for(&self, epoch: u32, log_end_offset: i64) -> Option<(u32, i64)> {
        let idx = self.entries.partition_point(|e| e.epoch <= epoch);
        let found = self.entries.get(idx.checked_sub(1)?)?;
        let end = self.entries.get(idx).map_or(log_end_offset, |next| next.start_offset);
        Some((found.epoch, end))
    }
}

/// Parses checkpoint text; `None` if it is malformed or not strictly increasing.
fn parse(raw: &[u8]) -> Option<Vec<EpochEntry>> {
    let text = std::str::from_utf8(raw).ok()?;
    let mut lines = text.lines();
    if lines.next()?.trim().parse::<u32>().ok()? != VERSION {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    let mut entries: Vec<EpochEntry> = Vec::new();
    for _ in 0..count {
        let mut parts = lines.next()?.split_whitespace();
        let epoch: u32 = parts.next()?.parse().ok()?;
        let start_offset: i64 = parts.next()?.parse().ok()?;
        if parts.next().is_some() || start_offset < 0 {
            return None;
        }
        if let Some(last) = entries.last() {
            if epoch <= last.epoch || start_offset <= last.start_offset {
                return None;
            }
        }
        entries.push(EpochEntry { epoch, start_offset });
    }
    if lines.any(|l| !l.trim().is_empty()) {
        return None;
    }
    Some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_rejects_malformed() {
        assert_eq!(parse(b"0\n0\n"), Some(vec![]));
        assert_eq!(
            parse(b"0\n2\n1 0\n3 5\n"),
            Some(vec![
                EpochEntry {
                    epoch: 1,
                    start_offset: 0
                },
                EpochEntry {
                    epoch: 3,
                    start_offset: 5
                }
            ])
        );
        for bad in [
            &b""[..],
            b"1\n0\n",
            b"0\n2\n1 0\n",
            b"0\n1\n1 0 7\n",
            b"0\n2\n3 0\n1 5\n",
            b"0\n2\n1 5\n3 5\n",
            b"0\n1\n1 -1\n",
            b"0\n1\n1 0\nextra\n",
            b"\xff\xfe",
        ] {
            assert_eq!(parse(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn end_offset_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let (mut c, found) = EpochCache::load(&Arc::from(dir.path())).unwrap();
        assert!(!found);
        assert_eq!(c.end_offset_for(3, 10), None);
        c.assign(1, 0).unwrap();
        c.assign(2, 4).unwrap();
        c.assign(4, 6).unwrap();
        assert_eq!(c.end_offset_for(0, 8), None);
        assert_eq!(c.end_offset_for(1, 8), Some((1, 4)));
        assert_eq!(c.end_offset_for(3, 8), Some((2, 6)));
        assert_eq!(c.end_offset_for(4, 8), Some((4, 8)));
        assert_eq!(c.end_offset_for(9, 8), Some((4, 8)));
        let (reloaded, found) = EpochCache::load(&Arc::from(dir.path())).unwrap();
        assert!(found);
        assert_eq!(reloaded.entries(), c.entries());
    }
}
