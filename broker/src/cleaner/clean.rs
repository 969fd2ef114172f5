//! One clean of one log, over its files (Kafka's `Cleaner.doClean`). First the keys of the
//! dirty segments are mapped to their latest offsets, from the first dirty offset until the
//! map is full or the dirty part ends; the clean reaches as far as the last batch mapped whole.
//! Then every sealed segment up to there, from the oldest, is rewritten, a group of small ones
//! into one, keeping what `retain.rs` keeps, and each group is swapped in as soon as it is
//! written. The files are read without the log's lock (sealed segments do not change in
//! place); the swap checks, under the lock, that the segments cleaned are still there as they
//! were, and otherwise abandons the clean.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use crate::partition_log::{io_err, CleanedSegment, LogError, PartitionLog, SegmentFiles, SwapSegment};
use crate::record_batch::{self, BatchError, BatchHeader, HEADER_LEN};

use super::batch_codec::{self, RecordRef};
use super::choose::{self, LogStat};
use super::offset_map::OffsetMap;
use super::policy::CompactionPolicy;
use super::retain::{self, BatchRetention, RecordFacts};
use super::CleanError;

/// Bytes read from a segment at a time.
const READ_CHUNK: usize = 2 << 20;

/// What a clean needs of a log, read under its lock.
#[derive(Debug, Clone)]
pub struct LogSnapshot {
    /// The log's folder.
    pub dir: PathBuf,
    /// Every segment, the active one last.
    pub segments: Vec<SegmentFiles>,
    /// The log's offset index interval.
    pub index_interval_bytes: u32,
    /// The log's segment size: cleaned segments are grouped up to it.
    pub segment_bytes: u64,
    /// Each idempotent producer's last offset: its batch there is kept, emptied if need be.
    pub producer_last: HashMap<i64, i64>,
}

impl LogSnapshot {
    /// `log` as a clean reads it, over its `segments`.
    pub fn of(log: &mut PartitionLog, segments: Vec<SegmentFiles>) -> Result<Self, CleanError> {
        Ok(Self {
            dir: log.dir().to_path_buf(),
            segments,
            index_interval_bytes: log.config().index_interval_bytes,
            segment_bytes: log.config().segment_bytes,
            producer_last: log.producer_last_offsets()?,
        })
    }
}

/// What to clean, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanRange {
    /// Where the dirty part starts (the cleaner checkpoint).
    pub first_dirty: i64,
    /// The base of the first segment not to clean.
    pub first_uncleanable: i64,
    /// The topic's `delete.retention.ms`.
    pub delete_retention_ms: i64,
    /// The time of the clean, in ms.
    pub now_ms: i64,
}

impl CleanRange {
    /// The range `ltc` chose, cleaned by `policy`'s rules at `now_ms`.
    pub fn of(ltc: &choose::LogToClean, policy: &CompactionPolicy, now_ms: i64) -> Self {
        Self {
            first_dirty: ltc.first_dirty,
            first_uncleanable: ltc.first_uncleanable,
            delete_retention_ms: policy.delete_retention_ms,
            now_ms,
        }
    }
}

/// What a clean did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanStats {
    /// The first offset not cleaned: the new cleaner checkpoint.
    pub end_offset: i64,
    /// Keys mapped.
    pub keys: usize,
    /// Bytes read, to map and to clean.
    pub bytes_read: u64,
    /// Bytes of the segments replaced.
    pub bytes_before: u64,
    /// Bytes of the cleaned segments that replaced them.
    pub bytes_after: u64,
    /// Records read while cleaning.
    pub records_read: u64,
    /// Records kept.
    pub records_kept: u64,
    /// Segments replaced.
    pub segments_replaced: usize,
}

/// Swaps a written group in for the segments it was cleaned from; false if the log changed.
pub type Swap<'a> = dyn FnMut(&[SegmentFiles], SwapSegment) -> Result<bool, LogError> + 'a;

