//! Delete retention's pure decisions, Kafka's rules: which of a log's oldest sealed segments go
//! now, and whether the active segment is due to roll by time. The log applies them
//! (`log_start.rs`); a driver (`crate::retention`) runs them on a timer.
//!
//! Three rules, each a run of the oldest sealed segments (the active one never goes):
//! - time (`retention.ms`): a segment whose largest timestamp is more than `retention.ms` old;
//! - size (`retention.bytes`): the oldest segments while the log stays at least that big without them;
//! - log start: a segment wholly below the log start offset (after DeleteRecords), whatever the
//!   cleanup policy.
//!
//! Every rule stops at the first segment that does not qualify, and at the first that holds an
//! offset at or above the high watermark (records not yet committed are never deleted).

/// A topic's delete-retention settings, under Kafka's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// `retention.ms`; negative keeps records forever.
    pub retention_ms: i64,
    /// `retention.bytes`; negative sets no limit.
    pub retention_bytes: i64,
    /// `cleanup.policy` holds `delete`; without it only the log-start rule applies.
    pub delete: bool,
}

/// One sealed segment, as retention sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Its first offset.
    pub base: i64,
    /// The offset after its last record: the next segment's base.
    pub next_offset: i64,
    /// Its bytes.
    pub size: u64,
    /// Its largest record timestamp (the file's modification time when no record has one).
    pub largest_timestamp: i64,
}

/// The rule that deletes segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// `retention.ms`.
    Time,
    /// `retention.bytes`.
    Size,
    /// Wholly below the log start offset.
    LogStart,
}

/// How many of the oldest sealed segments to delete now (`sealed` oldest first, the active one
/// not among them) and the rule that reaches furthest; `None` when nothing goes. `total_size`
/// is the whole log's, the active segment included.
pub fn deletable(
    sealed: &[SegmentInfo],
    total_size: u64,
    log_start: i64,
    high_watermark: i64,
    policy: &RetentionPolicy,
    now_ms: i64,
) -> Option<(usize, DeleteReason)> {
    // Records at or past the high watermark are not committed: they stay.
    let committed = sealed.iter().take_while(|s| s.next_offset <= high_watermark).count();
    let sealed = &sealed[..committed];
    let run = |keep: &mut dyn FnMut(&SegmentInfo) -> bool| sealed.iter().take_while(|s| keep(s)).count();
    let by_start = run(&mut |s| s.next_offset <= log_start);
    let by_time = if policy.delete && policy.retention_ms >= 0 {
        run(&mut |s| now_ms.saturating_sub(s.largest_timestamp) > policy.retention_ms)
    } else {
        0
    };
    let by_size = match u64::try_from(policy.retention_bytes) {
        Ok(limit) if policy.delete && total_size >= limit => {
            let mut excess = total_size - limit;
            run(&mut |s| {
                let fits = s.size <= excess;
                if fits {
                    excess -= s.size;
                }
                fits
            })
        }
        _ => 0,
    };
    let mut best: Option<(usize, DeleteReason)> = None;
    for (n, why) in [
        (by_time, DeleteReason::Time),
        (by_size, DeleteReason::Size),
        (by_start, DeleteReason::LogStart),
    ] {
        // On a tie the rule named first is the one reported.
        if n > best.map_or(0, |(b, _)| b) {
            best = Some((n, why));
        }
    }
    best
}

