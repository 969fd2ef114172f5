//! A classic consumer group as plain data: its members, state and generation, and what a
//! change to it produces (`Out`: records to append and answers to send). The rules that move it
//! live in `membership`; the shard that owns many of them in `shard`.

use std::collections::{BTreeMap, BTreeSet};

use proto::errors::ErrorCode;

use super::records::{self, GroupValue, Key, StoredMember};

/// Who waits for an answer: the runtime's handle for a request in flight.
pub type ReplyTo = u64;

/// The settings of the group coordinator, with Kafka's names and defaults.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms`.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`: a new group waits this long for more members.
    pub initial_rebalance_delay_ms: i64,
    /// `group.max.size`: members per group.
    pub max_size: usize,
    /// Groups one `__consumer_offsets` partition coordinates (Ferry's bound on memory).
    pub max_groups_per_partition: usize,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes`, in ms.
    pub offsets_retention_ms: i64,
    /// `offsets.topic.num.partitions`: the partitions `__consumer_offsets` is created with.
    pub offsets_topic_num_partitions: i32,
    /// `offsets.topic.replication.factor`: its replicas, capped at the brokers alive.
    pub offsets_topic_replication_factor: i16,
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            max_size: i32::MAX as usize,
            max_groups_per_partition: 100_000,
            offset_metadata_max_bytes: 4096,
            offsets_retention_ms: 10_080 * 60_000,
            offsets_topic_num_partitions: super::DEFAULT_OFFSETS_PARTITIONS,
            offsets_topic_replication_factor: super::DEFAULT_OFFSETS_REPLICATION,
        }
    }
}

/// A classic group's states, as Kafka names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members; may hold offsets.
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment.
    CompletingRebalance,
    /// Assigned.
    Stable,
}

impl GroupState {
    /// Kafka's name for the state, as ListGroups and DescribeGroups print it.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
        }
    }
}

/// A member of a classic group.
#[derive(Debug, Clone, Default)]
pub struct Member {
    /// Its id.
    pub id: String,
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
    /// The protocols it supports, in its order of preference, with their metadata.
    pub protocols: Vec<(String, Vec<u8>)>,
    /// Its assignment in the current generation.
    pub assignment: Vec<u8>,
    /// Its JoinGroup waiting for the rebalance to complete.
    pub join_waiter: Option<ReplyTo>,
    /// Its SyncGroup waiting for the leader's assignment.
    pub sync_waiter: Option<ReplyTo>,
    /// When its session ends without a heartbeat (ms).
    pub session_deadline: i64,
    /// Order of joining: the first member still present leads.
    pub joined_seq: u64,
}

impl Member {
    /// Its metadata for `protocol`.
    pub fn metadata(&self, protocol: &str) -> Vec<u8> {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}

/// A classic group.
#[derive(Debug, Clone)]
pub struct Group {
    /// Its id.
    pub id: String,
    /// Its state.
    pub state: GroupState,
    /// Its generation.
    pub generation: i32,
    /// Its protocol type, once a member joined (`consumer`, `connect`, ...).
    pub protocol_type: Option<String>,
    /// The chosen protocol (assignor) of this generation.
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: Option<String>,
    /// Members by id.
    pub members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED and not joined yet.
    pub pending: BTreeSet<String>,
    /// When the current phase times out: the join phase, the initial delay or the sync phase.
    pub deadline: Option<i64>,
    /// While a new group waits for members: when its delay can be extended no further.
    pub initial_delay_until: Option<i64>,
    /// When the state last changed (ms).
    pub state_timestamp: i64,
    /// The next `Member::joined_seq`.
    pub next_seq: u64,
}

impl Group {
    /// A new, empty group.
    pub fn new(id: &str, now: i64) -> Self {
        Self {
            id: id.to_string(),
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending: BTreeSet::new(),
            deadline: None,
            initial_delay_until: None,
            state_timestamp: now,
            next_seq: 0,
        }
    }

    /// The member whose static instance id is `instance`.
    pub fn static_member(&self, instance: &str) -> Option<&Member> {
        self.members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance))
    }

    /// The group as its metadata record stores it.
    pub fn to_value(&self) -> GroupValue {
        let protocol = self.protocol.clone();
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: protocol.clone(),
            leader: self.leader.clone(),
            state_timestamp: self.state_timestamp,
            members: self
                .members
                .values()
                .map(|m| StoredMember {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: protocol.as_deref().map(|p| m.metadata(p)).unwrap_or_default(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// The group a loaded record describes: Stable with its members, or Empty; each member's
    /// session starts again at `now`, as when a coordinator moves in Kafka.
    pub fn from_value(id: &str, v: GroupValue, now: i64) -> Self {
        let mut g = Group::new(id, now);
        g.generation = v.generation;
        g.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
        g.protocol = v.protocol.clone();
        g.leader = v.leader;
        g.state_timestamp = if v.state_timestamp >= 0 { v.state_timestamp } else { now };
        for (seq, m) in v.members.into_iter().enumerate() {
            let protocols = v
                .protocol
                .clone()
                .map(|p| vec![(p, m.subscription)])
                .unwrap_or_default();
            g.members.insert(
                m.member_id.clone(),
                Member {
                    id: m.member_id,
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    protocols,
                    assignment: m.assignment,
                    join_waiter: None,
                    sync_waiter: None,
                    session_deadline: now + i64::from(m.session_timeout_ms),
                    joined_seq: seq as u64,
                },
            );
        }
        g.next_seq = g.members.len() as u64;
        g.state = if g.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
        g
    }

    /// The protocol every member supports that most members prefer, Kafka's vote: each member
    /// votes for the first of its protocols that all support.
    pub fn select_protocol(&self) -> Option<String> {
        let mut common: Option<BTreeSet<&str>> = None;
        for m in self.members.values() {
            let mine: BTreeSet<&str> = m.protocols.iter().map(|(n, _)| n.as_str()).collect();
            common = Some(match common {
                None => mine,
                Some(c) => c.intersection(&mine).copied().collect(),
            });
        }
        let common = common?;
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some((n, _)) = m.protocols.iter().find(|(n, _)| common.contains(n.as_str())) {
                *votes.entry(n.as_str()).or_default() += 1;
            }
        }
        votes
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
            .map(|(n, _)| n.to_string())
    }

    /// Whether a member with `protocols` of `protocol_type` could join: the type matches and
    /// it shares a protocol with every member.
    pub fn supports(&self, protocol_type: &str, protocols: &[(String, Vec<u8>)]) -> bool {
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        protocols.iter().any(|(n, _)| {
            self.members
                .values()
                .all(|m| m.protocols.iter().any(|(mine, _)| mine == n))
        })
    }

    /// Asserts what every state assumes; called after each change.
    pub fn check(&self) {
        match self.state {
            GroupState::Empty => debug_assert!(self.members.is_empty(), "an empty group has no members"),
            _ => debug_assert!(!self.members.is_empty(), "a {:?} group has members", self.state),
        }
        if let Some(l) = &self.leader {
            debug_assert!(self.members.contains_key(l), "the leader is a member");
        }
        for m in self.members.values() {
            debug_assert!(
                m.sync_waiter.is_none() || self.state == GroupState::CompletingRebalance,
                "only a completing rebalance holds SyncGroups"
            );
        }
    }
}

/// A JoinGroup's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JoinAnswer {
    /// The error, or NONE.
    pub error: ErrorCode,
    /// The generation.
    pub generation: i32,
    /// The protocol type.
    pub protocol_type: Option<String>,
    /// The chosen protocol.
    pub protocol: Option<String>,
    /// The leader.
    pub leader: String,
    /// The member's id.
    pub member_id: String,
    /// For the leader: every member, its instance id and its metadata.
    pub members: Vec<(String, Option<String>, Vec<u8>)>,
}

impl JoinAnswer {
    /// An answer that carries only an error (and the member id).
    pub fn error(error: ErrorCode, member_id: &str) -> Self {
        Self {
            error,
            generation: -1,
            member_id: member_id.to_string(),
            ..Default::default()
        }
    }
}

/// A SyncGroup's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncAnswer {
    /// The error, or NONE.
    pub error: ErrorCode,
    /// The protocol type.
    pub protocol_type: Option<String>,
    /// The chosen protocol.
    pub protocol: Option<String>,
    /// The member's assignment.
    pub assignment: Vec<u8>,
}

/// An answer to a request held by the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// To a JoinGroup.
    Join(JoinAnswer),
    /// To a SyncGroup.
    Sync(SyncAnswer),
    /// An error code alone (Heartbeat, LeaveGroup, OffsetCommit, ...).
    Code(ErrorCode),
}

/// What a change produces: records to append to the partition, and answers to send once they
/// are committed.
#[derive(Debug, Default)]
pub struct Out {
    /// Keys and values (`None`: a tombstone), in order.
    pub records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Answers to requests in flight.
    pub replies: Vec<(ReplyTo, Reply)>,
}

impl Out {
    /// Adds a record.
    pub fn record(&mut self, key: &Key, value: Option<Vec<u8>>) {
        self.records.push((records::encode_key(key), value));
    }

    /// Adds an answer.
    pub fn reply(&mut self, to: ReplyTo, reply: Reply) {
        self.replies.push((to, reply));
    }

    /// Adds the group's metadata record.
    pub fn group_record(&mut self, g: &Group) {
        self.record(&Key::Group(g.id.clone()), Some(records::encode_group(&g.to_value())));
    }
}
