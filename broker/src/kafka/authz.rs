//! ACL checks on the Kafka APIs, as Kafka's request handlers make them: the operation each API
//! needs on the cluster, a topic, a group or a transactional id, decided from this broker's
//! view (`auth::view`), never by asking the quorum. A data request loses the topics the
//! principal may not touch, which answer `TOPIC_AUTHORIZATION_FAILED`; Metadata hides the topics
//! it may not describe. Admin decisions, allowed or refused, are logged as audit lines.

use std::collections::HashSet;

use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataResponse, ProduceRequest,
    ProduceResponse, TopicName,
};
use proto::acl::{Operation, ResourceType, CLUSTER_NAME};
use proto::errors::ErrorCode;
use uuid::Uuid;

use super::apis::wire;
use crate::auth::view::SecurityView;
use crate::replica_manager::BrokerCore;

/// Who sent a request, and the view that decides what they may do.
pub(super) struct Who<'a> {
    view: &'a SecurityView,
    core: &'a BrokerCore,
    /// `User:<name>`.
    pub principal: String,
    /// The client's address, as ACLs name hosts.
    pub host: &'a str,
}

impl<'a> Who<'a> {
    /// The sender of a request on a connection from `host` (`/ip`, as groups name members).
    pub fn new(view: &'a SecurityView, core: &'a BrokerCore, principal: String, host: &'a str) -> Self {
        Self {
            view,
            core,
            principal,
            host: host.trim_start_matches('/'),
        }
    }

    /// Whether ACLs are checked at all.
    pub fn checked(&self) -> bool {
        self.view.settings().authorizer
    }

    /// Whether the principal may do `op` on the resource; a denial is counted and logged.
    pub fn may(&self, op: Operation, rtype: ResourceType, name: &str) -> bool {
        let Some(d) = self.view.decide(&self.principal, self.host, op, rtype, name) else {
            return true;
        };
        if !d.allowed {
            self.core.metrics.authorization_denials.inc();
            tracing::debug!(principal = %self.principal, host = self.host, operation = %op, resource_type = %rtype, resource = name, reason = %d, "denied");
        }
        d.allowed
    }

