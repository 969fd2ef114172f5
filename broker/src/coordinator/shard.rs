//! One `__consumer_offsets` partition's coordinator state, a pure state machine in the shape of
//! Kafka's `CoordinatorShard`: a request comes in with the time, records to append and answers
//! come out (`Out`), and loading the partition replays the same records (`replay`). The runtime
//! appends the records through the partition's replication and sends the answers once they are
//! committed.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proto::errors::ErrorCode;

use super::group::{Group, GroupConfig, GroupState, JoinAnswer, Out, Reply, ReplyTo};
use super::membership::{self, JoinRequest, SyncRequest};
use super::records::{self, Key, OffsetValue};

/// A partition's committed offsets of one group, by topic and partition.
pub type Offsets = BTreeMap<(String, i32), OffsetValue>;

/// One offset to commit.
#[derive(Debug, Clone)]
pub struct CommitItem {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset.
    pub offset: i64,
    /// The leader epoch, or -1.
    pub leader_epoch: i32,
    /// The client's metadata, if any.
    pub metadata: Option<String>,
}

/// The identity an OffsetCommit carries.
#[derive(Debug, Clone, Default)]
pub struct Committer {
    /// The member id ("" for a commit from outside the group, such as an admin tool).
    pub member_id: String,
    /// The static instance id.
    pub instance_id: Option<String>,
    /// The generation (-1 from outside the group).
    pub generation: i32,
}

/// A group as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct Described {
    /// The state's name ("Dead" for an unknown group).
    pub state: &'static str,
    /// The protocol type.
    pub protocol_type: String,
    /// The protocol, when stable.
    pub protocol: String,
    /// Members: id, instance id, client id, host, metadata, assignment.
    pub members: Vec<DescribedMember>,
}

/// A member as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct DescribedMember {
    /// Its id.
    pub id: String,
    /// Its static instance id.
    pub instance_id: Option<String>,
    /// Its client id.
    pub client_id: String,
    /// Its host.
    pub client_host: String,
    /// Its metadata for the group's protocol.
    pub metadata: Vec<u8>,
    /// Its assignment.
    pub assignment: Vec<u8>,
}

/// The coordinator state of one partition.
#[derive(Debug, Default)]
pub struct Shard {
    pub(super) cfg: GroupConfig,
    pub(super) groups: HashMap<String, Group>,
    /// KIP-848 consumer groups (`shard_consumer`).
    pub(super) consumer_groups: HashMap<String, super::consumer::ConsumerGroup>,
    pub(super) offsets: HashMap<String, Offsets>,
    /// The most a group's record may take (the topic's `max.message.bytes`).
    max_record: usize,
}

impl Shard {
    /// An empty shard.
    pub fn new(cfg: GroupConfig, max_record: usize) -> Self {
        Self {
            cfg,
            groups: HashMap::new(),
            consumer_groups: HashMap::new(),
            offsets: HashMap::new(),
            max_record,
        }
    }

    /// Replays one stored record (loading); unreadable records are skipped and counted by the
    /// caller. `now` starts the loaded members' sessions.
    pub fn replay(&mut self, key: &[u8], value: Option<&[u8]>, now: i64) -> Result<(), records::RecordError> {
        let key = records::decode_key(key)?;
        let consumer_group = match &key {
            Key::ConsumerGroup(g) | Key::ConsumerMember { group: g, .. } | Key::ConsumerAssignment { group: g, .. } => {
                Some(g.clone())
            }
            _ => None,
        };
        if let Some(group) = consumer_group {
            if matches!(key, Key::ConsumerGroup(_)) && value.is_none() {
                self.consumer_groups.remove(&group);
            } else {
                let g = self
                    .consumer_groups
                    .entry(group.clone())
                    .or_insert_with(|| super::consumer::ConsumerGroup::new(&group));
                g.replay(&key, value, now)?;
            }
            return Ok(());
        }
        match key {
            Key::Offset {
                group,
                topic,
                partition,
            } => match value {
                Some(v) => {
                    let v = records::decode_offset(v)?;
                    self.offsets.entry(group).or_default().insert((topic, partition), v);
                }
                None => {
                    if let Some(o) = self.offsets.get_mut(&group) {
                        o.remove(&(topic, partition));
                        if o.is_empty() {
                            self.offsets.remove(&group);
                        }
                    }
                }
            },
            Key::Group(group) => match value {
                Some(v) => {
                    let v = records::decode_group(v)?;
                    self.groups.insert(group.clone(), Group::from_value(&group, v, now));
                }
                None => {
                    self.groups.remove(&group);
                }
            },
            // Consumer-group records were replayed above; others are not served.
            _ => {}
        }
        Ok(())
    }

    /// A group, if known.
    pub fn group(&self, id: &str) -> Option<&Group> {
        self.groups.get(id)
    }

