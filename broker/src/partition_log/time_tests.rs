//! The `.timeindex` of real logs: written as Kafka writes it, kept through rolls, truncation and
//! reopening, rebuilt when missing or damaged, and used by lookups by time.

use std::fs;

use super::time_index::{TimeIndex, TIME_ENTRY_LEN};
use super::*;

fn cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        fsync_on_append: false,
        fsync_on_roll: true,
    }
}

/// Timestamps that go up and down, so that only a real maximum counts.
fn ts_of(o: i64) -> i64 {
    10_000 + o * 10 + if o % 3 == 0 { 25 } else { 0 }
}

fn fill(log: &mut PartitionLog, n: i64) {
    for _ in 0..n {
        let o = log.log_end_offset();
        log.append_as_leader(&[vec![b'v'; 60]], 1, ts_of(o)).unwrap();
    }
}

/// What a lookup must answer: the first batch whose timestamp is at or after `ts`.
fn brute(end: i64, ts: i64) -> Option<(i64, i64)> {
    (0..end).map(|o| (o, ts_of(o))).find(|&(_, t)| t >= ts)
}

fn time_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".timeindex"))
        .map(|n| (n.clone(), fs::read(dir.join(&n)).unwrap()))
        .collect();
    v.sort();
    v
}

fn check_lookups(log: &PartitionLog) {
    let end = log.log_end_offset();
    for ts in (9_990..10_000 + end * 10 + 40).step_by(7) {
        assert_eq!(log.offset_for_timestamp(ts).unwrap(), brute(end, ts), "timestamp {ts}");
    }
}

#[test]
fn time_index_files_hold_kafkas_entries_and_answer_lookups_after_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut log = PartitionLog::open(&dir, cfg()).unwrap();
    assert!(time_files(&dir).is_empty(), "an empty log has no time index file");
    fill(&mut log, 200);
    let files = time_files(&dir);
    assert!(files.len() > 3, "every segment with an entry has a file: {files:?}");
    for (name, bytes) in &files[..files.len() - 1] {
        // Sealed: strictly growing timestamps, the last one the segment's largest.
        let base: i64 = name.trim_end_matches(".timeindex").parse().unwrap();
        let (t, clean) = TimeIndex::decode(bytes, i64::MAX);
        assert!(clean && !t.entries().is_empty(), "{name}");
        let last = t.entries().last().unwrap();
        let seg_end = log.sealed_segment_at(base).unwrap().next_offset;
        let max = (base..seg_end).map(ts_of).max().unwrap();
        assert_eq!(last.ts, max, "{name}");
        assert_eq!(bytes.len() % TIME_ENTRY_LEN, 0);
    }
    check_lookups(&log);
    drop(log);
    let log = PartitionLog::open(&dir, cfg()).unwrap();
    assert_eq!(time_files(&dir), files, "a clean reopen rewrites nothing");
    check_lookups(&log);
}

#[test]
fn truncation_drops_entries_and_damaged_or_missing_files_are_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut log = PartitionLog::open(&dir, cfg()).unwrap();
    fill(&mut log, 150);
    let written = time_files(&dir);
    log.truncate_to(120).unwrap();
    check_lookups(&log);
    fill(&mut log, 30);
    check_lookups(&log);
    drop(log);

    // Kafka's preallocated file after an unclean stop, a missing one (an older Ferry), and a
    // truncated one: the reopened log answers the same.
    let (first, _) = &written[0];
    let mut padded = fs::read(dir.join(first)).unwrap();
    padded.extend(vec![0u8; 10 * TIME_ENTRY_LEN]);
    fs::write(dir.join(first), &padded).unwrap();
    fs::remove_file(dir.join(&written[1].0)).unwrap();
    let (third, bytes) = &written[2];
    fs::write(dir.join(third), &bytes[..bytes.len() - 5]).unwrap();
    let log = PartitionLog::open(&dir, cfg()).unwrap();
    check_lookups(&log);
    let after = time_files(&dir);
    assert_eq!(after[..3], written[..3], "rebuilt as they were written");
}

#[test]
fn lookups_stay_exact_across_a_truncation_behind_a_peak() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let big = LogConfig {
        segment_bytes: 1 << 20,
        ..cfg()
    };
    let mut log = PartitionLog::open(&dir, big).unwrap();
    let mut ts: Vec<i64> = Vec::new();
    let put = |log: &mut PartitionLog, ts: &mut Vec<i64>, t: i64| {
        log.append_as_leader(&[vec![b'v'; 60]], 1, t).unwrap();
        ts.push(t);
    };
    for o in 0..10 {
        put(&mut log, &mut ts, 100 + o);
    }
    // A peak right after an entry, then the log is cut behind it: the peak stays, unindexed.
    put(&mut log, &mut ts, 5_000);
    for o in 0..3 {
        put(&mut log, &mut ts, 200 + o);
    }
    log.truncate_to(13).unwrap();
    ts.truncate(13);
    for o in 0..20 {
        put(&mut log, &mut ts, 1_000 + o);
    }
    for target in [150, 999, 1_005, 4_000, 5_000] {
        let want = ts.iter().position(|&t| t >= target).map(|o| (o as i64, ts[o]));
        assert_eq!(log.offset_for_timestamp(target).unwrap(), want, "timestamp {target}");
    }
}

#[test]
fn the_largest_timestamp_below_a_bound_is_found_across_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(&tmp.path().join("t-0"), cfg()).unwrap();
    assert_eq!(log.max_timestamp_before(0).unwrap(), None);
    fill(&mut log, 200);
    assert!(log.segments.len() > 2, "the answer must span segments");
    for upto in [1, 2, 4, 50, 97, 150, 198, 199, 200] {
        // The earliest record with the largest timestamp below `upto`.
        let mut want: Option<(i64, i64)> = None;
        for o in 0..upto {
            if want.is_none_or(|(_, t)| ts_of(o) > t) {
                want = Some((o, ts_of(o)));
            }
        }
        assert_eq!(log.max_timestamp_before(upto).unwrap(), want, "below {upto}");
    }
}
