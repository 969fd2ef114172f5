//! Which log to clean and how far, by Kafka's rules (`LogCleanerManager`, `LogToClean`): the
//! dirty part of a log runs from the cleaner checkpoint to the first segment that may not be
//! cleaned yet (the active one, the one holding the high watermark, or the first with a record
//! younger than `min.compaction.lag.ms`); its dirty ratio is the bytes of those segments over
//! the whole; the log with the largest ratio above its `min.cleanable.dirty.ratio` is cleaned
//! first, and one with a dirty record older than `max.compaction.lag.ms` is cleaned whatever
//! its ratio. Pure.

use crate::partition_log::SegmentFiles;

use super::policy::CompactionPolicy;

/// A log as the choice sees it.
#[derive(Debug, Clone, Copy)]
pub struct LogStat<'a> {
    /// Every segment, oldest first; the last one is active.
    pub segments: &'a [SegmentFiles],
    /// The log start offset.
    pub log_start: i64,
    /// The high watermark: nothing at or past it is cleaned (Kafka's last stable offset).
    pub high_watermark: i64,
}

impl LogStat<'_> {
    fn active(&self) -> Option<&SegmentFiles> {
        self.segments.last()
    }

    fn log_end(&self) -> i64 {
        self.active().map_or(self.log_start, |s| s.next_offset)
    }

    /// Index of the segment holding `offset` (the first one for an offset before it).
    fn floor(&self, offset: i64) -> usize {
        self.segments.partition_point(|s| s.base <= offset).saturating_sub(1)
    }

    /// The sealed segments from the one holding `from` on (Kafka's `nonActiveLogSegmentsFrom`).
    fn sealed_from(&self, from: i64) -> &[SegmentFiles] {
        let sealed = self.segments.len().saturating_sub(1);
        let start = self.floor(from).min(sealed);
        if self.active().is_some_and(|a| from >= a.base) {
            return &[];
        }
        &self.segments[start..sealed]
    }

    /// Bytes of the segments that hold offsets in `from..to`.
    fn bytes_between(&self, from: i64, to: i64) -> u64 {
        self.segments[self.floor(from)..]
            .iter()
            .take_while(|s| s.base < to)
            .map(|s| s.size)
            .sum()
    }
}

/// The range of a log a clean may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetsToClean {
    /// Where the dirty part starts.
    pub first_dirty: i64,
    /// The first offset not to clean (exclusive end of the dirty part).
    pub first_uncleanable: i64,
    /// The checkpoint was out of the log and is reset to `first_dirty`.
    pub force_update_checkpoint: bool,
}

/// The dirty range of a log whose cleaner checkpoint is `checkpoint` (Kafka's
/// `cleanableOffsets`): a checkpoint before the log start or past its end restarts at the start.
pub fn cleanable_offsets(
    log: &LogStat,
    checkpoint: Option<i64>,
    policy: &CompactionPolicy,
    now_ms: i64,
) -> OffsetsToClean {
    let start = log.log_start;
    let checkpointed = checkpoint.unwrap_or(start);
    let (first_dirty, force_update_checkpoint) = if checkpointed < start || checkpointed > log.log_end() {
        (start, true)
    } else {
        (checkpointed, false)
    };
    let lag = policy.min_compaction_lag_ms.max(0);
    let too_young = (lag > 0)
        .then(|| {
            log.sealed_from(first_dirty)
                .iter()
                .find(|s| s.largest_timestamp > now_ms.saturating_sub(lag))
                .map(|s| s.base)
        })
        .flatten();
    let active = log.active().map_or(first_dirty, |a| a.base);
    let uncleanable = [Some(log.high_watermark), Some(active), too_young]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(active);
    OffsetsToClean {
        first_dirty,
        first_uncleanable: first_dirty.max(uncleanable),
        force_update_checkpoint,
    }
}

/// How long past `max.compaction.lag.ms` the oldest dirty record is (its segment's first batch
/// timestamp), in ms; 0 if none is (Kafka's `maxCompactionDelay`).
pub fn max_compaction_delay(log: &LogStat, first_dirty: i64, policy: &CompactionPolicy, now_ms: i64) -> i64 {
    let earliest = log
        .sealed_from(first_dirty)
        .iter()
        .filter_map(|s| s.first_batch_timestamp)
        .filter(|ts| *ts > 0)
        .min();
    let clean_until = now_ms.saturating_sub(policy.max_compaction_lag_ms.max(0));
    match earliest {
        Some(ts) if ts < clean_until => clean_until - ts,
        _ => 0,
    }
}

