//! The log start offset and segment deletion on a real log in a temp dir: retention by time and
//! by size, the active segment kept, the start moved and kept across a reopen.

use std::fs;
use std::path::Path;

use super::retention::{deletable, DeleteReason, RetentionPolicy};
use super::*;

fn small() -> LogConfig {
    LogConfig {
        segment_bytes: 300,
        index_interval_bytes: 1,
        fsync_on_append: false,
        fsync_on_roll: true,
    }
}

/// Appends `n` single-record batches in epoch 1, the record at offset `o` stamped `ts(o)`.
fn fill(log: &mut PartitionLog, n: usize, ts: impl Fn(i64) -> i64) {
    for _ in 0..n {
        let o = log.log_end_offset();
        log.append_as_leader(&[format!("record {o:04}")], 1, ts(o)).unwrap();
    }
}

fn names(dir: &Path, suffix: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(suffix))
        .collect();
    v.sort();
    v
}

fn policy(retention_ms: i64, retention_bytes: i64) -> RetentionPolicy {
    RetentionPolicy {
        retention_ms,
        retention_bytes,
        delete: true,
    }
}

/// Runs retention once on `log` as the driver does, with everything committed.
fn apply(log: &mut PartitionLog, p: &RetentionPolicy, now: i64) -> Option<(usize, DeleteReason)> {
    let hw = log.log_end_offset();
    let d = deletable(
        &log.sealed_segment_infos(),
        log.size_bytes(),
        log.log_start_offset(),
        hw,
        p,
        now,
    )?;
    let renamed = log.delete_oldest_segments(d.0).unwrap();
    assert!(renamed.iter().all(|p| p.to_string_lossy().ends_with(DELETED_SUFFIX)));
    Some(d)
}

#[test]
fn time_retention_deletes_expired_sealed_segments_and_moves_the_log_start() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut log = PartitionLog::open(&dir, small()).unwrap();
    // Offsets 0..20 stamped 1_000 + o, then 20..40 stamped 100_000 + o.
    fill(&mut log, 40, |o| if o < 20 { 1_000 + o } else { 100_000 + o });
    let segments = log.segment_count();
    assert!(segments >= 6, "{segments} segments");
    let old: Vec<_> = log
        .sealed_segment_infos()
        .into_iter()
        .filter(|s| s.next_offset <= 20)
        .collect();
    assert!(!old.is_empty());
    let (n, why) = apply(&mut log, &policy(50_000, -1), 100_000).unwrap();
    assert_eq!((n, why), (old.len(), DeleteReason::Time));
    let start = old.last().unwrap().next_offset;
    assert_eq!(log.log_start_offset(), start);
    assert_eq!(log.segment_count(), segments - n);
    // The renamed files wait for their removal; the log no longer sees them.
    assert_eq!(names(&dir, ".log.deleted").len(), n);
    assert!(matches!(
        log.read(0, 1000, 40),
        Err(LogError::OffsetOutOfRange { offset: 0, .. })
    ));
    assert_eq!(log.read_records(start, 1 << 20, 40).unwrap()[0].0, start);
    // Nothing more expires: the rest is recent.
    assert_eq!(apply(&mut log, &policy(50_000, -1), 100_000), None);
    let deleted: Vec<_> = names(&dir, DELETED_SUFFIX).iter().map(|n| dir.join(n)).collect();
    remove_deleted_files(&deleted).unwrap();
    assert!(names(&dir, DELETED_SUFFIX).is_empty());
}

#[test]
fn size_retention_keeps_at_least_retention_bytes_and_never_the_active_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut log = PartitionLog::open(&dir, small()).unwrap();
    fill(&mut log, 40, |o| 1_000 + o);
    let total = log.size_bytes();
    let limit = total / 2;
    let (_, why) = apply(&mut log, &policy(-1, limit as i64), 0).unwrap();
    assert_eq!(why, DeleteReason::Size);
    let first = log.sealed_segment_infos()[0];
    assert!(log.size_bytes() >= limit, "kept at least retention.bytes");
    assert!(log.size_bytes() - first.size < limit, "and no more segments than that");
    // A limit of 0 takes every sealed segment; the active one stays, with its records.
    apply(&mut log, &policy(-1, 0), 0).unwrap();
    assert_eq!(log.segment_count(), 1);
    assert!(log.size_bytes() > 0);
    let active_base = log.log_start_offset();
    assert_eq!(
        log.read_records(active_base, 1 << 20, 40).unwrap().last().unwrap().0,
        39
    );
    assert_eq!(log.delete_oldest_segments(5).unwrap(), Vec::<std::path::PathBuf>::new());
    assert_eq!(log.log_end_offset(), 40);
}

#[test]
fn segment_ms_rolls_a_non_empty_active_segment_so_that_time_retention_can_take_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut log = PartitionLog::open(&dir, LogConfig::default()).unwrap();
    assert!(
        !log.roll_if_due(1_000, 1_000_000).unwrap(),
        "an empty active segment stays"
    );
    fill(&mut log, 3, |_| 5_000);
    assert_eq!(
        apply(&mut log, &policy(1_000, -1), 1_000_000),
        None,
        "only the active one"
    );
    assert!(!log.roll_if_due(1_000, 6_000).unwrap(), "not old enough");
    assert!(log.roll_if_due(1_000, 6_001).unwrap());
    assert_eq!(log.segment_count(), 2);
    assert_eq!(
        apply(&mut log, &policy(1_000, -1), 1_000_000),
        Some((1, DeleteReason::Time))
    );
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (3, 3));
    fill(&mut log, 1, |_| 2_000_000);
    assert_eq!(log.read_records(3, 1 << 20, 4).unwrap().len(), 1);
}

