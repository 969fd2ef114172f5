//! Cleans of real logs in a temp dir: what is kept, at which offsets, and that the cleaned log
//! reopens, reads at any offset, and replicates.

use std::collections::BTreeMap;
use std::path::Path;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::partition_log::{LogConfig, PartitionLog};

use super::clean::{clean, clean_exclusive, CleanRange, CleanStats, LogSnapshot};
use super::offset_map::OffsetMap;
use super::policy::CompactionPolicy;
use super::retain::delete_horizon;
use super::CleanError;

/// A record to produce: key and value (`None`: a tombstone).
pub(super) type Kv = (Option<String>, Option<String>);

/// A log with small segments.
pub(super) fn open(dir: &Path) -> PartitionLog {
    PartitionLog::open(
        dir,
        LogConfig {
            segment_bytes: 2048,
            index_interval_bytes: 256,
            ..Default::default()
        },
    )
    .unwrap()
}

/// Kafka's encoding of `records` as one batch of `producer` (-1: none) from sequence `seq`.
pub(super) fn batch(records: &[Kv], compression: Compression, producer: i64, seq: i32, ts: i64) -> Vec<u8> {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: producer,
            producer_epoch: if producer >= 0 { 0 } else { -1 },
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // Kafka's encoder splits batches where offset minus sequence changes: -1 is the base.
            sequence: if producer >= 0 { seq + i as i32 } else { i as i32 - 1 },
            timestamp: ts + i as i64,
            key: k.clone().map(Bytes::from),
            value: v.clone().map(Bytes::from),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf.to_vec()
}

/// Appends `records` as the leader in batches of `per_batch`.
pub(super) fn produce(log: &mut PartitionLog, records: &[Kv], per_batch: usize, compression: Compression) {
    for chunk in records.chunks(per_batch) {
        log.append_batch_as_leader(batch(chunk, compression, -1, 0, 1_000), 1)
            .unwrap();
    }
}

/// `n` records over `keys` keys: `k{i % keys}` = `v{i}`.
pub(super) fn records(n: usize, keys: usize) -> Vec<Kv> {
    (0..n)
        .map(|i| (Some(format!("k{}", i % keys)), Some(format!("v{i}"))))
        .collect()
}

/// Every record of the log: offset -> (key, value), read as a consumer reads from the start.
pub(super) fn read_all(log: &PartitionLog) -> BTreeMap<i64, Kv> {
    let raw = log
        .read(log.log_start_offset(), usize::MAX, log.log_end_offset())
        .unwrap();
    let mut out = BTreeMap::new();
    for (_, b) in crate::record_batch::split_batches(&raw).unwrap() {
        for r in RecordBatchDecoder::decode(&mut Bytes::copy_from_slice(b))
            .unwrap()
            .records
        {
            let s = |b: Option<Bytes>| b.map(|b| String::from_utf8(b.to_vec()).unwrap());
            out.insert(r.offset, (s(r.key), s(r.value)));
        }
    }
    out
}

/// What a compacted `written` (offset -> record) should read as: the last record of each key,
/// tombstones too unless `drop_tombstones`.
pub(super) fn compacted(written: &BTreeMap<i64, Kv>, drop_tombstones: bool) -> BTreeMap<i64, Kv> {
    let mut last: BTreeMap<Option<String>, i64> = BTreeMap::new();
    for (o, (k, _)) in written {
        last.insert(k.clone(), *o);
    }
    last.into_values()
        .map(|o| (o, written[&o].clone()))
        .filter(|(_, (_, v))| v.is_some() || !drop_tombstones)
        .collect()
}

/// One clean as the driver runs it: from `checkpoint`, up to the active segment and `hw`.
pub(super) fn run_clean(
    log: &mut PartitionLog,
    checkpoint: i64,
    hw: i64,
    policy: &CompactionPolicy,
    now: i64,
    map: &mut OffsetMap,
) -> Result<CleanStats, CleanError> {
    clean_exclusive(log, Some(checkpoint), hw, policy, now, map)
}

pub(super) fn policy(delete_retention_ms: i64) -> CompactionPolicy {
    CompactionPolicy {
        compact: true,
        delete_retention_ms,
        ..Default::default()
    }
}

pub(super) fn big_map() -> OffsetMap {
    OffsetMap::new(1 << 20)
}