/// A log's clean and cleanable parts (Kafka's `LogToClean`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogToClean {
    /// Where the dirty part starts.
    pub first_dirty: i64,
    /// The base of the first segment not to clean: the clean maps keys up to here.
    pub first_uncleanable: i64,
    /// Bytes of the segments before the dirty part.
    pub clean_bytes: u64,
    /// Bytes of the dirty segments that may be cleaned.
    pub cleanable_bytes: u64,
    /// A dirty record is older than `max.compaction.lag.ms`.
    pub need_compaction_now: bool,
}

impl LogToClean {
    /// Clean and cleanable bytes.
    pub fn total_bytes(&self) -> u64 {
        self.clean_bytes + self.cleanable_bytes
    }

    /// Cleanable bytes over the total: the dirty ratio.
    pub fn cleanable_ratio(&self) -> f64 {
        match self.total_bytes() {
            0 => 0.0,
            t => self.cleanable_bytes as f64 / t as f64,
        }
    }
}

/// The clean and cleanable bytes of `log` for `offsets`; the cleanable part ends at the base of
/// the segment holding `first_uncleanable` (Kafka's `calculateCleanableBytes`).
pub fn log_to_clean(log: &LogStat, offsets: &OffsetsToClean, need_compaction_now: bool) -> LogToClean {
    let first_uncleanable = log
        .sealed_from(offsets.first_uncleanable)
        .first()
        .or(log.active())
        .map_or(offsets.first_uncleanable, |s| s.base);
    let clean_bytes = log
        .segments
        .iter()
        .take_while(|s| s.base < offsets.first_dirty)
        .map(|s| s.size)
        .sum();
    let cleanable_bytes = log.bytes_between(offsets.first_dirty.min(first_uncleanable), first_uncleanable);
    LogToClean {
        first_dirty: offsets.first_dirty,
        first_uncleanable,
        clean_bytes,
        cleanable_bytes,
        need_compaction_now,
    }
}

/// Whether a log is due: dirtier than its `min.cleanable.dirty.ratio`, or past its
/// `max.compaction.lag.ms` with something to clean.
pub fn is_due(ltc: &LogToClean, policy: &CompactionPolicy) -> bool {
    (ltc.need_compaction_now && ltc.cleanable_bytes > 0) || ltc.cleanable_ratio() > policy.min_cleanable_ratio
}