/// Cleans the log `snap` over `range`, calling `pace` with every byte count read or written
/// (the cleaner's I/O throttle) and `swap` for every group written.
pub fn clean(
    snap: &LogSnapshot,
    range: &CleanRange,
    map: &mut OffsetMap,
    pace: &dyn Fn(usize),
    swap: &mut Swap<'_>,
) -> Result<CleanStats, CleanError> {
    let sealed = &snap.segments[..snap.segments.len().saturating_sub(1)];
    let mut stats = CleanStats {
        end_offset: range.first_dirty,
        ..Default::default()
    };
    let mut scratch = Scratch::default();
    build_offset_map(sealed, range, map, pace, &mut stats, &mut scratch)?;
    let end = map.latest_offset() + 1;
    if end <= range.first_dirty {
        return Ok(stats);
    }
    stats.end_offset = end;
    stats.keys = map.len();
    let to_clean: Vec<SegmentFiles> = sealed.iter().take_while(|s| s.base < end).cloned().collect();
    for g in retain::group_segments(&to_clean, snap.segment_bytes) {
        let group = &to_clean[g];
        let mut out = CleanedSegment::create(&snap.dir, group[0].base, snap.index_interval_bytes)?;
        let ctx = GroupCtx {
            snap,
            range,
            map,
            end: group[group.len() - 1].next_offset,
        };
        if let Err(e) = group
            .iter()
            .try_for_each(|seg| clean_segment(seg, &ctx, &mut out, pace, &mut stats, &mut scratch))
        {
            out.discard();
            return Err(e);
        }
        let modified = std::fs::metadata(&group[group.len() - 1].log_path)
            .and_then(|m| m.modified())
            .ok();
        let size = out.size();
        let new = out.into_swap(modified)?;
        if !swap(group, new)? {
            return Err(CleanError::Aborted);
        }
        stats.bytes_before += group.iter().map(|s| s.size).sum::<u64>();
        stats.bytes_after += size;
        stats.segments_replaced += group.len();
    }
    Ok(stats)
}

/// Cleans `log`, which the caller holds alone, once as the cleaner threads do: from the cleaner
/// checkpoint `checkpoint` (`None`: never cleaned) up to the active segment and
/// `high_watermark`, by `policy`'s rules at `now_ms`. For tools, benchmarks and tests.
pub fn clean_exclusive(
    log: &mut PartitionLog,
    checkpoint: Option<i64>,
    high_watermark: i64,
    policy: &CompactionPolicy,
    now_ms: i64,
    map: &mut OffsetMap,
) -> Result<CleanStats, CleanError> {
    let segments = log.segment_files(true)?;
    let stat = LogStat {
        segments: &segments,
        log_start: log.log_start_offset(),
        high_watermark,
    };
    let offsets = choose::cleanable_offsets(&stat, checkpoint, policy, now_ms);
    let ltc = choose::log_to_clean(&stat, &offsets, false);
    let snap = LogSnapshot::of(log, segments)?;
    let range = CleanRange::of(&ltc, policy, now_ms);
    clean(&snap, &range, map, &|_| {}, &mut |old, new| {
        log.replace_segments(old, new)
    })
}

/// Buffers reused from batch to batch.
#[derive(Default)]
struct Scratch {
    block: Vec<u8>,
    records: Vec<RecordRef>,
    kept: Vec<RecordRef>,
    out: Vec<u8>,
}

