//! ACL checks on the admin APIs that name topics or config resources: CREATE (on the cluster
//! or the topic) to create topics, DELETE to delete topics or records, ALTER to add partitions,
//! DESCRIBE_CONFIGS and ALTER_CONFIGS on each topic or broker resource. Ferry refuses such a
//! request whole when any item in it is refused (each item answers its own authorization
//! code), where Kafka would carry out the others: a request half done by permission is harder
//! for an operator to reason about than one refused.

use std::str::FromStr;

use bytes::Bytes;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse as IncrementalResult;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, ApiKey, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteRecordsRequest, DeleteRecordsResponse, DeleteTopicsRequest, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use proto::acl::Operation;
use proto::cluster_view::ClusterView;
use proto::errors::ErrorCode;

use super::apis::wire;
use super::authz::Who;
use super::connection::ConnError;
use super::{malformed, refusals, respond};

/// Kafka's config resource type of a topic.
const TOPIC: i8 = 2;

/// The answer of a request the principal may not make whole, or `None` to go on.
pub(super) fn check(
    who: &Who<'_>,
    api: ApiKey,
    version: i16,
    c: i32,
    frame: &Bytes,
    view: &ClusterView,
) -> Option<Result<Bytes, ConnError>> {
    if !who.checked() {
        return None;
    }
    // Decoded from a copy: the handler decodes the frame again when the request goes on.
    let mut copy = frame.clone();
    let r = match api {
        ApiKey::CreateTopics => topics(
            who,
            api,
            Operation::Create,
            &mut copy,
            version,
            |req: CreateTopicsRequest| req.topics.into_iter().map(|t| t.name.0.to_string()).collect(),
        ),
        ApiKey::DeleteTopics => topics(
            who,
            api,
            Operation::Delete,
            &mut copy,
            version,
            |req: DeleteTopicsRequest| {
                let by_id = req.topics.into_iter().map(|t| match t.name {
                    Some(n) => n.0.to_string(),
                    None => name_of_id(view, t.topic_id),
                });
                req.topic_names
                    .into_iter()
                    .map(|n| n.0.to_string())
                    .chain(by_id)
                    .collect()
            },
        ),
        ApiKey::CreatePartitions => topics(
            who,
            api,
            Operation::Alter,
            &mut copy,
            version,
            |req: CreatePartitionsRequest| req.topics.into_iter().map(|t| t.name.0.to_string()).collect(),
        ),
        ApiKey::DeleteRecords => return delete_records(who, version, c, &mut copy),
        ApiKey::DescribeConfigs => return describe_configs(who, version, c, &mut copy),
        ApiKey::AlterConfigs => return alter_configs(who, version, c, &mut copy),
        ApiKey::IncrementalAlterConfigs => return incremental_alter_configs(who, version, c, &mut copy),
        _ => return None,
    };
    match r {
        Ok(true) => None,
        Ok(false) => {
            let why = format!("{} may not {} every topic named", who.principal, op_of(api));
            let mut frame = frame.clone();
            refusals::cluster_refused(api, version, c, &mut frame, &why)
        }
        Err(e) => Some(Err(e)),
    }
}

fn op_of(api: ApiKey) -> Operation {
    match api {
        ApiKey::CreateTopics => Operation::Create,
        ApiKey::CreatePartitions => Operation::Alter,
        _ => Operation::Delete,
    }
}

/// The name of the topic with `id`, or the id itself (an ACL on no topic matches it).
fn name_of_id(view: &ClusterView, id: uuid::Uuid) -> String {
    view.topics
        .iter()
        .find(|(_, e)| e.record.as_ref().and_then(|r| uuid::Uuid::from_str(&r.topic_id).ok()) == Some(id))
        .map_or_else(|| id.to_string(), |(n, _)| n.clone())
}

/// Whether the principal may do `op` on every topic the request names.
fn topics<R: Decodable>(
    who: &Who<'_>,
    api: ApiKey,
    op: Operation,
    frame: &mut Bytes,
    version: i16,
    names: impl FnOnce(R) -> Vec<String>,
) -> Result<bool, ConnError> {
    let req = R::decode(frame, version).map_err(malformed)?;
    let names = names(req);
    let denied = super::authz::admin_topics(who, api, op, names.iter().map(String::as_str));
    Ok(denied.is_empty())
}

fn delete_records(who: &Who<'_>, version: i16, c: i32, frame: &mut Bytes) -> Option<Result<Bytes, ConnError>> {
    let req = match DeleteRecordsRequest::decode(frame, version) {
        Ok(r) => r,
        Err(e) => return Some(Err(malformed(e))),
    };
    let names = req.topics.iter().map(|t| t.name.0.as_str());
    if super::authz::admin_topics(who, ApiKey::DeleteRecords, Operation::Delete, names).is_empty() {
        return None;
    }
    let mut r = DeleteRecordsResponse::default();
    r.topics = req
        .topics
        .into_iter()
        .map(|t| {
            let mut out = DeleteRecordsTopicResult::default();
            out.name = t.name;
            out.partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let mut pr = DeleteRecordsPartitionResult::default();
                    pr.partition_index = p.partition_index;
                    pr.low_watermark = -1;
                    pr.error_code = wire(ErrorCode::TOPIC_AUTHORIZATION_FAILED);
                    pr
                })
                .collect();
            out
        })
        .collect();
    Some(respond(ApiKey::DeleteRecords, version, c, &r))
}

