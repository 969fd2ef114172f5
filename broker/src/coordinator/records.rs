//! The records of `__consumer_offsets` in Kafka's own key and value schemas (Kafka's
//! `group-coordinator` message definitions), so that a migrated cluster's offsets and groups
//! read as they were written, and Kafka's tools read Ferry's. A key starts with its version,
//! which names the record type: 0 and 1 an offset commit, 2 a classic group's metadata, 3 and
//! and up the KIP-848 consumer-group records: 3 a group's epoch, 5 a member's subscription, 8 a
//! member's assignment (`consumer_records`); the others (4, 6, 7: partition metadata and the
//! target assignment, which Ferry computes again on load) are read and skipped.
//! A value of `None` is a tombstone.

use thiserror::Error;

/// Why a stored record could not be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RecordError {
    /// The bytes end inside a field.
    #[error("record ends inside {0}")]
    Short(&'static str),
    /// A length or count that cannot be.
    #[error("bad length {0} in {1}")]
    BadLength(i64, &'static str),
    /// A string that is not UTF-8.
    #[error("a string in {0} is not UTF-8")]
    NotUtf8(&'static str),
    /// A version this code does not know.
    #[error("unknown {what} version {version}")]
    UnknownVersion {
        /// Key or value, and of what.
        what: &'static str,
        /// The version found.
        version: i16,
    },
}

/// A record's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Key {
    /// A group's committed offset of one partition.
    Offset {
        /// The group.
        group: String,
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// A classic group's metadata.
    Group(String),
    /// A consumer group's (KIP-848) epoch.
    ConsumerGroup(String),
    /// A consumer group member's subscription.
    ConsumerMember {
        /// The group.
        group: String,
        /// The member.
        member: String,
    },
    /// A consumer group member's current assignment.
    ConsumerAssignment {
        /// The group.
        group: String,
        /// The member.
        member: String,
    },
    /// A record of a type not served (KIP-848 consumer groups, share groups): its key version.
    Other(i16),
}

/// A committed offset, `OffsetCommitValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    /// The offset committed.
    pub offset: i64,
    /// The leader epoch of the record before it, or -1.
    pub leader_epoch: i32,
    /// The client's metadata string.
    pub metadata: String,
    /// When it was committed (ms).
    pub commit_timestamp: i64,
    /// When it expires (v1 only; -1 otherwise).
    pub expire_timestamp: i64,
}

/// A member as `GroupMetadataValue` stores it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredMember {
    /// Its member id.
    pub member_id: String,
    /// Its static instance id.
    pub instance_id: Option<String>,
    /// Its client id.
    pub client_id: String,
    /// Its host.
    pub client_host: String,
    /// Its rebalance timeout (ms).
    pub rebalance_timeout_ms: i32,
    /// Its session timeout (ms).
    pub session_timeout_ms: i32,
    /// Its metadata for the chosen protocol.
    pub subscription: Vec<u8>,
    /// Its assignment.
    pub assignment: Vec<u8>,
}

/// A classic group's metadata, `GroupMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupValue {
    /// The protocol type (`consumer`, `connect`, ...).
    pub protocol_type: String,
    /// The generation.
    pub generation: i32,
    /// The chosen protocol (assignor), if any.
    pub protocol: Option<String>,
    /// The leader's member id, if any.
    pub leader: Option<String>,
    /// When the group last changed state (ms).
    pub state_timestamp: i64,
    /// The members.
    pub members: Vec<StoredMember>,
}

/// The value versions written: the newest non-flexible ones, which every Kafka since 2.3 reads.
const OFFSET_VALUE_VERSION: i16 = 3;
const GROUP_VALUE_VERSION: i16 = 3;

/// Encodes a key.
pub fn encode_key(key: &Key) -> Vec<u8> {
    let mut w = Writer::default();
    match key {
        Key::Offset {
            group,
            topic,
            partition,
        } => {
            w.i16(1);
            w.str(group);
            w.str(topic);
            w.i32(*partition);
        }
        Key::Group(group) => {
            w.i16(2);
            w.str(group);
        }
        Key::ConsumerGroup(group) => {
            w.i16(3);
            w.str(group);
        }
        Key::ConsumerMember { group, member } => {
            w.i16(5);
            w.str(group);
            w.str(member);
        }
        Key::ConsumerAssignment { group, member } => {
            w.i16(8);
            w.str(group);
            w.str(member);
        }
        Key::Other(v) => w.i16(*v),
    }
    w.0
}

/// Decodes a key.
pub fn decode_key(buf: &[u8]) -> Result<Key, RecordError> {
    let mut r = Reader::new(buf, false, "key");
    let version = r.i16()?;
    match version {
        0 | 1 => Ok(Key::Offset {
            group: r.str()?,
            topic: r.str()?,
            partition: r.i32()?,
        }),
        2 => Ok(Key::Group(r.str()?)),
        3 => Ok(Key::ConsumerGroup(r.str()?)),
        5 => Ok(Key::ConsumerMember {
            group: r.str()?,
            member: r.str()?,
        }),
        8 => Ok(Key::ConsumerAssignment {
            group: r.str()?,
            member: r.str()?,
        }),
        v if v >= 3 => Ok(Key::Other(v)),
        v => Err(RecordError::UnknownVersion {
            what: "key",
            version: v,
        }),
    }
}