    /// The number of groups coordinated here.
    pub fn group_count(&self) -> usize {
        self.groups.len() + self.consumer_groups.len()
    }

    fn group_for_join(&mut self, id: &str, now: i64) -> Result<&mut Group, ErrorCode> {
        if !self.groups.contains_key(id) && self.groups.len() >= self.cfg.max_groups_per_partition {
            return Err(ErrorCode::GROUP_MAX_SIZE_REACHED);
        }
        Ok(self.groups.entry(id.to_string()).or_insert_with(|| Group::new(id, now)))
    }

    /// Handles a JoinGroup; `new_id` is the id a new member would get.
    pub fn join(&mut self, group: &str, now: i64, req: JoinRequest, to: ReplyTo, new_id: String) -> Out {
        let mut out = Out::default();
        let err = |code| Reply::Join(JoinAnswer::error(code, &req.member_id));
        if group.is_empty() {
            out.reply(to, err(ErrorCode::INVALID_GROUP_ID));
            return out;
        }
        if req.session_timeout_ms < self.cfg.min_session_timeout_ms
            || req.session_timeout_ms > self.cfg.max_session_timeout_ms
        {
            out.reply(to, err(ErrorCode::INVALID_SESSION_TIMEOUT));
            return out;
        }
        if req.protocol_type.is_empty() || req.protocols.is_empty() {
            out.reply(to, err(ErrorCode::INCONSISTENT_GROUP_PROTOCOL));
            return out;
        }
        if !req.member_id.is_empty() && !self.groups.contains_key(group) {
            out.reply(to, err(ErrorCode::UNKNOWN_MEMBER_ID));
            return out;
        }
        let cfg = self.cfg.clone();
        match self.group_for_join(group, now) {
            Ok(g) => membership::join(&cfg, g, now, req, to, new_id, &mut out),
            Err(code) => out.reply(to, err(code)),
        }
        out
    }

    /// Handles a SyncGroup.
    pub fn sync(&mut self, group: &str, now: i64, req: SyncRequest, to: ReplyTo) -> Out {
        let mut out = Out::default();
        match self.groups.get_mut(group) {
            Some(g) => membership::sync(g, now, req, to, self.max_record, &mut out),
            None => out.reply(
                to,
                Reply::Sync(super::group::SyncAnswer {
                    error: ErrorCode::UNKNOWN_MEMBER_ID,
                    ..Default::default()
                }),
            ),
        }
        out
    }