#[test]
fn the_log_start_survives_a_reopen_from_its_segments_and_from_a_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut log = PartitionLog::open(&dir, small()).unwrap();
    fill(&mut log, 30, |o| 1_000 + o);
    let second = log.sealed_segment_infos()[1].base;
    log.delete_oldest_segments(1).unwrap();
    assert_eq!(log.log_start_offset(), second);
    // DeleteRecords: inside a segment, which stays.
    let inside = second + 3;
    assert!(log.increment_log_start(inside).unwrap());
    assert!(!log.increment_log_start(inside - 1).unwrap(), "it never moves down");
    assert!(matches!(
        log.increment_log_start(31),
        Err(LogError::OffsetOutOfRange { offset: 31, .. })
    ));
    assert!(log.read(inside - 1, 100, 30).is_err());
    assert_eq!(log.offset_for_timestamp(0).unwrap().map(|(o, _)| o), Some(inside));
    drop(log);
    // Retention's deletions survive by themselves: the segment files are gone (and the
    // leftover `.deleted` files are removed when the log opens).
    assert!(!names(&dir, DELETED_SUFFIX).is_empty());
    let mut log = PartitionLog::open(&dir, small()).unwrap();
    assert!(names(&dir, DELETED_SUFFIX).is_empty());
    assert_eq!(log.log_start_offset(), second);
    // A start inside a segment comes back from the checkpoint.
    log.restore_log_start(inside).unwrap();
    assert_eq!(log.log_start_offset(), inside);
    assert_eq!(
        (
            log.log_end_offset(),
            log.read_records(inside, 1 << 20, 30).unwrap()[0].0
        ),
        (30, inside)
    );
    // Then the segments wholly below it go by the log-start rule, whatever the policy.
    fill(&mut log, 10, |o| 1_000 + o);
    let keep_all = RetentionPolicy {
        delete: false,
        ..policy(-1, -1)
    };
    log.increment_log_start(25).unwrap();
    assert_eq!(apply(&mut log, &keep_all, 0).map(|d| d.1), Some(DeleteReason::LogStart));
    assert!(log
        .sealed_segment_infos()
        .first()
        .is_none_or(|s| s.base <= 25 && s.next_offset > 25));
    assert_eq!(log.log_start_offset(), 25);
}

#[test]
fn a_checkpoint_past_the_log_end_starts_the_log_over_there() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut log = PartitionLog::open(&dir, small()).unwrap();
    fill(&mut log, 5, |o| o);
    log.restore_log_start(12).unwrap();
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset(), log.size_bytes()),
        (12, 12, 0)
    );
    assert_eq!(names(&dir, ".log"), vec![format!("{:020}.log", 12)]);
    fill(&mut log, 2, |o| o);
    drop(log);
    let log = PartitionLog::open(&dir, small()).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (12, 14));
    assert_eq!(log.latest_epoch(), Some(1));
}

#[test]
fn an_empty_follower_copies_from_a_log_start_inside_a_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let mut leader = PartitionLog::open(&tmp.path().join("l-0"), LogConfig::default()).unwrap();
    leader.append_as_leader(&["a", "b", "c", "d"], 3, 10).unwrap();
    leader.append_as_leader(&["e"], 3, 11).unwrap();
    leader.increment_log_start(2).unwrap();
    let mut follower = PartitionLog::open(&tmp.path().join("f-0"), LogConfig::default()).unwrap();
    // Its log ends below the leader's start: it starts over there, then takes the batch
    // holding offset 2, which begins at 0.
    follower.reset_to(2).unwrap();
    let raw = leader.read(2, 1 << 20, 5).unwrap();
    assert_eq!(follower.append_replicated(&raw).unwrap(), 5);
    assert_eq!(follower.log_start_offset(), 2);
    assert_eq!(follower.read_records(2, 1 << 20, 5).unwrap()[0].0, 2);
    assert_eq!(follower.end_offset_for_epoch(3), Some((3, 5)));
    // Truncating below its first segment (a divergent leader) starts it over there too.
    follower.truncate_to(0).unwrap();
    assert_eq!((follower.log_start_offset(), follower.log_end_offset()), (0, 0));
    assert!(follower.truncate_to(-1).is_err());
}

#[test]
fn the_epoch_cache_forgets_epochs_below_the_log_start() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut log = PartitionLog::open(&dir, small()).unwrap();
    for epoch in [1, 2, 3] {
        for _ in 0..5 {
            log.append_as_leader(&["x"], epoch, 0).unwrap();
        }
    }
    log.increment_log_start(7).unwrap();
    // Epoch 1 ended at 5, below the start: an older epoch now reads as unknown here.
    assert_eq!(log.end_offset_for_epoch(1), None);
    assert_eq!(log.end_offset_for_epoch(2), Some((2, 10)));
    drop(log);
    let log = PartitionLog::open(&dir, small()).unwrap();
    assert_eq!(log.end_offset_for_epoch(1), None);
    assert_eq!(log.end_offset_for_epoch(3), Some((3, 15)));
}
