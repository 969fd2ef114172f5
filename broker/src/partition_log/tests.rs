use std::fs::{self, OpenOptions};
use std::io::Write;

use bytes::Bytes;

use super::*;
use crate::record_batch::encode_batch;

fn small(segment_bytes: u64, index_interval_bytes: u32) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes,
        fsync_on_append: false,
        fsync_on_roll: true,
    }
}

fn vals(recs: &[(i64, Bytes)]) -> Vec<(i64, String)> {
    recs.iter()
        .map(|(o, v)| (*o, String::from_utf8_lossy(v).into_owned()))
        .collect()
}

/// Appends `n` single-record batches "r<offset>" in `epoch`.
fn fill(log: &mut PartitionLog, n: usize, epoch: u32) {
    for _ in 0..n {
        let o = log.log_end_offset();
        log.append_as_leader(&[format!("r{o}")], epoch, 1000 + o).unwrap();
    }
}

fn segment_files(dir: &Path, ext: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(ext))
        .collect();
    names.sort();
    names
}

fn last_log_file(dir: &Path) -> PathBuf {
    dir.join(segment_files(dir, ".log").pop().unwrap())
}

fn append_bytes(path: &Path, bytes: &[u8]) {
    OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

#[test]
fn append_and_read_records_and_raw() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut log = PartitionLog::open(&dir, LogConfig::default()).unwrap();
    assert!(dir.is_dir());
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset(), log.size_bytes()),
        (0, 0, 0)
    );

    assert_eq!(log.append_as_leader(&["a", "b", "c"], 1, 10).unwrap(), (0, 3));
    assert_eq!(log.append_as_leader(&[b"d".to_vec()], 1, 11).unwrap(), (3, 4));
    assert_eq!(log.append_as_leader(&[&b"e"[..], b"f"], 1, 12).unwrap(), (4, 6));
    assert_eq!(log.log_end_offset(), 6);

    let all = log.read_records(0, usize::MAX, 6).unwrap();
    let want: Vec<(i64, String)> = "abcdef"
        .chars()
        .enumerate()
        .map(|(i, c)| (i as i64, c.to_string()))
        .collect();
    assert_eq!(vals(&all), want);

    let mut raw = encode_batch(0, 1, 10, &["a", "b", "c"]);
    raw.extend(encode_batch(3, 1, 11, &["d"]));
    raw.extend(encode_batch(4, 1, 12, &["e", "f"]));
    assert_eq!(log.read(0, usize::MAX, 6).unwrap(), raw);
    assert_eq!(log.size_bytes(), raw.len() as u64);

    // Starting inside a batch returns the whole batch raw, but only the requested records decoded.
    assert_eq!(log.read(1, usize::MAX, 6).unwrap(), raw);
    assert_eq!(vals(&log.read_records(1, usize::MAX, 6).unwrap())[0], (1, "b".into()));
    assert_eq!(
        vals(&log.read_records(4, usize::MAX, 6).unwrap()),
        vec![(4, "e".into()), (5, "f".into())]
    );

    assert!(matches!(
        log.append_as_leader(&[] as &[&str], 1, 0),
        Err(LogError::Empty)
    ));
    assert_eq!(log.log_end_offset(), 6);
}

#[test]
fn offsets_contiguous_and_survive_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(tmp.path(), LogConfig::default()).unwrap();
    let mut expected = 0;
    for n in 1..=20usize {
        let recs: Vec<String> = (0..n).map(|i| format!("{n}-{i}")).collect();
        let (base, end) = log.append_as_leader(&recs, 0, 0).unwrap();
        assert_eq!(base, expected);
        expected += n as i64;
        assert_eq!(end, expected);
    }
    let before = log.read_records(0, usize::MAX, i64::MAX).unwrap();
    assert_eq!(before.len() as i64, expected);
    assert!(before.iter().enumerate().all(|(i, (o, _))| *o == i as i64));
    drop(log);

    let log = PartitionLog::open(tmp.path(), LogConfig::default()).unwrap();
    assert_eq!(log.log_end_offset(), expected);
    assert_eq!(log.read_records(0, usize::MAX, i64::MAX).unwrap(), before);
}

