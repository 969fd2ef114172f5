//! Record batch wire and disk format: a fixed header followed by length-prefixed records.
//!
//! Layout, all integers little-endian:
//!
//! ```text
//! 0  base_offset      i64
//! 8  batch_length     u32   bytes after this field to the end of the batch
//! 12 leader_epoch     u32
//! 16 crc              u32   CRC32C of bytes 20..end
//! 20 record_count     u32
//! 24 max_timestamp_ms i64
//! 32 records: (length u32, value bytes) * record_count
//! ```

use bytes::Bytes;

/// Size of the fixed batch header in bytes.
pub const HEADER_LEN: usize = 32;

/// Bytes before (and including) the `batch_length` field; `total_len = LENGTH_PREFIX + batch_length`.
const LENGTH_PREFIX: usize = 12;
/// Start of the CRC-covered region.
const CRC_START: usize = 20;
/// Smallest valid `batch_length`: the rest of the header with no records.
const MIN_BATCH_LENGTH: u32 = (HEADER_LEN - LENGTH_PREFIX) as u32;

/// Why a batch could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// The buffer ends before the batch does.
    #[error("incomplete batch: need {needed} bytes, have {available}")]
    Incomplete { needed: usize, available: usize },
    /// The `batch_length` field is too small to hold a header.
    #[error("invalid batch length field {0} (minimum {MIN_BATCH_LENGTH})")]
    BadLength(u32),
    /// The buffer passed to `verify` is not exactly one batch long.
    #[error("buffer holds {actual} bytes but the batch header says {expected}")]
    LengthMismatch { expected: usize, actual: usize },
    /// Offsets are never negative.
    #[error("negative base offset {0}")]
    NegativeBaseOffset(i64),
    /// Batches always carry at least one record.
    #[error("batch declares zero records")]
    NoRecords,
    /// The last offset of the batch would not fit in an i64.
    #[error("offset overflow: base offset {base} with {count} records")]
    OffsetOverflow { base: i64, count: u32 },
    /// Checksum does not match the content.
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    /// A record's length prefix points past the end of the batch.
    #[error("record {index} of {count} runs past the end of the batch")]
    RecordOverrun { index: u32, count: u32 },
    /// Bytes are left over after the declared number of records.
    #[error("{extra} unexpected bytes after the last of {count} records")]
    TrailingBytes { extra: usize, count: u32 },
    /// The batch would not fit the format's 32-bit length fields.
    #[error("batch too large for the format: {0}")]
    TooLarge(String),
}

/// Decoded batch header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: i64,
    /// Epoch of the leader that created the batch.
    pub leader_epoch: u32,
    /// Number of records (at least one).
    pub record_count: u32,
    /// Largest record timestamp in the batch.
    pub max_timestamp_ms: i64,
    /// Size of the whole batch in bytes, header included.
    pub total_len: usize,
}

impl BatchHeader {
    /// Offset of the last record in the batch.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.record_count) - 1
    }

    /// Offset right after the batch.
    pub fn next_offset(&self) -> i64 {
        self.base_offset + i64::from(self.record_count)
    }
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_le_bytes(b)
}

fn i64_at(buf: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    i64::from_le_bytes(b)
}

/// Encodes records into one batch; `encode_batch` with an error instead of a panic on oversize input.
pub fn try_encode_batch(
    base_offset: i64,
    leader_epoch: u32,
    timestamp_ms: i64,
    records: &[impl AsRef<[u8]>],
) -> Result<Vec<u8>, BatchError> {
    let count = u32::try_from(records.len()).map_err(|_| BatchError::TooLarge(format!("{} records", records.len())))?;
    let mut total = HEADER_LEN as u64;
    for r in records {
        let len = r.as_ref().len();
        if u32::try_from(len).is_err() {
            return Err(BatchError::TooLarge(format!("record of {len} bytes")));
        }
        total += 4 + len as u64;
    }
    let batch_length = u32::try_from(total - LENGTH_PREFIX as u64)
        .map_err(|_| BatchError::TooLarge(format!("batch of {total} bytes")))?;

    let mut buf = Vec::with_capacity(total as usize);
    buf.extend_from_slice(&base_offset.to_le_bytes());
    buf.extend_from_slice(&batch_length.to_le_bytes());
    buf.extend_from_slice(&leader_epoch.to_le_bytes());
    buf.extend_from_slice(&0u32.to_le_bytes()); // crc, filled below
    buf.extend_from_slice(&count.to_le_bytes());
    buf.extend_from_slice(&timestamp_ms.to_le_bytes());
    for r in records {
        let r = r.as_ref();
        buf.extend_from_slice(&(r.len() as u32).to_le_bytes());
        buf.extend_from_slice(r);
    }
    let crc = crc32c::crc32c(&buf[CRC_START..]);
    buf[16..20].copy_from_slice(&crc.to_le_bytes());
    Ok(buf)
}

