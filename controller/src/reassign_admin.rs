//! The reassignment half of the `Admin` service: submit and supersede in one guarded transaction
//! per request, and list (dir reports are [`crate::reassign_dir`]). Every partition of a request is validated before anything
//! is written; one bad partition refuses the whole request. The exception is a cancel refused for
//! its partition's current state ([`answered_alone`]): as in Kafka, that partition gets its own
//! code and the rest of the request goes ahead, because a move finishing, or its ISR changing,
//! between an operator's list and cancel is a race, not bad input. Cancels are written by
//! [`crate::reassign_cancel`]. A request's partitions are planned in the order of their keys,
//! over every core ([`plan_alter`]), and written in that order; the answers keep the request's.

use std::collections::{BTreeMap, BTreeSet};

use metastore::Client;
use prost::Message;
use proto::cluster_view::ClusterView;
use proto::errors::{ErrorCode, Refusal};
use proto::ferry::*;
use proto::metastore as pb;
use proto::{keys, topic_config};

use crate::reassignment;
use crate::store::{at_revision, load_topics_view, put_op, read_alone, TopicDepth};
use crate::write_runner::{Plan, Runner};

/// In-flight reassignments by partition, with their key's revision.
pub type Reassignments = BTreeMap<(String, u32), (ReassignmentRecord, u64)>;

/// Reads the reassignment records of `topics` (every record when `None`) and whether the
/// cancel-all marker is present (with its revision, 0 when absent).
pub async fn load_reassignments(
    client: &Client,
    topics: Option<&[String]>,
) -> Result<(Reassignments, u64), metastore::ClientError> {
    let kvs = match topics {
        None => {
            // One read covers the records and the marker (both start with this), so they come
            // from one revision and cost one read index.
            const RECORDS_AND_MARKER: &str = "/admin/reassign";
            debug_assert!(keys::REASSIGNMENTS.starts_with(RECORDS_AND_MARKER));
            debug_assert!(keys::REASSIGN_CANCEL.starts_with(RECORDS_AND_MARKER));
            let resp = client.range_req(range(RECORDS_AND_MARKER.into())).await?;
            resp.kvs
        }
        Some(topics) => {
            let records = futures::future::try_join_all(
                topics
                    .iter()
                    .map(|t| client.range_req(range(keys::topic_reassignments(t)))),
            );
            let (marker, records) = tokio::try_join!(client.get(keys::REASSIGN_CANCEL), records)?;
            marker
                .into_iter()
                .chain(records.into_iter().flat_map(|r| r.kvs))
                .collect()
        }
    };
    Ok(crate::off_runtime(move || {
        let mut out = BTreeMap::new();
        let mut marker = 0;
        for kv in kvs {
            if kv.key == keys::REASSIGN_CANCEL {
                marker = kv.mod_revision;
                continue;
            }
            if let (Some((t, p)), Ok(r)) = (
                keys::parse_reassignment_key(&kv.key),
                ReassignmentRecord::decode(kv.value.as_ref()),
            ) {
                out.insert((t.to_string(), p), (r, kv.mod_revision));
            }
        }
        (out, marker)
    })
    .await)
}

/// A read of every key under `prefix`.
fn range(prefix: String) -> pb::RangeRequest {
    pb::RangeRequest {
        prefix,
        ..Default::default()
    }
}

/// The distinct topics of a request's partitions.
pub(crate) fn topics_of<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let (mut set, mut last) = (BTreeSet::new(), None);
    // A request names a topic's partitions together: a million of them cost one insert each
    // only when they are scattered.
    for n in names {
        if last != Some(n) {
            set.insert(n);
            last = Some(n);
        }
    }
    set.into_iter().map(str::to_string).collect()
}

/// A delete of `key`.
pub(crate) fn delete_op(key: String) -> pb::Op {
    pb::Op {
        op: Some(pb::op::Op::Delete(pb::DeleteOp { key })),
    }
}

pub(crate) fn unclean_allowed(view: &ClusterView, topic: &str) -> bool {
    view.topics
        .get(topic)
        .and_then(|t| t.record.as_ref())
        .is_some_and(|r| topic_config::unclean_election_allowed(&r.config))
}

