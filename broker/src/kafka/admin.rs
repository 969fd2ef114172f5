//! The admin APIs of the Kafka listener, forwarded to the controller as a KRaft broker
//! forwards them: CreateTopics, DeleteTopics, AlterPartitionReassignments and
//! ListPartitionReassignments become the Admin service's calls, and DescribeCluster is answered
//! from this broker's metadata. Each maps Kafka's message to Ferry's and the answer back, with
//! Kafka's error codes per topic and partition.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId, CreateTopicsRequest,
    CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, DescribeClusterResponse,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use proto::cluster_view::ClusterView;
use proto::errors::ErrorCode;
use proto::ferry as pb;

use super::apis::wire;
use crate::controller_channels::ControllerChannels;

/// The longest wait for the controller's answer.
const CONTROLLER_DEADLINE: Duration = Duration::from_secs(30);

pub(super) fn text(s: &str) -> Option<StrBytes> {
    (!s.is_empty()).then(|| StrBytes::from_string(s.to_string()))
}

pub(super) fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// One call to the controller; a transport failure answers REQUEST_TIMED_OUT, which Kafka's
/// admin clients retry, and moves on to the next quorum node.
pub(super) async fn call<T, F, Fut>(ch: &ControllerChannels, f: F) -> Result<T, (i16, String)>
where
    F: FnOnce(pb::admin_client::AdminClient<crate::controller_channels::Credentialed>) -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    call_on(ch, ch.admin(), f).await
}

/// [`call`] to the Security service.
pub(super) async fn call_security<T, F, Fut>(ch: &ControllerChannels, f: F) -> Result<T, (i16, String)>
where
    F: FnOnce(pb::security_client::SecurityClient<crate::controller_channels::Credentialed>) -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    call_on(ch, ch.security(), f).await
}

async fn call_on<C, T, F, Fut>(ch: &ControllerChannels, client: C, f: F) -> Result<T, (i16, String)>
where
    F: FnOnce(C) -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    match tokio::time::timeout(CONTROLLER_DEADLINE, f(client)).await {
        Ok(Ok(r)) => {
            ch.follow(r.metadata());
            Ok(r.into_inner())
        }
        Ok(Err(s)) => {
            ch.failed();
            Err((
                wire(ErrorCode::REQUEST_TIMED_OUT),
                format!("the controller: {}", s.message()),
            ))
        }
        Err(_) => {
            ch.failed();
            Err((
                wire(ErrorCode::REQUEST_TIMED_OUT),
                format!("the controller did not answer within {CONTROLLER_DEADLINE:?}"),
            ))
        }
    }
}

/// `num.partitions` and `default.replication.factor` at Kafka's defaults: what a topic created
/// with -1 for either gets (KIP-464), as kafka-topics sends when not told.
const DEFAULT_PARTITIONS: i32 = 1;
/// See [`DEFAULT_PARTITIONS`].
const DEFAULT_REPLICATION_FACTOR: i32 = 1;

/// A count or factor as asked, -1 meaning the broker's default.
fn or_default(asked: i32, default: i32) -> i32 {
    if asked == -1 {
        default
    } else {
        asked
    }
}

