//! Kafka's record batch (magic 2), the format of the wire and of the `.log` files: what a Kafka
//! broker writes is what Ferry writes. Batches from clients are checked here before the leader
//! gives them offsets; their bytes are then kept exactly as produced.
//!
//! Layout, all integers big-endian:
//!
//! ```text
//! 0  base_offset            i64
//! 8  batch_length           i32   bytes after this field to the end of the batch
//! 12 partition_leader_epoch i32
//! 16 magic                  i8    2
//! 17 crc                    u32   CRC32C of bytes 21..end
//! 21 attributes             i16   bits 0-2 compression, 3 timestamp type, 4 transactional, 5 control
//! 23 last_offset_delta      i32
//! 27 base_timestamp         i64
//! 35 max_timestamp          i64
//! 43 producer_id            i64
//! 51 producer_epoch         i16
//! 53 base_sequence          i32
//! 57 records_count          i32
//! 61 records (varint-framed; compressed as one block when the codec is not none)
//! ```
//!
//! The base offset and the leader epoch lie outside the CRC, so the leader sets them without
//! touching the rest.

pub(crate) mod varint;

use bytes::Bytes;

/// Size of the fixed batch header in bytes.
pub const HEADER_LEN: usize = 61;

/// Bytes before (and including) the `batch_length` field; `total_len = LENGTH_PREFIX + batch_length`.
const LENGTH_PREFIX: usize = 12;
/// Where the magic byte sits.
const MAGIC_AT: usize = 16;
/// Where the CRC sits.
const CRC_AT: usize = 17;
/// Start of the CRC-covered region.
const CRC_START: usize = 21;
/// Smallest valid `batch_length`: the rest of the header with no records.
const MIN_BATCH_LENGTH: u32 = (HEADER_LEN - LENGTH_PREFIX) as u32;
/// The only batch format served.
pub const MAGIC: i8 = 2;

/// Why a batch could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// The buffer ends before the batch does.
    #[error("incomplete batch: need {needed} bytes, have {available}")]
    Incomplete { needed: usize, available: usize },
    /// The `batch_length` field is too small to hold a header.
    #[error("invalid batch length field {0} (minimum {MIN_BATCH_LENGTH})")]
    BadLength(u32),
    /// Not a magic-2 batch (older message formats are not served).
    #[error("record batch magic {0}, only magic 2 is supported")]
    BadMagic(i8),
    /// The buffer passed to `verify` is not exactly one batch long.
    #[error("buffer holds {actual} bytes but the batch header says {expected}")]
    LengthMismatch { expected: usize, actual: usize },
    /// Offsets are never negative.
    #[error("negative base offset {0}")]
    NegativeBaseOffset(i64),
    /// A negative record count, or none in a batch a client produced (only the log cleaner
    /// leaves empty batches, as Kafka's does, to keep an offset range or a producer's sequence).
    #[error("batch declares {0} records")]
    NoRecords(i32),
    /// More records than offsets, or a negative offset span.
    #[error("batch declares {count} records over a last offset delta of {delta}")]
    BadCount { count: i32, delta: i32 },
    /// The last offset of the batch would not fit in an i64.
    #[error("offset overflow: base offset {base} with last offset delta {delta}")]
    OffsetOverflow { base: i64, delta: u32 },
    /// Checksum does not match the content.
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    /// A compression codec Kafka does not define.
    #[error("unknown compression codec {0}")]
    BadCodec(u8),
    /// A record does not parse, or runs past the end of the batch.
    #[error("record {index} of {count}: {reason}")]
    BadRecord { index: u32, count: u32, reason: String },
    /// Bytes are left over after the declared number of records.
    #[error("{extra} unexpected bytes after the last of {count} records")]
    TrailingBytes { extra: usize, count: u32 },
    /// The records are compressed; this path reads only uncompressed batches.
    #[error("the batch is compressed with {0}; read it over the Kafka protocol")]
    Compressed(&'static str),
    /// The batch would not fit the format's 32-bit length fields.
    #[error("batch too large for the format: {0}")]
    TooLarge(String),
}