/// The writes of one partition's change: the partition, its guards and ops.
pub(crate) struct Change {
    /// The partition changed (topic, partition).
    pub partition: (String, u32),
    /// What must still hold: the partition's revision as planned on.
    pub guards: Vec<pb::Guard>,
    /// The partition's next state, and its reassignment record's put or delete.
    pub ops: Vec<pb::Op>,
}

/// Writes a partition's next state and its reassignment record, or removes the record when
/// `had_record`. Guarded by the partition's revision alone: every write of a reassignment record
/// writes its partition in the same transaction, so that revision stands for both, provided the
/// record was read after the partition (as [`load_moves`] reads them; and a 100,000-partition
/// request carries half the guards).
pub(crate) fn change(
    topic: &str,
    p: u32,
    partition_rev: u64,
    state: &PartitionState,
    record: Option<&ReassignmentRecord>,
    had_record: bool,
) -> Change {
    let pkey = keys::partition(topic, p);
    let mut ops = vec![put_op(pkey.clone(), state)];
    match record {
        Some(r) => ops.push(put_op(keys::reassignment(topic, p), r)),
        None if had_record => ops.push(delete_op(keys::reassignment(topic, p))),
        None => {}
    }
    Change {
        partition: (topic.to_string(), p),
        guards: vec![at_revision(pkey, partition_rev)],
        ops,
    }
}

fn refusal(topic: &str, p: u32, code: ErrorCode, message: String) -> PartitionResult {
    PartitionResult {
        topic: topic.to_string(),
        partition: p,
        error_code: code.0,
        error_message: message,
    }
}

/// The state a request is planned on: the cluster view, the reassignments, the cancel-all
/// marker's revision (0: absent) and the broker config records (for arming throttles).
pub(crate) struct Moves {
    /// Brokers, topics and partitions.
    pub view: ClusterView,
    /// The reassignment records.
    pub moving: Reassignments,
    /// The cancel-all marker's revision (0: absent).
    pub marker: u64,
    /// The broker config records.
    pub brokers: crate::throttles::BrokerConfigs,
}

/// Reads the state a request on `topics` is planned on: of those topics (or, when there are
/// many, of the whole cluster, [`read_alone`]) the view and the broker configs side by side
/// (each read waits for its own read index, which a busy leader is slow to confirm), then the
/// reassignments. Not all at once: a record changes only with its partition, so a record read
/// after its partition is never older than it and the partition's guard covers both. Read side
/// by side, a record from just before a completion met the completed partition: a cancel then
/// refused it as leaving no original replica in sync (the move had finished), and could have
/// rolled a finished move back.
pub(crate) async fn load_moves(client: &Client, topics: &[String]) -> Result<Moves, metastore::ClientError> {
    let (view, brokers) = tokio::try_join!(
        load_topics_view(client, topics, TopicDepth::AllPartitions),
        crate::throttles::load_broker_configs(client)
    )?;
    let (moving, marker) = load_reassignments(client, read_alone(topics)).await?;
    Ok(Moves {
        view,
        moving,
        marker,
        brokers,
    })
}

/// What a request's partitions decided, before the writes are put together.
pub(crate) enum Decided {
    Refused(AlterPartitionReassignmentsResponse),
    /// The changes (in key order, [`key_order`]), the answers (in the request's order), and the
    /// scopes the partitions left moving touch (for arming auto-remove throttles).
    Write(Vec<Change>, Vec<PartitionResult>, crate::throttles::Touched),
}

/// What every partition of a request is decided against.
struct AlterContext<'a> {
    view: &'a ClusterView,
    moving: &'a Reassignments,
    marker: u64,
    live: BTreeSet<i32>,
    throttle: u64,
    now: u64,
}