#[test]
fn read_at_leo_is_empty_and_out_of_range_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(tmp.path(), LogConfig::default()).unwrap();
    assert!(log.read(0, 100, 0).unwrap().is_empty());
    fill(&mut log, 3, 0);
    assert!(log.read(3, 100, 3).unwrap().is_empty());
    assert!(log.read_records(3, 100, 3).unwrap().is_empty());
    assert!(matches!(
        log.read(4, 100, 3),
        Err(LogError::OffsetOutOfRange {
            offset: 4,
            start: 0,
            end: 3
        })
    ));
    assert!(matches!(
        log.read(-1, 100, 3),
        Err(LogError::OffsetOutOfRange { offset: -1, .. })
    ));
    assert!(matches!(log.truncate_to(-1), Err(LogError::OffsetOutOfRange { .. })));
    let msg = log.read(9, 100, 3).unwrap_err().to_string();
    assert!(msg.contains("offset 9") && msg.contains("0..3"), "{msg}");
}

#[test]
fn read_respects_max_bytes_and_upto() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(tmp.path(), LogConfig::default()).unwrap();
    fill(&mut log, 5, 0);
    let one = log.read(0, usize::MAX, 1).unwrap().len();
    assert!(one > 0);
    // One batch even when it exceeds max_bytes.
    assert_eq!(log.read(0, 1, 5).unwrap().len(), one);
    assert_eq!(log.read(0, 0, 5).unwrap().len(), one);
    // Whole batches only, never more than max_bytes after the first.
    assert_eq!(log.read(0, one * 3 - 1, 5).unwrap().len(), one * 2);
    assert_eq!(log.read(0, one * 3, 5).unwrap().len(), one * 3);
    // upto is exclusive: batches must end at or before it.
    assert_eq!(
        vals(&log.read_records(1, usize::MAX, 3).unwrap()),
        vec![(1, "r1".into()), (2, "r2".into())]
    );
    assert!(log.read(3, usize::MAX, 3).unwrap().is_empty());
    assert!(log.read(3, usize::MAX, 2).unwrap().is_empty());

    // A multi-record batch straddling upto is withheld entirely.
    log.append_as_leader(&["x", "y", "z"], 0, 0).unwrap();
    assert!(log.read(5, usize::MAX, 7).unwrap().is_empty());
    assert_eq!(log.read_records(4, usize::MAX, 7).unwrap().len(), 1);
    assert_eq!(log.read_records(6, usize::MAX, 8).unwrap().len(), 2);
}

#[test]
fn segments_roll_and_reads_span_them() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = small(200, 64);
    let mut log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    fill(&mut log, 30, 0);
    // Each batch is 32 + 4 + ~3 bytes, so about five per 200-byte segment.
    let logs = segment_files(tmp.path(), ".log");
    assert!(logs.len() >= 5, "{logs:?}");
    assert_eq!(logs.len(), log.segment_count());
    assert_eq!(logs[0], "00000000000000000000.log");
    // Every sealed segment has index entries; the active one may have none, and then no file.
    let indexes = segment_files(tmp.path(), ".index").len();
    assert!(indexes + 1 >= logs.len() && indexes <= logs.len(), "{indexes} indexes");
    for name in &logs {
        let len = fs::metadata(tmp.path().join(name)).unwrap().len();
        assert!(len > 0 && len <= 200, "{name}: {len}");
        let base: i64 = name[..20].parse().unwrap();
        let first = log.read_records(base, 1, i64::MAX).unwrap();
        assert_eq!(first[0].0, base, "segment {name} starts at its base offset");
    }
    assert_eq!(
        log.size_bytes(),
        logs.iter()
            .map(|n| fs::metadata(tmp.path().join(n)).unwrap().len())
            .sum::<u64>()
    );

    let all = log.read_records(0, usize::MAX, i64::MAX).unwrap();
    assert_eq!(vals(&all), (0..30).map(|o| (o, format!("r{o}"))).collect::<Vec<_>>());
    let mid = log.read_records(7, 800, i64::MAX).unwrap();
    assert_eq!(mid[0].0, 7);
    assert!(mid.len() > 5, "a read continues into later segments");

    // Oversized batch gets its own segment; the next batch rolls again.
    let big = vec![b'x'; 500];
    let (base, _) = log.append_as_leader(&[&big], 0, 0).unwrap();
    fill(&mut log, 1, 0);
    let logs2 = segment_files(tmp.path(), ".log");
    assert_eq!(logs2.len(), logs.len() + 2);
    assert!(logs2.contains(&format!("{base:020}.log")));
    assert_eq!(log.read_records(base, 1, i64::MAX).unwrap()[0].1.len(), 500);
    drop(log);

    let log = PartitionLog::open(tmp.path(), cfg).unwrap();
    assert_eq!(log.log_end_offset(), 32);
    assert_eq!(log.read_records(0, usize::MAX, i64::MAX).unwrap().len(), 32);
}