/// Encodes an offset commit's value.
pub fn encode_offset(v: &OffsetValue) -> Vec<u8> {
    let mut w = Writer::default();
    w.i16(OFFSET_VALUE_VERSION);
    w.i64(v.offset);
    w.i32(v.leader_epoch);
    w.str(&v.metadata);
    w.i64(v.commit_timestamp);
    w.0
}

/// Decodes an offset commit's value, versions 0 to 4.
pub fn decode_offset(buf: &[u8]) -> Result<OffsetValue, RecordError> {
    let mut v = Reader::new(buf, false, "offset value");
    let version = v.i16()?;
    if !(0..=4).contains(&version) {
        return Err(RecordError::UnknownVersion {
            what: "offset value",
            version,
        });
    }
    v.flexible = version >= 4;
    let offset = v.i64()?;
    let leader_epoch = if version >= 3 { v.i32()? } else { -1 };
    let metadata = v.str()?;
    let commit_timestamp = v.i64()?;
    let expire_timestamp = if version == 1 { v.i64()? } else { -1 };
    Ok(OffsetValue {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp,
        expire_timestamp,
    })
}

/// Encodes a group's metadata value.
pub fn encode_group(g: &GroupValue) -> Vec<u8> {
    let mut w = Writer::default();
    w.i16(GROUP_VALUE_VERSION);
    w.str(&g.protocol_type);
    w.i32(g.generation);
    w.opt_str(g.protocol.as_deref());
    w.opt_str(g.leader.as_deref());
    w.i64(g.state_timestamp);
    w.i32(g.members.len() as i32);
    for m in &g.members {
        w.str(&m.member_id);
        w.opt_str(m.instance_id.as_deref());
        w.str(&m.client_id);
        w.str(&m.client_host);
        w.i32(m.rebalance_timeout_ms);
        w.i32(m.session_timeout_ms);
        w.bytes(&m.subscription);
        w.bytes(&m.assignment);
    }
    w.0
}

