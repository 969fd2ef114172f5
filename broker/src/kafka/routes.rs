//! The routes of the requests that go to a part of the broker other than the data path: group
//! and offset requests to the coordinator, admin requests to the controller.

use bytes::Bytes;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterPartitionReassignmentsRequest, ApiKey, ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest, CreatePartitionsRequest, CreateTopicsRequest, DeleteGroupsRequest,
    DeleteTopicsRequest, DescribeConfigsRequest, DescribeGroupsRequest, ElectLeadersRequest, HeartbeatRequest,
    IncrementalAlterConfigsRequest, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest,
    ListPartitionReassignmentsRequest, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest, SyncGroupRequest,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest,
    DescribeUserScramCredentialsRequest,
};
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatResponse, HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, OffsetDeleteResponse,
    SyncGroupResponse,
};
use kafka_protocol::protocol::Decodable;
use proto::acl::Operation;

use super::authz::Who;
use super::authz_groups as az;
use super::connection::ConnError;
use super::{
    acls, admin, client_quotas, configs, consumer_groups, groups, malformed, offsets, partitions, respond,
    scram_credentials,
};
use crate::controller_channels::ControllerChannels;
use crate::replica_manager::BrokerCore;

/// Decodes a group or offset request, checks the principal's ACLs (`authz_groups`), has the
/// coordinator carry it out, and encodes the answer.
#[allow(clippy::too_many_arguments)]
pub(super) async fn group_api(
    api: ApiKey,
    version: i16,
    c: i32,
    core: &BrokerCore,
    g: &groups::Groups,
    frame: &mut Bytes,
    who: &Who<'_>,
    host: &str,
    client: &str,
) -> Result<Bytes, ConnError> {
    let refused = az::group_refused();
    match api {
        ApiKey::JoinGroup => {
            let req = JoinGroupRequest::decode(frame, version).map_err(malformed)?;
            if !who.group(Operation::Read, &req.group_id.0) {
                let mut r = JoinGroupResponse::default();
                r.error_code = refused;
                r.generation_id = -1;
                return respond(api, version, c, &r);
            }
            let answer = groups::join_group(g, req, version, host, client).await;
            respond(api, version, c, &answer)
        }
        ApiKey::SyncGroup => {
            let req = SyncGroupRequest::decode(frame, version).map_err(malformed)?;
            if !who.group(Operation::Read, &req.group_id.0) {
                let mut r = SyncGroupResponse::default();
                r.error_code = refused;
                return respond(api, version, c, &r);
            }
            respond(api, version, c, &groups::sync_group(g, req, version).await)
        }
        ApiKey::Heartbeat => {
            let req = HeartbeatRequest::decode(frame, version).map_err(malformed)?;
            if !who.group(Operation::Read, &req.group_id.0) {
                let mut r = HeartbeatResponse::default();
                r.error_code = refused;
                return respond(api, version, c, &r);
            }
            respond(api, version, c, &groups::heartbeat(g, req).await)
        }
        ApiKey::LeaveGroup => {
            let req = LeaveGroupRequest::decode(frame, version).map_err(malformed)?;
            if !who.group(Operation::Read, &req.group_id.0) {
                let mut r = LeaveGroupResponse::default();
                r.error_code = refused;
                return respond(api, version, c, &r);
            }
            respond(api, version, c, &groups::leave_group(g, req, version).await)
        }
        ApiKey::OffsetCommit => {
            let mut req = OffsetCommitRequest::decode(frame, version).map_err(malformed)?;
            let denied = match az::offset_commit(who, &mut req) {
                Ok(d) => d,
                Err(r) => return respond(api, version, c, &r),
            };
            let mut answer = offsets::offset_commit(g, req).await;
            answer.topics.extend(denied);
            respond(api, version, c, &answer)
        }
        ApiKey::OffsetFetch => {
            let req = OffsetFetchRequest::decode(frame, version).map_err(malformed)?;
            let single = req.group_id.0.to_string();
            let mut answer = offsets::offset_fetch(g, req, version).await;
            az::offset_fetch(who, &single, &mut answer);
            respond(api, version, c, &answer)
        }
        ApiKey::ListGroups => {
            let req = ListGroupsRequest::decode(frame, version).map_err(malformed)?;
            let mut answer = groups::list_groups(g, req, version).await;
            az::list_groups(who, &mut answer);
            respond(api, version, c, &answer)
        }
        ApiKey::DescribeGroups => {
            let req = DescribeGroupsRequest::decode(frame, version).map_err(malformed)?;
            let mut answer = groups::describe_groups(g, req, version).await;
            az::describe_groups(who, &mut answer);
            respond(api, version, c, &answer)
        }
        ApiKey::DeleteGroups => {
            let mut req = DeleteGroupsRequest::decode(frame, version).map_err(malformed)?;
            let mut denied = Vec::new();
            req.groups_names.retain(|n| {
                let ok = who.group(Operation::Delete, n);
                if !ok {
                    denied.push(n.clone());
                }
                ok
            });
            let mut answer = groups::delete_groups(g, req).await;
            answer.results.extend(denied.into_iter().map(|group_id| {
                let mut r = DeletableGroupResult::default();
                r.group_id = group_id;
                r.error_code = refused;
                r
            }));
            respond(api, version, c, &answer)
        }
        ApiKey::ConsumerGroupHeartbeat => {
            let req = ConsumerGroupHeartbeatRequest::decode(frame, version).map_err(malformed)?;
            if !who.group(Operation::Read, &req.group_id.0) {
                let mut r = ConsumerGroupHeartbeatResponse::default();
                r.error_code = refused;
                r.member_epoch = -1;
                return respond(api, version, c, &r);
            }
            let hidden = az::undescribable_subscriptions(who, &req);
            if !hidden.is_empty() {
                let mut r = ConsumerGroupHeartbeatResponse::default();
                r.error_code = super::apis::wire(proto::errors::ErrorCode::TOPIC_AUTHORIZATION_FAILED);
                r.error_message = Some(format!("not authorized to describe the subscribed topics {hidden:?}").into());
                r.member_epoch = -1;
                return respond(api, version, c, &r);
            }
            let answer = consumer_groups::heartbeat(g, core, req, host, client).await;
            respond(api, version, c, &answer)
        }
        ApiKey::ConsumerGroupDescribe => {
            let req = ConsumerGroupDescribeRequest::decode(frame, version).map_err(malformed)?;
            let mut answer = consumer_groups::describe(g, core, req).await;
            az::consumer_group_describe(who, &mut answer);
            respond(api, version, c, &answer)
        }
        _ => {
            let req = OffsetDeleteRequest::decode(frame, version).map_err(malformed)?;
            if !who.group(Operation::Delete, &req.group_id.0) {
                let mut r = OffsetDeleteResponse::default();
                r.error_code = refused;
                return respond(api, version, c, &r);
            }
            respond(api, version, c, &offsets::offset_delete(g, req).await)
        }
    }
}