/// One partition of a request: its change, and its next state when it is left moving by a
/// submit (a cancel, or a target already met, arms nothing).
fn plan_partition(t: &ReassignmentTarget, cx: &AlterContext<'_>) -> Result<(Change, Option<PartitionState>), Refusal> {
    let (topic, p) = (t.topic.as_str(), t.partition);
    let entry = cx.view.partition(topic, p).ok_or_else(|| {
        Refusal::new(
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            format!("partition {topic}-{p} does not exist"),
        )
    })?;
    let existing = cx.moving.get(&(topic.to_string(), p));
    let Some(target) = &t.replicas else {
        let Some((record, _)) = existing else {
            return Err(Refusal::new(
                ErrorCode::NO_REASSIGNMENT_IN_PROGRESS,
                format!("there is no reassignment of {topic}-{p} to cancel"),
            ));
        };
        let state = reassignment::cancel(&entry.state, record, &cx.live, unclean_allowed(cx.view, topic))
            .map_err(|e| e.context(format!("{topic}-{p}")))?;
        return Ok((change(topic, p, entry.mod_revision, &state, None, true), None));
    };
    if cx.marker != 0 {
        return Err(Refusal::new(
            ErrorCode::REASSIGNMENT_CANCEL_IN_PROGRESS,
            "a cancel-all is in force; remove it (RemoveCancel) before submitting",
        ));
    }
    reassignment::validate_target(&target.brokers, &cx.live).map_err(|e| e.context(format!("{topic}-{p}")))?;
    reassignment::validate_dirs(&target.brokers, &t.log_dirs, &cx.view.brokers)
        .map_err(|e| e.context(format!("{topic}-{p}")))?;
    let sub = reassignment::submit(
        &entry.state,
        existing.map(|(r, _)| r),
        &target.brokers,
        &t.log_dirs,
        cx.throttle,
        cx.now,
        &cx.live,
    );
    let c = change(
        topic,
        p,
        entry.mod_revision,
        &sub.state,
        sub.record.as_ref(),
        existing.is_some(),
    );
    let moving = reassignment::is_moving(&sub.state).then_some(sub.state);
    Ok((c, moving))
}

/// Whether a refusal of one partition leaves the rest of the request to go ahead: a cancel with
/// nothing to cancel, or one that would leave no original replica in sync. Both come from the
/// partition's state at the time, not from the request.
fn answered_alone(code: ErrorCode) -> bool {
    code == ErrorCode::NO_REASSIGNMENT_IN_PROGRESS || code == ErrorCode::ELIGIBLE_LEADERS_NOT_AVAILABLE
}

/// The answer to a request with refused partitions: nothing is written.
fn refused_whole(results: Vec<PartitionResult>) -> AlterPartitionReassignmentsResponse {
    let refused: Vec<&PartitionResult> = results.iter().filter(|r| r.error_code != 0).collect();
    // Name a partition that refused the request, not one only answered alone.
    let first = refused
        .iter()
        .find(|r| !answered_alone(ErrorCode(r.error_code)))
        .map(|r| r.error_message.clone());
    AlterPartitionReassignmentsResponse {
        error_code: ErrorCode::INVALID_REQUEST.0,
        error_message: format!(
            "nothing was changed: {} partition(s) refused, the first: {}",
            refused.len(),
            first.unwrap_or_default()
        ),
        results,
    }
}

/// The positions of `partitions` in the order of their keys, each with its sort key: grouped by
/// topic (in the order topics are first named), each topic's by [`keys::partition_key_rank`],
/// a repeated partition after its first naming. Planned and written in this order, neighbouring
/// keys reach the store's tree in turn.
pub(crate) fn key_order<'a>(partitions: impl Iterator<Item = (&'a str, u32)>) -> Vec<((usize, u64), usize)> {
    let mut topics = BTreeMap::new();
    let mut keyed: Vec<((usize, u64), usize)> = partitions
        .enumerate()
        .map(|(i, (topic, p))| {
            let n = topics.len();
            let topic = *topics.entry(topic).or_insert(n);
            ((topic, keys::partition_key_rank(p)), i)
        })
        .collect();
    // Unique with the position, so unstable is deterministic and the first naming comes first.
    keyed.sort_unstable();
    keyed
}

/// The request's partitions in key order ([`key_order`]), as indexes into it, each with whether
/// it repeats the partition before it (a partition named twice is refused).
fn request_order(req: &AlterPartitionReassignmentsRequest) -> Vec<(usize, bool)> {
    let mut last = None;
    key_order(req.partitions.iter().map(|t| (t.topic.as_str(), t.partition)))
        .into_iter()
        .map(|(key, i)| (i, last.replace(key) == Some(key)))
        .collect()
}

/// Partitions planned per thread, at least ([`crate::par_map`]).
pub(crate) const PLAN_CHUNK: usize = 4_000;

