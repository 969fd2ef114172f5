//! The topic half of the `Admin` service: CreateTopics, CreatePartitions and DeleteTopics. Each
//! request is checked against the node's [`RequestLimits`] first (a request over them is refused
//! whole) and reads the metadata once. Then, as in Kafka, each topic stands alone: it is
//! validated, then written in its own guarded transaction, and gets its own result; a topic that
//! fails does not stop the others, and the ones written before it stay written.

use std::collections::BTreeSet;

use metastore::Client;
use proto::cluster_view::{ClusterView, TopicEntry};
use proto::errors::ErrorCode;
use proto::ferry::*;
use proto::metastore as pb;
use proto::{keys, topic_config};

use crate::limits::RequestLimits;
use crate::partition_change::NO_LEADER;
use crate::placement::{self, BrokerSlot};
use crate::store::{at_revision, load_topics_view, load_view, put_op, TopicDepth};
use crate::topic_name::validate_topic_name;
use crate::write_runner::{Plan, Runner};
use proto::errors::Refusal;

fn refuse<T>(code: ErrorCode, message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal {
        code,
        message: message.into(),
    })
}

/// Whether a broker may take a new replica: not when every log dir of its is cordoned (KIP-1066).
fn open_to_new(b: &BrokerRegistration) -> bool {
    proto::cordon::takes_new_replicas(&b.log_dirs, &b.cordoned_log_dirs)
}

/// The brokers automatic placement may give a new replica: every registered one but those whose
/// every log dir is cordoned (KIP-1066), as Kafka's controller leaves them out.
fn slots(view: &ClusterView) -> Vec<BrokerSlot> {
    view.brokers
        .values()
        .filter(|b| open_to_new(b))
        .map(|b| BrokerSlot {
            id: b.id,
            rack: (!b.rack.is_empty()).then(|| b.rack.clone()),
        })
        .collect()
}

/// Kafka's refusal of a replication factor over the brokers placement may use, naming the first
/// partition that cannot be placed and the brokers left out because they are cordoned.
fn too_few_brokers<T>(view: &ClusterView, rf: usize, available: usize, topic: &str, first: i32) -> Result<T, Refusal> {
    let closed: Vec<i32> = view
        .brokers
        .values()
        .filter(|b| !open_to_new(b))
        .map(|b| b.id)
        .collect();
    let why = if closed.is_empty() {
        String::new()
    } else {
        format!(" Cannot place {topic}-{first}: brokers {closed:?} have every log dir cordoned.")
    };
    refuse(
        ErrorCode::INVALID_REPLICATION_FACTOR,
        format!("Replication factor: {rf} larger than available brokers: {available}.{why}"),
    )
}

/// Refuses an explicit assignment that gives a new replica to a broker whose every log dir is
/// cordoned (KIP-1066: no new replica lands on a cordoned dir, placed or named; Kafka fixed its
/// own manual-assignment path in KAFKA-20832). `first` is the first new partition's number.
fn refuse_cordoned(view: &ClusterView, topic: &str, first: i32, lists: &[Vec<i32>]) -> Result<(), Refusal> {
    for (i, replicas) in lists.iter().enumerate() {
        let closed = replicas
            .iter()
            .find(|b| view.brokers.get(b).is_some_and(|r| !open_to_new(r)));
        if let Some(b) = closed {
            return refuse(
                ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                format!(
                    "partition {topic}-{}: broker {b} has every log dir cordoned ({}) and takes no new replica",
                    first as usize + i,
                    topic_config::CORDONED_LOG_DIRS
                ),
            );
        }
    }
    Ok(())
}

/// A stable starting broker per topic, so that topics do not all lead on the same broker.
fn start_for(topic: &str) -> u32 {
    topic
        .bytes()
        .fold(17u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32))
}

fn new_partition(replicas: Vec<i32>, live: &BTreeSet<i32>) -> PartitionState {
    let leader = replicas.iter().copied().find(|r| live.contains(r)).unwrap_or(NO_LEADER);
    PartitionState {
        log_dirs: vec![String::new(); replicas.len()],
        isr: replicas.clone(),
        replicas,
        leader,
        ..Default::default()
    }
}