/// Decoded batch header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: i64,
    /// Epoch of the leader that appended the batch (`u32::MAX` for -1, as a producer sends it).
    pub leader_epoch: u32,
    /// The attributes: compression, timestamp type, transactional and control bits.
    pub attributes: i16,
    /// Offset of the last record relative to the first.
    pub last_offset_delta: u32,
    /// Number of records (none only in a batch the log cleaner emptied).
    pub record_count: u32,
    /// Timestamp of the first record.
    pub base_timestamp_ms: i64,
    /// Largest record timestamp in the batch.
    pub max_timestamp_ms: i64,
    /// The idempotent producer's id, or -1.
    pub producer_id: i64,
    /// The idempotent producer's epoch, or -1.
    pub producer_epoch: i16,
    /// Sequence number of the first record, or -1.
    pub base_sequence: i32,
    /// Size of the whole batch in bytes, header included.
    pub total_len: usize,
}

impl BatchHeader {
    /// Offset of the last record in the batch.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// Offset right after the batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    /// The compression codec's name, or an error for a codec Kafka does not define.
    pub fn codec(&self) -> Result<&'static str, BatchError> {
        match self.attributes & 0x7 {
            0 => Ok("none"),
            1 => Ok("gzip"),
            2 => Ok("snappy"),
            3 => Ok("lz4"),
            4 => Ok("zstd"),
            c => Err(BatchError::BadCodec(c as u8)),
        }
    }

    /// Whether the batch is part of a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & 0x10 != 0
    }

    /// Whether the batch holds a transaction marker.
    pub fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }

    /// Whether the batch's timestamps are the broker's append time, not the producer's.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & 0x08 != 0
    }
}

fn be<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut b = [0u8; N];
    b.copy_from_slice(&buf[at..at + N]);
    b
}

fn i16_at(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(be(buf, at))
}

fn i32_at(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(be(buf, at))
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(be(buf, at))
}

fn i64_at(buf: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(be(buf, at))
}

/// One record's bytes inside an uncompressed batch: length varint, attributes, timestamp delta,
/// offset delta, key, value and headers. Encoded for values with no key and no headers.
fn encode_record(out: &mut Vec<u8>, offset_delta: i64, value: &[u8]) {
    let value_len = value.len() as i64;
    // attributes (1) + timestamp delta 0 (1) + offset delta + key -1 (1) + value + 0 headers (1)
    let body = 1 + 1 + varint::len(offset_delta) + 1 + varint::len(value_len) + value.len() + 1;
    varint::write(out, body as i64);
    out.push(0);
    varint::write(out, 0);
    varint::write(out, offset_delta);
    varint::write(out, -1);
    varint::write(out, value_len);
    out.extend_from_slice(value);
    varint::write(out, 0);
}

