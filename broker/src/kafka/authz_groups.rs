//! ACL checks on the group and offset APIs, as Kafka's handlers make them: READ on the group
//! to join, sync, heartbeat, leave and commit; DESCRIBE to find its coordinator, fetch its
//! offsets and describe it; DELETE to delete it or its offsets; READ on each topic committed,
//! DESCRIBE on each topic whose offsets are fetched. A group the principal may not touch
//! answers GROUP_AUTHORIZATION_FAILED; ListGroups lists only the groups it may describe
//! (every group with DESCRIBE on the cluster).

use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::{
    ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest, DescribeGroupsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchResponse,
    TopicName,
};
use proto::acl::{Operation, ResourceType};
use proto::errors::ErrorCode;

use super::apis::wire;
use super::authz::Who;

/// GROUP_AUTHORIZATION_FAILED on the wire.
pub(super) fn group_refused() -> i16 {
    wire(ErrorCode::GROUP_AUTHORIZATION_FAILED)
}

/// FindCoordinator: a group key needs DESCRIBE on the group, a transaction key DESCRIBE on the
/// transactional id; the answer for a key refused names no coordinator.
pub(super) fn find_coordinator(who: &Who<'_>, req: &FindCoordinatorRequest, answer: &mut FindCoordinatorResponse) {
    if !who.checked() {
        return;
    }
    let allowed = |key: &str| match req.key_type {
        0 => who.group(Operation::Describe, key),
        _ => who.may(Operation::Describe, ResourceType::TransactionalId, key),
    };
    let code = if req.key_type == 0 {
        ErrorCode::GROUP_AUTHORIZATION_FAILED
    } else {
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    };
    if answer.coordinators.is_empty() {
        if !allowed(&req.key) {
            answer.error_code = wire(code);
            answer.error_message = None;
            answer.node_id = kafka_protocol::messages::BrokerId(-1);
            answer.host = Default::default();
            answer.port = -1;
        }
        return;
    }
    for c in &mut answer.coordinators {
        if !allowed(&c.key) {
            c.error_code = wire(code);
            c.error_message = None;
            c.node_id = kafka_protocol::messages::BrokerId(-1);
            c.host = Default::default();
            c.port = -1;
        }
    }
}

/// OffsetCommit: every partition refused when the group is; else the topics the principal may
/// not read, taken out of the request.
pub(super) fn offset_commit(
    who: &Who<'_>,
    req: &mut OffsetCommitRequest,
) -> Result<Vec<OffsetCommitResponseTopic>, OffsetCommitResponse> {
    if !who.checked() {
        return Ok(Vec::new());
    }
    let answer = |topics: Vec<(TopicName, Vec<i32>)>, code: ErrorCode| {
        topics
            .into_iter()
            .map(|(name, partitions)| {
                let mut t = OffsetCommitResponseTopic::default();
                t.name = name;
                t.partitions = partitions
                    .into_iter()
                    .map(|partition_index| {
                        let mut p = OffsetCommitResponsePartition::default();
                        p.partition_index = partition_index;
                        p.error_code = wire(code);
                        p
                    })
                    .collect();
                t
            })
            .collect::<Vec<_>>()
    };
    let of = |t: &kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic| {
        (t.name.clone(), t.partitions.iter().map(|p| p.partition_index).collect())
    };
    if !who.group(Operation::Read, &req.group_id.0) {
        let mut r = OffsetCommitResponse::default();
        r.topics = answer(
            req.topics.iter().map(of).collect(),
            ErrorCode::GROUP_AUTHORIZATION_FAILED,
        );
        return Err(r);
    }
    let mut denied = Vec::new();
    req.topics.retain(|t| {
        let ok = who.topic(Operation::Read, &t.name.0);
        if !ok {
            denied.push(of(t));
        }
        ok
    });
    Ok(answer(denied, ErrorCode::TOPIC_AUTHORIZATION_FAILED))
}