/// The replicas of a new topic: the explicit assignment, or placed over the live brokers. The
/// topic's limits were checked before ([`RequestLimits::new_topic`]).
fn plan_topic(t: &NewTopic, view: &ClusterView) -> Result<Vec<Vec<i32>>, Refusal> {
    validate_topic_name(&t.topic)?;
    if view.topics.contains_key(&t.topic) {
        return refuse(
            ErrorCode::TOPIC_ALREADY_EXISTS,
            format!("Topic '{}' already exists.", t.topic),
        );
    }
    if let Err(e) = topic_config::validate(&t.config) {
        return refuse(ErrorCode::INVALID_CONFIG, e);
    }
    if !t.assignment.is_empty() {
        if t.partitions > 0 || t.replication_factor > 0 {
            return refuse(
                ErrorCode::INVALID_REQUEST,
                "give either an assignment or partitions and replication factor, not both",
            );
        }
        let lists: Vec<Vec<i32>> = t.assignment.iter().map(|r| r.brokers.clone()).collect();
        let known: BTreeSet<i32> = view.live_brokers();
        placement::validate_assignment(&lists, &known, None)?;
        refuse_cordoned(view, &t.topic, 0, &lists)?;
        return Ok(lists);
    }
    if t.partitions <= 0 {
        return refuse(
            ErrorCode::INVALID_PARTITIONS,
            format!("Number of partitions must be larger than 0, got {}.", t.partitions),
        );
    }
    if t.replication_factor <= 0 {
        return refuse(
            ErrorCode::INVALID_REPLICATION_FACTOR,
            format!(
                "Replication factor must be larger than 0, got {}.",
                t.replication_factor
            ),
        );
    }
    let brokers = slots(view);
    if t.replication_factor as usize > brokers.len() {
        return too_few_brokers(view, t.replication_factor as usize, brokers.len(), &t.topic, 0);
    }
    placement::assign_replicas(
        &brokers,
        t.partitions as u32,
        t.replication_factor as u32,
        0,
        start_for(&t.topic),
    )
    .or_else(|e| refuse(ErrorCode::INVALID_REPLICATION_FACTOR, e.to_string()))
}

/// A topic's answer.
pub fn topic_result(topic: &str, r: Result<(), Refusal>) -> TopicResult {
    match r {
        Ok(()) => TopicResult {
            topic: topic.to_string(),
            ..Default::default()
        },
        Err(e) => TopicResult {
            topic: topic.to_string(),
            error_code: e.code.0,
            error_message: e.message,
        },
    }
}

/// The refusal of an unknown topic.
pub fn unknown_topic(topic: &str) -> Refusal {
    Refusal {
        code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
        message: format!("Topic '{topic}' does not exist."),
    }
}

/// A topic named twice in one request.
fn named_twice(topic: &str) -> Refusal {
    Refusal {
        code: ErrorCode::INVALID_REQUEST,
        message: format!("topic '{topic}' appears more than once in the request"),
    }
}

/// Partitions `first..` with their replicas, in the order of their keys
/// ([`keys::partition_key_rank`]), so that the store applies neighbouring keys in turn.
fn in_key_order<T>(replicas: Vec<T>, first: u32) -> impl Iterator<Item = (u32, T)> {
    let mut numbered: Vec<(u32, T)> = (first..).zip(replicas).collect();
    numbered.sort_by_cached_key(|(p, _)| keys::partition_key_rank(*p));
    numbered.into_iter()
}

/// A new topic's writes: its record and every partition, guarded on the topic being absent (a
/// topic created since the view was read, or named twice, fails the guard).
fn create_writes(t: &NewTopic, view: &ClusterView, validate_only: bool) -> Result<Plan<()>, Refusal> {
    let assignment = plan_topic(t, view)?;
    if validate_only {
        return Ok(Plan::answer(()));
    }
    let live = view.live_brokers();
    let record = TopicRecord {
        topic_id: uuid::Uuid::new_v4().to_string(),
        partitions: assignment.len() as u32,
        config: t.config.clone(),
        deleting: false,
        auto_remove: None,
    };
    let mut ops = Vec::with_capacity(assignment.len() + 1);
    ops.push(put_op(keys::topic(&t.topic), &record));
    ops.extend(
        in_key_order(assignment, 0)
            .map(|(p, replicas)| put_op(keys::partition(&t.topic, p), &new_partition(replicas, &live))),
    );
    Ok(Plan::write(vec![at_revision(keys::topic(&t.topic), 0)], ops, ()))
}

