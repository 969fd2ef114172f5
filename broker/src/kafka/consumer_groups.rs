//! The KIP-848 consumer-group APIs of the Kafka listener: ConsumerGroupHeartbeat and
//! ConsumerGroupDescribe, which Java consumers use with `group.protocol=consumer`.

use std::collections::HashMap;
use std::str::FromStr;

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as DescribedAssignment, DescribedGroup, Member, TopicPartitions as DescribedTopic,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use proto::cluster_view::ClusterView;
use proto::errors::ErrorCode;
use uuid::Uuid;

use super::apis::wire;
use super::groups::{on_shard, Groups};
use crate::coordinator::assignor::TopicMeta;
use crate::coordinator::consumer::{Heartbeat, HeartbeatAnswer, HEARTBEAT_INTERVAL_MS};
use crate::coordinator::consumer_records::{MemberValue, TopicPartitions as Owned};
use crate::coordinator::group::Out;
use crate::replica_manager::BrokerCore;

/// A topic of `view` as the assignors see it, unless it is being deleted.
fn topic(view: &ClusterView, name: &str) -> Option<TopicMeta> {
    let r = view.topics.get(name)?.record.as_ref().filter(|r| !r.deleting)?;
    let id = Uuid::from_str(&r.topic_id).ok()?;
    Some(TopicMeta {
        id,
        partitions: r.partitions,
    })
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// Answers ConsumerGroupHeartbeat.
pub async fn heartbeat(
    groups: &Groups,
    core: &BrokerCore,
    req: ConsumerGroupHeartbeatRequest,
    host: &str,
    client_id: &str,
) -> ConsumerGroupHeartbeatResponse {
    let group = req.group_id.0.to_string();
    let hb = Heartbeat {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        value: MemberValue {
            instance_id: req.instance_id.as_ref().map(|i| i.to_string()),
            rack_id: req.rack_id.as_ref().map(|r| r.to_string()),
            client_id: client_id.to_string(),
            client_host: host.to_string(),
            topics: req
                .subscribed_topic_names
                .as_ref()
                .map(|ts| ts.iter().map(|t| t.0.to_string()).collect())
                .unwrap_or_default(),
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            server_assignor: req.server_assignor.as_ref().map(|a| a.to_string()),
        },
        topics_sent: req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some(),
        owned: req.topic_partitions.as_ref().map(|tps| {
            tps.iter()
                .map(|t| (t.topic_id, t.partitions.clone()))
                .collect::<Owned>()
        }),
    };
    let mut regex_refused = None;
    if req.subscribed_topic_regex.is_some() {
        regex_refused = Some("subscriptions by regular expression are not served by Ferry yet".to_string());
    }
    let new_id = Uuid::new_v4().to_string();
    let answer = match regex_refused {
        Some(why) => HeartbeatAnswer {
            error: ErrorCode::INVALID_REQUEST,
            message: Some(why),
            member_epoch: -1,
            ..Default::default()
        },
        None => on_shard(&groups.runtime, &group, |st, now| {
            // Only the topics the group subscribes to are looked up, in the view as it is now.
            let view = core.view.read();
            st.shard
                .consumer_heartbeat(&group, now, hb, &|name| topic(&view, name), new_id)
        })
        .await
        .unwrap_or_else(|code| HeartbeatAnswer {
            error: code,
            member_epoch: -1,
            ..Default::default()
        }),
    };
    let mut r = ConsumerGroupHeartbeatResponse::default();
    r.error_code = wire(answer.error);
    r.error_message = answer.message.as_deref().map(s);
    r.member_id = (!answer.member_id.is_empty()).then(|| s(&answer.member_id));
    r.member_epoch = answer.member_epoch;
    r.heartbeat_interval_ms = HEARTBEAT_INTERVAL_MS;
    r.assignment = answer.assignment.map(|a| {
        let mut out = Assignment::default();
        out.topic_partitions = a
            .into_iter()
            .map(|(id, ps)| {
                let mut t = TopicPartitions::default();
                t.topic_id = id;
                t.partitions = ps;
                t
            })
            .collect();
        out
    });
    r
}

fn described(tp: &Owned, names: &HashMap<Uuid, String>) -> DescribedAssignment {
    let mut a = DescribedAssignment::default();
    a.topic_partitions = tp
        .iter()
        .map(|(id, ps)| {
            let mut t = DescribedTopic::default();
            t.topic_id = *id;
            t.topic_name = TopicName(s(names.get(id).map(String::as_str).unwrap_or("")));
            t.partitions = ps.clone();
            t
        })
        .collect();
    a
}

/// Answers ConsumerGroupDescribe; a classic group answers GROUP_ID_NOT_FOUND, as Kafka does, so
/// that the admin client asks DescribeGroups instead.
pub async fn describe(
    groups: &Groups,
    core: &BrokerCore,
    req: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let names: HashMap<Uuid, String> = {
        let view = core.view.read();
        view.topics
            .keys()
            .filter_map(|name| Some((topic(&view, name)?.id, name.clone())))
            .collect()
    };
    let mut r = ConsumerGroupDescribeResponse::default();
    for id in req.group_ids {
        let name = id.0.to_string();
        let found = on_shard(&groups.runtime, &name, |st, _| {
            let d = st.shard.consumer_group(&name).map(|g| {
                let mut out = DescribedGroup::default();
                out.group_state = s(g.state());
                out.group_epoch = g.epoch;
                out.assignment_epoch = g.assignment_epoch;
                out.assignor_name = s(crate::coordinator::assignor::ASSIGNORS[0]);
                out.members = g
                    .members
                    .iter()
                    .map(|(mid, m)| {
                        let mut o = Member::default();
                        o.member_id = s(mid);
                        o.instance_id = m.value.instance_id.as_deref().map(s);
                        o.rack_id = m.value.rack_id.as_deref().map(s);
                        o.member_epoch = m.epoch;
                        o.client_id = s(&m.value.client_id);
                        o.client_host = s(&m.value.client_host);
                        o.subscribed_topic_names = m.value.topics.iter().map(|t| TopicName(s(t))).collect();
                        o.assignment = described(&m.assigned, &names);
                        o.target_assignment = described(g.target.get(mid).unwrap_or(&Owned::new()), &names);
                        o
                    })
                    .collect();
                out
            });
            (d, Out::default())
        })
        .await;
        let mut g = match found {
            Ok(Some(g)) => g,
            Ok(None) => {
                let mut g = DescribedGroup::default();
                g.error_code = wire(ErrorCode::GROUP_ID_NOT_FOUND);
                g.error_message = Some(s(&format!("group {name} is not a consumer group")));
                g
            }
            Err(code) => {
                let mut g = DescribedGroup::default();
                g.error_code = wire(code);
                g
            }
        };
        g.group_id = id;
        r.groups.push(g);
    }
    r
}