/// Whether the active segment is due to roll by `segment.ms`: it holds records and its first
/// batch's timestamp (`rolling_timestamp`, Kafka's basis) is more than `segment_ms` old.
pub fn roll_due(active_size: u64, rolling_timestamp: Option<i64>, segment_ms: i64, now_ms: i64) -> bool {
    active_size > 0 && segment_ms > 0 && rolling_timestamp.is_some_and(|ts| now_ms.saturating_sub(ts) > segment_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Segments of 100 bytes, 10 offsets each, with these largest timestamps.
    fn segs(timestamps: &[i64]) -> Vec<SegmentInfo> {
        timestamps
            .iter()
            .enumerate()
            .map(|(i, ts)| SegmentInfo {
                base: i as i64 * 10,
                next_offset: i as i64 * 10 + 10,
                size: 100,
                largest_timestamp: *ts,
            })
            .collect()
    }

    fn policy(retention_ms: i64, retention_bytes: i64) -> RetentionPolicy {
        RetentionPolicy {
            retention_ms,
            retention_bytes,
            delete: true,
        }
    }

    #[test]
    fn time_retention_deletes_the_oldest_run_of_expired_segments() {
        let s = segs(&[1_000, 2_000, 9_000, 3_000]);
        // At 10_000 with 5_000 ms: 1_000 and 2_000 are expired; 9_000 stops the run, so the
        // expired 3_000 behind it waits (Kafka stops at the first segment kept).
        assert_eq!(
            deletable(&s, 500, 0, 100, &policy(5_000, -1), 10_000),
            Some((2, DeleteReason::Time))
        );
        // Exactly retention.ms old is not older than it.
        assert_eq!(deletable(&s, 500, 0, 100, &policy(9_000, -1), 10_000), None);
        assert_eq!(
            deletable(&s, 500, 0, 100, &policy(-1, -1), 10_000),
            None,
            "-1 keeps forever"
        );
    }

    #[test]
    fn size_retention_keeps_the_log_at_least_retention_bytes() {
        let s = segs(&[0, 0, 0, 0]);
        // 4 sealed of 100 and an active of 50: 450 bytes. Down to 250 the two oldest can go.
        assert_eq!(
            deletable(&s, 450, 0, 100, &policy(-1, 250), 0),
            Some((2, DeleteReason::Size))
        );
        assert_eq!(
            deletable(&s, 450, 0, 100, &policy(-1, 251), 0),
            Some((1, DeleteReason::Size))
        );
        assert_eq!(
            deletable(&s, 450, 0, 100, &policy(-1, 150), 0),
            Some((3, DeleteReason::Size))
        );
        assert_eq!(deletable(&s, 450, 0, 100, &policy(-1, 451), 0), None, "under the limit");
        assert_eq!(
            deletable(&s, 450, 0, 100, &policy(-1, 0), 0),
            Some((4, DeleteReason::Size)),
            "every sealed segment, never the active one"
        );
    }

    #[test]
    fn the_rule_that_reaches_furthest_wins_and_compact_only_topics_keep_their_segments() {
        let s = segs(&[1_000, 20_000, 1_000, 1_000]);
        let both = policy(5_000, 150);
        assert_eq!(deletable(&s, 400, 0, 100, &both, 10_000), Some((2, DeleteReason::Size)));
        let by_time = policy(5_000, 350);
        assert_eq!(
            deletable(&s, 400, 0, 100, &by_time, 10_000),
            Some((1, DeleteReason::Time))
        );
        let compact = RetentionPolicy { delete: false, ..both };
        assert_eq!(deletable(&s, 400, 0, 100, &compact, 10_000), None);
        // Below the log start (DeleteRecords at 25): the two wholly below go, whatever the policy.
        assert_eq!(
            deletable(&s, 400, 25, 100, &compact, 10_000),
            Some((2, DeleteReason::LogStart))
        );
    }

    #[test]
    fn segments_holding_uncommitted_records_stay() {
        let s = segs(&[0, 0, 0]);
        assert_eq!(
            deletable(&s, 300, 0, 15, &policy(1, 0), 10_000),
            Some((1, DeleteReason::Time))
        );
        assert_eq!(deletable(&s, 300, 0, 9, &policy(1, 0), 10_000), None);
        assert_eq!(
            deletable(&s, 300, 0, 20, &policy(1, 0), 10_000),
            Some((2, DeleteReason::Time)),
            "a segment ending at the watermark is committed"
        );
    }

    #[test]
    fn the_active_segment_rolls_once_its_first_record_is_older_than_segment_ms() {
        assert!(roll_due(10, Some(1_000), 5_000, 7_000));
        assert!(!roll_due(10, Some(1_000), 5_000, 6_000));
        assert!(!roll_due(0, Some(1_000), 5_000, 70_000), "empty: nothing to roll");
        assert!(!roll_due(10, None, 5_000, 70_000), "no timestamp to go by");
    }
}