/// Encodes values into one uncompressed batch; `encode_batch` with an error instead of a panic
/// on oversize input.
pub fn try_encode_batch(
    base_offset: i64,
    leader_epoch: u32,
    timestamp_ms: i64,
    records: &[impl AsRef<[u8]>],
) -> Result<Vec<u8>, BatchError> {
    let count = i32::try_from(records.len()).map_err(|_| BatchError::TooLarge(format!("{} records", records.len())))?;
    let mut total = HEADER_LEN as u64;
    for r in records {
        total += r.as_ref().len() as u64 + 20;
    }
    if total > i32::MAX as u64 {
        return Err(BatchError::TooLarge(format!("batch of about {total} bytes")));
    }
    let mut buf = Vec::with_capacity(total as usize);
    buf.extend_from_slice(&base_offset.to_be_bytes());
    buf.extend_from_slice(&0i32.to_be_bytes()); // batch length, filled below
    buf.extend_from_slice(&leader_epoch.to_be_bytes());
    buf.push(MAGIC as u8);
    buf.extend_from_slice(&0u32.to_be_bytes()); // crc, filled below
    buf.extend_from_slice(&0i16.to_be_bytes());
    buf.extend_from_slice(&(count.max(1) - 1).to_be_bytes());
    buf.extend_from_slice(&timestamp_ms.to_be_bytes());
    buf.extend_from_slice(&timestamp_ms.to_be_bytes());
    buf.extend_from_slice(&(-1i64).to_be_bytes());
    buf.extend_from_slice(&(-1i16).to_be_bytes());
    buf.extend_from_slice(&(-1i32).to_be_bytes());
    buf.extend_from_slice(&count.to_be_bytes());
    for (i, r) in records.iter().enumerate() {
        encode_record(&mut buf, i as i64, r.as_ref());
    }
    let batch_length = (buf.len() - LENGTH_PREFIX) as u32;
    buf[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let crc = crc32c::crc32c(&buf[CRC_START..]);
    buf[CRC_AT..CRC_START].copy_from_slice(&crc.to_be_bytes());
    Ok(buf)
}

/// Encodes values into one batch whose records get offsets `base_offset..`.
///
/// # Panics
/// If the batch does not fit the format's 32-bit length fields (about 2 GiB); use
/// [`try_encode_batch`] for untrusted sizes.
pub fn encode_batch(base_offset: i64, leader_epoch: u32, timestamp_ms: i64, records: &[impl AsRef<[u8]>]) -> Vec<u8> {
    match try_encode_batch(base_offset, leader_epoch, timestamp_ms, records) {
        Ok(buf) => buf,
        Err(e) => panic!("encode_batch: {e}"),
    }
}

/// Gives a checked batch its place in the log: the leader's offsets and epoch. Both lie outside
/// the CRC, so the producer's bytes stay as they were.
pub fn set_offsets(batch: &mut [u8], base_offset: i64, leader_epoch: u32) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
    batch[12..16].copy_from_slice(&leader_epoch.to_be_bytes());
}

/// Parses and sanity-checks a header from the first [`HEADER_LEN`] bytes, without needing the rest of the batch.
///
/// `Ok(None)` if `buf` is shorter than a header.
pub fn peek_header(buf: &[u8]) -> Result<Option<BatchHeader>, BatchError> {
    if buf.len() < HEADER_LEN {
        // The magic byte comes early: an old-format batch is named as such, not as short.
        if buf.len() > MAGIC_AT && buf[MAGIC_AT] as i8 != MAGIC {
            return Err(BatchError::BadMagic(buf[MAGIC_AT] as i8));
        }
        return Ok(None);
    }
    let base_offset = i64_at(buf, 0);
    let batch_length = u32_at(buf, 8);
    let magic = buf[MAGIC_AT] as i8;
    let delta = i32_at(buf, 23);
    let count = i32_at(buf, 57);
    if magic != MAGIC {
        return Err(BatchError::BadMagic(magic));
    }
    if batch_length < MIN_BATCH_LENGTH || batch_length > i32::MAX as u32 {
        return Err(BatchError::BadLength(batch_length));
    }
    if base_offset < 0 {
        return Err(BatchError::NegativeBaseOffset(base_offset));
    }
    if count < 0 {
        return Err(BatchError::NoRecords(count));
    }
    if delta < 0 || count as i64 > delta as i64 + 1 {
        return Err(BatchError::BadCount { count, delta });
    }
    if base_offset.checked_add(delta as i64 + 1).is_none() {
        return Err(BatchError::OffsetOverflow {
            base: base_offset,
            delta: delta as u32,
        });
    }
    Ok(Some(BatchHeader {
        base_offset,
        leader_epoch: u32_at(buf, 12),
        attributes: i16_at(buf, 21),
        last_offset_delta: delta as u32,
        record_count: count as u32,
        base_timestamp_ms: i64_at(buf, 27),
        max_timestamp_ms: i64_at(buf, 35),
        producer_id: i64_at(buf, 43),
        producer_epoch: i16_at(buf, 51),
        base_sequence: i32_at(buf, 53),
        total_len: LENGTH_PREFIX + batch_length as usize,
    }))
}

