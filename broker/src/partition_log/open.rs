//! Opening a partition log: its segments found and recovered after an unclean stop, and its
//! leader epoch checkpoint brought in line with them.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;

use crate::record_batch::BatchHeader;

use super::epoch_cache::EpochCache;
use super::segment::{self, Segment};
use super::{io_err, LogConfig, LogError, PartitionLog, PendingDirSyncs};

impl PartitionLog {
    /// Opens (creating if missing) the log in `dir`, recovering from an unclean shutdown.
    pub fn open(dir: &Path, cfg: LogConfig) -> Result<Self, LogError> {
        let mut syncs = PendingDirSyncs::default();
        let log = Self::open_deferring_syncs(dir, cfg, &mut syncs)?;
        match syncs.sync().into_iter().next() {
            Some((_, e)) => Err(e),
            None => Ok(log),
        }
    }

    /// Like [`Self::open`], but the folder syncs a creation needs are added to `syncs`; the log
    /// is durable once they are done.
    pub fn open_deferring_syncs(dir: &Path, cfg: LogConfig, syncs: &mut PendingDirSyncs) -> Result<Self, LogError> {
        if cfg.segment_bytes == 0 || cfg.segment_bytes > u64::from(u32::MAX) {
            // Index positions are u32, so a segment must stay addressable by them.
            return Err(LogError::InvalidConfig(format!(
                "segment_bytes must be in 1..={}, got {}",
                u32::MAX,
                cfg.segment_bytes
            )));
        }
        if !dir.is_dir() {
            fs::create_dir_all(dir).map_err(|e| io_err("create directory", dir, e))?;
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                syncs.add(parent);
            }
        }