#[test]
fn a_clean_keeps_the_last_record_of_each_key_at_its_offset_and_the_log_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    // 600 records over 40 keys, in batches of 7, every codec in turn.
    let recs = records(600, 40);
    for (i, chunk) in recs.chunks(70).enumerate() {
        let codec = [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ][i % 5];
        produce(&mut log, chunk, 7, codec);
    }
    let written = read_all(&log);
    assert_eq!(written.len(), 600);
    let active = log.segment_files(false).unwrap().last().unwrap().base;
    let size_before = log.size_bytes();
    let stats = run_clean(&mut log, 0, i64::MAX, &policy(1000), 10_000, &mut big_map()).unwrap();
    assert_eq!(stats.end_offset, active, "cleaned up to the active segment");
    assert_eq!(stats.keys, 40);
    assert!(
        log.size_bytes() < size_before / 2,
        "{} -> {}",
        size_before,
        log.size_bytes()
    );

    // Before the active segment, the last record of each key; from it on, everything.
    let upto: BTreeMap<i64, Kv> = written
        .iter()
        .filter(|(o, _)| **o < active)
        .map(|(o, r)| (*o, r.clone()))
        .collect();
    let mut want = compacted(&upto, false);
    assert_eq!(want.len(), 40);
    // Records from the active segment on replace earlier ones only in a later clean.
    want.extend(written.range(active..).map(|(o, r)| (*o, r.clone())));
    assert_eq!(read_all(&log), want);

    // Reopened, the same; the segments still meet end to end; appends go on at the same offset.
    let leo = log.log_end_offset();
    drop(log);
    let mut log = open(dir.path());
    assert_eq!(read_all(&log), want);
    assert_eq!(log.log_end_offset(), leo);
    let segs = log.segment_files(false).unwrap();
    assert!(segs.windows(2).all(|w| w[0].next_offset == w[1].base), "{segs:?}");
    produce(&mut log, &records(3, 2), 3, Compression::None);
    assert_eq!(log.log_end_offset(), leo + 3);
}

#[test]
fn a_read_at_an_offset_the_clean_removed_starts_at_the_next_batch_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    produce(&mut log, &records(300, 5), 5, Compression::None);
    let end = log.log_end_offset();
    run_clean(&mut log, 0, end, &policy(1000), 0, &mut big_map()).unwrap();
    let kept = read_all(&log);
    let first_kept = *kept.keys().next().unwrap();
    assert!(first_kept > 0, "offset 0 was superseded");
    let raw = log.read(0, 1, end).unwrap();
    let (h, _) = crate::record_batch::split_batches(&raw).unwrap()[0];
    assert!(h.base_offset <= first_kept && h.next_offset() > 0);
    // Each offset reads from the batch holding it or the next one kept.
    for o in 0..end {
        let raw = log.read(o, 1, end).unwrap();
        let (h, _) = crate::record_batch::split_batches(&raw).unwrap()[0];
        assert!(h.next_offset() > o, "{o}");
    }
}

#[test]
fn a_tombstone_stays_for_delete_retention_ms_after_the_clean_that_kept_it_then_goes() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    let mut recs = records(200, 10);
    recs.push((Some("k3".into()), None));
    recs.push((Some("k4".into()), None));
    recs.extend(records(300, 2)); // k0, k1 again, and the segments roll on
    produce(&mut log, &recs, 4, Compression::None);
    let written = read_all(&log);
    let mut map = big_map();
    let p = policy(5_000);
    let s1 = run_clean(&mut log, 0, i64::MAX, &p, 1_000, &mut map).unwrap();
    let after = read_all(&log);
    let upto = |w: &BTreeMap<i64, Kv>, end| w.range(..end).map(|(o, r)| (*o, r.clone())).collect::<BTreeMap<_, _>>();
    let tombstones: Vec<i64> = after
        .iter()
        .filter(|(_, (_, v))| v.is_none())
        .map(|(o, _)| *o)
        .collect();
    assert_eq!(tombstones.len(), 2, "kept, with a delete horizon");
    assert_eq!(
        upto(&after, s1.end_offset),
        compacted(&upto(&written, s1.end_offset), false)
    );
    // The batch holding a tombstone now carries the horizon: the clean's time plus the retention.
    let raw = log.read(tombstones[0], 1, log.log_end_offset()).unwrap();
    let (h, _) = crate::record_batch::split_batches(&raw).unwrap()[0];
    assert_eq!(delete_horizon(&h), Some(6_000));

    // More writes make the log dirty again; a clean before the horizon keeps the tombstones.
    produce(&mut log, &records(100, 2), 4, Compression::None);
    let s2 = run_clean(&mut log, s1.end_offset, i64::MAX, &p, 5_999, &mut map).unwrap();
    assert!(s2.end_offset > s1.end_offset);
    assert_eq!(read_all(&log).values().filter(|(_, v)| v.is_none()).count(), 2);
    // After it, they go, and no record of their keys is left.
    produce(&mut log, &records(100, 2), 4, Compression::None);
    run_clean(&mut log, s2.end_offset, i64::MAX, &p, 6_000, &mut map).unwrap();
    let last = read_all(&log);
    assert!(last
        .values()
        .all(|(k, v)| v.is_some() && k.as_deref() != Some("k3") && k.as_deref() != Some("k4")));
    let keys: std::collections::BTreeSet<_> = last.values().map(|(k, _)| k.clone().unwrap()).collect();
    assert_eq!(keys.len(), 8, "{keys:?}");
}

