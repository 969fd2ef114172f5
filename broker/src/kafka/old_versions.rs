//! The versions advertised but not decoded: Produce v0–2 and Fetch v0–3, the message formats
//! before v2 (Kafka 4.x removed them, KIP-896). They stay in ApiVersions because librdkafka
//! enables its `MsgVer1` feature, and with it gzip and snappy, only when Produce v2 and Fetch v2
//! are both in range (Kafka 4.x keeps Produce v0–2 advertised for the same reason, KAFKA-18659).
//! A request at one of them is answered, not dropped: every partition it names gets
//! UNSUPPORTED_VERSION in the response shape of its version (Kafka 4.x closes the connection
//! instead; an answer tells the client why). Produce at acks 0 gets no answer, as always.
//!
//! The bodies are read by hand (the protocol crate has no shapes for these versions), every
//! count checked against the bytes left before anything is reserved.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Decodable;
use proto::errors::ErrorCode;

use super::apis::wire;
use super::frame::FrameError;

/// The partitions an old-version request names, by topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// Produce's acks (`None` for Fetch).
    pub acks: Option<i16>,
    /// Each topic with its partitions, in request order.
    pub topics: Vec<(String, Vec<i32>)>,
}

/// A bounded reader over a request body.
struct Reader<'a> {
    buf: &'a [u8],
}

fn short(what: &str) -> FrameError {
    FrameError::Malformed(format!("{what}: past the end of the request"))
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], FrameError> {
        if self.buf.len() < n {
            return Err(short(what));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn i16(&mut self, what: &str) -> Result<i16, FrameError> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self, what: &str) -> Result<i32, FrameError> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn string(&mut self, what: &str) -> Result<String, FrameError> {
        let len = self.i16(what)?;
        let len =
            usize::try_from(len).map_err(|_| FrameError::Malformed(format!("{what}: null or negative length")))?;
        let b = self.take(len, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| FrameError::Malformed(format!("{what}: not UTF-8")))
    }

    fn bytes(&mut self, what: &str) -> Result<(), FrameError> {
        let len = self.i32(what)?;
        // -1 is a null array.
        if len >= 0 {
            self.take(len as usize, what)?;
        }
        Ok(())
    }

    /// An array's count, proven possible: each element takes at least `min` bytes.
    fn count(&mut self, min: usize, what: &str) -> Result<usize, FrameError> {
        let n = self.i32(what)?;
        let n = usize::try_from(n).unwrap_or(0);
        if n.saturating_mul(min) > self.buf.len() {
            return Err(FrameError::Malformed(format!(
                "{what}: {n} entries cannot fit in {} bytes",
                self.buf.len()
            )));
        }
        Ok(n)
    }
}

/// Reads the partitions named by a Produce v0–2 or Fetch v0–3 body (after the header).
pub fn parse(api: ApiKey, version: i16, body: &[u8]) -> Result<Named, FrameError> {
    let mut r = Reader { buf: body };
    let acks = match api {
        ApiKey::Produce => {
            let acks = r.i16("acks")?;
            r.i32("timeout_ms")?;
            Some(acks)
        }
        _ => {
            r.i32("replica_id")?;
            r.i32("max_wait_ms")?;
            r.i32("min_bytes")?;
            if version >= 3 {
                r.i32("max_bytes")?;
            }
            None
        }
    };
    // A topic is at least a name length and a count; a partition its fixed fields.
    let partition_min = if acks.is_some() { 8 } else { 16 };
    let mut topics = Vec::new();
    for _ in 0..r.count(6, "topics")? {
        let name = r.string("topics.name")?;
        let mut partitions = Vec::new();
        for _ in 0..r.count(partition_min, "topics.partitions")? {
            partitions.push(r.i32("partitions.index")?);
            if acks.is_some() {
                r.bytes("partitions.records")?;
            } else {
                r.take(12, "partitions.fetch_offset and max_bytes")?;
            }
        }
        topics.push((name, partitions));
    }
    Ok(Named { acks, topics })
}

fn put_str(out: &mut BytesMut, s: &str) {
    // Topic names come from the request, whose Int16 length they fit.
    out.put_i16(s.len() as i16);
    out.put_slice(s.as_bytes());
}

/// Answers a request `frame` (header and body) at an advertised but not decoded version: the
/// answer frame, or `None` for Produce at acks 0.
pub fn answer(api: ApiKey, version: i16, mut frame: Bytes) -> Result<Option<Bytes>, FrameError> {
    // The header is the version's own (these versions are all before flexible headers).
    let header = RequestHeader::decode(&mut frame, api.request_header_version(version))
        .map_err(|e| FrameError::Malformed(e.to_string()))?;
    let named = parse(api, version, &frame)?;
    Ok(refuse(api, version, header.correlation_id, &named))
}

