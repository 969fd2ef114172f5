//! A crash in the middle of a clean leaves a log that opens whole: `.cleaned` files are
//! removed (the clean had not ended), and a `.swap` segment replaces the ones it was cleaned
//! from, wherever the swap stopped.

use std::collections::BTreeMap;
use std::path::Path;

use kafka_protocol::records::Compression;

use crate::partition_log::{CleanedSegment, SwapSegment};

use super::clean::{clean, CleanRange, LogSnapshot};
use super::tests::{big_map, open, produce, read_all, records, Kv};
use super::CleanError;

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    v.sort();
    v
}

/// A log of small segments, and what it reads as.
fn written(dir: &Path) -> BTreeMap<i64, Kv> {
    let mut log = open(dir);
    produce(&mut log, &records(400, 6), 5, Compression::None);
    read_all(&log)
}

/// How far a crash let a clean get.
struct Crashed {
    /// The bases of the first group's segments.
    bases: Vec<i64>,
    /// The offset after the group.
    end: i64,
    /// Where the mapped (dirty) part ended: the active segment's base.
    mapped_end: i64,
}

/// Cleans the log in `dir` as far as its first group's swap files, then stops as a crash
/// would.
fn crash_before_swap(dir: &Path) -> Crashed {
    let log = open(dir);
    let segments = log.segment_files(false).unwrap();
    let mapped_end = segments.last().unwrap().base;
    let snap = LogSnapshot {
        dir: dir.to_path_buf(),
        segments: segments.clone(),
        index_interval_bytes: 256,
        // Three segments to a group.
        segment_bytes: segments[0].size * 3 + 1,
        producer_last: Default::default(),
    };
    let range = CleanRange {
        first_dirty: 0,
        first_uncleanable: mapped_end,
        delete_retention_ms: 1000,
        now_ms: 0,
    };
    let mut first = None;
    let r = clean(&snap, &range, &mut big_map(), &|_| {}, &mut |old, new: SwapSegment| {
        assert_eq!(new.base, old[0].base);
        first = Some((old.iter().map(|s| s.base).collect(), new.next_offset));
        Ok(false) // the swap never happens: its files stay
    });
    assert!(matches!(r, Err(CleanError::Aborted)));
    let (bases, end) = first.unwrap();
    Crashed { bases, end, mapped_end }
}

/// What the log reads as once the first group is cleaned: in it, each key's latest record of
/// the mapped part; the rest as it was.
fn first_group_cleaned(all: &BTreeMap<i64, Kv>, c: &Crashed) -> BTreeMap<i64, Kv> {
    let mut latest: BTreeMap<Option<String>, i64> = BTreeMap::new();
    for (o, (k, _)) in all.range(..c.mapped_end) {
        latest.insert(k.clone(), *o);
    }
    all.iter()
        .filter(|(o, (k, _))| **o >= c.end || latest[k] == **o)
        .map(|(o, r)| (*o, r.clone()))
        .collect()
}

fn leftovers(dir: &Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
        .collect()
}

#[test]
fn cleaned_files_left_by_a_crash_are_removed_and_the_log_is_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let before = written(dir.path());
    let log = open(dir.path());
    let mut c = CleanedSegment::create(dir.path(), 0, 256).unwrap();
    c.append(&log.read(0, 1, 5).unwrap()).unwrap();
    drop((c, log));
    // A crash among the renames to `.swap`: the index renamed, the log not yet.
    std::fs::rename(
        dir.path().join(format!("{:020}.index.cleaned", 0)),
        dir.path().join(format!("{:020}.index.swap", 0)),
    )
    .unwrap();
    assert!(names(dir.path()).contains(&format!("{:020}.log.cleaned", 0)));
    // A name no clean makes goes too.
    std::fs::write(dir.path().join("stray.swap"), b"?").unwrap();
    let log = open(dir.path());
    assert_eq!(read_all(&log), before);
    assert!(leftovers(dir.path()).is_empty(), "{:?}", leftovers(dir.path()));
}

#[test]
fn a_swap_left_by_a_crash_replaces_the_segments_it_was_cleaned_from() {
    let dir = tempfile::tempdir().unwrap();
    let before = written(dir.path());
    let c = crash_before_swap(dir.path());
    assert_eq!(c.bases.len(), 3);
    assert!(names(dir.path()).contains(&format!("{:020}.log.swap", c.bases[0])));
    let log = open(dir.path());
    let after = read_all(&log);
    assert_eq!(after, first_group_cleaned(&before, &c));
    assert!(after.len() < before.len());
    let segs = log.segment_files(false).unwrap();
    assert_eq!((segs[0].base, segs[0].next_offset), (c.bases[0], c.end));
    assert!(!segs.iter().any(|s| s.base == c.bases[1] || s.base == c.bases[2]));
    assert!(leftovers(dir.path()).is_empty(), "{:?}", leftovers(dir.path()));
}

#[test]
fn a_swap_finishes_after_a_crash_that_removed_some_old_segments_and_renamed_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let before = written(dir.path());
    let c = crash_before_swap(dir.path());
    // The swap had removed the first two old segments and renamed the new index into place.
    for b in &c.bases[..2] {
        for ext in ["log", "index", "timeindex"] {
            let _ = std::fs::remove_file(dir.path().join(format!("{b:020}.{ext}")));
        }
    }
    std::fs::rename(
        dir.path().join(format!("{:020}.index.swap", c.bases[0])),
        dir.path().join(format!("{:020}.index", c.bases[0])),
    )
    .unwrap();
    let log = open(dir.path());
    assert_eq!(read_all(&log), first_group_cleaned(&before, &c));
    drop(log);
    // Opened again, nothing is left to do.
    assert_eq!(read_all(&open(dir.path())), first_group_cleaned(&before, &c));
    assert!(leftovers(dir.path()).is_empty());
}