/// Writes one planned topic item once; a failed guard refuses it with `changed`.
async fn write_item(
    client: &Client,
    what: &'static str,
    planned: Result<Plan<()>, Refusal>,
    changed: Refusal,
) -> Result<Result<(), Refusal>, metastore::ClientError> {
    match planned {
        Ok(plan) => Runner::new(client, what, changed).write(plan).await,
        Err(e) => Ok(Err(e)),
    }
}

async fn create_one(
    client: &Client,
    t: &NewTopic,
    view: &ClusterView,
    validate_only: bool,
) -> Result<Result<(), Refusal>, metastore::ClientError> {
    let exists = Refusal::new(
        ErrorCode::TOPIC_ALREADY_EXISTS,
        format!("Topic '{}' already exists.", t.topic),
    );
    write_item(client, "create topic", create_writes(t, view, validate_only), exists).await
}

/// CreateTopics: each topic validated, then written in its own transaction, with its own result.
pub async fn create_topics(
    client: &Client,
    limits: &RequestLimits,
    req: CreateTopicsRequest,
) -> Result<CreateTopicsResponse, metastore::ClientError> {
    if let Err(e) = limits.create_topics(&req) {
        return Ok(CreateTopicsResponse {
            results: vec![],
            error_code: e.code.0,
            error_message: e.message,
        });
    }
    // One read for the whole request: each topic's write is guarded on its own key. A name that
    // breaks Kafka's rules is not read (a huge one would not even fit a key): its own check
    // answers it, with INVALID_TOPIC_EXCEPTION.
    let names: Vec<String> = req
        .topics
        .iter()
        .filter(|t| validate_topic_name(&t.topic).is_ok())
        .map(|t| t.topic.clone())
        .collect();
    let view = load_topics_view(client, &names, TopicDepth::FirstPartition).await?;
    let mut seen = BTreeSet::new();
    let mut results = Vec::with_capacity(req.topics.len());
    for t in &req.topics {
        let r = if !seen.insert(t.topic.as_str()) {
            Err(named_twice(&t.topic))
        } else {
            match limits.new_topic(t) {
                Ok(()) => create_one(client, t, &view, req.validate_only).await?,
                Err(e) => Err(e),
            }
        };
        if let Err(e) = &r {
            if e.code == ErrorCode::POLICY_VIOLATION {
                tracing::info!(topic = t.topic, reason = e.message, "topic refused");
            }
        }
        results.push(topic_result(&t.topic, r));
    }
    Ok(CreateTopicsResponse {
        results,
        ..Default::default()
    })
}

/// The new topic record and the replicas of the added partitions.
fn plan_partitions(
    name: &str,
    topic: &TopicEntry,
    t: &PartitionCount,
    view: &ClusterView,
) -> Result<(TopicRecord, Vec<Vec<i32>>), Refusal> {
    let current = topic.partitions.len() as i32;
    if t.count <= current {
        return refuse(
            ErrorCode::INVALID_PARTITIONS,
            format!(
                "Topic currently has {current} partitions, which is higher than or equal to the requested {}.",
                t.count
            ),
        );
    }
    let adding = (t.count - current) as usize;
    let rf = topic.partitions.values().next().map_or(1, |p| p.state.replicas.len());
    let new = if t.assignment.is_empty() {
        let brokers = slots(view);
        if rf > brokers.len() {
            return too_few_brokers(view, rf, brokers.len(), name, current);
        }
        placement::assign_replicas(&brokers, adding as u32, rf as u32, current as u32, start_for(name))
            .or_else(|e| refuse(ErrorCode::INVALID_REPLICATION_FACTOR, e.to_string()))?
    } else {
        if t.assignment.len() != adding {
            return refuse(
                ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                format!(
                    "Increasing the number of partitions by {adding} but {} assignments provided.",
                    t.assignment.len()
                ),
            );
        }
        let lists: Vec<Vec<i32>> = t.assignment.iter().map(|r| r.brokers.clone()).collect();
        placement::validate_assignment(&lists, &view.live_brokers(), Some(rf))
            .map_err(|e| e.context("new assignment"))?;
        refuse_cordoned(view, name, current, &lists)?;
        lists
    };
    let mut record = topic.record.clone().unwrap_or_default();
    record.partitions = t.count as u32;
    Ok((record, new))
}

