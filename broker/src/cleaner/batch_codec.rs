//! A batch's records for the cleaner: read out of a record batch v2 in any codec (the codecs
//! are the `kafka-protocol` crate's, Kafka's formats), and the records a clean keeps written
//! back as Kafka's `MemoryRecords.filterTo` does: the original batch's base offset, last offset
//! delta, leader epoch, producer fields, codec and timestamp type, with the delete horizon when
//! one is set; or an empty batch in the original's place.

use bytes::{Bytes, BytesMut};
use kafka_protocol::compression::{Compressor, Decompressor, Gzip, Lz4, Snappy, Zstd};

use crate::record_batch::varint;
use crate::record_batch::{BatchError, BatchHeader, HEADER_LEN};

use super::retain::DELETE_HORIZON_FLAG;

/// Where the CRC-covered part of a batch starts.
const CRC_START: usize = 21;
/// The attribute bits a rebuilt batch takes from its original: codec, timestamp type,
/// transactional, control.
const KEPT_ATTRIBUTES: i16 = 0x3f;

/// One record of a batch, with its fields as ranges of the batch's records block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef {
    /// Its offset.
    pub offset: i64,
    /// Its timestamp (the batch's base timestamp plus its delta).
    pub timestamp: i64,
    /// Its attributes byte.
    pub attributes: u8,
    /// Its key, `None` for a null one.
    pub key: Option<(usize, usize)>,
    /// Its value, `None` for a tombstone.
    pub value: Option<(usize, usize)>,
    /// Its headers, count and entries as encoded.
    pub headers: (usize, usize),
}

/// Whether the batch's CRC matches its bytes.
pub fn crc_ok(batch: &[u8]) -> bool {
    batch.len() >= HEADER_LEN
        && crc32c::crc32c(&batch[CRC_START..]) == u32::from_be_bytes([batch[17], batch[18], batch[19], batch[20]])
}

fn codec_err(e: impl std::fmt::Display) -> BatchError {
    BatchError::BadRecord {
        index: 0,
        count: 0,
        reason: format!("the records do not decompress: {e:#}"),
    }
}

/// The batch's records block, uncompressed: in the batch itself, or in `scratch`.
pub fn records_block<'a>(batch: &'a [u8], h: &BatchHeader, scratch: &'a mut Vec<u8>) -> Result<&'a [u8], BatchError> {
    let mut raw = &batch[HEADER_LEN..];
    let codec = h.codec()?;
    if codec == "none" {
        return Ok(raw);
    }
    scratch.clear();
    match codec {
        "gzip" => decompress_with::<Gzip>(&mut raw, scratch),
        "snappy" => decompress_with::<Snappy>(&mut raw, scratch),
        "lz4" => decompress_with::<Lz4>(&mut raw, scratch),
        _ => decompress_with::<Zstd>(&mut raw, scratch),
    }?;
    Ok(scratch)
}

/// Decompresses `raw` with codec `C` into `out`.
fn decompress_with<'a, C: Decompressor<&'a [u8], Buf = Bytes>>(
    raw: &mut &'a [u8],
    out: &mut Vec<u8>,
) -> Result<(), BatchError> {
    C::decompress(raw, |b| {
        out.extend_from_slice(b);
        Ok(())
    })
    .map_err(codec_err)
}

/// Compresses `raw` with codec `C` onto the end of `out`.
fn compress_with<C: Compressor<Vec<u8>, BufMut = BytesMut>>(raw: &[u8], out: &mut Vec<u8>) -> Result<(), BatchError> {
    C::compress(out, |b| {
        b.extend_from_slice(raw);
        Ok(())
    })
    .map_err(codec_err)
}

/// A nullable field's range at `*pos` (length -1 is null).
fn field(block: &[u8], pos: &mut usize, end: usize) -> Result<Option<(usize, usize)>, String> {
    let len = varint::read_i32(&block[..end], pos).ok_or("a length does not parse")?;
    if len == -1 {
        return Ok(None);
    }
    let len = usize::try_from(len).map_err(|_| format!("negative length {len}"))?;
    if len > end - *pos {
        return Err(format!("a field of {len} bytes runs past the record"));
    }
    *pos += len;
    Ok(Some((*pos - len, *pos)))
}