/// Decodes an admin request, has the controller carry it out, and encodes the answer.
pub(super) async fn forward(
    api: ApiKey,
    version: i16,
    c: i32,
    ch: &ControllerChannels,
    core: &BrokerCore,
    frame: &mut Bytes,
) -> Result<Bytes, ConnError> {
    match api {
        ApiKey::CreateTopics => {
            let req = CreateTopicsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &admin::create_topics(ch, req, version).await)
        }
        ApiKey::DeleteTopics => {
            let req = DeleteTopicsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &admin::delete_topics(ch, req).await)
        }
        ApiKey::DescribeConfigs => {
            let req = DescribeConfigsRequest::decode(frame, version).map_err(malformed)?;
            respond(
                api,
                version,
                c,
                &configs::describe_configs(ch, core, req, version).await,
            )
        }
        ApiKey::IncrementalAlterConfigs => {
            let req = IncrementalAlterConfigsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &configs::incremental_alter_configs(ch, req).await)
        }
        ApiKey::AlterConfigs => {
            let req = AlterConfigsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &configs::alter_configs(ch, req).await)
        }
        ApiKey::CreatePartitions => {
            let req = CreatePartitionsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &partitions::create_partitions(ch, req).await)
        }
        ApiKey::ElectLeaders => {
            let req = ElectLeadersRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &partitions::elect_leaders(ch, req, version).await)
        }
        ApiKey::AlterPartitionReassignments => {
            let req = AlterPartitionReassignmentsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &admin::alter_partition_reassignments(ch, req).await)
        }
        ApiKey::DescribeClientQuotas => {
            let req =
                kafka_protocol::messages::DescribeClientQuotasRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &client_quotas::describe(ch, req).await)
        }
        ApiKey::DescribeUserScramCredentials => {
            let req = DescribeUserScramCredentialsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &scram_credentials::describe(ch, req).await)
        }
        ApiKey::AlterUserScramCredentials => {
            let req = AlterUserScramCredentialsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &scram_credentials::alter(ch, req).await)
        }
        ApiKey::CreateAcls => {
            let req = CreateAclsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &acls::create(ch, req, version).await)
        }
        ApiKey::DescribeAcls => {
            let req = DescribeAclsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &acls::describe(ch, req, version).await)
        }
        ApiKey::DeleteAcls => {
            let req = DeleteAclsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &acls::delete(ch, req, version).await)
        }
        ApiKey::AlterClientQuotas => {
            let req = kafka_protocol::messages::AlterClientQuotasRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &client_quotas::alter(ch, req).await)
        }
        _ => {
            let req = ListPartitionReassignmentsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &admin::list_partition_reassignments(ch, req).await)
        }
    }
}