/// Whether the principal may do `op` on a config resource; the code it answers if not.
fn resource(who: &Who<'_>, api: ApiKey, op: Operation, rtype: i8, name: &str) -> Result<(), ErrorCode> {
    let (ok, code, shown) = if rtype == TOPIC {
        (
            who.topic(op, name),
            ErrorCode::TOPIC_AUTHORIZATION_FAILED,
            format!("Topic:{name}"),
        )
    } else {
        (
            who.cluster(op),
            ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
            "Cluster:kafka-cluster".to_string(),
        )
    };
    if op != Operation::DescribeConfigs {
        who.audit(api, op, &shown, ok);
    }
    if ok {
        Ok(())
    } else {
        Err(code)
    }
}

/// One config resource's answer in a refused request: its type, name, code and message.
type Refused = (i8, StrBytes, i16, Option<StrBytes>);

/// The answer of each resource when any is refused (an allowed one says another was refused),
/// or `None` when every resource is allowed.
fn refused_resources(
    who: &Who<'_>,
    api: ApiKey,
    op: Operation,
    items: impl Iterator<Item = (i8, StrBytes)>,
) -> Option<Vec<Refused>> {
    let items: Vec<(i8, StrBytes, Option<ErrorCode>)> = items
        .map(|(t, n)| {
            let code = resource(who, api, op, t, &n).err();
            (t, n, code)
        })
        .collect();
    if items.iter().all(|(_, _, code)| code.is_none()) {
        return None;
    }
    let answer = |code: Option<ErrorCode>| match code {
        Some(code) => (wire(code), format!("{} is not authorized", who.principal)),
        None => (
            wire(ErrorCode::INVALID_REQUEST),
            "not changed: another resource of the request is refused".to_string(),
        ),
    };
    Some(
        items
            .into_iter()
            .map(|(t, n, code)| {
                let (code, text) = answer(code);
                (t, n, code, Some(StrBytes::from_string(text)))
            })
            .collect(),
    )
}

fn describe_configs(who: &Who<'_>, version: i16, c: i32, frame: &mut Bytes) -> Option<Result<Bytes, ConnError>> {
    let req = match DescribeConfigsRequest::decode(frame, version) {
        Ok(r) => r,
        Err(e) => return Some(Err(malformed(e))),
    };
    let items = req.resources.into_iter().map(|r| (r.resource_type, r.resource_name));
    let refused = refused_resources(who, ApiKey::DescribeConfigs, Operation::DescribeConfigs, items)?;
    let mut r = DescribeConfigsResponse::default();
    r.results = refused
        .into_iter()
        .map(|(t, n, code, message)| {
            let mut out = DescribeConfigsResult::default();
            (out.resource_type, out.resource_name, out.error_code, out.error_message) = (t, n, code, message);
            out
        })
        .collect();
    Some(respond(ApiKey::DescribeConfigs, version, c, &r))
}

fn alter_configs(who: &Who<'_>, version: i16, c: i32, frame: &mut Bytes) -> Option<Result<Bytes, ConnError>> {
    let req = match AlterConfigsRequest::decode(frame, version) {
        Ok(r) => r,
        Err(e) => return Some(Err(malformed(e))),
    };
    let items = req.resources.into_iter().map(|r| (r.resource_type, r.resource_name));
    let refused = refused_resources(who, ApiKey::AlterConfigs, Operation::AlterConfigs, items)?;
    let mut r = AlterConfigsResponse::default();
    r.responses = refused
        .into_iter()
        .map(|(t, n, code, message)| {
            let mut out = AlterConfigsResourceResponse::default();
            (out.resource_type, out.resource_name, out.error_code, out.error_message) = (t, n, code, message);
            out
        })
        .collect();
    Some(respond(ApiKey::AlterConfigs, version, c, &r))
}

fn incremental_alter_configs(
    who: &Who<'_>,
    version: i16,
    c: i32,
    frame: &mut Bytes,
) -> Option<Result<Bytes, ConnError>> {
    let req = match IncrementalAlterConfigsRequest::decode(frame, version) {
        Ok(r) => r,
        Err(e) => return Some(Err(malformed(e))),
    };
    let items = req.resources.into_iter().map(|r| (r.resource_type, r.resource_name));
    let refused = refused_resources(who, ApiKey::IncrementalAlterConfigs, Operation::AlterConfigs, items)?;
    let mut r = IncrementalAlterConfigsResponse::default();
    r.responses = refused
        .into_iter()
        .map(|(t, n, code, message)| {
            let mut out = IncrementalResult::default();
            (out.resource_type, out.resource_name, out.error_code, out.error_message) = (t, n, code, message);
            out
        })
        .collect();
    Some(respond(ApiKey::IncrementalAlterConfigs, version, c, &r))
}