/// Maps the keys of the dirty sealed segments, from `range.first_dirty`, until the map is full.
fn build_offset_map(
    sealed: &[SegmentFiles],
    range: &CleanRange,
    map: &mut OffsetMap,
    pace: &dyn Fn(usize),
    stats: &mut CleanStats,
    s: &mut Scratch,
) -> Result<(), CleanError> {
    map.clear();
    let dirty = sealed
        .iter()
        .filter(|seg| seg.next_offset > range.first_dirty && seg.base < range.first_uncleanable);
    for seg in dirty {
        let mut batches = Batches::open(seg)?;
        while let Some((pos, h, batch)) = batches.next()? {
            pace(h.total_len);
            stats.bytes_read += h.total_len as u64;
            if h.last_offset() < range.first_dirty {
                continue;
            }
            if !h.is_control() {
                let corrupt = |source| batches_corrupt(seg, pos, source);
                let block = batch_codec::records_block(batch, &h, &mut s.block).map_err(corrupt)?;
                batch_codec::parse_records(block, &h, &mut s.records).map_err(corrupt)?;
                for r in &s.records {
                    let Some((a, b)) = r.key else { continue };
                    if r.offset >= range.first_dirty && !map.put(&block[a..b], r.offset) {
                        // Full: the clean ends after the last batch mapped whole.
                        return Ok(());
                    }
                }
            }
            map.update_latest_offset(h.last_offset());
        }
    }
    Ok(())
}

fn batches_corrupt(seg: &SegmentFiles, position: u64, source: BatchError) -> CleanError {
    CleanError::Corrupt {
        path: seg.log_path.clone(),
        position,
        source,
    }
}

/// What the batches of one group are cleaned against.
struct GroupCtx<'a> {
    snap: &'a LogSnapshot,
    range: &'a CleanRange,
    map: &'a OffsetMap,
    /// The offset after the group's last batch.
    end: i64,
}

/// Copies the batches of `seg` to `out`, keeping what `retain.rs` keeps.
fn clean_segment(
    seg: &SegmentFiles,
    ctx: &GroupCtx,
    out: &mut CleanedSegment,
    pace: &dyn Fn(usize),
    stats: &mut CleanStats,
    s: &mut Scratch,
) -> Result<(), CleanError> {
    let mut batches = Batches::open(seg)?;
    while let Some((pos, h, batch)) = batches.next()? {
        pace(h.total_len);
        stats.bytes_read += h.total_len as u64;
        let corrupt = |source| batches_corrupt(seg, pos, source);
        if !batch_codec::crc_ok(batch) {
            let stored = u32::from_be_bytes([batch[17], batch[18], batch[19], batch[20]]);
            return Err(corrupt(BatchError::CrcMismatch {
                stored,
                computed: crc32c::crc32c(&batch[21..]),
            }));
        }
        let retention = retain::batch_retention(&h, ctx.snap.producer_last.get(&h.producer_id).copied(), ctx.end);
        let written = match retention {
            BatchRetention::Whole => Some(Written::Original),
            _ => filter_batch(batch, &h, retention, ctx, stats, s).map_err(corrupt)?,
        };
        match written {
            Some(Written::Original) => {
                pace(batch.len());
                out.append(batch)?;
            }
            Some(Written::Rebuilt) => {
                pace(s.out.len());
                out.append(&s.out)?;
            }
            None => {}
        }
    }
    Ok(())
}

/// What becomes of a batch: itself, or the batch rebuilt in the scratch output.
enum Written {
    Original,
    Rebuilt,
}

