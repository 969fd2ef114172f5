//! Unit tests of the batch format.

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
    c[CRC_AT] ^= 1;
    assert!(matches!(verify(&c), Err(BatchError::CrcMismatch { .. })));
    let mut c = b.clone();
    c[MAGIC_AT] = 1;
    assert_eq!(verify(&c), Err(BatchError::BadMagic(1)));
}

#[test]
fn verify_checks_record_framing() {
    // Count says 2 but only one record present: CRC is fine, framing is not.
    let mut b = encode_batch(0, 0, 0, &[b"abc"]);
    b[23..27].copy_from_slice(&1i32.to_be_bytes());
    b[57..61].copy_from_slice(&2i32.to_be_bytes());
    reseal(&mut b);
    assert!(matches!(
        verify(&b),
        Err(BatchError::BadRecord { index: 1, count: 2, .. })
    ));

    let mut b = encode_batch(0, 0, 0, &[&b"abc"[..], b"d"]);
    b[57..61].copy_from_slice(&1i32.to_be_bytes());
    reseal(&mut b);
    assert!(matches!(
        verify(&b),
        Err(BatchError::TrailingBytes { extra: 8, count: 1 })
    ));

    // A record that claims more bytes than the batch holds.
    let mut b = encode_batch(0, 0, 0, &[b"abc"]);
    b[HEADER_LEN] = 0x7e;
    reseal(&mut b);
    assert!(matches!(verify(&b), Err(BatchError::BadRecord { index: 0, .. })));
}

/// Recomputes the CRC after a test edits a batch.
fn reseal(b: &mut [u8]) {
    let crc = crc32c::crc32c(&b[CRC_START..]);
    b[CRC_AT..CRC_START].copy_from_slice(&crc.to_be_bytes());
}

#[test]
fn bad_headers_are_errors() {
    let mut b = encode_batch(0, 0, 0, &[b"abc"]);
    b[8..12].copy_from_slice(&3u32.to_be_bytes());
    assert_eq!(peek_header(&b), Err(BatchError::BadLength(3)));
    let b = encode_batch(-1, 0, 0, &[b"abc"]);
    assert_eq!(verify(&b), Err(BatchError::NegativeBaseOffset(-1)));
    let b = encode_batch(i64::MAX, 0, 0, &[b"abc"]);
    assert!(matches!(verify(&b), Err(BatchError::OffsetOverflow { .. })));
    let empty: [&[u8]; 0] = [];
    // An empty batch is whole (the log cleaner leaves them); clients may not produce one.
    assert_eq!(verify(&encode_batch(0, 0, 0, &empty)).map(|h| h.record_count), Ok(0));
    let mut b = encode_batch(0, 0, 0, &[b"abc"]);
    b[57..61].copy_from_slice(&(-1i32).to_be_bytes());
    assert_eq!(peek_header(&b), Err(BatchError::NoRecords(-1)));
    let mut b = encode_batch(0, 0, 0, &[b"abc"]);
    b[21..23].copy_from_slice(&7i16.to_be_bytes());
    reseal(&mut b);
    assert_eq!(verify(&b), Err(BatchError::BadCodec(7)));
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

/// Kafka's own encoder (the protocol crate's) is the oracle: its batches, with keys, headers and
/// compression, pass our checks unchanged, and ours decode with its decoder.
#[test]
fn batches_match_kafkas_encoder() {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let record = |i: i64| Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: i,
        sequence: -1,
        timestamp: 1_700_000_000_000 + i,
        key: Some(Bytes::from(format!("k{i}"))),
        value: Some(Bytes::from(format!("value {i}"))),
        headers: [(
            kafka_protocol::protocol::StrBytes::from_static_str("h"),
            Some(Bytes::from_static(b"v")),
        )]
        .into_iter()
        .collect(),
    };
    for compression in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let mut buf = bytes::BytesMut::new();
        let opts = RecordEncodeOptions {
            version: 2,
            compression,
        };
        RecordBatchEncoder::encode(&mut buf, &[record(0), record(1), record(2)], &opts).unwrap();
        // The encoder may cut the records into several batches; each passes as it is.
        let batches = split_batches(&buf).unwrap_or_else(|e| panic!("{compression:?}: {e}"));
        let offsets: u32 = batches.iter().map(|(h, _)| h.record_count).sum();
        assert_eq!(offsets, 3, "{compression:?}");
        let (h, first) = batches[0];
        assert_eq!(h.codec().unwrap(), format!("{compression:?}").to_lowercase());
        if compression == Compression::None {
            let recs = records(first).unwrap();
            assert_eq!(recs[0], (0, Bytes::from_static(b"value 0")));
        } else {
            assert!(matches!(records(first), Err(BatchError::Compressed(_))));
        }
        // The leader's offsets leave the CRC valid.
        let mut moved = first.to_vec();
        set_offsets(&mut moved, 41, 6);
        let moved_header = verify(&moved).unwrap();
        assert_eq!((moved_header.base_offset, moved_header.leader_epoch), (41, 6));
        assert_eq!(moved_header.next_offset(), 41 + h.next_offset());
    }
    let ours = encode_batch(5, 2, 99, &[b"x".as_slice(), b"yz"]);
    let mut b = Bytes::from(ours);
    let decoded = RecordBatchDecoder::decode(&mut b).unwrap();
    let values: Vec<_> = decoded.records.iter().map(|r| (r.offset, r.value.clone())).collect();
    assert_eq!(
        values,
        vec![
            (5, Some(Bytes::from_static(b"x"))),
            (6, Some(Bytes::from_static(b"yz")))
        ]
    );
}

#[test]
fn the_max_timestamp_is_the_first_record_stamped_with_it() {
    // Every record shares the batch's one timestamp: the first of them, as Kafka answers.
    let batch = encode_batch(40, 1, 5_000, &[b"a", b"b", b"c"]);
    assert_eq!(offset_of_max_timestamp(&batch).unwrap(), 40);
    // A damaged batch is refused, not answered.
    let mut bad = batch.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    assert!(offset_of_max_timestamp(&bad).is_err());
}