/// One record at `pos` of `block`, ending before `end`.
fn record(block: &[u8], start: usize, end: usize, h: &BatchHeader) -> Result<RecordRef, String> {
    let mut pos = start;
    let attributes = *block.get(pos).ok_or("empty record")?;
    pos += 1;
    let ts_delta = varint::read_i64(&block[..end], &mut pos).ok_or("the timestamp delta does not parse")?;
    let offset_delta = varint::read_i32(&block[..end], &mut pos).ok_or("the offset delta does not parse")?;
    let key = field(block, &mut pos, end)?;
    let value = field(block, &mut pos, end)?;
    let headers_at = pos;
    let count = varint::read_i32(&block[..end], &mut pos).ok_or("the header count does not parse")?;
    if count < 0 || count as usize > end - pos {
        return Err(format!("header count {count} does not fit the record"));
    }
    for _ in 0..count {
        if field(block, &mut pos, end)?.is_none() {
            return Err("a header without a key".into());
        }
        field(block, &mut pos, end)?;
    }
    if pos != end {
        return Err(format!("{} bytes left over in the record", end - pos));
    }
    Ok(RecordRef {
        offset: h.base_offset + i64::from(offset_delta),
        timestamp: h.base_timestamp_ms.saturating_add(ts_delta),
        attributes,
        key,
        value,
        headers: (headers_at, end),
    })
}

/// The records of a batch whose uncompressed records block is `block`, into `out`; offsets
/// must grow within the batch's span.
pub fn parse_records(block: &[u8], h: &BatchHeader, out: &mut Vec<RecordRef>) -> Result<(), BatchError> {
    out.clear();
    let count = h.record_count;
    let bad = |index: u32, reason: String| BatchError::BadRecord { index, count, reason };
    let mut pos = 0;
    let mut last = h.base_offset - 1;
    for index in 0..count {
        let len = varint::read_i32(block, &mut pos).ok_or_else(|| bad(index, "its length does not parse".into()))?;
        let len = usize::try_from(len).map_err(|_| bad(index, format!("negative length {len}")))?;
        if len > block.len() - pos {
            return Err(bad(index, format!("{len} bytes run past the end of the batch")));
        }
        let r = record(block, pos, pos + len, h).map_err(|e| bad(index, e))?;
        if r.offset <= last || r.offset > h.last_offset() {
            return Err(bad(
                index,
                format!("offset {} out of order or past the batch", r.offset),
            ));
        }
        last = r.offset;
        out.push(r);
        pos += len;
    }
    if pos != block.len() {
        return Err(BatchError::TrailingBytes {
            extra: block.len() - pos,
            count,
        });
    }
    Ok(())
}

