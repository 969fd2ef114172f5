//! A KIP-848 consumer group (`group.protocol=consumer`) as plain data, and its heartbeat: the
//! coordinator keeps each member's subscription, computes the target assignment with a server
//! assignor whenever the group epoch moves, and brings each member to its target in steps that
//! never give a partition to two members at once: a member first gives up what it must
//! (its epoch stays), and gets a partition only once no other member holds it.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use proto::errors::ErrorCode;

use super::assignor::{self, Topics};
use super::consumer_records::{self, AssignmentValue, MemberValue, TopicPartitions};
use super::group::Out;
use super::records::Key;

/// `group.consumer.heartbeat.interval.ms`.
pub const HEARTBEAT_INTERVAL_MS: i32 = 5_000;
/// `group.consumer.session.timeout.ms`.
pub const SESSION_TIMEOUT_MS: i64 = 45_000;

/// A member of a consumer group.
#[derive(Debug, Clone, Default)]
pub struct Member {
    /// Its subscription and identity.
    pub value: MemberValue,
    /// Its epoch.
    pub epoch: i32,
    /// Its epoch before the last bump (a member whose answer was lost retries with it).
    pub previous_epoch: i32,
    /// Its partitions.
    pub assigned: TopicPartitions,
    /// Partitions it must give up before others get them.
    pub pending: TopicPartitions,
    /// When its session ends without a heartbeat.
    pub session_deadline: i64,
    /// When it must have given up its pending partitions.
    pub revocation_deadline: Option<i64>,
    /// The assignment last sent to it.
    pub sent: Option<TopicPartitions>,
}

/// A consumer group.
#[derive(Debug, Clone, Default)]
pub struct ConsumerGroup {
    /// Its id.
    pub id: String,
    /// The group epoch: moves with every change of members, subscriptions or topics.
    pub epoch: i32,
    /// The epoch the target assignment was computed at.
    pub assignment_epoch: i32,
    /// Members by id.
    pub members: BTreeMap<String, Member>,
    /// The target assignment by member.
    pub target: BTreeMap<String, TopicPartitions>,
    /// A hash of the subscribed topics' ids and partition counts.
    pub topics_hash: u64,
}

/// A ConsumerGroupHeartbeat.
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    /// The member id ("" on a v0 join: the coordinator names it).
    pub member_id: String,
    /// 0 to join, -1 to leave, -2 for a static member's leave, else its epoch.
    pub member_epoch: i32,
    /// Its subscription and identity; `topics` empty and unchanged when `None` is sent.
    pub value: MemberValue,
    /// Whether the subscription was sent.
    pub topics_sent: bool,
    /// The partitions it owns, when it says.
    pub owned: Option<TopicPartitions>,
}

/// A heartbeat's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    /// The error.
    pub error: ErrorCode,
    /// Why.
    pub message: Option<String>,
    /// The member's id.
    pub member_id: String,
    /// Its epoch.
    pub member_epoch: i32,
    /// Its new assignment, when it changed.
    pub assignment: Option<TopicPartitions>,
}

fn refuse(error: ErrorCode, message: String, member: &str) -> HeartbeatAnswer {
    HeartbeatAnswer {
        error,
        message: Some(message),
        member_id: member.to_string(),
        member_epoch: -1,
        assignment: None,
    }
}

fn pairs(tp: &TopicPartitions) -> BTreeSet<(uuid::Uuid, i32)> {
    tp.iter()
        .flat_map(|(id, ps)| ps.iter().map(move |p| (*id, *p)))
        .collect()
}

fn from_pairs(set: &BTreeSet<(uuid::Uuid, i32)>) -> TopicPartitions {
    let mut out = TopicPartitions::new();
    for (id, p) in set {
        out.entry(*id).or_default().push(*p);
    }
    out
}

impl ConsumerGroup {
    /// A new, empty group.
    pub fn new(id: &str) -> Self {
        Self {
            id: id.to_string(),
            ..Default::default()
        }
    }

    /// Kafka's name for the group's state.
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.epoch > self.assignment_epoch {
            "Assigning"
        } else if self.members.iter().any(|(id, m)| {
            m.epoch != self.assignment_epoch
                || !m.pending.is_empty()
                || pairs(&m.assigned) != self.target.get(id).map(pairs).unwrap_or_default()
        }) {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// Every topic a member subscribes to.
    pub fn subscribed(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.value.topics.iter().cloned())
            .collect()
    }

