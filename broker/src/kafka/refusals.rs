//! Answers to a request whose principal lacks the operation on the CLUSTER resource, shaped as
//! Kafka shapes them: the refusal's code and message on every item of the answer, so the
//! client learns that nothing was done. The topic admin APIs (CreateTopics, DeleteTopics,
//! CreatePartitions) answer TOPIC_AUTHORIZATION_FAILED per topic instead, as Kafka answers a
//! topic the principal may not touch. The builders are pure: request in, answer out.

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData as AlteredEntity, EntryData as AlteredEntry};
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse, AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse,
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey, CreateAclsRequest, CreateAclsResponse,
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteAclsRequest,
    DeleteAclsResponse, DeleteTopicsRequest, DeleteTopicsResponse, DescribeAclsRequest, DescribeAclsResponse,
    DescribeClientQuotasRequest, DescribeClientQuotasResponse, DescribeLogDirsRequest, DescribeLogDirsResponse,
    DescribeQuorumRequest, DescribeQuorumResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse, ElectLeadersRequest, ElectLeadersResponse, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use proto::errors::ErrorCode;

use super::admin::text;
use super::apis::wire;
use super::connection::ConnError;
use super::{malformed, respond};

/// The code and message every item of a refused answer carries.
struct Refused {
    code: i16,
    message: Option<StrBytes>,
}

impl Refused {
    fn cluster(message: &str) -> Self {
        Refused {
            code: wire(ErrorCode::CLUSTER_AUTHORIZATION_FAILED),
            message: text(message),
        }
    }

    fn topic(message: &str) -> Self {
        Refused {
            code: wire(ErrorCode::TOPIC_AUTHORIZATION_FAILED),
            message: text(message),
        }
    }
}

/// Answers the request in `frame` (read past its header) as refused on the CLUSTER resource
/// with `message`, nothing done; `None` for an API this does not cover.
pub(super) fn cluster_refused(
    api: ApiKey,
    version: i16,
    correlation: i32,
    frame: &mut Bytes,
    message: &str,
) -> Option<Result<Bytes, ConnError>> {
    let r = Refused::cluster(message);
    let t = Refused::topic(message);
    let v = version;
    let c = correlation;
    Some(match api {
        ApiKey::AlterPartitionReassignments => answer(api, v, c, frame, |q| alter_reassignments(&q, &r)),
        ApiKey::ListPartitionReassignments => answer(api, v, c, frame, |_: ListPartitionReassignmentsRequest| {
            list_reassignments(&r)
        }),
        ApiKey::ElectLeaders => answer(api, v, c, frame, |q| elect_leaders(&q, v, &r)),
        ApiKey::AlterReplicaLogDirs => answer(api, v, c, frame, |q| alter_replica_log_dirs(&q, &r)),
        ApiKey::DescribeLogDirs => answer(api, v, c, frame, |_: DescribeLogDirsRequest| describe_log_dirs(v, &r)),
        ApiKey::DescribeQuorum => answer(api, v, c, frame, |_: DescribeQuorumRequest| describe_quorum(v, &r)),
        ApiKey::CreateAcls => answer(api, v, c, frame, |q| create_acls(&q, &r)),
        ApiKey::DescribeAcls => answer(api, v, c, frame, |_: DescribeAclsRequest| describe_acls(&r)),
        ApiKey::DeleteAcls => answer(api, v, c, frame, |q| delete_acls(&q, &r)),
        ApiKey::AlterUserScramCredentials => answer(api, v, c, frame, |q| alter_scram(&q, &r)),
        ApiKey::DescribeUserScramCredentials => answer(api, v, c, frame, |_: DescribeUserScramCredentialsRequest| {
            describe_scram(&r)
        }),
        ApiKey::DescribeClientQuotas => answer(api, v, c, frame, |_: DescribeClientQuotasRequest| describe_quotas(&r)),
        ApiKey::AlterClientQuotas => answer(api, v, c, frame, |q| alter_quotas(&q, &r)),
        ApiKey::CreateTopics => answer(api, v, c, frame, |q| create_topics(&q, v, &t)),
        ApiKey::DeleteTopics => answer(api, v, c, frame, |q| delete_topics(&q, v, &t)),
        ApiKey::CreatePartitions => answer(api, v, c, frame, |q| create_partitions(&q, &t)),
        _ => return None,
    })
}

/// Decodes the request, builds the answer, and encodes it as a response frame.
fn answer<Q: Decodable, A: Encodable>(
    api: ApiKey,
    version: i16,
    correlation: i32,
    frame: &mut Bytes,
    build: impl FnOnce(Q) -> A,
) -> Result<Bytes, ConnError> {
    let request = Q::decode(frame, version).map_err(malformed)?;
    respond(api, version, correlation, &build(request))
}