/// Plans every partition of a request against one read state. A large request is planned on
/// every core: a million partitions take seconds of CPU, and nothing else runs meanwhile.
pub(crate) fn plan_alter(
    req: &AlterPartitionReassignmentsRequest,
    view: &ClusterView,
    moving: &Reassignments,
    marker: u64,
    now_ms: u64,
) -> Decided {
    let throttle = match req.throttle_rate {
        Some(t) if t <= 0 => {
            return Decided::Refused(AlterPartitionReassignmentsResponse {
                error_code: ErrorCode::INVALID_THROTTLE.0,
                error_message: format!("throttle_rate: {t} bytes/s; a throttle must be greater than 0"),
                results: vec![],
            })
        }
        Some(t) => t as u64,
        None => 0,
    };
    let cx = AlterContext {
        view,
        moving,
        marker,
        live: view.live_brokers(),
        throttle,
        now: now_ms,
    };
    let order = request_order(req);
    let plan_one = |&(i, repeated): &(usize, bool)| {
        let t = &req.partitions[i];
        let outcome = if repeated {
            Err(Refusal::new(
                ErrorCode::INVALID_REQUEST,
                format!("partition {}-{} appears twice in the request", t.topic, t.partition),
            ))
        } else {
            plan_partition(t, &cx)
        };
        (i, outcome)
    };
    let planned = crate::par_map(&order, PLAN_CHUNK, plan_one);
    let n = req.partitions.len();
    let mut results: Vec<Option<PartitionResult>> = vec![None; n];
    let mut changes = Vec::with_capacity(n);
    let mut touched = crate::throttles::Touched::default();
    let mut failed = false;
    for (i, outcome) in planned {
        let t = &req.partitions[i];
        let (topic, p) = (t.topic.as_str(), t.partition);
        results[i] = Some(match outcome {
            Ok((c, moved)) => {
                changes.push(c);
                if let Some(state) = moved {
                    touched.add(topic, &state);
                }
                refusal(topic, p, ErrorCode::NONE, String::new())
            }
            Err(Refusal { code, message }) => {
                failed |= !answered_alone(code);
                refusal(topic, p, code, message)
            }
        });
    }
    // Every index of the request is in `order` once, so every slot was filled.
    let results: Vec<PartitionResult> = results.into_iter().flatten().collect();
    debug_assert_eq!(results.len(), n);
    if failed {
        return Decided::Refused(refused_whole(results));
    }
    Decided::Write(changes, results, touched)
}

/// The guards and ops of `changes`, after `guards`, in the order given (planners hand them in
/// key order, [`key_order`]).
pub(crate) fn merge(changes: Vec<Change>, mut guards: Vec<pb::Guard>) -> (Vec<pb::Guard>, Vec<pb::Op>) {
    guards.reserve(changes.iter().map(|c| c.guards.len()).sum());
    // Room for the few ops callers append (the submit epoch, the cancel marker), so that no
    // push copies a million-op vector.
    let mut ops = Vec::with_capacity(changes.iter().map(|c| c.ops.len()).sum::<usize>() + 2);
    for c in changes {
        guards.extend(c.guards);
        ops.extend(c.ops);
    }
    (guards, ops)
}

/// A request's writes and answer: its partitions' changes guarded by the cancel-all marker as it
/// was read and, when a submit leaves partitions moving, the arming of the auto-remove throttles
/// in scope and the put of the submit epoch (which tells their removal a submit happened).
pub(crate) fn alter_writes(
    req: &AlterPartitionReassignmentsRequest,
    m: &Moves,
    now_ms: u64,
) -> Plan<AlterPartitionReassignmentsResponse> {
    let (changes, results, touched) = match plan_alter(req, &m.view, &m.moving, m.marker, now_ms) {
        Decided::Refused(r) => return Plan::answer(r),
        Decided::Write(c, r, s) => (c, r, s),
    };
    let answer = AlterPartitionReassignmentsResponse {
        results,
        ..Default::default()
    };
    if req.validate_only || changes.is_empty() {
        return Plan::answer(answer);
    }
    let marker_guard = at_revision(keys::REASSIGN_CANCEL.into(), m.marker);
    let (mut guards, mut ops) = merge(changes, vec![marker_guard]);
    if !touched.is_empty() {
        let (g, o) = crate::throttles::arming(&m.view, &m.brokers, touched);
        guards.extend(g);
        ops.extend(o);
        ops.push(pb::Op {
            op: Some(pb::op::Op::Put(pb::PutOp {
                key: keys::REASSIGN_EPOCH.into(),
                value: Default::default(),
                lease: 0,
            })),
        });
    }
    Plan::write(guards, ops, answer)
}