    fn hash_topics(&self, topics: Topics<'_>) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for t in self.subscribed() {
            t.hash(&mut h);
            if let Some(m) = topics(&t) {
                (m.id, m.partitions).hash(&mut h);
            }
        }
        h.finish()
    }

    fn bump(&mut self, out: &mut Out) {
        self.epoch += 1;
        out.record(
            &Key::ConsumerGroup(self.id.clone()),
            Some(consumer_records::encode_group_epoch(self.epoch)),
        );
    }

    fn member_record(&self, id: &str, out: &mut Out) {
        if let Some(m) = self.members.get(id) {
            let key = Key::ConsumerMember {
                group: self.id.clone(),
                member: id.to_string(),
            };
            out.record(&key, Some(consumer_records::encode_member(&m.value)));
        }
    }

    fn assignment_record(&self, id: &str, out: &mut Out) {
        if let Some(m) = self.members.get(id) {
            let v = AssignmentValue {
                member_epoch: m.epoch,
                previous_member_epoch: m.previous_epoch,
                state: if !m.pending.is_empty() { 1 } else { 0 },
                assigned: m.assigned.clone(),
                pending_revocation: m.pending.clone(),
            };
            let key = Key::ConsumerAssignment {
                group: self.id.clone(),
                member: id.to_string(),
            };
            out.record(&key, Some(consumer_records::encode_assignment(&v)));
        }
    }

    /// Removes a member and its records; the group epoch moves.
    pub fn remove(&mut self, id: &str, out: &mut Out) {
        if self.members.remove(id).is_none() {
            return;
        }
        self.target.remove(id);
        let (group, member) = (self.id.clone(), id.to_string());
        out.record(
            &Key::ConsumerAssignment {
                group: group.clone(),
                member: member.clone(),
            },
            None,
        );
        out.record(&Key::ConsumerMember { group, member }, None);
        self.bump(out);
    }

    /// Handles a heartbeat; `new_id` names a member that joins without an id.
    pub fn heartbeat(
        &mut self,
        now: i64,
        req: Heartbeat,
        topics: Topics<'_>,
        max_size: usize,
        new_id: String,
        out: &mut Out,
    ) -> HeartbeatAnswer {
        let joining = req.member_epoch == 0;
        let id = if joining && req.member_id.is_empty() {
            new_id
        } else {
            req.member_id.clone()
        };
        if req.member_epoch < 0 {
            if !self.members.contains_key(&id) {
                return refuse(
                    ErrorCode::UNKNOWN_MEMBER_ID,
                    format!("member {id} is not in group {}", self.id),
                    &id,
                );
            }
            self.remove(&id, out);
            return HeartbeatAnswer {
                member_id: id,
                member_epoch: req.member_epoch,
                ..Default::default()
            };
        }
        let mut changed = false;
        if joining {
            if !req.topics_sent {
                return refuse(
                    ErrorCode::INVALID_REQUEST,
                    "SubscribedTopicNames must be set when joining".into(),
                    &id,
                );
            }
            if req.value.rebalance_timeout_ms <= 0 {
                return refuse(
                    ErrorCode::INVALID_REQUEST,
                    "RebalanceTimeoutMs must be above 0 when joining".into(),
                    &id,
                );
            }
            if !self.members.contains_key(&id) && self.members.len() >= max_size {
                return refuse(
                    ErrorCode::GROUP_MAX_SIZE_REACHED,
                    format!("group {} has {max_size} members, its group.max.size", self.id),
                    &id,
                );
            }
            let m = self.members.entry(id.clone()).or_default();
            // A member that joins again lost whatever it had.
            m.assigned.clear();
            m.pending.clear();
            m.sent = None;
            m.value = req.value.clone();
            changed = true;
        } else {
            let Some(m) = self.members.get_mut(&id) else {
                return refuse(
                    ErrorCode::UNKNOWN_MEMBER_ID,
                    format!("member {id} is not in group {}", self.id),
                    &id,
                );
            };
            if req.member_epoch != m.epoch {
                let lost_answer = req.member_epoch == m.previous_epoch
                    && req
                        .owned
                        .as_ref()
                        .is_none_or(|o| pairs(o).is_subset(&pairs(&m.assigned)));
                if !lost_answer {
                    return refuse(
                        ErrorCode::FENCED_MEMBER_EPOCH,
                        format!("member {id} sent epoch {}, its epoch is {}", req.member_epoch, m.epoch),
                        &id,
                    );
                }
            }
            if req.topics_sent && req.value.topics != m.value.topics {
                m.value.topics = req.value.topics.clone();
                changed = true;
            }
        }
        if let Some(m) = self.members.get_mut(&id) {
            m.session_deadline = now + SESSION_TIMEOUT_MS;
        }
        if changed {
            self.member_record(&id, out);
            self.bump(out);
        }
        let hash = self.hash_topics(topics);
        if hash != self.topics_hash {
            self.topics_hash = hash;
            if !changed {
                self.bump(out);
            }
        }
        if self.epoch > self.assignment_epoch {
            let subs: BTreeMap<String, Vec<String>> = self
                .members
                .iter()
                .map(|(k, m)| (k.clone(), m.value.topics.clone()))
                .collect();
            let name = req.value.server_assignor.as_deref().unwrap_or(assignor::ASSIGNORS[0]);
            self.target = assignor::assign(name, &subs, topics);
            self.assignment_epoch = self.epoch;
        }
        self.reconcile(&id, now, req.owned.as_ref(), out);
        let m = &self.members[&id];
        let assignment = (joining || m.sent.as_ref() != Some(&m.assigned)).then(|| m.assigned.clone());
        let epoch = m.epoch;
        if let Some(m) = self.members.get_mut(&id) {
            m.sent = Some(m.assigned.clone());
        }
        HeartbeatAnswer {
            error: ErrorCode::NONE,
            message: None,
            member_id: id,
            member_epoch: epoch,
            assignment,
        }
    }

    /// Moves a member towards its target: revoke first, then add what no one else holds.
    fn reconcile(&mut self, id: &str, now: i64, owned: Option<&TopicPartitions>, out: &mut Out) {
        let target = self.target.get(id).map(pairs).unwrap_or_default();
        let others: BTreeSet<(uuid::Uuid, i32)> = self
            .members
            .iter()
            .filter(|(k, _)| k.as_str() != id)
            .flat_map(|(_, m)| pairs(&m.assigned).into_iter().chain(pairs(&m.pending)))
            .collect();
        let assignment_epoch = self.assignment_epoch;
        let Some(m) = self.members.get_mut(id) else { return };
        let mut changed = false;
        if !m.pending.is_empty() {
            // Only the member's own word that it let go frees a partition.
            let released = owned.is_some_and(|o| pairs(o).is_disjoint(&pairs(&m.pending)));
            if !released {
                return;
            }
            m.pending.clear();
            m.revocation_deadline = None;
            changed = true;
        }
        let assigned = pairs(&m.assigned);
        let revoke: BTreeSet<_> = assigned.difference(&target).copied().collect();
        if !revoke.is_empty() {
            m.assigned = from_pairs(&assigned.intersection(&target).copied().collect());
            m.pending = from_pairs(&revoke);
            m.revocation_deadline = Some(now + i64::from(m.value.rebalance_timeout_ms.max(1)));
            changed = true;
        } else {
            let add: BTreeSet<_> = target
                .difference(&assigned)
                .filter(|tp| !others.contains(tp))
                .copied()
                .collect();
            if !add.is_empty() {
                m.assigned = from_pairs(&assigned.union(&add).copied().collect());
                changed = true;
            }
            if m.epoch != assignment_epoch {
                m.previous_epoch = m.epoch;
                m.epoch = assignment_epoch;
                changed = true;
            }
        }
        if changed {
            self.assignment_record(id, out);
        }
    }

    /// Ends the members whose session ended or who kept partitions past their rebalance timeout.
    pub fn tick(&mut self, now: i64, out: &mut Out) {
        let gone: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| m.session_deadline <= now || m.revocation_deadline.is_some_and(|d| d <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for id in gone {
            self.remove(&id, out);
        }
    }

    /// Replays one of the group's records; members' sessions start at `now`.
    pub fn replay(&mut self, key: &Key, value: Option<&[u8]>, now: i64) -> Result<(), super::records::RecordError> {
        match (key, value) {
            (Key::ConsumerGroup(_), Some(v)) => self.epoch = consumer_records::decode_group_epoch(v)?,
            (Key::ConsumerMember { member, .. }, Some(v)) => {
                let m = self.members.entry(member.clone()).or_default();
                m.value = consumer_records::decode_member(v)?;
                m.session_deadline = now + SESSION_TIMEOUT_MS;
            }
            (Key::ConsumerAssignment { member, .. }, Some(v)) => {
                let a = consumer_records::decode_assignment(v)?;
                let m = self.members.entry(member.clone()).or_default();
                m.epoch = a.member_epoch;
                m.previous_epoch = a.previous_member_epoch;
                m.assigned = a.assigned;
                m.pending = a.pending_revocation;
                m.session_deadline = now + SESSION_TIMEOUT_MS;
                if !m.pending.is_empty() {
                    m.revocation_deadline = Some(now + i64::from(m.value.rebalance_timeout_ms.max(1)));
                }
            }
            (Key::ConsumerMember { member, .. }, None) | (Key::ConsumerAssignment { member, .. }, None) => {
                self.members.remove(member);
            }
            _ => {}
        }
        // The target is computed again at the next heartbeat.
        self.assignment_epoch = 0;
        Ok(())
    }

    /// Checks an offset commit of `member` at `epoch`.
    pub fn may_commit(&mut self, member: &str, epoch: i32, now: i64) -> Result<(), ErrorCode> {
        if member.is_empty() && epoch < 0 {
            return if self.members.is_empty() {
                Ok(())
            } else {
                Err(ErrorCode::UNKNOWN_MEMBER_ID)
            };
        }
        let m = self.members.get_mut(member).ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?;
        if epoch != m.epoch && epoch != m.previous_epoch {
            return Err(ErrorCode::STALE_MEMBER_EPOCH);
        }
        m.session_deadline = m.session_deadline.max(now);
        Ok(())
    }

    /// Asserts that no partition is held by two members.
    pub fn check(&self) {
        let mut seen = BTreeSet::new();
        for m in self.members.values() {
            for tp in pairs(&m.assigned).into_iter().chain(pairs(&m.pending)) {
                debug_assert!(seen.insert(tp), "partition {tp:?} held by two members of {}", self.id);
            }
        }
    }
}