        let mut logs = Vec::new();
        let mut cleaner_left = false;
        let mut indexes: Vec<(i64, &str)> = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| io_err("list", dir, e))? {
            let entry = entry.map_err(|e| io_err("list", dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(base) = name.strip_suffix(".log").and_then(segment::parse_stem) {
                logs.push(base);
            } else if let Some(base) = name.strip_suffix(".index").and_then(segment::parse_stem) {
                indexes.push((base, "index"));
            } else if let Some(base) = name.strip_suffix(".timeindex").and_then(segment::parse_stem) {
                indexes.push((base, "timeindex"));
            } else if name.ends_with(super::CLEANED_SUFFIX) || name.ends_with(super::SWAP_SUFFIX) {
                cleaner_left = true;
            } else if name.ends_with(super::DELETED_SUFFIX) {
                // Retention deleted it; its removal after the delay did not happen before the stop.
                let path = entry.path();
                fs::remove_file(&path).map_err(|e| io_err("remove", &path, e))?;
            }
        }
        if cleaner_left {
            // A clean a crash interrupted: finished or undone (`replace.rs`), then the folder is
            // read again.
            super::replace::recover_swaps(dir, syncs)?;
            return Self::open_deferring_syncs(dir, cfg, syncs);
        }
        logs.sort_unstable();
        // One copy of the folder's path, shared by the log and its segments.
        let shared: Arc<Path> = Arc::from(dir);
        let dir = &shared;
        for (base, ext) in indexes.into_iter().filter(|(b, _)| logs.binary_search(b).is_err()) {
            // An index without its log is left over from a deletion or roll that did not finish.
            let path = segment::file_path(dir, base, ext, "");
            fs::remove_file(&path).map_err(|e| io_err("remove", &path, e))?;
        }

        let mut segments: BTreeMap<i64, Box<Segment>> = BTreeMap::new();
        let mut tail_epochs: Vec<(u32, i64)> = Vec::new();
        let interval = cfg.index_interval_bytes;
        let mut collect_epochs = |h: &BatchHeader| {
            if tail_epochs.last().is_none_or(|&(e, _)| e != h.leader_epoch) {
                tail_epochs.push((h.leader_epoch, h.base_offset));
            }
        };
        for (i, &base) in logs.iter().enumerate() {
            let mut seg = Segment::open(dir, base)?;
            // Not a torn tail to cut away: a whole segment in another format is refused, so that
            // nothing is lost. Ferry's own format before Kafka's is not converted.
            if seg.starts_in_old_ferry_format()? {
                return Err(LogError::Corrupt {
                    path: seg.log_path(),
                    detail: "this log was written in the format of an older Ferry, not Kafka's record \
                             batch v2, and is not converted: move the folder away to start this replica empty"
                        .into(),
                });
            }
            if let Some(prev) = segments.values().next_back().map(|s| s.next_offset) {
                if prev != base {
                    if i + 1 == logs.len() {
                        // The last sealed segment lost its tail (see below): what follows the
                        // gap goes, and that segment is the active one again.
                        tracing::warn!(path = %seg.log_path().display(), previous_end = prev, "removing the active segment after a sealed one that lost its tail");
                        seg.remove_files()?;
                        syncs.add(dir);
                        let (prev_base, _) = segments.pop_last().expect("a previous segment exists");
                        let mut prev_seg = Segment::open(dir, prev_base)?;
                        prev_seg.recover_active(interval, &mut collect_epochs)?;
                        segments.insert(prev_base, Box::new(prev_seg));
                        break;
                    }
                    return Err(LogError::Corrupt {
                        path: seg.log_path(),
                        detail: format!("segment starts at offset {base} but the previous one ends at {prev}"),
                    });
                }
            }
            match logs.len() - i {
                1 => {
                    seg.recover_active(interval, &mut collect_epochs)?;
                }
                // The last sealed segment: its fsync may not have ended before a crash (see
                // `seal_sync`), so a torn tail is cut as the active segment's would be.
                2 => match seg.recover_sealed(interval) {
                    Err(LogError::Corrupt { detail, .. }) => {
                        tracing::warn!(path = %seg.log_path().display(), detail, "the last sealed segment lost its tail; recovering it as the active one");
                        seg = Segment::open(dir, base)?;
                        seg.recover_active(interval, &mut collect_epochs)?;
                    }
                    r => r?,
                },
                _ => seg.recover_sealed(interval)?,
            }
            segments.insert(base, Box::new(seg));
        }
        if segments.is_empty() {
            let seg = Segment::create(dir, 0)?;
            syncs.add(dir);
            segments.insert(0, Box::new(seg));
        }

        let (epochs, found) = EpochCache::load(dir)?;
        let log_start = *segments
            .keys()
            .next()
            .expect("a segment was made above if none was found");
        let mut log = PartitionLog {
            dir: shared.clone(),
            cfg,
            segments,
            epochs,
            producers: None,
            sealing: None,
            log_start,
        };
        log.recover_epochs(found, &tail_epochs)?;
        Ok(log)
    }

    /// Brings the epoch cache in line with the recovered log.
    fn recover_epochs(&mut self, found: bool, tail_epochs: &[(u32, i64)]) -> Result<(), LogError> {
        let leo = self.log_end_offset();
        if found {
            let mut changed = self.epochs.truncate_from_end_in_memory(leo);
            // Batches the checkpoint does not know about (it is written first, so this is only a safety net).
            for &(epoch, start) in tail_epochs {
                changed |= self.epochs.assign_in_memory(epoch, start);
            }
            if changed {
                self.epochs.persist()?;
            }
            return Ok(());
        }
        let mut seen = Vec::new();
        for seg in self.segments.values() {
            seg.for_each_header(&mut |h| seen.push((h.leader_epoch, h.base_offset)))?;
        }
        if seen.is_empty() {
            // Nothing to remember: an empty checkpoint would cost a new replica two more fsyncs,
            // and the first append writes the checkpoint anyway.
            return Ok(());
        }
        for (epoch, start) in seen {
            self.epochs.assign_in_memory(epoch, start);
        }
        tracing::info!(dir = %self.dir.display(), entries = self.epochs.entries().len(), "rebuilt leader epoch checkpoint");
        self.epochs.persist()
    }
}