/// The answer frame (size prefix, header v0, body) naming every partition of `named` with
/// UNSUPPORTED_VERSION, in the shape of `version`; `None` for Produce at acks 0.
pub fn refuse(api: ApiKey, version: i16, correlation: i32, named: &Named) -> Option<Bytes> {
    if named.acks == Some(0) {
        return None;
    }
    let code = wire(ErrorCode::UNSUPPORTED_VERSION);
    let mut out = BytesMut::new();
    out.put_i32(0);
    out.put_i32(correlation);
    let fetch = api == ApiKey::Fetch;
    if fetch && version >= 1 {
        out.put_i32(0); // throttle_time_ms
    }
    out.put_i32(named.topics.len() as i32);
    for (name, partitions) in &named.topics {
        put_str(&mut out, name);
        out.put_i32(partitions.len() as i32);
        for p in partitions {
            out.put_i32(*p);
            out.put_i16(code);
            if fetch {
                out.put_i64(-1); // high_watermark
                out.put_i32(0); // records: none
            } else {
                out.put_i64(-1); // base_offset
                if version >= 2 {
                    out.put_i64(-1); // log_append_time_ms
                }
            }
        }
    }
    if !fetch && version >= 1 {
        out.put_i32(0); // throttle_time_ms
    }
    let size = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&size.to_be_bytes());
    Some(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn produce_body(acks: i16) -> Vec<u8> {
        let mut b = BytesMut::new();
        b.put_i16(acks);
        b.put_i32(1000);
        b.put_i32(1);
        put_str(&mut b, "t");
        b.put_i32(2);
        for p in [0, 3] {
            b.put_i32(p);
            b.put_i32(3);
            b.put_slice(b"abc");
        }
        b.to_vec()
    }

    #[test]
    fn a_produce_v2_is_answered_per_partition_with_unsupported_version() {
        let named = parse(ApiKey::Produce, 2, &produce_body(1)).unwrap();
        assert_eq!(named.topics, vec![("t".to_string(), vec![0, 3])]);
        let out = refuse(ApiKey::Produce, 2, 77, &named).unwrap();
        let mut want = BytesMut::new();
        want.put_i32(77);
        want.put_i32(1);
        put_str(&mut want, "t");
        want.put_i32(2);
        for p in [0, 3] {
            want.put_i32(p);
            want.put_i16(35);
            want.put_i64(-1);
            want.put_i64(-1);
        }
        want.put_i32(0);
        assert_eq!(&out[4..], &want[..]);
        assert_eq!(
            i32::from_be_bytes([out[0], out[1], out[2], out[3]]) as usize,
            want.len()
        );
    }

    #[test]
    fn a_produce_at_acks_0_gets_no_answer() {
        let named = parse(ApiKey::Produce, 0, &produce_body(0)).unwrap();
        assert_eq!(refuse(ApiKey::Produce, 0, 1, &named), None);
    }

    #[test]
    fn a_fetch_v3_is_answered_in_its_shape() {
        let mut b = BytesMut::new();
        b.put_i32(-1);
        b.put_i32(500);
        b.put_i32(1);
        b.put_i32(1 << 20);
        b.put_i32(1);
        put_str(&mut b, "t");
        b.put_i32(1);
        b.put_i32(4);
        b.put_i64(0);
        b.put_i32(1 << 20);
        let named = parse(ApiKey::Fetch, 3, &b).unwrap();
        assert_eq!(named.topics, vec![("t".to_string(), vec![4])]);
        let out = refuse(ApiKey::Fetch, 3, 9, &named).unwrap();
        let mut want = BytesMut::new();
        want.put_i32(9);
        want.put_i32(0);
        want.put_i32(1);
        put_str(&mut want, "t");
        want.put_i32(1);
        want.put_i32(4);
        want.put_i16(35);
        want.put_i64(-1);
        want.put_i32(0);
        assert_eq!(&out[4..], &want[..]);
    }

    #[test]
    fn counts_that_cannot_fit_and_cut_bodies_are_refused() {
        let mut b = BytesMut::new();
        b.put_i16(1);
        b.put_i32(1000);
        b.put_i32(i32::MAX);
        assert!(matches!(parse(ApiKey::Produce, 2, &b), Err(FrameError::Malformed(_))));
        let body = produce_body(1);
        for cut in 0..body.len() {
            assert!(parse(ApiKey::Produce, 2, &body[..cut]).is_err(), "cut at {cut}");
        }
    }
}