#[test]
fn index_lookup_finds_middle_offsets() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = small(1 << 20, 100);
    let mut log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    for i in 0..500 {
        log.append_as_leader(&[format!("a{i}"), format!("b{i}")], 0, i).unwrap();
    }
    assert!(
        log.active().index_len() > 50,
        "index entries: {}",
        log.active().index_len()
    );
    for off in [0, 1, 2, 333, 500, 777, 998, 999] {
        let recs = log.read_records(off, 1, i64::MAX).unwrap();
        let want = if off % 2 == 0 {
            format!("a{}", off / 2)
        } else {
            format!("b{}", off / 2)
        };
        assert_eq!(vals(&recs[..1]), vec![(off, want)], "offset {off}");
    }
    let index_path = tmp.path().join("00000000000000000000.index");
    let index_len = fs::metadata(&index_path).unwrap().len();
    assert_eq!(index_len, log.active().index_len() as u64 * 8);
    drop(log);

    // Reopen: index reused, same results.
    let log = PartitionLog::open(tmp.path(), cfg).unwrap();
    assert_eq!(fs::metadata(&index_path).unwrap().len(), index_len);
    assert_eq!(
        vals(&log.read_records(555, 1, i64::MAX).unwrap())[0],
        (555, "b277".into())
    );
}

#[test]
fn torn_tail_is_truncated_on_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = small(300, 64);
    let mut log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    fill(&mut log, 12, 0);
    let size = log.size_bytes();
    drop(log);

    // A partial batch (valid header, missing body) then, separately, plain garbage.
    let last = last_log_file(tmp.path());
    let partial = encode_batch(12, 0, 0, &["this one never finished"]);
    append_bytes(&last, &partial[..partial.len() - 5]);
    let log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(log.size_bytes(), size);
    drop(log);

    append_bytes(&last, &[0xAB; 7]);
    let mut log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(log.append_as_leader(&["after"], 0, 0).unwrap(), (12, 13));
    assert_eq!(
        vals(&log.read_records(12, 100, 13).unwrap()),
        vec![(12, "after".into())]
    );
    drop(log);

    // Header claiming an absurd length must not cause a huge allocation or panic.
    let mut bogus = encode_batch(13, 0, 0, &["x"]);
    bogus[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
    append_bytes(&last_log_file(tmp.path()), &bogus);
    let log = PartitionLog::open(tmp.path(), cfg).unwrap();
    assert_eq!(log.log_end_offset(), 13);
    assert_eq!(log.read_records(0, usize::MAX, 13).unwrap().len(), 13);
}

#[test]
fn corrupt_crc_in_last_batch_is_truncated() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(tmp.path(), LogConfig::default()).unwrap();
    fill(&mut log, 5, 0);
    let last_len = log.read(4, usize::MAX, 5).unwrap().len() as u64;
    let size = log.size_bytes();
    drop(log);

    let path = last_log_file(tmp.path());
    let mut bytes = fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 1] ^= 0xFF; // flip a byte of the last record's value
    fs::write(&path, &bytes).unwrap();

    let mut log = PartitionLog::open(tmp.path(), LogConfig::default()).unwrap();
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(log.size_bytes(), size - last_len);
    assert_eq!(fs::metadata(&path).unwrap().len(), size - last_len);
    assert_eq!(log.append_as_leader(&["new4"], 0, 0).unwrap(), (4, 5));
    assert_eq!(
        vals(&log.read_records(3, usize::MAX, 5).unwrap()),
        vec![(3, "r3".into()), (4, "new4".into())]
    );
}