/// CreateTopics: each topic with its count and factor or its assignment, and its configs.
pub async fn create_topics(ch: &ControllerChannels, req: CreateTopicsRequest, version: i16) -> CreateTopicsResponse {
    let topics: Vec<pb::NewTopic> = req
        .topics
        .iter()
        .map(|t| {
            let mut assignment: Vec<_> = t.assignments.iter().collect();
            assignment.sort_by_key(|a| a.partition_index);
            pb::NewTopic {
                topic: t.name.0.to_string(),
                partitions: if assignment.is_empty() {
                    or_default(t.num_partitions, DEFAULT_PARTITIONS)
                } else {
                    -1
                },
                replication_factor: if assignment.is_empty() {
                    or_default(i32::from(t.replication_factor), DEFAULT_REPLICATION_FACTOR)
                } else {
                    -1
                },
                assignment: assignment
                    .iter()
                    .map(|a| pb::Replicas {
                        brokers: a.broker_ids.iter().map(|b| b.0).collect(),
                    })
                    .collect(),
                config: t
                    .configs
                    .iter()
                    .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
                    .collect(),
            }
        })
        .collect();
    let grpc = pb::CreateTopicsRequest {
        topics,
        validate_only: req.validate_only,
    };
    let answer = call(ch, |mut c| async move { c.create_topics(grpc).await }).await;
    let by_topic = results_by_topic(answer.as_ref().map(|r| (&r.results, r.error_code, &r.error_message)));
    let mut resp = CreateTopicsResponse::default();
    resp.topics = req
        .topics
        .iter()
        .map(|t| {
            let mut out = CreatableTopicResult::default();
            out.name = t.name.clone();
            let (code, message) = by_topic(&t.name.0);
            out.error_code = code;
            out.error_message = text(&message);
            if version >= 5 && code == 0 {
                out.num_partitions = if t.assignments.is_empty() {
                    or_default(t.num_partitions, DEFAULT_PARTITIONS)
                } else {
                    t.assignments.len() as i32
                };
                out.replication_factor = if t.assignments.is_empty() {
                    or_default(i32::from(t.replication_factor), DEFAULT_REPLICATION_FACTOR) as i16
                } else {
                    t.assignments.first().map_or(0, |a| a.broker_ids.len() as i16)
                };
            }
            out
        })
        .collect();
    resp
}

/// A lookup of each topic's outcome: its own result, else the request-wide refusal, else the
/// transport failure.
pub(super) fn results_by_topic<'a>(
    answer: Result<(&'a Vec<pb::TopicResult>, i32, &'a String), &'a (i16, String)>,
) -> impl Fn(&str) -> (i16, String) + 'a {
    move |topic: &str| match answer {
        Err((code, message)) => (*code, message.clone()),
        Ok((results, code, message)) => match results.iter().find(|r| r.topic == topic) {
            Some(r) => (wire(ErrorCode(r.error_code)), r.error_message.clone()),
            None => (wire(ErrorCode(code)), message.clone()),
        },
    }
}

/// DeleteTopics, by name (v6 ids are not served: topics are named).
pub async fn delete_topics(ch: &ControllerChannels, req: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let names: Vec<String> = req
        .topic_names
        .iter()
        .map(|n| n.0.to_string())
        .chain(
            req.topics
                .iter()
                .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string())),
        )
        .collect();
    let grpc = pb::DeleteTopicsRequest { topics: names.clone() };
    let answer = call(ch, |mut c| async move { c.delete_topics(grpc).await }).await;
    let by_topic = results_by_topic(answer.as_ref().map(|r| (&r.results, r.error_code, &r.error_message)));
    let mut resp = DeleteTopicsResponse::default();
    resp.responses = names
        .iter()
        .map(|n| {
            let mut out = DeletableTopicResult::default();
            out.name = Some(name(n));
            let (code, message) = by_topic(n);
            out.error_code = code;
            out.error_message = text(&message);
            out
        })
        .collect();
    resp
}

