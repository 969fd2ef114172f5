//! Proves a request body's every length and count true before the protocol crate decodes it.
//! The crate reserves memory for the element count an array claims, so a lying count inside a
//! nested array (a Produce partition list, say) could reserve gigabytes. Walking the body with
//! the request's schema reads each element once; a count is accepted only if that many
//! elements really follow, so decoding allocates no more than the frame's own content.

use super::frame::FrameError;

/// One field of a request schema.
#[derive(Debug, Clone)]
pub enum Field {
    /// A fixed number of bytes (an integer, a boolean, a UUID).
    Fixed(usize),
    /// A string, nullable or not: Int16 length (compact when flexible).
    Str,
    /// A byte array, nullable or not: Int32 length (compact when flexible).
    Bytes,
    /// An array of structs with these fields (compact when flexible).
    Array(Vec<Field>),
    /// An array of fixed-size values of this many bytes each (no tagged fields per element).
    Ints(usize),
    /// An array of strings (no tagged fields per element).
    Strs,
    /// A nullable struct with these fields: Int8 -1 for null, else 1 and the struct.
    Nullable(Vec<Field>),
}

/// Most elements one array of a request may hold, as Kafka 4.4 bounds them: a count past it is
/// refused even when the frame is large enough to hold it.
pub const MAX_ARRAY_ELEMENTS: usize = 1_000_000;

/// Fixed-size fields by name, to keep schemas readable.
pub const I8: Field = Field::Fixed(1);
/// A 16-bit integer.
pub const I16: Field = Field::Fixed(2);
/// A 32-bit integer.
pub const I32: Field = Field::Fixed(4);
/// A 64-bit integer.
pub const I64: Field = Field::Fixed(8);
/// A UUID.
pub const UUID: Field = Field::Fixed(16);

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

fn short(what: &str) -> FrameError {
    FrameError::Malformed(format!("the request ends inside {what}"))
}