#[test]
fn corruption_before_last_index_entry_is_found() {
    // The scan starts at the last index entry; a bad batch there must send it back to an earlier one.
    let tmp = tempfile::tempdir().unwrap();
    let cfg = small(1 << 20, 0); // an index entry for every batch
    let mut log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    fill(&mut log, 10, 0);
    let batch_len = log.read(0, 0, 1).unwrap().len();
    drop(log);
    let path = last_log_file(tmp.path());
    let mut bytes = fs::read(&path).unwrap();
    let last_start = bytes.len() - batch_len;
    bytes[last_start + 30] ^= 1; // inside the CRC-covered header of batch 9
    fs::write(&path, &bytes).unwrap();
    let log = PartitionLog::open(tmp.path(), cfg).unwrap();
    assert_eq!(log.log_end_offset(), 9);
    assert_eq!(log.active().index_len(), 9);
}

#[test]
fn empty_last_segment_after_recovery() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = small(120, 64);
    let mut log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    fill(&mut log, 7, 0);
    let segs = log.segment_count();
    assert!(segs > 1);
    drop(log);
    // Whole last segment is garbage: it is emptied, and the log ends where the previous one does.
    let last = last_log_file(tmp.path());
    let base: i64 = last.file_name().unwrap().to_str().unwrap()[..20].parse().unwrap();
    fs::write(&last, [0u8; 50]).unwrap();
    let mut log = PartitionLog::open(tmp.path(), cfg).unwrap();
    assert_eq!(log.log_end_offset(), base);
    assert_eq!(log.segment_count(), segs);
    fill(&mut log, 2, 0);
    assert_eq!(
        log.read_records(0, usize::MAX, i64::MAX).unwrap().len() as i64,
        base + 2
    );
}

#[test]
fn older_segment_index_missing_or_corrupt_is_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = small(400, 50);
    let mut log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    fill(&mut log, 40, 0);
    assert!(log.segment_count() >= 3);
    let expected = log.read_records(0, usize::MAX, i64::MAX).unwrap();
    drop(log);

    let indexes = segment_files(tmp.path(), ".index");
    let first = tmp.path().join(&indexes[0]);
    let second = tmp.path().join(&indexes[1]);
    let good_first = fs::read(&first).unwrap();
    assert!(!good_first.is_empty());
    fs::remove_file(&first).unwrap();
    // Plausibly ordered entries that point at the wrong places.
    let mut bad = Vec::new();
    for (rel, pos) in [(1u32, 3u32), (2, 9)] {
        bad.extend(rel.to_be_bytes());
        bad.extend(pos.to_be_bytes());
    }
    fs::write(&second, &bad).unwrap();
    // And a stray index with no log next to it.
    fs::write(tmp.path().join(format!("{:020}.index", 999_999)), b"junk").unwrap();

    let log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    assert_eq!(fs::read(&first).unwrap(), good_first);
    assert_ne!(fs::read(&second).unwrap(), bad);
    assert!(!tmp.path().join(format!("{:020}.index", 999_999)).exists());
    assert_eq!(log.read_records(0, usize::MAX, i64::MAX).unwrap(), expected);
    for off in 0..40 {
        assert_eq!(log.read_records(off, 1, i64::MAX).unwrap()[0].0, off);
    }
}

#[test]
fn damaged_older_segment_is_an_error_not_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = small(200, 64);
    let mut log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    fill(&mut log, 20, 0);
    drop(log);
    let first = tmp.path().join(&segment_files(tmp.path(), ".log")[0]);
    let len = fs::metadata(&first).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&first)
        .unwrap()
        .set_len(len - 3)
        .unwrap();
    let err = PartitionLog::open(tmp.path(), cfg.clone()).unwrap_err();
    assert!(matches!(err, LogError::Corrupt { .. }), "{err}");

    // A missing middle segment is a gap, also an error.
    let tmp = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    fill(&mut log, 20, 0);
    drop(log);
    fs::remove_file(tmp.path().join(&segment_files(tmp.path(), ".log")[1])).unwrap();
    assert!(matches!(
        PartitionLog::open(tmp.path(), cfg).unwrap_err(),
        LogError::Corrupt { .. }
    ));
}