/// Writes the fixed header of a batch like `h` at the start of `out` (which holds the records
/// after it), then its length and CRC.
fn seal_header(out: &mut [u8], h: &BatchHeader, attributes: i16, base_ts: i64, max_ts: i64, count: u32) {
    out[0..8].copy_from_slice(&h.base_offset.to_be_bytes());
    let batch_length = (out.len() - 12) as u32;
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    out[12..16].copy_from_slice(&h.leader_epoch.to_be_bytes());
    out[16] = 2;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    out[23..27].copy_from_slice(&h.last_offset_delta.to_be_bytes());
    out[27..35].copy_from_slice(&base_ts.to_be_bytes());
    out[35..43].copy_from_slice(&max_ts.to_be_bytes());
    out[43..51].copy_from_slice(&h.producer_id.to_be_bytes());
    out[51..53].copy_from_slice(&h.producer_epoch.to_be_bytes());
    out[53..57].copy_from_slice(&h.base_sequence.to_be_bytes());
    out[57..61].copy_from_slice(&count.to_be_bytes());
    let crc = crc32c::crc32c(&out[CRC_START..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Appends to `out` an empty batch in the place of `h` (Kafka's `writeEmptyHeader`): its offsets,
/// producer fields and largest timestamp, no records.
pub fn encode_empty(h: &BatchHeader, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + HEADER_LEN, 0);
    let attributes = h.attributes & KEPT_ATTRIBUTES & !0x07;
    seal_header(
        &mut out[start..],
        h,
        attributes,
        h.max_timestamp_ms,
        h.max_timestamp_ms,
        0,
    );
}

/// Appends to `out` a batch like `h` holding the records `kept` (ranges of `block`), with the
/// delete horizon `horizon` if any: its base timestamp is then the horizon, as in Kafka.
pub fn encode_retained(
    h: &BatchHeader,
    block: &[u8],
    kept: &[RecordRef],
    horizon: Option<i64>,
    out: &mut Vec<u8>,
) -> Result<(), BatchError> {
    let Some(first) = kept.first() else {
        encode_empty(h, out);
        return Ok(());
    };
    let base_ts = horizon.unwrap_or(first.timestamp);
    let max_ts = if h.is_log_append_time() {
        h.max_timestamp_ms
    } else {
        kept.iter().map(|r| r.timestamp).max().unwrap_or(base_ts)
    };
    let mut raw = Vec::with_capacity(kept.iter().map(|r| r.headers.1 - r.headers.0 + 32).sum());
    let mut body = Vec::new();
    for r in kept {
        body.clear();
        body.push(r.attributes);
        varint::write(&mut body, r.timestamp.wrapping_sub(base_ts));
        varint::write(&mut body, r.offset - h.base_offset);
        for f in [r.key, r.value] {
            match f {
                None => varint::write(&mut body, -1),
                Some((a, b)) => {
                    varint::write(&mut body, (b - a) as i64);
                    body.extend_from_slice(&block[a..b]);
                }
            }
        }
        body.extend_from_slice(&block[r.headers.0..r.headers.1]);
        varint::write(&mut raw, body.len() as i64);
        raw.extend_from_slice(&body);
    }
    let start = out.len();
    out.resize(start + HEADER_LEN, 0);
    match h.codec()? {
        "none" => out.extend_from_slice(&raw),
        "gzip" => compress_with::<Gzip>(&raw, out)?,
        "snappy" => compress_with::<Snappy>(&raw, out)?,
        "lz4" => compress_with::<Lz4>(&raw, out)?,
        _ => compress_with::<Zstd>(&raw, out)?,
    }
    if out.len() - start > i32::MAX as usize {
        return Err(BatchError::TooLarge(format!("{} bytes", out.len() - start)));
    }
    let mut attributes = h.attributes & KEPT_ATTRIBUTES;
    if horizon.is_some() {
        attributes |= DELETE_HORIZON_FLAG;
    }
    seal_header(&mut out[start..], h, attributes, base_ts, max_ts, kept.len() as u32);
    Ok(())
}

/// Whether a produced batch holds a record without a key, which Kafka refuses on a compacted
/// topic (its cleaner could not keep it); false too when the records do not decode, which the
/// log's own checks then report.
pub fn has_keyless_record(batch: &[u8]) -> bool {
    let Ok(Some(h)) = crate::record_batch::parse_header(batch) else {
        return false;
    };
    if h.is_control() {
        return false;
    }
    let (mut scratch, mut records) = (Vec::new(), Vec::new());
    let Ok(block) = records_block(&batch[..h.total_len], &h, &mut scratch) else {
        return false;
    };
    parse_records(block, &h, &mut records).is_ok() && records.iter().any(|r| r.key.is_none())
}

/// A record's key and value (`None`: null), as [`encode_keyed`] takes it.
pub type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// A producer's batch of `records` (key, value; `None` is null) at offsets `0..`, all stamped
/// `timestamp_ms`, in codec `codec` (Kafka's attribute bits: 0 none, 1 gzip, 2 snappy, 3 lz4,
/// 4 zstd): keyed records for tools and tests, numbered by the leader when appended.
pub fn encode_keyed(records: &[KeyValue<'_>], timestamp_ms: i64, codec: u8) -> Result<Vec<u8>, BatchError> {
    let n = u32::try_from(records.len()).map_err(|_| BatchError::TooLarge(format!("{} records", records.len())))?;
    if n == 0 {
        return Err(BatchError::NoRecords(0));
    }
    // The block holds an empty header list first, which every record shares, then the fields.
    let mut block = vec![0u8];
    let mut put = |f: Option<&[u8]>| {
        f.map(|b| {
            block.extend_from_slice(b);
            (block.len() - b.len(), block.len())
        })
    };
    let refs: Vec<RecordRef> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| RecordRef {
            offset: i as i64,
            timestamp: timestamp_ms,
            attributes: 0,
            key: put(*k),
            value: put(*v),
            headers: (0, 1),
        })
        .collect();
    let h = BatchHeader {
        attributes: i16::from(codec & 0x07),
        last_offset_delta: n - 1,
        record_count: n,
        base_timestamp_ms: timestamp_ms,
        max_timestamp_ms: timestamp_ms,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        ..Default::default()
    };
    let mut out = Vec::new();
    encode_retained(&h, &block, &refs, None, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_batch::{self, peek_header};
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    /// Kafka's encoder's batch of `n` records at `base`: key `k{i}`, value `v{i}` (a tombstone
    /// for every third), a header on each, timestamps 1000 + i.
    fn kafka_batch(base: i64, n: i64, compression: Compression, producer: i64) -> Vec<u8> {
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 3,
                producer_id: producer,
                producer_epoch: if producer >= 0 { 1 } else { -1 },
                timestamp_type: TimestampType::Creation,
                offset: base + i,
                sequence: if producer >= 0 { i as i32 } else { i as i32 - 1 },
                timestamp: 1000 + i,
                key: Some(Bytes::from(format!("k{i}"))),
                value: (i % 3 != 2).then(|| Bytes::from(format!("v{i}"))),
                headers: IndexMap::from([(StrBytes::from_static_str("h"), Some(Bytes::from_static(b"x")))]),
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

    fn decode_all(batch: &[u8]) -> (BatchHeader, Vec<u8>, Vec<RecordRef>) {
        let h = peek_header(batch).unwrap().unwrap();
        let mut scratch = Vec::new();
        let block = records_block(batch, &h, &mut scratch).unwrap().to_vec();
        let mut recs = Vec::new();
        parse_records(&block, &h, &mut recs).unwrap();
        (h, block, recs)
    }

    #[test]
    fn records_of_every_codec_decode_and_a_rebuilt_batch_reads_back_in_kafkas_decoder() {
        for compression in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let batch = kafka_batch(100, 6, compression, 9);
            assert!(crc_ok(&batch));
            let (h, block, recs) = decode_all(&batch);
            assert_eq!(recs.len(), 6);
            let r = recs[2];
            assert_eq!((r.offset, r.timestamp, r.value), (102, 1002, None));
            assert_eq!(&block[r.key.unwrap().0..r.key.unwrap().1], b"k2");
            // Keep records 1, 2 (a tombstone) and 4, with a delete horizon.
            let kept = [recs[1], recs[2], recs[4]];
            let mut out = Vec::new();
            encode_retained(&h, &block, &kept, Some(99_999), &mut out).unwrap();
            let nh = record_batch::verify(&out).unwrap();
            assert_eq!((nh.base_offset, nh.last_offset(), nh.record_count), (100, 105, 3));
            assert_eq!(
                (nh.producer_id, nh.producer_epoch, nh.base_sequence, nh.leader_epoch),
                (9, 1, 0, 3)
            );
            assert_eq!(nh.codec().unwrap(), h.codec().unwrap());
            assert_eq!(super::super::retain::delete_horizon(&nh), Some(99_999));
            assert_eq!(nh.max_timestamp_ms, 1004);
            let got = RecordBatchDecoder::decode(&mut Bytes::from(out.clone()))
                .unwrap()
                .records;
            let summary: Vec<_> = got
                .iter()
                .map(|r| (r.offset, r.timestamp, r.key.clone(), r.value.clone(), r.headers.len()))
                .collect();
            assert_eq!(
                summary,
                vec![
                    (101, 1001, Some(Bytes::from("k1")), Some(Bytes::from("v1")), 1),
                    (102, 1002, Some(Bytes::from("k2")), None, 1),
                    (104, 1004, Some(Bytes::from("k4")), Some(Bytes::from("v4")), 1),
                ],
                "{compression:?}"
            );
            // Its records decode again here, the horizon kept.
            let (h2, _, again) = decode_all(&out);
            assert_eq!(
                again.iter().map(|r| (r.offset, r.timestamp)).collect::<Vec<_>>(),
                vec![(101, 1001), (102, 1002), (104, 1004)]
            );
            assert_eq!(super::super::retain::delete_horizon(&h2), Some(99_999));
        }
    }

    #[test]
    fn keyed_batches_for_tools_read_back_in_kafkas_decoder() {
        let recs: [KeyValue; 3] = [(Some(b"a"), Some(b"1")), (Some(b"b"), None), (None, Some(b"3"))];
        for codec in 0..=4 {
            let b = encode_keyed(&recs, 5, codec).unwrap();
            let h = record_batch::verify(&b).unwrap();
            assert_eq!(
                (h.base_offset, h.record_count, h.producer_id, h.attributes & 7),
                (0, 3, -1, i16::from(codec))
            );
            let got = RecordBatchDecoder::decode(&mut Bytes::from(b)).unwrap().records;
            let kv: Vec<_> = got
                .iter()
                .map(|r| (r.offset, r.timestamp, r.key.clone(), r.value.clone()))
                .collect();
            assert_eq!(
                kv,
                vec![
                    (0, 5, Some(Bytes::from("a")), Some(Bytes::from("1"))),
                    (1, 5, Some(Bytes::from("b")), None),
                    (2, 5, None, Some(Bytes::from("3"))),
                ]
            );
        }
        assert_eq!(encode_keyed(&[], 0, 0), Err(BatchError::NoRecords(0)));
    }

    #[test]
    fn a_keyless_record_is_found_in_any_codec() {
        let keyed: [KeyValue; 2] = [(Some(b"a"), Some(b"1")), (Some(b"b"), None)];
        let keyless: [KeyValue; 2] = [(Some(b"a"), Some(b"1")), (None, Some(b"2"))];
        for codec in 0..=4 {
            assert!(!has_keyless_record(&encode_keyed(&keyed, 0, codec).unwrap()));
            assert!(has_keyless_record(&encode_keyed(&keyless, 0, codec).unwrap()));
        }
        assert!(has_keyless_record(&record_batch::encode_batch(0, 0, 0, &[b"no key"])));
        assert!(!has_keyless_record(b"short"));
    }

    #[test]
    fn an_emptied_batch_keeps_its_place_offsets_and_producer() {
        let batch = kafka_batch(50, 4, Compression::Lz4, 7);
        let (h, _, _) = decode_all(&batch);
        let mut out = vec![1, 2, 3];
        encode_empty(&h, &mut out);
        let e = record_batch::verify(&out[3..]).unwrap();
        assert_eq!((e.base_offset, e.next_offset(), e.record_count), (50, 54, 0));
        assert_eq!((e.producer_id, e.base_sequence, e.codec().unwrap()), (7, 0, "none"));
        assert_eq!((e.base_timestamp_ms, e.max_timestamp_ms), (1003, 1003));
        assert!(RecordBatchDecoder::decode(&mut Bytes::from(out[3..].to_vec()))
            .unwrap()
            .records
            .is_empty());
    }

    #[test]
    fn damaged_records_are_errors_not_panics() {
        let batch = kafka_batch(0, 3, Compression::None, -1);
        let (h, block, _) = decode_all(&batch);
        let mut recs = Vec::new();
        for cut in 0..block.len() {
            assert!(parse_records(&block[..cut], &h, &mut recs).is_err(), "{cut}");
        }
        let mut gz = kafka_batch(0, 3, Compression::Gzip, -1);
        let n = gz.len();
        gz[n - 5] ^= 0xff;
        let gh = peek_header(&gz).unwrap().unwrap();
        let mut scratch = Vec::new();
        assert!(records_block(&gz, &gh, &mut scratch).is_err() || !crc_ok(&gz));
    }
}