#[test]
fn keyless_records_are_not_kept_and_the_active_segment_and_past_the_high_watermark_are_not_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    let mut recs = records(100, 3);
    recs.insert(10, (None, Some("no key".into())));
    produce(&mut log, &recs, 5, Compression::None);
    produce(&mut log, &records(400, 3), 5, Compression::None);
    let segs = log.segment_files(false).unwrap();
    assert!(segs.len() > 4);
    // A high watermark in the fourth segment: only the three before it are cleaned.
    let hw = segs[3].base + 1;
    let before = read_all(&log);
    let s = run_clean(&mut log, 0, hw, &policy(1000), 0, &mut big_map()).unwrap();
    assert_eq!(s.end_offset, segs[3].base);
    let after = read_all(&log);
    assert!(after.values().all(|(k, _)| k.is_some()), "the keyless record is gone");
    assert_eq!(
        after.range(segs[3].base..).count(),
        before.range(segs[3].base..).count()
    );
    let now = log.segment_files(false).unwrap();
    assert_eq!(now.last(), segs.last(), "the active segment is as it was");
}

#[test]
fn a_full_offset_map_cleans_only_as_far_as_its_keys_fit_and_the_next_clean_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    // 1000 distinct keys, then 1000 records over the first 50 again.
    produce(&mut log, &records(1000, 1000), 10, Compression::None);
    produce(&mut log, &records(1000, 50), 10, Compression::None);
    let written = read_all(&log);
    let active = log.segment_files(false).unwrap().last().unwrap().base;
    // Room for 300 keys (90% of 334 slots).
    let mut small = OffsetMap::new(334 * super::offset_map::BYTES_PER_KEY);
    let s1 = run_clean(&mut log, 0, i64::MAX, &policy(1000), 0, &mut small).unwrap();
    assert!(
        s1.end_offset < active && s1.end_offset <= 301,
        "stopped where the keys filled the map: {}",
        s1.end_offset
    );
    assert_eq!(s1.end_offset % 10, 0, "at the end of a batch mapped whole");
    // Nothing was lost: every record is still there (each key's latest was past the clean).
    assert_eq!(read_all(&log), written);
    let mut checkpoint = s1.end_offset;
    while checkpoint < active {
        checkpoint = run_clean(&mut log, checkpoint, i64::MAX, &policy(1000), 0, &mut small)
            .unwrap()
            .end_offset;
    }
    let upto: BTreeMap<i64, Kv> = written.range(..active).map(|(o, r)| (*o, r.clone())).collect();
    let mut want = compacted(&upto, false);
    want.extend(written.range(active..).map(|(o, r)| (*o, r.clone())));
    assert_eq!(read_all(&log), want);
}