#[test]
fn truncate_mid_segment_across_segments_and_into_a_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = small(250, 40);
    let mut log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    fill(&mut log, 30, 0);
    let segs_before = log.segment_count();

    // Mid-segment in the active segment.
    log.truncate_to(28).unwrap();
    assert_eq!(log.log_end_offset(), 28);
    assert_eq!(log.segment_count(), segs_before);

    // Across segments: later segment files disappear.
    log.truncate_to(9).unwrap();
    assert_eq!(log.log_end_offset(), 9);
    let logs = segment_files(tmp.path(), ".log");
    assert_eq!(logs.len(), log.segment_count());
    assert!(logs.len() < segs_before);
    assert!(segment_files(tmp.path(), ".index").len() <= logs.len());
    assert_eq!(
        log.size_bytes(),
        logs.iter()
            .map(|n| fs::metadata(tmp.path().join(n)).unwrap().len())
            .sum::<u64>()
    );
    assert!(matches!(log.read(10, 100, 100), Err(LogError::OffsetOutOfRange { .. })));

    // Into a multi-record batch: the whole batch goes.
    let (base, _) = log.append_as_leader(&["m0", "m1", "m2", "m3"], 0, 0).unwrap();
    assert_eq!(base, 9);
    fill(&mut log, 2, 0);
    log.truncate_to(11).unwrap();
    assert_eq!(log.log_end_offset(), 9);
    log.truncate_to(100).unwrap(); // no-op
    assert_eq!(log.log_end_offset(), 9);

    fill(&mut log, 3, 0);
    let expected = log.read_records(0, usize::MAX, i64::MAX).unwrap();
    assert_eq!(
        vals(&expected),
        (0..12).map(|o| (o, format!("r{o}"))).collect::<Vec<_>>()
    );
    drop(log);
    let mut log = PartitionLog::open(tmp.path(), cfg).unwrap();
    assert_eq!(log.read_records(0, usize::MAX, i64::MAX).unwrap(), expected);
    for off in 0..12 {
        assert_eq!(log.read_records(off, 1, i64::MAX).unwrap()[0].0, off);
    }

    // To the very start: empty log, still appendable.
    log.truncate_to(0).unwrap();
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset(), log.size_bytes()),
        (0, 0, 0)
    );
    assert_eq!(
        segment_files(tmp.path(), ".log"),
        vec!["00000000000000000000.log".to_string()]
    );
    fill(&mut log, 1, 0);
    assert_eq!(log.log_end_offset(), 1);
}

#[test]
fn truncate_to_segment_base_keeps_previous_segment_active() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = small(200, 64);
    let mut log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    fill(&mut log, 20, 0);
    let second_base: i64 = segment_files(tmp.path(), ".log")[1][..20].parse().unwrap();
    log.truncate_to(second_base).unwrap();
    assert_eq!(log.log_end_offset(), second_base);
    fill(&mut log, 3, 0);
    drop(log);
    let log = PartitionLog::open(tmp.path(), cfg).unwrap();
    assert_eq!(log.log_end_offset(), second_base + 3);
    assert_eq!(
        log.read_records(0, usize::MAX, i64::MAX).unwrap().len() as i64,
        second_base + 3
    );
}

#[test]
fn epoch_cache_lookup_truncate_and_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(tmp.path(), LogConfig::default()).unwrap();
    assert_eq!(log.latest_epoch(), None);
    assert_eq!(log.end_offset_for_epoch(1), None);
    for epoch in [1, 1, 2, 4] {
        log.append_as_leader(&["x", "y"], epoch, 0).unwrap();
    }
    // Batches start at 0, 2 (epoch 1), 4 (epoch 2), 6 (epoch 4); LEO 8.
    assert_eq!(log.latest_epoch(), Some(4));
    assert_eq!(log.end_offset_for_epoch(0), None);
    assert_eq!(log.end_offset_for_epoch(1), Some((1, 4)));
    assert_eq!(log.end_offset_for_epoch(2), Some((2, 6)));
    assert_eq!(log.end_offset_for_epoch(3), Some((2, 6)));
    assert_eq!(log.end_offset_for_epoch(4), Some((4, 8)));
    assert_eq!(log.end_offset_for_epoch(7), Some((4, 8)));
    assert!(matches!(
        log.append_as_leader(&["old"], 3, 0),
        Err(LogError::StaleEpoch { epoch: 3, latest: 4 })
    ));

    drop(log);
    let mut log = PartitionLog::open(tmp.path(), LogConfig::default()).unwrap();
    assert_eq!(log.end_offset_for_epoch(3), Some((2, 6)));
    assert_eq!(log.end_offset_for_epoch(4), Some((4, 8)));

    // Truncating into epoch 2 forgets epoch 4.
    log.truncate_to(5).unwrap();
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(log.latest_epoch(), Some(1));
    assert_eq!(log.end_offset_for_epoch(4), Some((1, 4)));
    log.append_as_leader(&["z"], 5, 0).unwrap();
    assert_eq!(log.end_offset_for_epoch(4), Some((1, 4)));
    assert_eq!(log.end_offset_for_epoch(5), Some((5, 5)));
    drop(log);

    let text = fs::read_to_string(tmp.path().join("leader-epoch-checkpoint")).unwrap();
    assert_eq!(text, "0\n2\n1 0\n5 4\n");
    let log = PartitionLog::open(tmp.path(), LogConfig::default()).unwrap();
    assert_eq!(log.latest_epoch(), Some(5));
    assert_eq!(log.end_offset_for_epoch(3), Some((1, 4)));
}

