//! What a clean keeps, by Kafka's rules (`Cleaner.shouldRetainRecord`, the cleaner's batch
//! retention and `MemoryRecords.filterTo`), and how it groups segments. Pure.
//!
//! A record is kept when it is past the offsets mapped, or is the latest of its key and either
//! has a value or is a tombstone whose batch's delete horizon has not passed. A record without
//! a key is not kept (Kafka refuses them on compacted topics; its cleaner drops any it finds).
//! A batch none of whose records are kept goes, except the last of a producer (kept empty, so
//! that its sequence survives) and the last of a cleaned segment (kept empty, so that the
//! segment still ends where the next begins). A control batch is kept as it is.

use std::ops::Range;

use crate::partition_log::SegmentFiles;
use crate::record_batch::BatchHeader;

/// The attribute bit of a batch whose base timestamp is its delete horizon (Kafka's KIP-534).
pub const DELETE_HORIZON_FLAG: i16 = 0x40;

/// What a clean does with a batch before looking at its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchRetention {
    /// Kept as it is (a control batch: Ferry writes no transactions, so none ends).
    Whole,
    /// Its kept records in a rebuilt batch, and the batch emptied if none is kept.
    RetainEmpty,
    /// Its kept records in a rebuilt batch, and the batch gone if none is kept.
    DeleteEmpty,
}

/// The retention of batch `h` in a cleaned segment ending at `segment_end`, where
/// `producer_last` is the last offset its producer wrote.
pub fn batch_retention(h: &BatchHeader, producer_last: Option<i64>, segment_end: i64) -> BatchRetention {
    if h.is_control() {
        BatchRetention::Whole
    } else if (h.producer_id >= 0 && producer_last == Some(h.last_offset())) || h.next_offset() == segment_end {
        BatchRetention::RetainEmpty
    } else {
        BatchRetention::DeleteEmpty
    }
}

/// The batch's delete horizon, if a clean set one.
pub fn delete_horizon(h: &BatchHeader) -> Option<i64> {
    (h.attributes & DELETE_HORIZON_FLAG != 0).then_some(h.base_timestamp_ms)
}

/// One record, as the keep decision sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordFacts {
    /// Its offset.
    pub offset: i64,
    /// Whether it has a key.
    pub has_key: bool,
    /// Whether it has a value (a tombstone has none).
    pub has_value: bool,
    /// The latest offset the map holds for its key.
    pub latest_for_key: Option<i64>,
}

/// Whether a clean keeps a record, given the last offset mapped, its batch's delete horizon and
/// the time of the clean.
pub fn retain_record(r: &RecordFacts, latest_mapped: i64, horizon: Option<i64>, now_ms: i64) -> bool {
    if r.offset > latest_mapped {
        return true;
    }
    if !r.has_key {
        return false;
    }
    let latest = r.latest_for_key.is_none_or(|l| r.offset >= l);
    let keep_tombstone = horizon.is_none_or(|h| now_ms < h);
    latest && (r.has_value || keep_tombstone)
}

/// The delete horizon a rebuilt batch carries: the one it had, or, when it keeps a tombstone
/// for the first time, `delete.retention.ms` from now.
pub fn new_horizon(existing: Option<i64>, keeps_tombstone: bool, now_ms: i64, delete_retention_ms: i64) -> Option<i64> {
    existing.or_else(|| keeps_tombstone.then(|| now_ms.saturating_add(delete_retention_ms)))
}