/// Decodes a group's metadata value, versions 0 to 4.
pub fn decode_group(buf: &[u8]) -> Result<GroupValue, RecordError> {
    let mut r = Reader::new(buf, false, "group value");
    let version = r.i16()?;
    if !(0..=4).contains(&version) {
        return Err(RecordError::UnknownVersion {
            what: "group value",
            version,
        });
    }
    r.flexible = version >= 4;
    let protocol_type = r.str()?;
    let generation = r.i32()?;
    let protocol = r.opt_str()?;
    let leader = r.opt_str()?;
    let state_timestamp = if version >= 2 { r.i64()? } else { -1 };
    let count = r.count()?;
    let mut members = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let member_id = r.str()?;
        let instance_id = if version >= 3 { r.opt_str()? } else { None };
        let client_id = r.str()?;
        let client_host = r.str()?;
        let rebalance_timeout_ms = if version >= 1 { r.i32()? } else { 0 };
        let session_timeout_ms = r.i32()?;
        let subscription = r.bytes()?;
        let assignment = r.bytes()?;
        r.tags()?;
        members.push(StoredMember {
            member_id,
            instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms: if version >= 1 {
                rebalance_timeout_ms
            } else {
                session_timeout_ms
            },
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    Ok(GroupValue {
        protocol_type,
        generation,
        protocol,
        leader,
        state_timestamp,
        members,
    })
}

/// Big-endian, non-flexible encoding (the versions written are all non-flexible).
#[derive(Default)]
pub(super) struct Writer(pub(super) Vec<u8>);

impl Writer {
    pub(super) fn i16(&mut self, v: i16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub(super) fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub(super) fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub(super) fn str(&mut self, s: &str) {
        // Names are bounded well below 32 KiB where they are accepted (group ids, topics,
        // metadata); a longer one is cut rather than written with a wrapped length.
        let b = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
        self.i16(b.len() as i16);
        self.0.extend_from_slice(b);
    }
    pub(super) fn opt_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.str(s),
            None => self.i16(-1),
        }
    }
    pub(super) fn bytes(&mut self, b: &[u8]) {
        self.i32(b.len() as i32);
        self.0.extend_from_slice(b);
    }
}

/// Reads either encoding; every length is checked against what is left.
pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    pub(super) flexible: bool,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8], flexible: bool, what: &'static str) -> Self {
        Self {
            buf,
            pos: 0,
            flexible,
            what,
        }
    }
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.buf.len());
        let end = end.ok_or(RecordError::Short(self.what))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub(super) fn i16(&mut self) -> Result<i16, RecordError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    pub(super) fn i32(&mut self) -> Result<i32, RecordError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(super) fn i64(&mut self) -> Result<i64, RecordError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    pub(super) fn uvarint(&mut self) -> Result<u64, RecordError> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.take(1)?[0];
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(RecordError::BadLength(-1, self.what))
    }
    /// A length: `None` for null.
    pub(super) fn len(&mut self, wide: bool) -> Result<Option<usize>, RecordError> {
        let n = if self.flexible {
            self.uvarint()? as i64 - 1
        } else if wide {
            i64::from(self.i32()?)
        } else {
            i64::from(self.i16()?)
        };
        match n {
            -1 => Ok(None),
            n if n < 0 || n as usize > self.buf.len() - self.pos => Err(RecordError::BadLength(n, self.what)),
            n => Ok(Some(n as usize)),
        }
    }
    pub(super) fn opt_str(&mut self) -> Result<Option<String>, RecordError> {
        match self.len(false)? {
            None => Ok(None),
            Some(n) => {
                let b = self.take(n)?;
                std::str::from_utf8(b)
                    .map(|s| Some(s.to_string()))
                    .map_err(|_| RecordError::NotUtf8(self.what))
            }
        }
    }
    pub(super) fn str(&mut self) -> Result<String, RecordError> {
        Ok(self.opt_str()?.unwrap_or_default())
    }
    pub(super) fn bytes(&mut self) -> Result<Vec<u8>, RecordError> {
        match self.len(true)? {
            None => Ok(Vec::new()),
            Some(n) => Ok(self.take(n)?.to_vec()),
        }
    }
    /// An array's count; each element takes at least a byte, so a larger count lies.
    pub(super) fn count(&mut self) -> Result<usize, RecordError> {
        Ok(self.len(true)?.unwrap_or(0))
    }
    pub(super) fn tags(&mut self) -> Result<(), RecordError> {
        if !self.flexible {
            return Ok(());
        }
        let n = self.uvarint()?;
        for _ in 0..n {
            self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_name_their_type() {
        let k = Key::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 7,
        };
        let b = encode_key(&k);
        assert_eq!(&b[..2], &1i16.to_be_bytes());
        assert_eq!(decode_key(&b).unwrap(), k);
        assert_eq!(
            decode_key(&encode_key(&Key::Group("g".into()))).unwrap(),
            Key::Group("g".into())
        );
        // A KIP-848 record is read as what it is, not an error.
        assert_eq!(decode_key(&[0, 4, 0, 1, b'g']).unwrap(), Key::Other(4));
        assert!(decode_key(&[0]).is_err());
    }

    #[test]
    fn an_offset_value_of_version_3_is_what_kafka_3_writes() {
        let v = OffsetValue {
            offset: 42,
            leader_epoch: 3,
            metadata: "m".into(),
            commit_timestamp: 1000,
            expire_timestamp: -1,
        };
        let b = encode_offset(&v);
        // version, offset, epoch, metadata (len + byte), timestamp
        assert_eq!(b.len(), 2 + 8 + 4 + 3 + 8);
        assert_eq!(decode_offset(&b).unwrap(), v);
    }

    #[test]
    fn older_and_flexible_offset_values_are_read() {
        // v1: offset, metadata, commit ts, expire ts.
        let mut b = vec![0, 1];
        b.extend_from_slice(&5i64.to_be_bytes());
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&7i64.to_be_bytes());
        b.extend_from_slice(&9i64.to_be_bytes());
        let v = decode_offset(&b).unwrap();
        assert_eq!(
            (v.offset, v.leader_epoch, v.commit_timestamp, v.expire_timestamp),
            (5, -1, 7, 9)
        );
        // v4: flexible, compact string and an empty tag section.
        let mut b = vec![0, 4];
        b.extend_from_slice(&6i64.to_be_bytes());
        b.extend_from_slice(&2i32.to_be_bytes());
        b.extend_from_slice(&[3, b'h', b'i']);
        b.extend_from_slice(&8i64.to_be_bytes());
        b.push(0);
        let v = decode_offset(&b).unwrap();
        assert_eq!((v.offset, v.leader_epoch, v.metadata.as_str()), (6, 2, "hi"));
    }

    #[test]
    fn group_values_round_trip_and_lying_counts_are_refused() {
        let g = GroupValue {
            protocol_type: "consumer".into(),
            generation: 4,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            state_timestamp: 99,
            members: vec![StoredMember {
                member_id: "m1".into(),
                instance_id: Some("i1".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: vec![1, 2],
                assignment: vec![3],
            }],
        };
        let b = encode_group(&g);
        assert_eq!(decode_group(&b).unwrap(), g);
        let mut lying = encode_group(&GroupValue::default());
        let n = lying.len();
        lying[n - 4..].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(decode_group(&lying), Err(RecordError::BadLength(..))));
        assert!(decode_group(&b[..b.len() - 1]).is_err());
    }
}