/// The records of a batch a clean keeps, rebuilt into `s.out` when not all are; `None` when the
/// batch goes.
fn filter_batch(
    batch: &[u8],
    h: &BatchHeader,
    retention: BatchRetention,
    ctx: &GroupCtx,
    stats: &mut CleanStats,
    s: &mut Scratch,
) -> Result<Option<Written>, BatchError> {
    let block = batch_codec::records_block(batch, h, &mut s.block)?;
    batch_codec::parse_records(block, h, &mut s.records)?;
    let latest_mapped = ctx.map.latest_offset();
    let horizon = retain::delete_horizon(h);
    s.kept.clear();
    let mut keeps_tombstone = false;
    for r in &s.records {
        let facts = RecordFacts {
            offset: r.offset,
            has_key: r.key.is_some(),
            has_value: r.value.is_some(),
            latest_for_key: match r.key {
                Some((a, b)) if r.offset <= latest_mapped => ctx.map.get(&block[a..b]),
                _ => None,
            },
        };
        if retain::retain_record(&facts, latest_mapped, horizon, ctx.range.now_ms) {
            s.kept.push(*r);
            keeps_tombstone |= r.value.is_none();
        }
    }
    stats.records_read += s.records.len() as u64;
    stats.records_kept += s.kept.len() as u64;
    s.out.clear();
    if s.kept.is_empty() {
        return Ok(match retention {
            BatchRetention::DeleteEmpty => None,
            _ if s.records.is_empty() => Some(Written::Original),
            _ => {
                batch_codec::encode_empty(h, &mut s.out);
                Some(Written::Rebuilt)
            }
        });
    }
    let needs_horizon = keeps_tombstone && horizon.is_none();
    if s.kept.len() == s.records.len() && !needs_horizon {
        return Ok(Some(Written::Original));
    }
    let new = retain::new_horizon(
        horizon,
        keeps_tombstone,
        ctx.range.now_ms,
        ctx.range.delete_retention_ms,
    );
    batch_codec::encode_retained(h, block, &s.kept, new, &mut s.out)?;
    Ok(Some(Written::Rebuilt))
}

/// A batch read: its position in the file, its header and its bytes.
type NextBatch<'b> = (u64, BatchHeader, &'b [u8]);

/// The batches of a segment's file up to the size it had when listed, read in large chunks.
struct Batches<'a> {
    seg: &'a SegmentFiles,
    file: File,
    buf: Vec<u8>,
    /// File position of `buf[0]`.
    buf_pos: u64,
    /// Where the next batch starts in `buf`, and how much of `buf` is read.
    at: usize,
    filled: usize,
}

impl<'a> Batches<'a> {
    fn open(seg: &'a SegmentFiles) -> Result<Self, LogError> {
        let file = File::open(&seg.log_path).map_err(|e| io_err("open", &seg.log_path, e))?;
        Ok(Self {
            seg,
            file,
            buf: Vec::new(),
            buf_pos: 0,
            at: 0,
            filled: 0,
        })
    }

    /// Makes at least `need` bytes from the next batch's start available, if the file has them.
    fn fill(&mut self, need: usize) -> Result<(), LogError> {
        self.buf.copy_within(self.at..self.filled, 0);
        self.buf_pos += self.at as u64;
        self.filled -= self.at;
        self.at = 0;
        let left = (self.seg.size - self.buf_pos) as usize;
        let want = need.max(READ_CHUNK).min(left);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let upto = want.max(self.filled);
        if upto > self.filled {
            let at = self.buf_pos + self.filled as u64;
            self.file
                .read_exact_at(&mut self.buf[self.filled..upto], at)
                .map_err(|e| io_err("read", &self.seg.log_path, e))?;
            self.filled = upto;
        }
        Ok(())
    }

    /// The next batch: its position, header and bytes.
    fn next(&mut self) -> Result<Option<NextBatch<'_>>, CleanError> {
        let pos = self.buf_pos + self.at as u64;
        if pos >= self.seg.size {
            return Ok(None);
        }
        let torn = |available| BatchError::Incomplete {
            needed: HEADER_LEN,
            available,
        };
        if self.filled - self.at < HEADER_LEN {
            self.fill(HEADER_LEN)?;
        }
        let h = record_batch::peek_header(&self.buf[self.at..self.filled])
            .map_err(|e| batches_corrupt(self.seg, pos, e))?
            .ok_or_else(|| batches_corrupt(self.seg, pos, torn(self.filled - self.at)))?;
        if self.filled - self.at < h.total_len {
            self.fill(h.total_len)?;
            if self.filled < h.total_len {
                return Err(batches_corrupt(self.seg, pos, torn(self.filled)));
            }
        }
        let start = self.at;
        self.at += h.total_len;
        Ok(Some((pos, h, &self.buf[start..start + h.total_len])))
    }
}