    /// Handles a Heartbeat.
    pub fn heartbeat(
        &mut self,
        group: &str,
        now: i64,
        member: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> ErrorCode {
        match self.groups.get_mut(group) {
            Some(g) => membership::heartbeat(g, now, member, instance, generation),
            None => ErrorCode::UNKNOWN_MEMBER_ID,
        }
    }

    /// Handles a LeaveGroup of `members` (member id, instance id): an answer per member.
    pub fn leave(&mut self, group: &str, now: i64, members: &[(String, Option<String>)]) -> (Vec<ErrorCode>, Out) {
        let mut out = Out::default();
        let Some(g) = self.groups.get_mut(group) else {
            return (vec![ErrorCode::UNKNOWN_MEMBER_ID; members.len()], out);
        };
        let codes = members
            .iter()
            .map(|(id, instance)| {
                let id = match (id.is_empty(), instance) {
                    (true, Some(i)) => match g.static_member(i) {
                        Some(m) => m.id.clone(),
                        None => return ErrorCode::UNKNOWN_MEMBER_ID,
                    },
                    _ => id.clone(),
                };
                match g.members.get(&id) {
                    None if g.pending.remove(&id) => ErrorCode::NONE,
                    None => ErrorCode::UNKNOWN_MEMBER_ID,
                    Some(m) if instance.is_some() && m.instance_id != *instance => ErrorCode::FENCED_INSTANCE_ID,
                    Some(_) => {
                        membership::remove_member(g, now, &id, &mut out);
                        ErrorCode::NONE
                    }
                }
            })
            .collect();
        (codes, out)
    }

    /// Runs every group's timers, and expires offsets as `offsets.retention.minutes` says.
    pub fn tick(&mut self, now: i64) -> Out {
        let mut out = Out::default();
        for g in self.groups.values_mut() {
            if g.deadline.is_some() || !g.members.is_empty() {
                membership::tick(g, now, &mut out);
            }
        }
        for g in self.consumer_groups.values_mut() {
            g.tick(now, &mut out);
        }
        self.expire_offsets(now, &mut out);
        out
    }

    /// Checks who may commit: a member of this generation, or anyone while the group has no
    /// members (admin tools, consumers that assign partitions themselves).
    fn may_commit(&mut self, group: &str, who: &Committer, now: i64) -> Result<(), ErrorCode> {
        if let Some(g) = self.consumer_groups.get_mut(group) {
            return g.may_commit(&who.member_id, who.generation, now);
        }
        let Some(g) = self.groups.get_mut(group) else {
            if who.generation >= 0 || !who.member_id.is_empty() {
                return Err(ErrorCode::ILLEGAL_GENERATION);
            }
            if self.groups.len() >= self.cfg.max_groups_per_partition {
                return Err(ErrorCode::GROUP_MAX_SIZE_REACHED);
            }
            self.groups.insert(group.to_string(), Group::new(group, now));
            return Ok(());
        };
        if who.generation < 0 && who.member_id.is_empty() {
            return if g.state == GroupState::Empty {
                Ok(())
            } else {
                Err(ErrorCode::UNKNOWN_MEMBER_ID)
            };
        }
        if g.state == GroupState::Empty {
            return Err(ErrorCode::UNKNOWN_MEMBER_ID);
        }
        membership::validate_member(g, &who.member_id, who.instance_id.as_deref(), who.generation)?;
        if g.state == GroupState::CompletingRebalance {
            return Err(ErrorCode::REBALANCE_IN_PROGRESS);
        }
        if let Some(m) = g.members.get_mut(&who.member_id) {
            m.session_deadline = now + i64::from(m.session_timeout_ms);
        }
        Ok(())
    }

    /// Handles an OffsetCommit: a code per item, and the records of those accepted.
    pub fn commit(&mut self, group: &str, now: i64, who: &Committer, items: &[CommitItem]) -> (Vec<ErrorCode>, Out) {
        let mut out = Out::default();
        if group.is_empty() {
            return (vec![ErrorCode::INVALID_GROUP_ID; items.len()], out);
        }
        if let Err(code) = self.may_commit(group, who, now) {
            return (vec![code; items.len()], out);
        }
        let max_meta = self.cfg.offset_metadata_max_bytes;
        let offsets = self.offsets.entry(group.to_string()).or_default();
        let codes = items
            .iter()
            .map(|i| {
                let metadata = i.metadata.clone().unwrap_or_default();
                if metadata.len() > max_meta {
                    return ErrorCode::OFFSET_METADATA_TOO_LARGE;
                }
                let v = OffsetValue {
                    offset: i.offset,
                    leader_epoch: i.leader_epoch,
                    metadata,
                    commit_timestamp: now,
                    expire_timestamp: -1,
                };
                let key = Key::Offset {
                    group: group.to_string(),
                    topic: i.topic.clone(),
                    partition: i.partition,
                };
                out.record(&key, Some(records::encode_offset(&v)));
                offsets.insert((i.topic.clone(), i.partition), v);
                ErrorCode::NONE
            })
            .collect();
        if offsets.is_empty() {
            self.offsets.remove(group);
        }
        (codes, out)
    }

    /// The committed offsets of `group`: of the partitions named, or all when `None`.
    pub fn fetch(&self, group: &str, wanted: Option<&[(String, i32)]>) -> Vec<((String, i32), Option<OffsetValue>)> {
        let have = self.offsets.get(group);
        match wanted {
            Some(w) => w
                .iter()
                .map(|tp| (tp.clone(), have.and_then(|o| o.get(tp)).cloned()))
                .collect(),
            None => have
                .map(|o| o.iter().map(|(k, v)| (k.clone(), Some(v.clone()))).collect())
                .unwrap_or_default(),
        }
    }

    /// Every group: id, protocol type, state and type (`classic` or `consumer`).
    pub fn list(&self) -> Vec<(String, String, &'static str, &'static str)> {
        let mut ids: BTreeSet<&String> = self.groups.keys().collect();
        ids.extend(self.offsets.keys());
        ids.extend(self.consumer_groups.keys());
        ids.into_iter()
            .map(|id| {
                if let Some(g) = self.consumer_groups.get(id) {
                    return (id.clone(), "consumer".to_string(), g.state(), "consumer");
                }
                match self.groups.get(id) {
                    Some(g) => (
                        id.clone(),
                        g.protocol_type.clone().unwrap_or_default(),
                        g.state.name(),
                        "classic",
                    ),
                    None => (id.clone(), String::new(), GroupState::Empty.name(), "classic"),
                }
            })
            .collect()
    }

    /// A group as DescribeGroups shows it; `None` when unknown.
    pub fn describe(&self, group: &str) -> Option<Described> {
        let Some(g) = self.groups.get(group) else {
            return self.offsets.contains_key(group).then(|| Described {
                state: GroupState::Empty.name(),
                protocol_type: String::new(),
                protocol: String::new(),
                members: Vec::new(),
            });
        };
        let protocol = g.protocol.clone().unwrap_or_default();
        let stable = g.state == GroupState::Stable;
        let mut members: Vec<_> = g.members.values().collect();
        members.sort_by_key(|m| m.joined_seq);
        Some(Described {
            state: g.state.name(),
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol: if stable { protocol.clone() } else { String::new() },
            members: members
                .into_iter()
                .map(|m| DescribedMember {
                    id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: m.metadata(&protocol),
                    assignment: if stable { m.assignment.clone() } else { Vec::new() },
                })
                .collect(),
        })
    }

    /// Deletes empty groups with their offsets: a code per group.
    pub fn delete_groups(&mut self, ids: &[String]) -> (Vec<ErrorCode>, Out) {
        let mut out = Out::default();
        let codes = ids
            .iter()
            .map(|id| {
                let mut found = false;
                if let Some(g) = self.consumer_groups.get(id) {
                    if !g.members.is_empty() {
                        return ErrorCode::NON_EMPTY_GROUP;
                    }
                    self.consumer_groups.remove(id);
                    out.record(&Key::ConsumerGroup(id.clone()), None);
                    found = true;
                }
                let known = found || self.groups.contains_key(id) || self.offsets.contains_key(id);
                if !known {
                    return ErrorCode::GROUP_ID_NOT_FOUND;
                }
                if self.groups.get(id).is_some_and(|g| g.state != GroupState::Empty) {
                    return ErrorCode::NON_EMPTY_GROUP;
                }
                self.drop_group(id, &mut out);
                ErrorCode::NONE
            })
            .collect();
        (codes, out)
    }

    fn drop_group(&mut self, id: &str, out: &mut Out) {
        for (topic, partition) in self.offsets.remove(id).unwrap_or_default().into_keys() {
            let key = Key::Offset {
                group: id.to_string(),
                topic,
                partition,
            };
            out.record(&key, None);
        }
        if self
            .groups
            .remove(id)
            .is_some_and(|g| g.generation > 0 || g.protocol_type.is_some())
        {
            out.record(&Key::Group(id.to_string()), None);
        }
    }

    /// Deletes a group's offsets of partitions it does not consume: a code per partition.
    pub fn delete_offsets(
        &mut self,
        group: &str,
        parts: &[(String, i32)],
        subscribed: &BTreeSet<String>,
    ) -> Result<(Vec<ErrorCode>, Out), ErrorCode> {
        if !self.groups.contains_key(group)
            && !self.offsets.contains_key(group)
            && !self.consumer_groups.contains_key(group)
        {
            return Err(ErrorCode::GROUP_ID_NOT_FOUND);
        }
        let mut out = Out::default();
        let offsets = self.offsets.entry(group.to_string()).or_default();
        let codes = parts
            .iter()
            .map(|(topic, partition)| {
                if subscribed.contains(topic) {
                    return ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC;
                }
                if offsets.remove(&(topic.clone(), *partition)).is_some() {
                    let key = Key::Offset {
                        group: group.to_string(),
                        topic: topic.clone(),
                        partition: *partition,
                    };
                    out.record(&key, None);
                }
                ErrorCode::NONE
            })
            .collect();
        if offsets.is_empty() {
            self.offsets.remove(group);
        }
        Ok((codes, out))
    }

    /// Offsets expire `offsets.retention.minutes` after their group became empty (or, for a
    /// group that never had members, after their commit); a group left with nothing goes.
    fn expire_offsets(&mut self, now: i64, out: &mut Out) {
        let retention = self.cfg.offsets_retention_ms;
        let mut emptied = Vec::new();
        for (id, offsets) in self.offsets.iter_mut() {
            if self.consumer_groups.get(id).is_some_and(|g| !g.members.is_empty()) {
                continue;
            }
            let since = match self.groups.get(id) {
                Some(g) if g.state != GroupState::Empty => continue,
                Some(g) if g.protocol_type.is_some() => Some(g.state_timestamp),
                _ => None,
            };
            let old: Vec<(String, i32)> = offsets
                .iter()
                .filter(|(_, v)| {
                    let base = match (v.expire_timestamp, since) {
                        (e, _) if e >= 0 => return e <= now,
                        (_, Some(s)) => s,
                        (_, None) => v.commit_timestamp,
                    };
                    base.saturating_add(retention) <= now
                })
                .map(|(k, _)| k.clone())
                .collect();
            for (topic, partition) in old {
                offsets.remove(&(topic.clone(), partition));
                let key = Key::Offset {
                    group: id.clone(),
                    topic,
                    partition,
                };
                out.record(&key, None);
            }
            if offsets.is_empty() {
                emptied.push(id.clone());
            }
        }
        for id in emptied {
            self.offsets.remove(&id);
            if self.groups.get(&id).is_some_and(|g| g.state == GroupState::Empty) {
                // Only a group that had members ever wrote a record to delete.
                if self
                    .groups
                    .remove(&id)
                    .is_some_and(|g| g.generation > 0 || g.protocol_type.is_some())
                {
                    out.record(&Key::Group(id), None);
                }
            }
        }
    }
}