/// Topics with their partitions, each once, in order of first mention: Kafka keys its
/// per-partition answers by topic-partition, so a repeat answers once.
fn grouped<'a>(pairs: impl Iterator<Item = (&'a TopicName, i32)>) -> Vec<(TopicName, Vec<i32>)> {
    let mut out: Vec<(TopicName, Vec<i32>)> = Vec::new();
    let mut at: HashMap<&TopicName, usize> = HashMap::new();
    for (topic, partition) in pairs {
        let i = *at.entry(topic).or_insert_with(|| {
            out.push((topic.clone(), Vec::new()));
            out.len() - 1
        });
        if !out[i].1.contains(&partition) {
            out[i].1.push(partition);
        }
    }
    out
}

fn alter_reassignments(q: &AlterPartitionReassignmentsRequest, r: &Refused) -> AlterPartitionReassignmentsResponse {
    let mut a = AlterPartitionReassignmentsResponse::default();
    a.error_code = r.code;
    a.error_message = r.message.clone();
    a.responses = q
        .topics
        .iter()
        .map(|t| {
            let mut topic = ReassignableTopicResponse::default();
            topic.name = t.name.clone();
            topic.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut out = ReassignablePartitionResponse::default();
                    out.partition_index = p.partition_index;
                    out.error_code = r.code;
                    out.error_message = r.message.clone();
                    out
                })
                .collect();
            topic
        })
        .collect();
    a
}

fn list_reassignments(r: &Refused) -> ListPartitionReassignmentsResponse {
    let mut a = ListPartitionReassignmentsResponse::default();
    a.error_code = r.code;
    a.error_message = r.message.clone();
    a
}

/// ElectLeaders: v0 has no top-level code, so the partitions carry it alone; a request for
/// every partition (null topics) names none, and none is answered.
fn elect_leaders(q: &ElectLeadersRequest, version: i16, r: &Refused) -> ElectLeadersResponse {
    let mut a = ElectLeadersResponse::default();
    if version >= 1 {
        a.error_code = r.code;
    }
    let topics = q.topic_partitions.as_deref().unwrap_or_default();
    let pairs = topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (&t.topic, *p)));
    a.replica_election_results = grouped(pairs)
        .into_iter()
        .map(|(topic, partitions)| {
            let mut out = ReplicaElectionResult::default();
            out.topic = topic;
            out.partition_result = partitions
                .into_iter()
                .map(|p| {
                    let mut pr = PartitionResult::default();
                    pr.partition_id = p;
                    pr.error_code = r.code;
                    pr.error_message = r.message.clone();
                    pr
                })
                .collect();
            out
        })
        .collect();
    a
}

/// AlterReplicaLogDirs: every partition of every dir named, grouped by topic (no message field).
fn alter_replica_log_dirs(q: &AlterReplicaLogDirsRequest, r: &Refused) -> AlterReplicaLogDirsResponse {
    let pairs = q
        .dirs
        .iter()
        .flat_map(|d| d.topics.iter())
        .flat_map(|t| t.partitions.iter().map(move |p| (&t.name, *p)));
    let mut a = AlterReplicaLogDirsResponse::default();
    a.results = grouped(pairs)
        .into_iter()
        .map(|(topic, partitions)| {
            let mut out = AlterReplicaLogDirTopicResult::default();
            out.topic_name = topic;
            out.partitions = partitions
                .into_iter()
                .map(|p| {
                    let mut pr = AlterReplicaLogDirPartitionResult::default();
                    pr.partition_index = p;
                    pr.error_code = r.code;
                    pr
                })
                .collect();
            out
        })
        .collect();
    a
}

/// DescribeLogDirs: the code from v3, which first has the field; before that, no dirs.
fn describe_log_dirs(version: i16, r: &Refused) -> DescribeLogDirsResponse {
    let mut a = DescribeLogDirsResponse::default();
    if version >= 3 {
        a.error_code = r.code;
    }
    a
}

fn describe_quorum(version: i16, r: &Refused) -> DescribeQuorumResponse {
    let mut a = DescribeQuorumResponse::default();
    a.error_code = r.code;
    if version >= 2 {
        a.error_message = r.message.clone();
    }
    a
}

fn create_acls(q: &CreateAclsRequest, r: &Refused) -> CreateAclsResponse {
    let mut a = CreateAclsResponse::default();
    a.results = q
        .creations
        .iter()
        .map(|_| {
            let mut out = AclCreationResult::default();
            out.error_code = r.code;
            out.error_message = r.message.clone();
            out
        })
        .collect();
    a
}