#[test]
fn a_producers_last_batch_stays_empty_so_its_sequence_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    // Producer 5 writes k1..k3 (sequences 0..3), then a plain producer overwrites them.
    log.append_batch_as_leader(batch(&records(3, 3), Compression::None, 5, 0, 1_000), 1)
        .unwrap();
    produce(&mut log, &records(300, 3), 3, Compression::None);
    let end = log.log_end_offset();
    run_clean(&mut log, 0, end, &policy(1000), 0, &mut big_map()).unwrap();
    let raw = log.read(0, 1, end).unwrap();
    let (h, _) = crate::record_batch::split_batches(&raw).unwrap()[0];
    assert_eq!(
        (h.base_offset, h.record_count, h.producer_id, h.base_sequence),
        (0, 0, 5, 0),
        "kept empty"
    );
    assert!(read_all(&log).keys().all(|o| *o > 2));
    drop(log);
    let mut log = open(dir.path());
    // The next batch of producer 5 goes on from sequence 3; an older one is refused.
    assert!(log
        .append_batch_as_leader(batch(&records(1, 1), Compression::None, 5, 7, 2_000), 1)
        .is_err());
    log.append_batch_as_leader(batch(&records(1, 1), Compression::None, 5, 3, 2_000), 1)
        .unwrap();
}

#[test]
fn a_follower_copies_a_cleaned_log_with_its_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let mut leader = open(&dir.path().join("leader"));
    produce(&mut leader, &records(500, 7), 5, Compression::Snappy);
    run_clean(&mut leader, 0, i64::MAX, &policy(1000), 0, &mut big_map()).unwrap();
    let mut follower = open(&dir.path().join("follower"));
    let end = leader.log_end_offset();
    while follower.log_end_offset() < end {
        let raw = leader.read(follower.log_end_offset(), 300, end).unwrap();
        follower.append_replicated(&raw).unwrap();
    }
    assert_eq!(read_all(&follower), read_all(&leader));
    drop(follower);
    let follower = open(&dir.path().join("follower"));
    assert_eq!(read_all(&follower), read_all(&leader));
    assert_eq!(follower.log_end_offset(), end);
}

#[test]
fn a_clean_is_abandoned_when_the_log_changed_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    produce(&mut log, &records(300, 5), 5, Compression::None);
    let before = read_all(&log);
    let segments = log.segment_files(false).unwrap();
    let snap = LogSnapshot {
        dir: log.dir().to_path_buf(),
        segments: segments.clone(),
        index_interval_bytes: 256,
        segment_bytes: 2048,
        producer_last: Default::default(),
    };
    let range = CleanRange {
        first_dirty: 0,
        first_uncleanable: segments.last().unwrap().base,
        delete_retention_ms: 1000,
        now_ms: 0,
    };
    // A truncation into the first segment cleaned, between its clean and its swap.
    let cut = segments[0].base + 5; // a batch boundary
    let r = clean(&snap, &range, &mut big_map(), &|_| {}, &mut |old, new| {
        log.truncate_to(cut)?;
        log.replace_segments(old, new)
    });
    assert!(matches!(r, Err(CleanError::Aborted)), "{r:?}");
    let truncated = read_all(&log);
    assert_eq!(truncated, before.range(..cut).map(|(o, r)| (*o, r.clone())).collect());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".swap") || n.ends_with(".cleaned"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    drop(log);
    assert_eq!(read_all(&open(dir.path())), truncated);
}

#[test]
fn a_clean_is_not_swapped_into_another_copy_of_the_log() {
    // A dir move swaps a copy of the log in under the replica while a clean of the old one runs.
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(&dir.path().join("a"));
    produce(&mut log, &records(300, 5), 5, Compression::None);
    log.flush().unwrap();
    let before = read_all(&log);
    std::fs::create_dir(dir.path().join("b")).unwrap();
    for e in std::fs::read_dir(dir.path().join("a")).unwrap().flatten() {
        std::fs::copy(e.path(), dir.path().join("b").join(e.file_name())).unwrap();
    }
    let mut copy = open(&dir.path().join("b"));
    let segments = log.segment_files(false).unwrap();
    let snap = LogSnapshot {
        dir: log.dir().to_path_buf(),
        segments: segments.clone(),
        index_interval_bytes: 256,
        segment_bytes: 2048,
        producer_last: Default::default(),
    };
    let range = CleanRange {
        first_dirty: 0,
        first_uncleanable: segments.last().unwrap().base,
        delete_retention_ms: 1000,
        now_ms: 0,
    };
    let r = clean(&snap, &range, &mut big_map(), &|_| {}, &mut |old, new| {
        copy.replace_segments(old, new)
    });
    assert!(matches!(r, Err(CleanError::Aborted)), "{r:?}");
    assert_eq!(read_all(&copy), before);
    assert_eq!(read_all(&log), before);
    drop((log, copy));
    assert_eq!(read_all(&open(&dir.path().join("a"))), before);
    assert_eq!(read_all(&open(&dir.path().join("b"))), before);
}