#[test]
fn epoch_checkpoint_missing_corrupt_or_ahead() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = small(150, 64);
    let mut log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    for epoch in [1, 1, 2, 4, 4, 4] {
        log.append_as_leader(&["x", "y"], epoch, 0).unwrap();
    }
    assert!(log.segment_count() > 1);
    drop(log);
    let ckpt = tmp.path().join("leader-epoch-checkpoint");
    let good = fs::read_to_string(&ckpt).unwrap();
    assert_eq!(good, "0\n3\n1 0\n2 4\n4 6\n");

    fs::remove_file(&ckpt).unwrap();
    let log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    assert_eq!(log.end_offset_for_epoch(3), Some((2, 6)));
    drop(log);
    assert_eq!(fs::read_to_string(&ckpt).unwrap(), good);

    fs::write(&ckpt, "garbage\n").unwrap();
    let log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    assert_eq!(log.end_offset_for_epoch(1), Some((1, 4)));
    drop(log);
    assert_eq!(fs::read_to_string(&ckpt).unwrap(), good);

    // Entries at or past the log end (e.g. data lost in a crash) are dropped on open.
    fs::write(&ckpt, "0\n5\n1 0\n2 4\n4 6\n6 12\n7 20\n").unwrap();
    let log = PartitionLog::open(tmp.path(), cfg).unwrap();
    assert_eq!(log.latest_epoch(), Some(4));
    assert_eq!(log.end_offset_for_epoch(9), Some((4, 12)));
    drop(log);
    assert_eq!(fs::read_to_string(&ckpt).unwrap(), good);
}

#[test]
fn append_replicated_copies_and_checks_contiguity() {
    let tmp = tempfile::tempdir().unwrap();
    let mut leader = PartitionLog::open(&tmp.path().join("leader"), small(300, 64)).unwrap();
    let mut follower = PartitionLog::open(&tmp.path().join("follower"), small(500, 32)).unwrap();
    for (i, epoch) in [1, 1, 2, 2, 2, 3, 5, 5].into_iter().enumerate() {
        let recs: Vec<String> = (0..=i).map(|j| format!("v{i}.{j}")).collect();
        leader.append_as_leader(&recs, epoch, i as i64).unwrap();
    }
    let leo = leader.log_end_offset();

    // Fetch in small chunks, like a follower would.
    while follower.log_end_offset() < leo {
        let chunk = leader.read(follower.log_end_offset(), 120, leo).unwrap();
        assert!(!chunk.is_empty());
        follower.append_replicated(&chunk).unwrap();
    }
    assert_eq!(follower.append_replicated(&[]).unwrap(), leo);
    assert_eq!(
        follower.read_records(0, usize::MAX, leo).unwrap(),
        leader.read_records(0, usize::MAX, leo).unwrap()
    );
    assert_eq!(
        follower.read(0, usize::MAX, leo).unwrap(),
        leader.read(0, usize::MAX, leo).unwrap()
    );
    for e in 0..7 {
        assert_eq!(
            follower.end_offset_for_epoch(e),
            leader.end_offset_for_epoch(e),
            "epoch {e}"
        );
    }

    // Wrong base offset, nothing written.
    let stale = leader.read(0, usize::MAX, leo).unwrap();
    let err = follower.append_replicated(&stale).unwrap_err();
    assert!(
        matches!(err, LogError::NonContiguous { expected, got: 0 } if expected == leo),
        "{err}"
    );
    // Below the log end is refused (past it is a gap the leader's cleaner left, and taken).
    let overlap = encode_batch(leo - 1, 5, 0, &["overlap"]);
    assert!(matches!(follower.append_replicated(&overlap), Err(LogError::NonContiguous { got, .. }) if got == leo - 1));
    // A good batch followed by a bad one: neither is written.
    let mut mixed = encode_batch(leo, 5, 0, &["ok"]);
    mixed.extend(encode_batch(leo, 5, 0, &["bad"]));
    assert!(matches!(
        follower.append_replicated(&mixed),
        Err(LogError::NonContiguous { .. })
    ));
    let mut torn = encode_batch(leo, 5, 0, &["torn"]);
    torn.pop();
    assert!(matches!(
        follower.append_replicated(&torn),
        Err(LogError::InvalidBatch(_))
    ));
    let mut flipped = encode_batch(leo, 5, 0, &["flipped"]);
    *flipped.last_mut().unwrap() ^= 1;
    assert!(matches!(
        follower.append_replicated(&flipped),
        Err(LogError::InvalidBatch(_))
    ));
    let old_epoch = encode_batch(leo, 4, 0, &["old"]);
    assert!(matches!(
        follower.append_replicated(&old_epoch),
        Err(LogError::StaleEpoch { epoch: 4, latest: 5 })
    ));
    assert_eq!(follower.log_end_offset(), leo);

    // Follower diverged: truncate and re-fetch.
    follower.truncate_to(10).unwrap();
    let resume = follower.log_end_offset();
    let rest = leader.read(resume, usize::MAX, leo).unwrap();
    assert_eq!(follower.append_replicated(&rest).unwrap(), leo);
    let dir = follower.dir().to_path_buf();
    drop(follower);
    let follower = PartitionLog::open(&dir, small(500, 32)).unwrap();
    assert_eq!(
        follower.read_records(3, usize::MAX, leo).unwrap(),
        leader.read_records(3, usize::MAX, leo).unwrap()
    );
}