/// Runs of consecutive segments, each cleaned into one: at most `max_bytes` together (the
/// log's segment size) and at most `i32::MAX` offsets apart, as Kafka groups them.
pub fn group_segments(segments: &[SegmentFiles], max_bytes: u64) -> Vec<Range<usize>> {
    let mut groups = Vec::new();
    let mut start = 0;
    while start < segments.len() {
        let first = &segments[start];
        let (mut end, mut bytes) = (start + 1, first.size);
        while let Some(next) = segments.get(end) {
            let span = next.next_offset - 1 - first.base;
            if bytes + next.size > max_bytes || span > i64::from(i32::MAX) {
                break;
            }
            bytes += next.size;
            end += 1;
        }
        groups.push(start..end);
        start = end;
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn header(base: i64, delta: u32, pid: i64, attributes: i16) -> BatchHeader {
        BatchHeader {
            base_offset: base,
            last_offset_delta: delta,
            record_count: delta + 1,
            producer_id: pid,
            attributes,
            base_timestamp_ms: 777,
            ..Default::default()
        }
    }

    fn rec(offset: i64, key: bool, value: bool, latest: Option<i64>) -> RecordFacts {
        RecordFacts {
            offset,
            has_key: key,
            has_value: value,
            latest_for_key: latest,
        }
    }

    #[test]
    fn only_the_latest_record_of_a_key_is_kept_and_keyless_ones_go() {
        let latest_mapped = 100;
        assert!(retain_record(&rec(10, true, true, Some(10)), latest_mapped, None, 0));
        assert!(!retain_record(&rec(10, true, true, Some(50)), latest_mapped, None, 0));
        // A key the map does not hold (mapped before the dirty part) stays.
        assert!(retain_record(&rec(10, true, true, None), latest_mapped, None, 0));
        assert!(!retain_record(&rec(10, false, true, None), latest_mapped, None, 0));
        // Past the mapped offsets everything stays, keyless records too.
        assert!(retain_record(&rec(101, true, true, Some(500)), latest_mapped, None, 0));
        assert!(retain_record(&rec(101, false, true, None), latest_mapped, None, 0));
    }

    #[test]
    fn a_tombstone_stays_until_its_batchs_delete_horizon() {
        let t = rec(10, true, false, Some(10));
        assert!(
            retain_record(&t, 100, None, 5_000),
            "no horizon yet: kept, and one is set"
        );
        assert_eq!(new_horizon(None, true, 5_000, 1_000), Some(6_000));
        assert!(retain_record(&t, 100, Some(6_000), 5_999));
        assert!(!retain_record(&t, 100, Some(6_000), 6_000));
        // A superseded tombstone goes at once.
        assert!(!retain_record(&rec(10, true, false, Some(11)), 100, None, 0));
        // A horizon once set stays; none is set without a tombstone.
        assert_eq!(new_horizon(Some(42), true, 5_000, 1_000), Some(42));
        assert_eq!(new_horizon(None, false, 5_000, 1_000), None);
        assert_eq!(new_horizon(None, true, i64::MAX - 1, 1_000), Some(i64::MAX));
    }

    #[test]
    fn the_horizon_is_read_from_the_flag_and_the_base_timestamp() {
        assert_eq!(delete_horizon(&header(0, 0, -1, 0)), None);
        assert_eq!(delete_horizon(&header(0, 0, -1, DELETE_HORIZON_FLAG | 2)), Some(777));
    }

    #[test]
    fn a_producers_last_batch_and_a_segments_last_batch_are_kept_empty() {
        let h = header(10, 4, 7, 0);
        assert_eq!(batch_retention(&h, Some(14), 100), BatchRetention::RetainEmpty);
        assert_eq!(batch_retention(&h, Some(20), 100), BatchRetention::DeleteEmpty);
        assert_eq!(batch_retention(&h, None, 15), BatchRetention::RetainEmpty);
        assert_eq!(
            batch_retention(&header(10, 4, -1, 0), Some(14), 100),
            BatchRetention::DeleteEmpty
        );
        assert_eq!(
            batch_retention(&header(10, 0, 7, 0x20), None, 100),
            BatchRetention::Whole
        );
    }

    #[test]
    fn segments_group_up_to_the_segment_size_and_an_int_of_offsets() {
        let seg = |base: i64, next: i64, size: u64| SegmentFiles {
            base,
            next_offset: next,
            size,
            log_path: PathBuf::new(),
            largest_timestamp: 0,
            first_batch_timestamp: None,
        };
        let segs = [
            seg(0, 10, 40),
            seg(10, 20, 40),
            seg(20, 30, 30),
            seg(30, 40, 90),
            seg(40, 50, 5),
        ];
        assert_eq!(group_segments(&segs, 100), vec![0..2, 2..3, 3..5]);
        assert_eq!(group_segments(&segs, 10), vec![0..1, 1..2, 2..3, 3..4, 4..5]);
        let wide = [
            seg(0, 10, 1),
            seg(10, i64::from(i32::MAX) + 1, 1),
            seg(i64::from(i32::MAX) + 1, i64::from(i32::MAX) + 5, 1),
        ];
        assert_eq!(group_segments(&wide, 100), vec![0..2, 2..3]);
        assert!(group_segments(&[], 100).is_empty());
    }
}
