//! The shard's KIP-848 consumer groups: ConsumerGroupHeartbeat and ConsumerGroupDescribe. A
//! group id names either a classic group or a consumer group; an empty classic group (offsets
//! only) becomes a consumer group when a consumer joins it, as Kafka upgrades one.

use proto::errors::ErrorCode;

use super::assignor::{Topics, ASSIGNORS};
use super::consumer::{ConsumerGroup, Heartbeat, HeartbeatAnswer};
use super::group::{GroupState, Out};
use super::records::Key;
use super::shard::Shard;

impl Shard {
    /// Handles a ConsumerGroupHeartbeat; `topics` finds the cluster's topics by name.
    pub fn consumer_heartbeat(
        &mut self,
        group: &str,
        now: i64,
        req: Heartbeat,
        topics: Topics<'_>,
        new_id: String,
    ) -> (HeartbeatAnswer, Out) {
        let mut out = Out::default();
        let refuse = |error, message: String| HeartbeatAnswer {
            error,
            message: Some(message),
            member_id: req.member_id.clone(),
            member_epoch: -1,
            assignment: None,
        };
        if group.is_empty() {
            return (refuse(ErrorCode::INVALID_GROUP_ID, "the group id is empty".into()), out);
        }
        if let Some(a) = req.value.server_assignor.as_deref().filter(|a| !ASSIGNORS.contains(a)) {
            let why = format!("server assignor {a:?} is not one of {ASSIGNORS:?}");
            return (refuse(ErrorCode::UNSUPPORTED_ASSIGNOR, why), out);
        }
        if let Some(classic) = self.groups.get(group) {
            if classic.state != GroupState::Empty {
                let why = format!("group {group} is a classic group with members");
                return (refuse(ErrorCode::GROUP_ID_NOT_FOUND, why), out);
            }
            if classic.generation > 0 || classic.protocol_type.is_some() {
                out.record(&Key::Group(group.to_string()), None);
            }
            self.groups.remove(group);
        }
        if !self.consumer_groups.contains_key(group) {
            if req.member_epoch != 0 {
                let why = format!("group {group} has no member {}", req.member_id);
                return (refuse(ErrorCode::UNKNOWN_MEMBER_ID, why), out);
            }
            if self.group_count() >= self.cfg.max_groups_per_partition {
                let why = format!(
                    "this coordinator holds {} groups, its limit",
                    self.cfg.max_groups_per_partition
                );
                return (refuse(ErrorCode::GROUP_MAX_SIZE_REACHED, why), out);
            }
        }
        let max = self.cfg.max_size;
        let g = self
            .consumer_groups
            .entry(group.to_string())
            .or_insert_with(|| ConsumerGroup::new(group));
        let answer = g.heartbeat(now, req, topics, max, new_id, &mut out);
        g.check();
        // A refused first join leaves no group behind.
        if g.epoch == 0 && g.members.is_empty() {
            self.consumer_groups.remove(group);
        }
        (answer, out)
    }

    /// A consumer group, if `group` is one.
    pub fn consumer_group(&self, group: &str) -> Option<&ConsumerGroup> {
        self.consumer_groups.get(group)
    }
}