/// The due log with the largest dirty ratio, among `(key, log, policy)` candidates.
pub fn filthiest<K>(
    candidates: impl IntoIterator<Item = (K, LogToClean, CompactionPolicy)>,
) -> Option<(K, LogToClean)> {
    candidates
        .into_iter()
        .filter(|(_, ltc, policy)| ltc.total_bytes() > 0 && is_due(ltc, policy))
        .map(|(k, ltc, _)| (k, ltc))
        .max_by(|a, b| a.1.cleanable_ratio().total_cmp(&b.1.cleanable_ratio()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// Segments of `sizes` bytes, 100 offsets each, the last active; segment i's records have
    /// timestamps up to `1000 * (i + 1)`, its first batch `1000 * i + 1`.
    fn segments(sizes: &[u64]) -> Vec<SegmentFiles> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| SegmentFiles {
                base: 100 * i as i64,
                next_offset: 100 * (i as i64 + 1),
                size,
                log_path: PathBuf::new(),
                largest_timestamp: 1000 * (i as i64 + 1),
                first_batch_timestamp: Some(1000 * i as i64 + 1),
            })
            .collect()
    }

    fn stat(segs: &[SegmentFiles], hw: i64) -> LogStat<'_> {
        LogStat {
            segments: segs,
            log_start: 0,
            high_watermark: hw,
        }
    }

    fn compacted() -> CompactionPolicy {
        CompactionPolicy {
            compact: true,
            ..Default::default()
        }
    }

    #[test]
    fn the_dirty_ratio_is_the_dirty_sealed_segments_over_the_whole_and_the_active_one_is_never_dirty() {
        let segs = segments(&[10, 10, 30, 50, 999]);
        let log = stat(&segs, 450);
        let p = compacted();
        // Never cleaned: everything sealed is dirty; the active segment counts nowhere.
        let o = cleanable_offsets(&log, None, &p, 0);
        assert_eq!(
            o,
            OffsetsToClean {
                first_dirty: 0,
                first_uncleanable: 400,
                force_update_checkpoint: false
            }
        );
        let ltc = log_to_clean(&log, &o, false);
        assert_eq!((ltc.clean_bytes, ltc.cleanable_bytes), (0, 100));
        assert_eq!(ltc.cleanable_ratio(), 1.0);
        // Cleaned up to 200: 20 clean bytes, 80 dirty.
        let o = cleanable_offsets(&log, Some(200), &p, 0);
        let ltc = log_to_clean(&log, &o, false);
        assert_eq!(
            (ltc.clean_bytes, ltc.cleanable_bytes, ltc.first_uncleanable),
            (20, 80, 400)
        );
        assert_eq!(ltc.cleanable_ratio(), 0.8);
        assert!(is_due(&ltc, &p));
        // Cleaned up to the active segment: nothing dirty, nothing due.
        let ltc = log_to_clean(&log, &cleanable_offsets(&log, Some(400), &p, 0), false);
        assert_eq!((ltc.cleanable_bytes, ltc.cleanable_ratio()), (0, 0.0));
        assert!(!is_due(&ltc, &p));
    }

    #[test]
    fn the_high_watermark_bounds_the_clean_at_its_segments_base() {
        let segs = segments(&[10, 10, 10, 10]);
        let o = cleanable_offsets(&stat(&segs, 150), None, &compacted(), 0);
        assert_eq!(o.first_uncleanable, 150);
        let ltc = log_to_clean(&stat(&segs, 150), &o, false);
        assert_eq!((ltc.first_uncleanable, ltc.cleanable_bytes), (100, 10));
    }

    #[test]
    fn a_checkpoint_outside_the_log_starts_over_at_the_log_start() {
        let segs = segments(&[10, 10]);
        let mut log = stat(&segs, 200);
        let o = cleanable_offsets(&log, Some(500), &compacted(), 0);
        assert_eq!((o.first_dirty, o.force_update_checkpoint), (0, true));
        log.log_start = 50;
        let o = cleanable_offsets(&log, Some(20), &compacted(), 0);
        assert_eq!((o.first_dirty, o.force_update_checkpoint), (50, true));
    }

    #[test]
    fn a_segment_younger_than_the_min_compaction_lag_and_all_after_it_wait() {
        let segs = segments(&[10, 10, 10, 10, 10]);
        let log = stat(&segs, 500);
        let p = CompactionPolicy {
            min_compaction_lag_ms: 1500,
            ..compacted()
        };
        // At 3600 the segments ending at 1000 and 2000 are old enough; the one ending at 3000 is not.
        let o = cleanable_offsets(&log, None, &p, 3600);
        assert_eq!(o.first_uncleanable, 200);
        assert_eq!(log_to_clean(&log, &o, false).cleanable_bytes, 20);
        // Without a lag, up to the active segment.
        assert_eq!(cleanable_offsets(&log, None, &compacted(), 3600).first_uncleanable, 400);
    }

    #[test]
    fn a_dirty_record_older_than_the_max_compaction_lag_makes_the_log_due_whatever_its_ratio() {
        let segs = segments(&[1000, 1000, 1000, 10, 10]);
        let log = stat(&segs, 500);
        let p = CompactionPolicy {
            max_compaction_lag_ms: 1000,
            ..compacted()
        };
        let o = cleanable_offsets(&log, Some(300), &p, 5000);
        // The first dirty segment's first batch is at 3001; due from 4001 on.
        assert_eq!(max_compaction_delay(&log, o.first_dirty, &p, 5000), 999);
        assert_eq!(max_compaction_delay(&log, o.first_dirty, &p, 4001), 0);
        let ltc = log_to_clean(&log, &o, true);
        assert!(ltc.cleanable_ratio() < p.min_cleanable_ratio);
        assert!(is_due(&ltc, &p));
        assert!(!is_due(&log_to_clean(&log, &o, false), &p));
        // The default lag never forces a clean.
        assert_eq!(max_compaction_delay(&log, 0, &compacted(), i64::MAX), 0);
    }

    #[test]
    fn the_filthiest_due_log_is_chosen() {
        let ltc = |clean, cleanable| LogToClean {
            first_dirty: 0,
            first_uncleanable: 0,
            clean_bytes: clean,
            cleanable_bytes: cleanable,
            need_compaction_now: false,
        };
        let p = compacted();
        let low = CompactionPolicy {
            min_cleanable_ratio: 0.1,
            ..p
        };
        let picked = filthiest([("a", ltc(60, 40), p), ("b", ltc(30, 70), p), ("c", ltc(80, 20), low)]);
        assert_eq!(picked.map(|(k, _)| k), Some("b"));
        // "c" alone is due by its own lower ratio; "a" is not.
        assert_eq!(
            filthiest([("a", ltc(60, 40), p), ("c", ltc(80, 20), low)]).map(|(k, _)| k),
            Some("c")
        );
        assert!(filthiest([("a", ltc(60, 40), p), ("e", ltc(0, 0), low)]).is_none());
    }
}