/// The writes that add a topic's partitions: the topic record with its new count and each new
/// partition, guarded by the topic record's revision.
fn partitions_writes(
    t: &PartitionCount,
    topic: &TopicEntry,
    view: &ClusterView,
    validate_only: bool,
) -> Result<Plan<()>, Refusal> {
    let (record, new) = plan_partitions(&t.topic, topic, t, view)?;
    if validate_only {
        return Ok(Plan::answer(()));
    }
    let live = view.live_brokers();
    let first = topic.partitions.len() as u32;
    let mut ops = Vec::with_capacity(new.len() + 1);
    ops.push(put_op(keys::topic(&t.topic), &record));
    ops.extend(
        in_key_order(new, first)
            .map(|(p, replicas)| put_op(keys::partition(&t.topic, p), &new_partition(replicas, &live))),
    );
    let guards = vec![at_revision(keys::topic(&t.topic), topic.mod_revision)];
    Ok(Plan::write(guards, ops, ()))
}

async fn create_partitions_one(
    client: &Client,
    t: &PartitionCount,
    topic: &TopicEntry,
    view: &ClusterView,
    validate_only: bool,
) -> Result<Result<(), Refusal>, metastore::ClientError> {
    let changed = Refusal::new(
        ErrorCode::INVALID_UPDATE_VERSION,
        format!(
            "topic '{}' changed while its partitions were being added; retry",
            t.topic
        ),
    );
    let planned = partitions_writes(t, topic, view, validate_only);
    write_item(client, "create partitions", planned, changed).await
}

/// CreatePartitions: each topic validated, then written in its own transaction, with its own
/// result.
pub async fn create_partitions(
    client: &Client,
    limits: &RequestLimits,
    req: CreatePartitionsRequest,
) -> Result<CreatePartitionsResponse, metastore::ClientError> {
    let whole = |e: Refusal| CreatePartitionsResponse {
        results: vec![],
        error_code: e.code.0,
        error_message: e.message,
    };
    if let Err(e) = limits.create_partitions(&req) {
        return Ok(whole(e));
    }
    let view = load_view(client).await?;
    let topic_of = |name: &str| view.topics.get(name).filter(|e| e.record.is_some());
    // What the request adds up to, from the current counts, before any partition is planned.
    let adding: u64 = req
        .topics
        .iter()
        .filter_map(|t| topic_of(&t.topic).map(|e| (t.count.max(0) as u64).saturating_sub(e.partitions.len() as u64)))
        .sum();
    if let Err(e) = limits.partitions_in_request("topics", adding) {
        return Ok(whole(e));
    }
    let mut seen = BTreeSet::new();
    let mut results = Vec::with_capacity(req.topics.len());
    for t in &req.topics {
        let r = if !seen.insert(t.topic.as_str()) {
            Err(named_twice(&t.topic))
        } else {
            match topic_of(&t.topic) {
                None => Err(unknown_topic(&t.topic)),
                Some(topic) => create_partitions_one(client, t, topic, &view, req.validate_only).await?,
            }
        };
        results.push(topic_result(&t.topic, r));
    }
    Ok(CreatePartitionsResponse {
        results,
        ..Default::default()
    })
}