fn describe_acls(r: &Refused) -> DescribeAclsResponse {
    let mut a = DescribeAclsResponse::default();
    a.error_code = r.code;
    a.error_message = r.message.clone();
    a
}

fn delete_acls(q: &DeleteAclsRequest, r: &Refused) -> DeleteAclsResponse {
    let mut a = DeleteAclsResponse::default();
    a.filter_results = q
        .filters
        .iter()
        .map(|_| {
            let mut out = DeleteAclsFilterResult::default();
            out.error_code = r.code;
            out.error_message = r.message.clone();
            out
        })
        .collect();
    a
}

/// AlterUserScramCredentials: one result per user named, deletions first, each once.
fn alter_scram(q: &AlterUserScramCredentialsRequest, r: &Refused) -> AlterUserScramCredentialsResponse {
    let names = q
        .deletions
        .iter()
        .map(|d| &d.name)
        .chain(q.upsertions.iter().map(|u| &u.name));
    let mut users: Vec<&StrBytes> = Vec::new();
    for name in names {
        if !users.contains(&name) {
            users.push(name);
        }
    }
    let mut a = AlterUserScramCredentialsResponse::default();
    a.results = users
        .into_iter()
        .map(|user| {
            let mut out = AlterUserScramCredentialsResult::default();
            out.user = user.clone();
            out.error_code = r.code;
            out.error_message = r.message.clone();
            out
        })
        .collect();
    a
}

fn describe_scram(r: &Refused) -> DescribeUserScramCredentialsResponse {
    let mut a = DescribeUserScramCredentialsResponse::default();
    a.error_code = r.code;
    a.error_message = r.message.clone();
    a
}

/// DescribeClientQuotas: no entries (null), as Kafka's error answer has.
fn describe_quotas(r: &Refused) -> DescribeClientQuotasResponse {
    let mut a = DescribeClientQuotasResponse::default();
    a.error_code = r.code;
    a.error_message = r.message.clone();
    a.entries = None;
    a
}

/// AlterClientQuotas: each entry refused, named by its entity as asked.
fn alter_quotas(q: &AlterClientQuotasRequest, r: &Refused) -> AlterClientQuotasResponse {
    let mut a = AlterClientQuotasResponse::default();
    a.entries = q
        .entries
        .iter()
        .map(|e| {
            let mut out = AlteredEntry::default();
            out.error_code = r.code;
            out.error_message = r.message.clone();
            out.entity = e
                .entity
                .iter()
                .map(|p| {
                    let mut d = AlteredEntity::default();
                    d.entity_type = p.entity_type.clone();
                    d.entity_name = p.entity_name.clone();
                    d
                })
                .collect();
            out
        })
        .collect();
    a
}

/// CreateTopics: each topic refused by name; from v5 the count and factor answer -1 (unknown).
fn create_topics(q: &CreateTopicsRequest, version: i16, r: &Refused) -> CreateTopicsResponse {
    let mut a = CreateTopicsResponse::default();
    a.topics = q
        .topics
        .iter()
        .map(|t| {
            let mut out = CreatableTopicResult::default();
            out.name = t.name.clone();
            out.error_code = r.code;
            out.error_message = r.message.clone();
            if version >= 5 {
                out.num_partitions = -1;
                out.replication_factor = -1;
            }
            out
        })
        .collect();
    a
}

/// DeleteTopics: each topic refused as named, by name (before v6) or by name or id (v6).
fn delete_topics(q: &DeleteTopicsRequest, version: i16, r: &Refused) -> DeleteTopicsResponse {
    let refused = |name: Option<TopicName>, id: uuid::Uuid| {
        let mut out = DeletableTopicResult::default();
        out.name = name;
        if version >= 6 {
            out.topic_id = id;
        }
        out.error_code = r.code;
        if version >= 5 {
            out.error_message = r.message.clone();
        }
        out
    };
    let mut a = DeleteTopicsResponse::default();
    a.responses = q
        .topic_names
        .iter()
        .map(|n| refused(Some(n.clone()), uuid::Uuid::nil()))
        .chain(q.topics.iter().map(|t| refused(t.name.clone(), t.topic_id)))
        .collect();
    a
}

fn create_partitions(q: &CreatePartitionsRequest, r: &Refused) -> CreatePartitionsResponse {
    let mut a = CreatePartitionsResponse::default();
    a.results = q
        .topics
        .iter()
        .map(|t| {
            let mut out = CreatePartitionsTopicResult::default();
            out.name = t.name.clone();
            out.error_code = r.code;
            out.error_message = r.message.clone();
            out
        })
        .collect();
    a
}

#[cfg(test)]
#[path = "refusals_tests.rs"]
mod tests;