#[test]
fn flush_fsync_config_and_delete() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("topic-3");
    assert_eq!(partition_dir(tmp.path(), "topic", 3), dir);
    let cfg = LogConfig {
        fsync_on_append: true,
        ..small(100, 10)
    };
    let mut log = PartitionLog::open(&dir, cfg).unwrap();
    fill(&mut log, 10, 2);
    log.flush().unwrap();
    assert_eq!(log.dir(), dir.as_path());
    log.delete_files().unwrap();
    assert!(!dir.exists());

    for bad in [0, u64::from(u32::MAX) + 1] {
        let err = PartitionLog::open(tmp.path(), small(bad, 10)).unwrap_err();
        assert!(matches!(err, LogError::InvalidConfig(_)), "{err}");
    }
}

#[test]
fn empty_logs_hold_no_file_descriptors() {
    let tmp = tempfile::tempdir().unwrap();
    // Only descriptors of files under this test's dir: other tests may run in this process.
    let fds = || {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter(|e| std::fs::read_link(e.path()).is_ok_and(|p| p.starts_with(tmp.path())))
            .count()
    };
    let before = fds();
    let mut logs: Vec<PartitionLog> = (0..50)
        .map(|i| PartitionLog::open(&tmp.path().join(format!("t-{i}")), LogConfig::default()).unwrap())
        .collect();
    assert!(fds() < before + 5, "50 empty logs hold {} descriptors", fds() - before);
    // Reopened empty logs hold none either; a write opens the files it needs.
    drop(logs);
    logs = (0..50)
        .map(|i| PartitionLog::open(&tmp.path().join(format!("t-{i}")), LogConfig::default()).unwrap())
        .collect();
    assert!(fds() < before + 5);
    logs[0].append_as_leader(&[b"x"], 1, 0).unwrap();
    assert_eq!(logs[0].read_records(0, 1024, 1).unwrap().len(), 1);
    let after = fds();
    assert!(after > before && after <= before + 2 + 5, "{before} then {after}");
}