/// DeleteTopics: each topic deleted in its own transaction, with its own result.
pub async fn delete_topics(
    client: &Client,
    limits: &RequestLimits,
    req: DeleteTopicsRequest,
) -> Result<DeleteTopicsResponse, metastore::ClientError> {
    if let Err(e) = limits.items("topics", req.topics.len()) {
        return Ok(DeleteTopicsResponse {
            results: vec![],
            error_code: e.code.0,
            error_message: e.message,
        });
    }
    let view = load_view(client).await?;
    let mut seen = BTreeSet::new();
    let mut results = Vec::with_capacity(req.topics.len());
    for name in &req.topics {
        let r = if !seen.insert(name.as_str()) {
            Err(named_twice(name))
        } else {
            match view.topics.get(name).filter(|t| t.record.is_some()) {
                None => Err(unknown_topic(name)),
                Some(t) => delete_one(client, name, t.mod_revision).await?,
            }
        };
        results.push(topic_result(name, r));
    }
    Ok(DeleteTopicsResponse {
        results,
        ..Default::default()
    })
}

/// Deletes a topic: its partitions (with their moves' records) and its record, in one
/// transaction guarded by the topic record's revision.
async fn delete_one(client: &Client, name: &str, rev: u64) -> Result<Result<(), Refusal>, metastore::ClientError> {
    let ops = vec![
        pb::Op {
            op: Some(pb::op::Op::DeletePrefix(pb::DeletePrefixOp {
                prefix: keys::topic_children(name),
            })),
        },
        pb::Op {
            op: Some(pb::op::Op::Delete(pb::DeleteOp { key: keys::topic(name) })),
        },
    ];
    let guards = vec![at_revision(keys::topic(name), rev)];
    let changed = Refusal::new(
        ErrorCode::INVALID_UPDATE_VERSION,
        format!("topic '{name}' changed; retry"),
    );
    write_item(client, "delete topic", Ok(Plan::write(guards, ops, ())), changed).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn view(cordoned: &[(i32, &[&str])]) -> ClusterView {
        let mut v = ClusterView::default();
        for id in 1..=3 {
            let dirs = vec![format!("/b{id}/d1"), format!("/b{id}/d2")];
            let closed: Vec<String> = cordoned
                .iter()
                .filter(|(b, _)| *b == id)
                .flat_map(|(_, d)| d.iter().map(|d| format!("/b{id}/{d}")))
                .collect();
            let reg = proto::ferry::BrokerRegistration {
                id,
                log_dirs: dirs,
                cordoned_log_dirs: closed,
                ..Default::default()
            };
            v.apply(&proto::keys::broker(id), Some(&reg.encode_to_vec()), 1);
        }
        v
    }

    fn topic(partitions: i32, rf: i32) -> NewTopic {
        NewTopic {
            topic: "t".into(),
            partitions,
            replication_factor: rf,
            ..Default::default()
        }
    }

    #[test]
    fn placement_leaves_out_a_broker_whose_every_dir_is_cordoned() {
        let v = view(&[(3, &["d1", "d2"]), (2, &["d1"])]);
        let lists = plan_topic(&topic(12, 2), &v).unwrap();
        assert!(lists.iter().flatten().all(|b| *b != 3), "{lists:?}");
        assert!(lists.iter().flatten().any(|b| *b == 2), "one open dir is enough");
        let e = plan_topic(&topic(4, 3), &v).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_REPLICATION_FACTOR);
        assert!(
            e.message.contains("available brokers: 2") && e.message.contains("t-0") && e.message.contains("[3]"),
            "{}",
            e.message
        );
    }

    #[test]
    fn an_explicit_assignment_to_a_fully_cordoned_broker_is_refused_naming_it() {
        let v = view(&[(3, &["d1", "d2"]), (2, &["d1"])]);
        let explicit = |lists: &[&[i32]]| NewTopic {
            topic: "t".into(),
            assignment: lists.iter().map(|b| Replicas { brokers: b.to_vec() }).collect(),
            ..Default::default()
        };
        let e = plan_topic(&explicit(&[&[1, 2], &[2, 3]]), &v).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_REPLICA_ASSIGNMENT);
        assert!(
            e.message.contains("t-1") && e.message.contains("broker 3"),
            "{}",
            e.message
        );
        assert!(
            plan_topic(&explicit(&[&[1, 2], &[2, 1]]), &v).is_ok(),
            "one open dir is enough"
        );
    }
}