/// Parses the header of the batch at the start of `buf`; `Ok(None)` if `buf` does not hold the whole batch yet.
///
/// Checks the header fields only, not the CRC; see [`verify`].
pub fn parse_header(buf: &[u8]) -> Result<Option<BatchHeader>, BatchError> {
    match peek_header(buf)? {
        Some(h) if buf.len() >= h.total_len => Ok(Some(h)),
        _ => Ok(None),
    }
}

/// Checks that `batch` is exactly one well-formed batch: header, CRC, codec, and for an
/// uncompressed batch every record's framing and the count. A compressed batch's records are
/// covered by the CRC and not unpacked here: the leader keeps the producer's bytes.
pub fn verify(batch: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = peek_header(batch)?.ok_or(BatchError::Incomplete {
        needed: HEADER_LEN,
        available: batch.len(),
    })?;
    if batch.len() != header.total_len {
        return Err(BatchError::LengthMismatch {
            expected: header.total_len,
            actual: batch.len(),
        });
    }
    let stored = u32_at(batch, CRC_AT);
    let computed = crc32c::crc32c(&batch[CRC_START..]);
    if stored != computed {
        return Err(BatchError::CrcMismatch { stored, computed });
    }
    if header.codec()? == "none" {
        for_each_record(batch, &header, |_| {})?;
    }
    Ok(header)
}

/// A field length: -1 (null) when `nullable`, else 0..=rest of the record.
fn field_len(rec: &[u8], pos: &mut usize, nullable: bool) -> Result<Option<usize>, String> {
    let len = varint::read_i32(rec, pos).ok_or("a length does not parse")?;
    if len == -1 && nullable {
        return Ok(None);
    }
    let len = usize::try_from(len).map_err(|_| format!("negative length {len}"))?;
    if len > rec.len() - *pos {
        return Err(format!("a field of {len} bytes runs past the record"));
    }
    *pos += len;
    Ok(Some(len))
}

/// One record of a batch, as [`for_each_record`] walks it.
struct RecordAt {
    /// Offset relative to the batch's base offset.
    offset_delta: i32,
    /// Timestamp relative to the batch's base timestamp.
    timestamp_delta: i64,
    /// The value's range (in the record, then in the batch), `None` for a null value.
    value: Option<(usize, usize)>,
}

/// Parses one record body: its offset and timestamp deltas and its value range within `rec`.
fn parse_record(rec: &[u8]) -> Result<RecordAt, String> {
    let mut pos = 1; // attributes
    if rec.is_empty() {
        return Err("empty record".into());
    }
    let timestamp_delta = varint::read_i64(rec, &mut pos).ok_or("the timestamp delta does not parse")?;
    let delta = varint::read_i32(rec, &mut pos).ok_or("the offset delta does not parse")?;
    field_len(rec, &mut pos, true)?; // key
    let value = field_len(rec, &mut pos, true)?.map(|n| (pos - n, pos));
    let headers = varint::read_i32(rec, &mut pos).ok_or("the header count does not parse")?;
    if headers < 0 || headers as usize > rec.len() - pos {
        return Err(format!("header count {headers} does not fit the record"));
    }
    for _ in 0..headers {
        field_len(rec, &mut pos, false)?;
        field_len(rec, &mut pos, true)?;
    }
    if pos != rec.len() {
        return Err(format!("{} bytes left over in the record", rec.len() - pos));
    }
    Ok(RecordAt {
        offset_delta: delta,
        timestamp_delta,
        value,
    })
}