/// OffsetFetch's answer, checked: a group the principal may not describe answers
/// GROUP_AUTHORIZATION_FAILED with no offsets; topics it may not describe are left out.
pub(super) fn offset_fetch(who: &Who<'_>, single_group: &str, answer: &mut OffsetFetchResponse) {
    if !who.checked() {
        return;
    }
    if answer.groups.is_empty() {
        if !who.group(Operation::Describe, single_group) {
            answer.error_code = group_refused();
            answer.topics.clear();
            return;
        }
        answer.topics.retain(|t| who.topic(Operation::Describe, &t.name.0));
        return;
    }
    for g in &mut answer.groups {
        if !who.group(Operation::Describe, &g.group_id.0) {
            g.error_code = group_refused();
            g.topics.clear();
            continue;
        }
        g.topics.retain(|t| who.topic(Operation::Describe, &t.name.0));
    }
}

/// ListGroups' answer: every group with DESCRIBE on the cluster, else those the principal may
/// describe.
pub(super) fn list_groups(who: &Who<'_>, answer: &mut ListGroupsResponse) {
    if !who.checked() || who.cluster(Operation::Describe) {
        return;
    }
    answer.groups.retain(|g| who.group(Operation::Describe, &g.group_id.0));
}

/// DescribeGroups' answer: a group the principal may not describe says only that.
pub(super) fn describe_groups(who: &Who<'_>, answer: &mut DescribeGroupsResponse) {
    if !who.checked() {
        return;
    }
    for g in &mut answer.groups {
        if !who.group(Operation::Describe, &g.group_id.0) {
            let id = g.group_id.clone();
            *g = Default::default();
            g.group_id = id;
            g.error_code = group_refused();
        }
    }
}

/// ConsumerGroupDescribe's answer, checked as DescribeGroups'.
pub(super) fn consumer_group_describe(who: &Who<'_>, answer: &mut ConsumerGroupDescribeResponse) {
    if !who.checked() {
        return;
    }
    for g in &mut answer.groups {
        if !who.group(Operation::Describe, &g.group_id.0) {
            let id = g.group_id.clone();
            *g = Default::default();
            g.group_id = id;
            g.error_code = group_refused();
        }
    }
}

/// ConsumerGroupHeartbeat's subscribed topics the principal may not describe (Kafka answers the
/// heartbeat TOPIC_AUTHORIZATION_FAILED when there is any, so a member cannot learn of topics
/// through the group's assignment).
pub(super) fn undescribable_subscriptions(who: &Who<'_>, req: &ConsumerGroupHeartbeatRequest) -> Vec<String> {
    if !who.checked() {
        return Vec::new();
    }
    let mut refused: Vec<String> = req
        .subscribed_topic_names
        .iter()
        .flatten()
        .map(|t| t.0.to_string())
        .filter(|t| !who.topic(Operation::Describe, t))
        .collect();
    refused.sort();
    refused.dedup();
    refused
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::view::SecurityView;
    use crate::auth::ListenerSecurity;
    use kafka_protocol::messages::TopicName;
    use proto::acl::{AccessControlEntry, Permission, ResourcePattern};

    #[test]
    fn a_heartbeat_subscribing_to_a_topic_it_may_not_describe_is_refused_by_name() {
        let view = SecurityView::new(ListenerSecurity {
            authorizer: true,
            ..Default::default()
        });
        let key = proto::acl::key_of(&ResourcePattern::literal(ResourceType::Topic, "t1"));
        let value = proto::acl::encode_acls(&[AccessControlEntry::new(
            "User:bob",
            "*",
            Operation::Read,
            Permission::Allow,
        )]);
        view.apply_acls(true, std::iter::once((key.as_str(), Some(value.as_slice()))));
        let dir = tempfile::tempdir().unwrap();
        let core =
            crate::replica_manager::BrokerCore::open(1, vec![dir.path().to_path_buf()], Default::default()).unwrap();
        let who = Who::new(&view, &core, "User:bob".into(), "127.0.0.1");
        let heartbeat = |topics: &[&str]| {
            let mut req = ConsumerGroupHeartbeatRequest::default();
            req.subscribed_topic_names = Some(topics.iter().map(|t| TopicName(t.to_string().into())).collect());
            req
        };
        // READ implies DESCRIBE on t1; t2 has no ACL.
        assert!(undescribable_subscriptions(&who, &heartbeat(&["t1"])).is_empty());
        assert_eq!(
            undescribable_subscriptions(&who, &heartbeat(&["t1", "t2", "t2"])),
            ["t2"]
        );
        assert!(undescribable_subscriptions(&who, &ConsumerGroupHeartbeatRequest::default()).is_empty());
    }
}