/// AlterPartitionReassignments: a replica list moves a partition, null cancels its move.
/// Ferry takes the request whole or not at all, so one refused partition refuses every one,
/// each answered with its own reason where it has one; a cancel refused for its partition's state
/// (no move running, no original replica in sync) is answered alone, as in Kafka.
pub async fn alter_partition_reassignments(
    ch: &ControllerChannels,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let mut partitions = Vec::new();
    let mut bad = HashMap::new();
    for t in &req.topics {
        for p in &t.partitions {
            let Ok(partition) = u32::try_from(p.partition_index) else {
                bad.insert(
                    (t.name.0.to_string(), p.partition_index),
                    "negative partition index".to_string(),
                );
                continue;
            };
            partitions.push(pb::ReassignmentTarget {
                topic: t.name.0.to_string(),
                partition,
                replicas: p.replicas.as_ref().map(|r| pb::Replicas {
                    brokers: r.iter().map(|b| b.0).collect(),
                }),
                log_dirs: Vec::new(),
            });
        }
    }
    let answer = if bad.is_empty() {
        let grpc = pb::AlterPartitionReassignmentsRequest {
            partitions,
            throttle_rate: None,
            validate_only: false,
        };
        call(ch, |mut c| async move { c.alter_partition_reassignments(grpc).await }).await
    } else {
        Err((wire(ErrorCode::INVALID_REQUEST), "a partition index is negative".into()))
    };
    let mut resp = AlterPartitionReassignmentsResponse::default();
    let (top_code, top_message, results) = match &answer {
        Ok(r) => (
            wire(ErrorCode(r.error_code)),
            r.error_message.clone(),
            r.results.as_slice(),
        ),
        Err((code, message)) => (*code, message.clone(), &[][..]),
    };
    // By partition, so that a 100,000-partition answer is not a quadratic search.
    let results: HashMap<(&str, i64), &pb::PartitionResult> = results
        .iter()
        .map(|r| ((r.topic.as_str(), i64::from(r.partition)), r))
        .collect();
    resp.responses = req
        .topics
        .iter()
        .map(|t| {
            let mut out = ReassignableTopicResponse::default();
            out.name = t.name.clone();
            out.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut o = ReassignablePartitionResponse::default();
                    o.partition_index = p.partition_index;
                    let own = results.get(&(t.name.0.as_str(), i64::from(p.partition_index)));
                    let (code, message) = match (own, bad.get(&(t.name.0.to_string(), p.partition_index))) {
                        (_, Some(m)) => (wire(ErrorCode::INVALID_REQUEST), m.clone()),
                        (Some(r), _) if r.error_code != 0 => (wire(ErrorCode(r.error_code)), r.error_message.clone()),
                        _ => (top_code, top_message.clone()),
                    };
                    o.error_code = code;
                    o.error_message = text(&message);
                    o
                })
                .collect();
            out
        })
        .collect();
    resp
}

/// ListPartitionReassignments: the moves in progress, all or for the partitions named.
pub async fn list_partition_reassignments(
    ch: &ControllerChannels,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let partitions = req
        .topics
        .iter()
        .flatten()
        .flat_map(|t| {
            t.partition_indexes.iter().filter_map(|p| {
                Some(pb::TopicPartition {
                    topic: t.name.0.to_string(),
                    partition: u32::try_from(*p).ok()?,
                })
            })
        })
        .collect();
    let grpc = pb::ListPartitionReassignmentsRequest {
        partitions,
        with_progress: false,
    };
    let mut resp = ListPartitionReassignmentsResponse::default();
    match call(ch, |mut c| async move { c.list_partition_reassignments(grpc).await }).await {
        Err((code, message)) => {
            resp.error_code = code;
            resp.error_message = text(&message);
        }
        Ok(r) if r.error_code != 0 => {
            resp.error_code = wire(ErrorCode(r.error_code));
            resp.error_message = text(&r.error_message);
        }
        Ok(r) => {
            let mut by_topic: BTreeMap<String, Vec<OngoingPartitionReassignment>> = BTreeMap::new();
            for m in r.reassignments {
                let mut p = OngoingPartitionReassignment::default();
                p.partition_index = m.partition as i32;
                p.replicas = m.replicas.iter().copied().map(BrokerId).collect();
                p.adding_replicas = m.adding.iter().copied().map(BrokerId).collect();
                p.removing_replicas = m.removing.iter().copied().map(BrokerId).collect();
                by_topic.entry(m.topic).or_default().push(p);
            }
            resp.topics = by_topic
                .into_iter()
                .map(|(t, partitions)| {
                    let mut o = OngoingTopicReassignment::default();
                    o.name = name(&t);
                    o.partitions = partitions;
                    o
                })
                .collect();
        }
    }
    resp
}

/// DescribeCluster from this broker's metadata: the brokers with the Kafka listener the request
/// came in on, and this broker named as the controller, since it takes admin requests (as in
/// Metadata).
pub fn describe_cluster(view: &ClusterView, this: i32, cluster_id: String, listener: &str) -> DescribeClusterResponse {
    let mut r = DescribeClusterResponse::default();
    r.controller_id = BrokerId(this);
    r.cluster_id = StrBytes::from_string(cluster_id);
    r.brokers = super::apis::kafka_brokers(view, listener)
        .map(|b| {
            let mut m = DescribeClusterBroker::default();
            m.broker_id = b.id;
            m.host = b.host;
            m.port = b.port;
            m.rack = b.rack;
            m
        })
        .collect();
    r
}
