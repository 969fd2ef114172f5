//! The values of the KIP-848 consumer-group records, in Kafka's flexible encoding: a group's
//! epoch (`ConsumerGroupMetadataValue`), a member's subscription
//! (`ConsumerGroupMemberMetadataValue`) and a member's assignment
//! (`ConsumerGroupCurrentMemberAssignmentValue`), each version 0.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::records::{Reader, RecordError};

/// Partitions by topic id.
pub type TopicPartitions = BTreeMap<Uuid, Vec<i32>>;

/// A member's subscription as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberValue {
    /// Its static instance id.
    pub instance_id: Option<String>,
    /// Its rack.
    pub rack_id: Option<String>,
    /// Its client id.
    pub client_id: String,
    /// Its host.
    pub client_host: String,
    /// The topics it subscribes to.
    pub topics: Vec<String>,
    /// Its rebalance timeout (ms).
    pub rebalance_timeout_ms: i32,
    /// The server assignor it asked for.
    pub server_assignor: Option<String>,
}

/// A member's assignment as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssignmentValue {
    /// Its epoch.
    pub member_epoch: i32,
    /// Its epoch before the last bump.
    pub previous_member_epoch: i32,
    /// Kafka's member state (0 stable, 1 unrevoked, 2 unreleased).
    pub state: i8,
    /// Its partitions.
    pub assigned: TopicPartitions,
    /// Partitions it must give up.
    pub pending_revocation: TopicPartitions,
}

/// Flexible-version writing: compact lengths and an empty tag section per struct.
#[derive(Default)]
struct Flex(Vec<u8>);

impl Flex {
    fn uvarint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn i8(&mut self, v: i8) {
        self.0.push(v as u8);
    }
    fn i16(&mut self, v: i16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            None => self.uvarint(0),
            Some(s) => {
                self.uvarint(s.len() as u64 + 1);
                self.0.extend_from_slice(s.as_bytes());
            }
        }
    }
    fn str(&mut self, s: &str) {
        self.opt_str(Some(s));
    }
    fn count(&mut self, n: usize) {
        self.uvarint(n as u64 + 1);
    }
    fn no_tags(&mut self) {
        self.uvarint(0);
    }
    fn partitions(&mut self, tp: &TopicPartitions) {
        self.count(tp.len());
        for (id, ps) in tp {
            self.0.extend_from_slice(id.as_bytes());
            self.count(ps.len());
            for p in ps {
                self.i32(*p);
            }
            self.no_tags();
        }
    }
}

/// Encodes a group's epoch.
pub fn encode_group_epoch(epoch: i32) -> Vec<u8> {
    let mut w = Flex::default();
    w.i16(0);
    w.i32(epoch);
    w.no_tags();
    w.0
}

/// Decodes a group's epoch.
pub fn decode_group_epoch(buf: &[u8]) -> Result<i32, RecordError> {
    let mut r = reader(buf, "consumer group value")?;
    let epoch = r.i32()?;
    r.tags()?;
    Ok(epoch)
}

fn reader<'a>(buf: &'a [u8], what: &'static str) -> Result<Reader<'a>, RecordError> {
    let mut r = Reader::new(buf, false, what);
    let version = r.i16()?;
    if version != 0 {
        return Err(RecordError::UnknownVersion { what, version });
    }
    r.flexible = true;
    Ok(r)
}

/// Encodes a member's subscription.
pub fn encode_member(m: &MemberValue) -> Vec<u8> {
    let mut w = Flex::default();
    w.i16(0);
    w.opt_str(m.instance_id.as_deref());
    w.opt_str(m.rack_id.as_deref());
    w.str(&m.client_id);
    w.str(&m.client_host);
    w.count(m.topics.len());
    for t in &m.topics {
        w.str(t);
    }
    w.opt_str(None);
    w.i32(m.rebalance_timeout_ms);
    w.opt_str(m.server_assignor.as_deref());
    w.no_tags();
    w.0
}

/// Decodes a member's subscription.
pub fn decode_member(buf: &[u8]) -> Result<MemberValue, RecordError> {
    let mut r = reader(buf, "consumer member value")?;
    let instance_id = r.opt_str()?;
    let rack_id = r.opt_str()?;
    let client_id = r.str()?;
    let client_host = r.str()?;
    let n = r.count()?;
    let mut topics = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        topics.push(r.str()?);
    }
    let _regex = r.opt_str()?;
    let rebalance_timeout_ms = r.i32()?;
    let server_assignor = r.opt_str()?;
    r.tags()?;
    Ok(MemberValue {
        instance_id,
        rack_id,
        client_id,
        client_host,
        topics,
        rebalance_timeout_ms,
        server_assignor,
    })
}

/// Encodes a member's assignment.
pub fn encode_assignment(a: &AssignmentValue) -> Vec<u8> {
    let mut w = Flex::default();
    w.i16(0);
    w.i32(a.member_epoch);
    w.i32(a.previous_member_epoch);
    w.i8(a.state);
    w.partitions(&a.assigned);
    w.partitions(&a.pending_revocation);
    w.no_tags();
    w.0
}

fn read_partitions(r: &mut Reader<'_>) -> Result<TopicPartitions, RecordError> {
    let n = r.count()?;
    let mut out = TopicPartitions::new();
    for _ in 0..n {
        let id = Uuid::from_slice(r.take(16)?).map_err(|_| RecordError::Short("a topic id"))?;
        let m = r.count()?;
        let mut ps = Vec::with_capacity(m.min(4096));
        for _ in 0..m {
            ps.push(r.i32()?);
        }
        r.tags()?;
        out.insert(id, ps);
    }
    Ok(out)
}

/// Decodes a member's assignment.
pub fn decode_assignment(buf: &[u8]) -> Result<AssignmentValue, RecordError> {
    let mut r = reader(buf, "consumer assignment value")?;
    let member_epoch = r.i32()?;
    let previous_member_epoch = r.i32()?;
    let state = r.take(1)?[0] as i8;
    let assigned = read_partitions(&mut r)?;
    let pending_revocation = read_partitions(&mut r)?;
    r.tags()?;
    Ok(AssignmentValue {
        member_epoch,
        previous_member_epoch,
        state,
        assigned,
        pending_revocation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_group_values_round_trip() {
        assert_eq!(decode_group_epoch(&encode_group_epoch(7)).unwrap(), 7);
        let m = MemberValue {
            instance_id: None,
            rack_id: Some("r1".into()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            topics: vec!["a".into(), "b".into()],
            rebalance_timeout_ms: 300_000,
            server_assignor: Some("uniform".into()),
        };
        assert_eq!(decode_member(&encode_member(&m)).unwrap(), m);
        let a = AssignmentValue {
            member_epoch: 3,
            previous_member_epoch: 2,
            state: 1,
            assigned: [(Uuid::from_u128(1), vec![0, 2])].into_iter().collect(),
            pending_revocation: [(Uuid::from_u128(2), vec![1])].into_iter().collect(),
        };
        let b = encode_assignment(&a);
        assert_eq!(decode_assignment(&b).unwrap(), a);
        assert!(decode_assignment(&b[..b.len() - 3]).is_err());
    }
}