    /// Whether the principal may do `op` on the cluster.
    pub fn cluster(&self, op: Operation) -> bool {
        self.may(op, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Whether the principal may do `op` on a topic.
    pub fn topic(&self, op: Operation, name: &str) -> bool {
        self.may(op, ResourceType::Topic, name)
    }

    /// Whether the principal may do `op` on a group.
    pub fn group(&self, op: Operation, name: &str) -> bool {
        self.may(op, ResourceType::Group, name)
    }

    /// Whether the principal may do `op` on some resource of `rtype`.
    pub fn any(&self, op: Operation, rtype: ResourceType) -> bool {
        self.view.allowed_any(&self.principal, self.host, op, rtype)
    }

    /// Logs an admin request's decision: principal, operation, resource and outcome.
    pub fn audit(&self, api: ApiKey, op: Operation, resource: &str, allowed: bool) {
        tracing::info!(
            target: "ferry::audit",
            principal = %self.principal,
            host = self.host,
            api = ?api,
            operation = %op,
            resource,
            outcome = if allowed { "allowed" } else { "denied" },
            "admin request"
        );
    }
}

/// The operation on the cluster an admin API needs, as Kafka's handlers check it.
pub(super) fn cluster_operation(api: ApiKey) -> Option<Operation> {
    Some(match api {
        ApiKey::AlterPartitionReassignments
        | ApiKey::ElectLeaders
        | ApiKey::AlterReplicaLogDirs
        | ApiKey::CreateAcls
        | ApiKey::DeleteAcls
        | ApiKey::AlterUserScramCredentials => Operation::Alter,
        ApiKey::ListPartitionReassignments
        | ApiKey::DescribeLogDirs
        | ApiKey::DescribeAcls
        | ApiKey::DescribeUserScramCredentials
        | ApiKey::DescribeQuorum => Operation::Describe,
        ApiKey::DescribeClientQuotas => Operation::DescribeConfigs,
        ApiKey::AlterClientQuotas => Operation::AlterConfigs,
        _ => return None,
    })
}

/// Metadata: topics the principal may not describe are left out of an answer for every topic,
/// and answer TOPIC_AUTHORIZATION_FAILED when named.
pub(super) fn metadata(who: &Who<'_>, answer: &mut MetadataResponse, named: bool) {
    if !who.checked() {
        return;
    }
    let mut kept = Vec::with_capacity(answer.topics.len());
    for t in std::mem::take(&mut answer.topics) {
        let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
        if who.topic(Operation::Describe, &name) {
            kept.push(t);
        } else if named {
            let mut refused = MetadataResponseTopic::default();
            refused.name = t.name;
            refused.is_internal = t.is_internal;
            refused.error_code = wire(ErrorCode::TOPIC_AUTHORIZATION_FAILED);
            kept.push(refused);
        }
    }
    answer.topics = kept;
}

/// Produce: the topics the principal may not write, taken out of the request.
pub(super) fn produce(who: &Who<'_>, req: &mut ProduceRequest) -> Vec<(TopicName, Vec<i32>)> {
    if !who.checked() {
        return Vec::new();
    }
    let mut denied = Vec::new();
    req.topic_data.retain(|t| {
        let ok = who.topic(Operation::Write, &t.name.0);
        if !ok {
            denied.push((t.name.clone(), t.partition_data.iter().map(|p| p.index).collect()));
        }
        ok
    });
    denied
}

/// Adds the denied topics to a Produce answer.
pub(super) fn produce_denied(answer: &mut ProduceResponse, denied: Vec<(TopicName, Vec<i32>)>) {
    for (name, partitions) in denied {
        let mut t = TopicProduceResponse::default();
        t.name = name;
        t.partition_responses = partitions
            .into_iter()
            .map(|index| {
                let mut p = PartitionProduceResponse::default();
                p.index = index;
                p.error_code = wire(ErrorCode::TOPIC_AUTHORIZATION_FAILED);
                p.base_offset = -1;
                p.log_append_time_ms = -1;
                p.log_start_offset = -1;
                p
            })
            .collect();
        answer.responses.push(t);
    }
}

/// A Fetch topic the principal may not read: its name or id and its partitions.
pub(super) type DeniedFetch = (TopicName, Uuid, Vec<i32>);

/// Fetch: the topics the principal may not read, taken out of the request (topics named by an
/// id no topic has stay, for the fetch to answer UNKNOWN_TOPIC_ID).
pub(super) fn fetch(who: &Who<'_>, req: &mut FetchRequest, version: i16) -> Vec<DeniedFetch> {
    if !who.checked() {
        return Vec::new();
    }
    let names = super::data::fetch_topics(&who.core.view.read(), &req.topics, version);
    let mut denied = Vec::new();
    let mut keep = names.iter().map(|(name, _)| match name {
        Some(n) => who.topic(Operation::Read, &n.0),
        None => true,
    });
    req.topics.retain(|t| {
        let ok = keep.next().unwrap_or(true);
        if !ok {
            denied.push((
                t.topic.clone(),
                t.topic_id,
                t.partitions.iter().map(|p| p.partition).collect(),
            ));
        }
        ok
    });
    denied
}

/// Adds the denied topics to a Fetch answer.
pub(super) fn fetch_denied(answer: &mut FetchResponse, denied: Vec<DeniedFetch>) {
    for (topic, topic_id, partitions) in denied {
        let mut t = FetchableTopicResponse::default();
        t.topic = topic;
        t.topic_id = topic_id;
        t.partitions = partitions
            .into_iter()
            .map(|partition_index| {
                let mut p = PartitionData::default();
                p.partition_index = partition_index;
                p.error_code = wire(ErrorCode::TOPIC_AUTHORIZATION_FAILED);
                p.high_watermark = -1;
                p.last_stable_offset = -1;
                p.log_start_offset = -1;
                p.records = Some(Default::default());
                p
            })
            .collect();
        answer.responses.push(t);
    }
}

/// ListOffsets: the topics the principal may not describe, taken out of the request.
pub(super) fn list_offsets(who: &Who<'_>, req: &mut ListOffsetsRequest) -> Vec<(TopicName, Vec<i32>)> {
    refuse_topics(who, Operation::Describe, None, &mut req.topics, |t| {
        (&t.name, t.partitions.iter().map(|p| p.partition_index).collect())
    })
}

/// Takes the topics of `topics` that the principal may not do `op` on out of a request, and
/// returns them with their partitions (from `parts`), for the answer to refuse; with `audit`,
/// each decision is logged as that API's.
pub(super) fn refuse_topics<T>(
    who: &Who<'_>,
    op: Operation,
    audit: Option<ApiKey>,
    topics: &mut Vec<T>,
    parts: impl Fn(&T) -> (&TopicName, Vec<i32>),
) -> Vec<(TopicName, Vec<i32>)> {
    if !who.checked() {
        return Vec::new();
    }
    let mut denied = Vec::new();
    topics.retain(|t| {
        let (name, partitions) = parts(t);
        let ok = who.topic(op, &name.0);
        if let Some(api) = audit {
            who.audit(api, op, &format!("Topic:{}", name.0), ok);
        }
        if !ok {
            denied.push((name.clone(), partitions));
        }
        ok
    });
    denied
}

/// Adds the denied topics to a ListOffsets answer.
pub(super) fn list_offsets_denied(answer: &mut ListOffsetsResponse, denied: Vec<(TopicName, Vec<i32>)>) {
    for (name, partitions) in denied {
        let mut t = ListOffsetsTopicResponse::default();
        t.name = name;
        t.partitions = partitions
            .into_iter()
            .map(|partition_index| {
                let mut p = ListOffsetsPartitionResponse::default();
                p.partition_index = partition_index;
                p.error_code = wire(ErrorCode::TOPIC_AUTHORIZATION_FAILED);
                p.timestamp = -1;
                p.offset = -1;
                p.leader_epoch = -1;
                p
            })
            .collect();
        answer.topics.push(t);
    }
}

/// InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster, or WRITE on
/// some topic (Kafka 2.8+).
pub(super) fn idempotent_producer(who: &Who<'_>) -> bool {
    who.cluster(Operation::IdempotentWrite) || who.any(Operation::Write, ResourceType::Topic)
}

/// The topics an admin request names that the principal may not do `op` on (CreateTopics
/// also passes with CREATE on the cluster).
pub(super) fn admin_topics<'t>(
    who: &Who<'_>,
    api: ApiKey,
    op: Operation,
    topics: impl Iterator<Item = &'t str>,
) -> HashSet<String> {
    if !who.checked() {
        return HashSet::new();
    }
    let cluster_create = op == Operation::Create && who.cluster(Operation::Create);
    let mut denied = HashSet::new();
    for t in topics {
        let ok = cluster_create || who.topic(op, t);
        who.audit(api, op, &format!("Topic:{t}"), ok);
        if !ok {
            denied.insert(t.to_string());
        }
    }
    denied
}