/// Walks the records of an uncompressed, length-checked batch, calling `f` for each (value
/// ranges are within `batch`); offset deltas must grow and stay within the batch's span.
fn for_each_record(batch: &[u8], h: &BatchHeader, mut f: impl FnMut(RecordAt)) -> Result<(), BatchError> {
    let count = h.record_count;
    let bad = |index: u32, reason: String| BatchError::BadRecord { index, count, reason };
    let mut pos = HEADER_LEN;
    let mut last_delta = -1i64;
    for index in 0..count {
        let len = varint::read_i32(batch, &mut pos).ok_or_else(|| bad(index, "its length does not parse".into()))?;
        let len = usize::try_from(len).map_err(|_| bad(index, format!("negative length {len}")))?;
        if len > batch.len() - pos {
            return Err(bad(index, format!("{len} bytes run past the end of the batch")));
        }
        let mut r = parse_record(&batch[pos..pos + len]).map_err(|r| bad(index, r))?;
        let delta = r.offset_delta;
        if i64::from(delta) <= last_delta || delta as i64 > h.last_offset_delta as i64 {
            return Err(bad(
                index,
                format!("offset delta {delta} out of order or past the batch"),
            ));
        }
        last_delta = delta.into();
        r.value = r.value.map(|(a, b)| (pos + a, pos + b));
        f(r);
        pos += len;
    }
    if pos != batch.len() {
        return Err(BatchError::TrailingBytes {
            extra: batch.len() - pos,
            count,
        });
    }
    Ok(())
}

/// Verifies one batch and returns its records as `(offset, value)`; values share one copy of the batch.
pub fn records(batch: &[u8]) -> Result<Vec<(i64, Bytes)>, BatchError> {
    records_from_bytes(Bytes::copy_from_slice(batch))
}

/// Like [`records`], but slices values out of `batch` without copying. A null value reads as
/// empty; a compressed batch is an error, since this path does not unpack.
pub fn records_from_bytes(batch: Bytes) -> Result<Vec<(i64, Bytes)>, BatchError> {
    let header = verify(&batch)?;
    let codec = header.codec()?;
    if codec != "none" {
        return Err(BatchError::Compressed(codec));
    }
    let mut out = Vec::with_capacity(header.record_count as usize);
    for_each_record(&batch, &header, |r| {
        let value = r.value.map_or_else(Bytes::new, |(a, b)| batch.slice(a..b));
        out.push((header.base_offset + i64::from(r.offset_delta), value));
    })?;
    Ok(out)
}

/// The offset of the first record of `batch` stamped with the batch's largest timestamp, which
/// ListOffsets' MAX_TIMESTAMP answers, as Kafka's `offsetOfMaxTimestamp` finds it. With log
/// append time every record carries the batch's time, so the first one. A compressed batch is
/// not unpacked here (the broker keeps producers' bytes as they are): its last offset stands
/// for it, which for records written in time order is the same record unless several share
/// the largest millisecond.
pub fn offset_of_max_timestamp(batch: &[u8]) -> Result<i64, BatchError> {
    let h = verify(batch)?;
    if h.is_log_append_time() {
        return Ok(h.base_offset);
    }
    if h.codec()? != "none" {
        return Ok(h.last_offset());
    }
    let mut first = None;
    for_each_record(batch, &h, |r| {
        if first.is_none() && h.base_timestamp_ms.saturating_add(r.timestamp_delta) == h.max_timestamp_ms {
            first = Some(h.base_offset + i64::from(r.offset_delta));
        }
    })?;
    Ok(first.unwrap_or_else(|| h.last_offset()))
}

/// Splits `buf` into whole, verified batches; trailing partial data is an `Incomplete` error.
pub fn split_batches(buf: &[u8]) -> Result<Vec<(BatchHeader, &[u8])>, BatchError> {
    let mut out = Vec::new();
    let mut rest = buf;
    while !rest.is_empty() {
        let needed = peek_header(rest)?.map_or(HEADER_LEN, |h| h.total_len);
        if rest.len() < needed {
            return Err(BatchError::Incomplete {
                needed,
                available: rest.len(),
            });
        }
        let (batch, tail) = rest.split_at(needed);
        out.push((verify(batch)?, batch));
        rest = tail;
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
