//! The sealed segment's fsync beside the log (`seal_sync.rs`) and what opening a log repairs
//! when a crash cut it short.

use std::fs::{self, OpenOptions};
use std::path::Path;

use super::*;

fn cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 250,
        index_interval_bytes: 40,
        fsync_on_append: false,
        fsync_on_roll: true,
    }
}

/// Appends `n` single-record batches "r<offset>" in epoch 0.
fn fill(log: &mut PartitionLog, n: usize) {
    for _ in 0..n {
        let o = log.log_end_offset();
        log.append_as_leader(&[format!("r{o}")], 0, 1000 + o).unwrap();
    }
}

/// The base offsets of the segments on disk, oldest first.
fn bases(dir: &Path) -> Vec<i64> {
    let mut b: Vec<i64> = fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            e.unwrap()
                .file_name()
                .into_string()
                .unwrap()
                .strip_suffix(".log")
                .map(|s| s.parse().unwrap())
        })
        .collect();
    b.sort_unstable();
    b
}

fn log_path(dir: &Path, base: i64) -> std::path::PathBuf {
    dir.join(format!("{base:020}.log"))
}

fn cut(path: &Path, by: u64) {
    let len = fs::metadata(path).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len - by)
        .unwrap();
}

/// A closed log of 30 single-record batches over several segments, and its segments' bases.
fn closed_log_of_30_records() -> (tempfile::TempDir, Vec<i64>) {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(tmp.path(), cfg()).unwrap();
    fill(&mut log, 30);
    drop(log);
    let on_disk = bases(tmp.path());
    assert!(on_disk.len() >= 4, "{on_disk:?}");
    (tmp, on_disk)
}

#[test]
fn the_recovery_point_stays_at_the_sealed_segment_until_its_fsync_is_waited_for() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(tmp.path(), cfg()).unwrap();
    fill(&mut log, 30);
    let on_disk = bases(tmp.path());
    let (sealed, active) = (on_disk[on_disk.len() - 2], on_disk[on_disk.len() - 1]);
    // Only the segment sealed last may still be syncing; every roll waited for the one before.
    assert!(
        [sealed, active].contains(&log.recovery_point()),
        "{}",
        log.recovery_point()
    );
    log.flush().unwrap();
    assert_eq!(log.recovery_point(), active);
}

#[test]
fn a_torn_tail_of_the_last_sealed_segment_is_cut_and_the_active_segment_after_it_removed() {
    let (tmp, on_disk) = closed_log_of_30_records();
    let (sealed, active) = (on_disk[on_disk.len() - 2], on_disk[on_disk.len() - 1]);
    // The crash tore the last batch of the sealed segment (its fsync had not ended).
    cut(&log_path(tmp.path(), sealed), 3);

    let mut log = PartitionLog::open(tmp.path(), cfg()).unwrap();
    assert_eq!(
        log.log_end_offset(),
        active - 1,
        "the torn batch and everything after it are gone"
    );
    assert_eq!(bases(tmp.path()), on_disk[..on_disk.len() - 1]);
    let kept: Vec<i64> = log
        .read_records(0, 1 << 20, i64::MAX)
        .unwrap()
        .iter()
        .map(|(o, _)| *o)
        .collect();
    assert_eq!(kept, (0..active - 1).collect::<Vec<_>>());
    // The log goes on from there, and opens again as written.
    fill(&mut log, 5);
    let end = log.log_end_offset();
    drop(log);
    let log = PartitionLog::open(tmp.path(), cfg()).unwrap();
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(log.read_records(active - 1, 1 << 20, i64::MAX).unwrap().len(), 5);
}

#[test]
fn a_sealed_segment_that_lost_whole_batches_drops_what_follows_the_gap() {
    let (tmp, on_disk) = closed_log_of_30_records();
    let (sealed, active) = (on_disk[on_disk.len() - 2], on_disk[on_disk.len() - 1]);
    // Offsets of two digits: every batch of the sealed segment has the same size.
    assert!(sealed >= 10);
    let path = log_path(tmp.path(), sealed);
    let batch = fs::metadata(&path).unwrap().len() / (active - sealed) as u64;
    cut(&path, batch);

    let log = PartitionLog::open(tmp.path(), cfg()).unwrap();
    assert_eq!(log.log_end_offset(), active - 1);
    assert_eq!(bases(tmp.path()), on_disk[..on_disk.len() - 1]);
}

#[test]
fn a_torn_segment_before_the_last_sealed_one_is_still_refused() {
    let (tmp, on_disk) = closed_log_of_30_records();
    // Synced before the roll after it: a crash cannot have torn it, so damage is not cut away.
    cut(&log_path(tmp.path(), on_disk[on_disk.len() - 3]), 3);
    let err = PartitionLog::open(tmp.path(), cfg()).unwrap_err();
    assert!(matches!(err, LogError::Corrupt { .. }), "{err}");
}