/// AlterPartitionReassignments: the whole request in one guarded transaction; new
/// reassignments are stamped `now_ms`.
pub async fn alter(
    client: &Client,
    req: AlterPartitionReassignmentsRequest,
    now_ms: u64,
) -> Result<AlterPartitionReassignmentsResponse, metastore::ClientError> {
    let topics = topics_of(req.partitions.iter().map(|t| t.topic.as_str()));
    let req = std::sync::Arc::new(req);
    // Held to the end, so that the request is freed off the runtime, not where the plan drops it.
    let last = req.clone();
    let kept_changing = Refusal::new(
        ErrorCode::INVALID_UPDATE_VERSION,
        "the partitions kept changing while the request was applied; retry",
    );
    let outcome = Runner::new(client, "reassignment request", kept_changing)
        .run_off_runtime(
            || load_moves(client, &topics),
            move |m: Moves| Ok(alter_writes(&req, &m, now_ms)),
        )
        .await;
    drop(tokio::task::spawn_blocking(move || drop(last)));
    let outcome = outcome?;
    Ok(outcome.unwrap_or_else(|e| AlterPartitionReassignmentsResponse {
        error_code: e.code.0,
        error_message: e.message,
        results: vec![],
    }))
}

/// ListPartitionReassignments.
pub async fn list(
    client: &Client,
    req: ListPartitionReassignmentsRequest,
) -> Result<ListPartitionReassignmentsResponse, metastore::ClientError> {
    let wanted: BTreeSet<(String, u32)> = req
        .partitions
        .iter()
        .map(|tp| (tp.topic.clone(), tp.partition))
        .collect();
    // Only the topics asked about, or with moves: the records come first when every move is
    // asked for (they name the topics), and then one whose partition stopped moving before it
    // was read is left out.
    let (view, (moving, marker)) = if wanted.is_empty() {
        let (moving, marker) = load_reassignments(client, None).await?;
        let topics = topics_of(moving.keys().map(|(t, _)| t.as_str()));
        (
            load_topics_view(client, &topics, TopicDepth::AllPartitions).await?,
            (moving, marker),
        )
    } else {
        let topics = topics_of(wanted.iter().map(|(t, _)| t.as_str()));
        let view = load_topics_view(client, &topics, TopicDepth::AllPartitions).await?;
        (view, load_reassignments(client, read_alone(&topics)).await?)
    };
    let reassignments = moving
        .into_iter()
        .filter(|(k, _)| wanted.is_empty() || wanted.contains(k))
        .filter_map(|((topic, p), (r, _))| {
            let state = view.partition(&topic, p).map(|e| e.state.clone())?;
            if !reassignment::is_moving(&state) {
                return None;
            }
            Some(OngoingReassignment {
                topic,
                partition: p,
                replicas: state.replicas,
                adding: state.adding,
                removing: state.removing,
                original_replicas: r.original,
                target: r.target,
                throttle_rate: r.throttle_rate,
                progress: vec![],
                target_log_dirs: r.target_log_dirs,
                dir_pending: state.dir_pending,
            })
        })
        .collect();
    Ok(ListPartitionReassignmentsResponse {
        reassignments,
        cancel_in_progress: marker != 0,
        ..Default::default()
    })
}

/// Completion as the ISR-change path and the active controller apply it: the partition's
/// completed state and the deletion of its reassignment key, guarded like every change.
pub fn completion_ops(
    topic: &str,
    p: u32,
    partition_rev: u64,
    state: &PartitionState,
) -> (Vec<pb::Guard>, Vec<pb::Op>) {
    let c = change(topic, p, partition_rev, state, None, true);
    (c.guards, c.ops)
}

#[cfg(test)]
#[path = "reassign_admin_tests.rs"]
mod tests;