/// Encodes records into one batch whose records get offsets `base_offset..`.
///
/// # Panics
/// If the batch does not fit the format's 32-bit length fields (about 4 GiB); use
/// [`try_encode_batch`] for untrusted sizes.
pub fn encode_batch(base_offset: i64, leader_epoch: u32, timestamp_ms: i64, records: &[impl AsRef<[u8]>]) -> Vec<u8> {
    match try_encode_batch(base_offset, leader_epoch, timestamp_ms, records) {
        Ok(buf) => buf,
        Err(e) => panic!("encode_batch: {e}"),
    }
}

/// Parses and sanity-checks a header from the first [`HEADER_LEN`] bytes, without needing the rest of the batch.
///
/// `Ok(None)` if `buf` is shorter than a header.
pub fn peek_header(buf: &[u8]) -> Result<Option<BatchHeader>, BatchError> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let base_offset = i64_at(buf, 0);
    let batch_length = u32_at(buf, 8);
    let leader_epoch = u32_at(buf, 12);
    let record_count = u32_at(buf, 20);
    let max_timestamp_ms = i64_at(buf, 24);
    if batch_length < MIN_BATCH_LENGTH {
        return Err(BatchError::BadLength(batch_length));
    }
    if base_offset < 0 {
        return Err(BatchError::NegativeBaseOffset(base_offset));
    }
    if record_count == 0 {
        return Err(BatchError::NoRecords);
    }
    if base_offset.checked_add(i64::from(record_count)).is_none() {
        return Err(BatchError::OffsetOverflow {
            base: base_offset,
            count: record_count,
        });
    }
    Ok(Some(BatchHeader {
        base_offset,
        leader_epoch,
        record_count,
        max_timestamp_ms,
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

/// Checks that `batch` is exactly one well-formed batch: header, CRC, record framing and count.
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
    let stored = u32_at(batch, 16);
    let computed = crc32c::crc32c(&batch[CRC_START..]);
    if stored != computed {
        return Err(BatchError::CrcMismatch { stored, computed });
    }
    let mut pos = HEADER_LEN;
    for index in 0..header.record_count {
        let len = record_len_at(batch, pos).ok_or(BatchError::RecordOverrun {
            index,
            count: header.record_count,
        })?;
        pos += 4 + len;
    }
    if pos != batch.len() {
        return Err(BatchError::TrailingBytes {
            extra: batch.len() - pos,
            count: header.record_count,
        });
    }
    Ok(header)
}

/// Length of the record whose prefix is at `pos`, if the prefix and value both fit in `batch`.
fn record_len_at(batch: &[u8], pos: usize) -> Option<usize> {
    let len_end = pos.checked_add(4)?;
    if len_end > batch.len() {
        return None;
    }
    let len = u32_at(batch, pos) as usize;
    (len_end.checked_add(len)? <= batch.len()).then_some(len)
}

/// Verifies one batch and returns its records as `(offset, value)`; values share one copy of the batch.
pub fn records(batch: &[u8]) -> Result<Vec<(i64, Bytes)>, BatchError> {
    records_from_bytes(Bytes::copy_from_slice(batch))
}

/// Like [`records`], but slices values out of `batch` without copying.
pub fn records_from_bytes(batch: Bytes) -> Result<Vec<(i64, Bytes)>, BatchError> {
    let header = verify(&batch)?;
    let mut out = Vec::with_capacity(header.record_count as usize);
    let mut pos = HEADER_LEN;
    for i in 0..header.record_count {
        // verify() already checked the framing, so lengths are in bounds.
        let len = u32_at(&batch, pos) as usize;
        out.push((header.base_offset + i64::from(i), batch.slice(pos + 4..pos + 4 + len)));
        pos += 4 + len;
    }
    Ok(out)
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
mod tests {
    use super::*;

    #[test]
    fn encode_verify_roundtrip() {
        let b = encode_batch(7, 3, 1234, &[b"a".as_slice(), b"", b"hello"]);
        let h = verify(&b).unwrap();
        assert_eq!(h.base_offset, 7);
        assert_eq!(h.leader_epoch, 3);
        assert_eq!(h.record_count, 3);
        assert_eq!(h.max_timestamp_ms, 1234);
        assert_eq!(h.total_len, b.len());
        assert_eq!(h.last_offset(), 9);
        assert_eq!(h.next_offset(), 10);
        assert_eq!(parse_header(&b).unwrap(), Some(h));
        let recs = records(&b).unwrap();
        let got: Vec<(i64, &[u8])> = recs.iter().map(|(o, v)| (*o, v.as_ref())).collect();
        assert_eq!(got, vec![(7, b"a".as_slice()), (8, b""), (9, b"hello")]);
    }

    #[test]
    fn parse_header_incomplete_is_none() {
        let b = encode_batch(0, 0, 0, &[b"xyz"]);
        for n in 0..b.len() {
            assert_eq!(parse_header(&b[..n]).unwrap(), None, "prefix {n}");
        }
        assert!(matches!(
            verify(&b[..b.len() - 1]),
            Err(BatchError::LengthMismatch { .. })
        ));
        assert!(matches!(verify(&b[..10]), Err(BatchError::Incomplete { .. })));
    }

    #[test]
    fn verify_detects_corruption() {
        let b = encode_batch(0, 1, 0, &[b"abc", b"def"]);
        for i in CRC_START..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x40;
            assert!(verify(&c).is_err(), "flip at {i} not detected");
        }
        let mut c = b.clone();
        c[16] ^= 1;
        assert!(matches!(verify(&c), Err(BatchError::CrcMismatch { .. })));
    }

    #[test]
    fn verify_checks_record_framing() {
        // Count says 2 but only one record present: CRC is fine, framing is not.
        let mut b = encode_batch(0, 0, 0, &[b"abc"]);
        b[20..24].copy_from_slice(&2u32.to_le_bytes());
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[16..20].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            verify(&b),
            Err(BatchError::RecordOverrun { index: 1, count: 2 })
        ));

        let mut b = encode_batch(0, 0, 0, &[&b"abc"[..], b"d"]);
        b[20..24].copy_from_slice(&1u32.to_le_bytes());
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[16..20].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            verify(&b),
            Err(BatchError::TrailingBytes { extra: 5, count: 1 })
        ));
    }

    #[test]
    fn bad_headers_are_errors() {
        let mut b = encode_batch(0, 0, 0, &[b"abc"]);
        b[8..12].copy_from_slice(&3u32.to_le_bytes());
        assert_eq!(peek_header(&b), Err(BatchError::BadLength(3)));
        let b = encode_batch(-1, 0, 0, &[b"abc"]);
        assert_eq!(verify(&b), Err(BatchError::NegativeBaseOffset(-1)));
        let b = encode_batch(i64::MAX, 0, 0, &[b"abc"]);
        assert!(matches!(verify(&b), Err(BatchError::OffsetOverflow { .. })));
        let empty: [&[u8]; 0] = [];
        assert_eq!(verify(&encode_batch(0, 0, 0, &empty)), Err(BatchError::NoRecords));
    }

    #[test]
    fn split_batches_whole_and_partial() {
        let mut buf = encode_batch(0, 1, 0, &[b"a", b"b"]);
        buf.extend(encode_batch(2, 1, 0, &[b"c"]));
        let batches = split_batches(&buf).unwrap();
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[1].0.base_offset, 2);
        assert_eq!(batches[0].1.len() + batches[1].1.len(), buf.len());
        assert!(split_batches(&[]).unwrap().is_empty());
        assert!(matches!(
            split_batches(&buf[..buf.len() - 2]),
            Err(BatchError::Incomplete { .. })
        ));
        assert!(matches!(
            split_batches(&buf[..5]),
            Err(BatchError::Incomplete { needed: HEADER_LEN, .. })
        ));
    }

    #[test]
    fn garbage_never_panics() {
        // Cheap deterministic fuzz: random-ish bytes through every entry point.
        let mut x: u32 = 0x1234_5678;
        for len in 0..300 {
            let buf: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            let _ = parse_header(&buf);
            let _ = verify(&buf);
            let _ = records(&buf);
            let _ = split_batches(&buf);
        }
    }
}