impl Reader<'_> {
    fn rest(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn skip(&mut self, n: usize, what: &str) -> Result<(), FrameError> {
        if n > self.rest() {
            return Err(short(what));
        }
        self.pos += n;
        Ok(())
    }

    fn i16(&mut self) -> Result<i16, FrameError> {
        let b = self.buf.get(self.pos..self.pos + 2).ok_or_else(|| short("a length"))?;
        self.pos += 2;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, FrameError> {
        let b = self.buf.get(self.pos..self.pos + 4).ok_or_else(|| short("a length"))?;
        self.pos += 4;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn uvarint(&mut self) -> Result<u32, FrameError> {
        let mut v: u32 = 0;
        for i in 0..5 {
            let b = *self.buf.get(self.pos).ok_or_else(|| short("a varint"))?;
            self.pos += 1;
            v |= u32::from(b & 0x7f).checked_shl(7 * i).unwrap_or(0);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(FrameError::Malformed("a varint runs over 5 bytes".into()))
    }

    /// An array's element count: `None` for null; a count over [`MAX_ARRAY_ELEMENTS`] is refused.
    fn count(&mut self, flexible: bool) -> Result<Option<usize>, FrameError> {
        let n = self.length(flexible, true)?;
        match n {
            Some(n) if n > MAX_ARRAY_ELEMENTS => Err(FrameError::Malformed(format!(
                "an array claims {n} elements, more than the {MAX_ARRAY_ELEMENTS} a request may hold"
            ))),
            n => Ok(n),
        }
    }

    /// A length or count: `None` for null.
    fn length(&mut self, flexible: bool, wide: bool) -> Result<Option<usize>, FrameError> {
        let n: i64 = if flexible {
            i64::from(self.uvarint()?) - 1
        } else if wide {
            i64::from(self.i32()?)
        } else {
            i64::from(self.i16()?)
        };
        match n {
            -1 => Ok(None),
            n if n < 0 => Err(FrameError::Malformed(format!("negative length {n}"))),
            n => Ok(Some(n as usize)),
        }
    }

    fn tagged_fields(&mut self) -> Result<(), FrameError> {
        let count = self.uvarint()?;
        if count as usize > self.rest() {
            return Err(FrameError::Malformed(format!("{count} tagged fields claimed")));
        }
        for _ in 0..count {
            self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.skip(size, "a tagged field")?;
        }
        Ok(())
    }

    fn fields(&mut self, fields: &[Field], flexible: bool) -> Result<(), FrameError> {
        for f in fields {
            match f {
                Field::Fixed(n) => self.skip(*n, "a fixed field")?,
                Field::Str => {
                    if let Some(n) = self.length(flexible, false)? {
                        self.skip(n, "a string")?;
                    }
                }
                Field::Bytes => {
                    if let Some(n) = self.length(flexible, true)? {
                        self.skip(n, "a byte array")?;
                    }
                }
                Field::Ints(size) => {
                    if let Some(count) = self.count(flexible)? {
                        let bytes = count.checked_mul(*size).ok_or_else(|| short("an array"))?;
                        self.skip(bytes, "an array")?;
                    }
                }
                Field::Strs => {
                    if let Some(count) = self.count(flexible)? {
                        // Each string takes at least its length: a count past what is left lies.
                        if count > self.rest() {
                            return Err(FrameError::Malformed(format!("{count} strings claimed")));
                        }
                        for _ in 0..count {
                            if let Some(n) = self.length(flexible, false)? {
                                self.skip(n, "a string")?;
                            }
                        }
                    }
                }
                Field::Nullable(inner) => {
                    let present = *self.buf.get(self.pos).ok_or_else(|| short("a nullable struct"))?;
                    self.pos += 1;
                    if present as i8 >= 0 {
                        self.fields(inner, flexible)?;
                    }
                }
                Field::Array(inner) => {
                    let Some(count) = self.count(flexible)? else {
                        continue;
                    };
                    // Every element takes at least one byte: a count past what is left lies.
                    if count > self.rest() {
                        return Err(FrameError::Malformed(format!(
                            "an array claims {count} elements; {} bytes are left",
                            self.rest()
                        )));
                    }
                    for _ in 0..count {
                        self.fields(inner, flexible)?;
                    }
                }
            }
        }
        if flexible {
            self.tagged_fields()?;
        }
        Ok(())
    }
}

/// Walks `body` (after the request or response header) against `schema`.
pub fn walk(body: &[u8], schema: &[Field], flexible: bool) -> Result<(), FrameError> {
    let mut r = Reader { buf: body, pos: 0 };
    r.fields(schema, flexible)
}

#[cfg(test)]
mod tests {
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ApiKey, FetchRequest, ProduceRequest, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    use super::*;
    use crate::kafka::schemas::schema;

    fn encoded<M: Encodable>(m: &M, v: i16) -> Bytes {
        let mut b = BytesMut::new();
        m.encode(&mut b, v).unwrap();
        b.freeze()
    }

    fn produce() -> ProduceRequest {
        let mut p = PartitionProduceData::default();
        p.index = 3;
        p.records = Some(Bytes::from_static(b"some bytes"));
        let mut t = TopicProduceData::default();
        t.name = TopicName(StrBytes::from_static_str("t"));
        t.partition_data = vec![p.clone(), p];
        let mut r = ProduceRequest::default();
        r.acks = -1;
        r.topic_data = vec![t];
        r
    }

    fn fetch() -> FetchRequest {
        let mut p = FetchPartition::default();
        p.fetch_offset = 5;
        let mut t = FetchTopic::default();
        t.topic = TopicName(StrBytes::from_static_str("t"));
        t.partitions = vec![p];
        let mut f = ForgottenTopic::default();
        f.topic = TopicName(StrBytes::from_static_str("gone"));
        f.partitions = vec![1, 2];
        let mut r = FetchRequest::default();
        r.topics = vec![t];
        r.forgotten_topics_data.push(f);
        r
    }

    #[test]
    fn requests_a_client_encodes_walk_clean_in_every_version_served() {
        for v in 3..=11 {
            let (s, flexible) = schema(ApiKey::Produce, v).unwrap();
            walk(&encoded(&produce(), v), &s, flexible).unwrap_or_else(|e| panic!("produce v{v}: {e}"));
        }
        for v in 7..=12 {
            let (s, flexible) = schema(ApiKey::Fetch, v).unwrap();
            walk(&encoded(&fetch(), v), &s, flexible).unwrap_or_else(|e| panic!("fetch v{v}: {e}"));
        }
    }

    #[test]
    fn an_array_count_larger_than_the_frame_is_refused_before_decoding() {
        let shorts = [Field::Array(vec![I16])];
        // Int32 count of 2 with 4 bytes left: two elements of 2 bytes.
        assert!(walk(&[0, 0, 0, 2, 0, 1, 0, 1], &shorts, false).is_ok());
        assert!(walk(&[0x7f, 0xff, 0xff, 0xff, 0, 1], &shorts, false).is_err());
        // Compact: varint 0 is null (then the tagged fields); a multi-byte varint claiming
        // millions fails, as does one cut short.
        assert!(walk(&[0, 0], &shorts, true).is_ok());
        assert!(walk(&[0xff, 0xff, 0x7f], &shorts, true).is_err());
        assert!(walk(&[0xff, 0xff], &shorts, true).is_err());
    }

    #[test]
    fn an_array_over_a_million_elements_is_refused_even_when_the_bytes_are_there() {
        let bytes_of = |count: u32| {
            let mut b = count.to_be_bytes().to_vec();
            b.resize(4 + count as usize, 0);
            b
        };
        let s = [Field::Ints(1)];
        assert!(walk(&bytes_of(MAX_ARRAY_ELEMENTS as u32), &s, false).is_ok());
        let e = walk(&bytes_of(MAX_ARRAY_ELEMENTS as u32 + 1), &s, false).unwrap_err();
        assert!(e.to_string().contains("more than the 1000000"), "{e}");
        let nested = [Field::Array(vec![I8])];
        assert!(walk(&bytes_of(MAX_ARRAY_ELEMENTS as u32 + 1), &nested, false).is_err());
    }

    #[test]
    fn a_nested_count_that_lies_is_refused() {
        let (s, flexible) = schema(ApiKey::Produce, 3).unwrap();
        let mut b = encoded(&produce(), 3).to_vec();
        // The partition count of the first topic: after transactional id (2), acks (2),
        // timeout (4), topic count (4) and the name (2 + 1).
        let at = 2 + 2 + 4 + 4 + 3;
        b[at..at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(walk(&b, &s, flexible).is_err());
        // A records length past the end, and a truncated body.
        let mut b = encoded(&produce(), 3).to_vec();
        b[at + 8..at + 12].copy_from_slice(&1_000_000i32.to_be_bytes());
        assert!(walk(&b, &s, flexible).is_err());
        let b = encoded(&produce(), 3);
        assert!(walk(&b[..b.len() - 1], &s, flexible).is_err());
    }

    #[test]
    fn a_nullable_struct_is_walked_only_when_present() {
        let s = [Field::Nullable(vec![I16]), I8];
        // Null (-1), then the Int8; present (1), its Int16, then the Int8.
        assert!(walk(&[0xff, 7], &s, false).is_ok());
        assert!(walk(&[1, 0, 2, 7], &s, false).is_ok());
        // Present but cut short.
        assert!(walk(&[1, 0], &s, false).is_err());
        assert!(walk(&[], &s, false).is_err());
    }
}