#[test]
fn a_new_log_leaves_its_folder_syncs_to_the_caller_and_an_existing_one_none() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-0");
    let mut syncs = PendingDirSyncs::default();
    let mut log = PartitionLog::open_deferring_syncs(&dir, small(1 << 20, 4096), &mut syncs).unwrap();
    // A new log is one file: its indexes come with their first entries.
    let files: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(files, vec![std::ffi::OsString::from("00000000000000000000.log")]);
    // The new folder (its segment files) and its parent (the folder's own entry).
    let mut want = vec![root.path().to_path_buf(), dir.clone()];
    want.sort();
    assert_eq!(syncs.0.iter().cloned().collect::<Vec<_>>(), want);
    assert!(syncs.sync().is_empty());
    fill(&mut log, 3, 0);
    drop(log);

    let mut again = PendingDirSyncs::default();
    let log = PartitionLog::open_deferring_syncs(&dir, small(1 << 20, 4096), &mut again).unwrap();
    assert_eq!(log.log_end_offset(), 3);
    assert!(again.0.is_empty(), "{again:?}");
}

#[test]
fn a_failed_folder_sync_is_reported_with_its_path() {
    let root = tempfile::tempdir().unwrap();
    let mut syncs = PendingDirSyncs::default();
    let gone = root.path().join("gone");
    syncs.add(&gone);
    let errors = syncs.sync();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].0, gone);
    assert!(errors[0].1.to_string().contains("gone"), "{}", errors[0].1);
}

#[test]
fn many_new_folders_share_one_file_system_sync_and_a_missing_one_is_named() {
    let root = tempfile::tempdir().unwrap();
    let mut syncs = PendingDirSyncs::default();
    let mut logs = Vec::new();
    for p in 0..300 {
        logs.push(
            PartitionLog::open_deferring_syncs(&root.path().join(format!("t-{p}")), small(1 << 20, 4096), &mut syncs)
                .unwrap(),
        );
    }
    assert_eq!(syncs.0.len(), 301, "each folder and their parent");
    assert!(syncs.sync().is_empty());

    let mut syncs = PendingDirSyncs::default();
    for p in 0..300 {
        syncs.add(&root.path().join(format!("t-{p}")));
    }
    let gone = root.path().join("gone");
    syncs.add(&gone);
    let errors = syncs.sync();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, gone);
    assert!(errors[0].1.to_string().contains("gone"), "{}", errors[0].1);
}

#[test]
fn index_entries_name_each_batchs_last_offset_as_kafka_writes_them() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = small(1 << 20, 0); // an index entry for every batch
    let mut log = PartitionLog::open(tmp.path(), cfg.clone()).unwrap();
    log.append_as_leader(&["a", "b", "c"], 1, 0).unwrap();
    log.append_as_leader(&["d", "e"], 1, 0).unwrap();
    let index = fs::read(tmp.path().join("00000000000000000000.index")).unwrap();
    let first_len = log.read(0, 0, 3).unwrap().len() as u32;
    let entry = |i: usize| {
        let e = &index[i * 8..i * 8 + 8];
        (
            u32::from_be_bytes([e[0], e[1], e[2], e[3]]),
            u32::from_be_bytes([e[4], e[5], e[6], e[7]]),
        )
    };
    assert_eq!(index.len(), 16);
    assert_eq!(
        entry(0),
        (2, 0),
        "the first batch ends at offset 2 and starts at byte 0"
    );
    assert_eq!(entry(1), (4, first_len));
    drop(log);
    // Reopened, the index is trusted and finds offsets inside a batch.
    let log = PartitionLog::open(tmp.path(), cfg).unwrap();
    assert_eq!(log.active().index_len(), 2);
    assert_eq!(
        vals(&log.read_records(3, 1 << 20, 5).unwrap()),
        vec![(3, "d".into()), (4, "e".into())]
    );
}

#[test]
fn a_log_in_another_format_is_refused_whole_not_truncated() {
    let tmp = tempfile::tempdir().unwrap();
    // An older Ferry's first batch: little-endian length at 8, CRC32C at 16 over bytes 20 on.
    let mut old = vec![7u8; 40];
    old[..8].copy_from_slice(&0i64.to_le_bytes());
    old[8..12].copy_from_slice(&28u32.to_le_bytes());
    let crc = crc32c::crc32c(&old[20..]);
    old[16..20].copy_from_slice(&crc.to_le_bytes());
    let path = tmp.path().join("00000000000000000000.log");
    fs::write(&path, &old).unwrap();
    let err = PartitionLog::open(tmp.path(), LogConfig::default()).unwrap_err();
    assert!(err.to_string().contains("format of an older Ferry"), "{err}");
    assert_eq!(fs::read(&path).unwrap(), old, "nothing was cut");
}
