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
use proto::cluster_view::ClusterView;
use proto::errors::{ErrorCode, Refusal};
use proto::ferry::*;
use proto::metastore as pb;
use proto::{keys, topic_config};

use crate::reassignment;
use crate::store::{at_revision, load_topics_view, put_op, TopicDepth};
use crate::write_runner::{Plan, Runner};

/// The cancel-all marker's revision, 0 when it is absent.
pub async fn load_marker(client: &Client) -> Result<u64, metastore::ClientError> {
    Ok(client.get(keys::REASSIGN_CANCEL).await?.map_or(0, |kv| kv.mod_revision))
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

pub(crate) fn unclean_allowed(view: &ClusterView, topic: &str) -> bool {
    view.topics
        .get(topic)
        .and_then(|t| t.record.as_ref())
        .is_some_and(|r| topic_config::unclean_election_allowed(&r.config))
}

/// The writes of one partition's change: the partition, its guard and its put.
pub struct Change {
    /// The partition changed (topic, partition).
    pub partition: (String, u32),
    /// What must still hold: the partition's revision as planned on.
    pub guard: pb::Guard,
    /// The put of the partition's next state (its reassignment record with it).
    pub op: pb::Op,
}

/// Writes a partition's next state, guarded by the revision it was planned on. The state holds
/// the reassignment record, so one key and one guard cover both.
pub fn change(topic: &str, p: u32, partition_rev: u64, state: &PartitionState) -> Change {
    let pkey = keys::partition(topic, p);
    Change {
        partition: (topic.to_string(), p),
        guard: at_revision(pkey.clone(), partition_rev),
        op: put_op(pkey, state),
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

/// The state a request is planned on: the cluster view (its partitions hold their reassignment
/// records), the cancel-all marker's revision (0: absent) and the broker config records (for
/// arming throttles).
pub(crate) struct Moves {
    /// Brokers, topics and partitions.
    pub view: ClusterView,
    /// The cancel-all marker's revision (0: absent).
    pub marker: u64,
    /// The broker config records.
    pub brokers: crate::throttles::BrokerConfigs,
}

/// Reads the state a request on `topics` is planned on: of those topics the view (with the
/// partitions' reassignment records), the broker configs and the cancel-all marker, side by side.
pub(crate) async fn load_moves(client: &Client, topics: &[String]) -> Result<Moves, metastore::ClientError> {
    let (view, brokers, marker) = tokio::try_join!(
        load_topics_view(client, topics, TopicDepth::AllPartitions),
        crate::throttles::load_broker_configs(client),
        load_marker(client)
    )?;
    Ok(Moves { view, marker, brokers })
}

/// What a request's partitions decided, before the writes are put together.
pub(crate) enum Decided {
    Refused(AlterPartitionReassignmentsResponse),
    /// The changes (in key order, [`key_order`]), the refused partitions' answers (in the
    /// request's order), and the scopes the partitions left moving touch (for arming auto-remove
    /// throttles).
    Write(Vec<Change>, Vec<PartitionResult>, crate::throttles::Touched),
}

/// What every partition of a request is decided against.
struct AlterContext<'a> {
    view: &'a ClusterView,
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
    let Some(target) = &t.replicas else {
        let state = reassignment::cancel(&entry.state, &cx.live, unclean_allowed(cx.view, topic))
            .map_err(|e| e.context(format!("{topic}-{p}")))?;
        return Ok((change(topic, p, entry.mod_revision, &state), None));
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
    let next = reassignment::submit(
        &entry.state,
        &target.brokers,
        &t.log_dirs,
        cx.throttle,
        cx.now,
        &cx.live,
    );
    let c = change(topic, p, entry.mod_revision, &next);
    let moving = next.is_moving().then_some(next);
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
    debug_assert!(results.iter().all(|r| r.error_code != 0));
    // Name a partition that refused the request, not one only answered alone.
    let first = results
        .iter()
        .find(|r| !answered_alone(ErrorCode(r.error_code)))
        .map(|r| r.error_message.clone());
    AlterPartitionReassignmentsResponse {
        error_code: ErrorCode::INVALID_REQUEST.0,
        error_message: format!(
            "nothing was changed: {} partition(s) refused, the first: {}",
            results.len(),
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
    let mut changes = Vec::with_capacity(req.partitions.len());
    let mut refused = Vec::new();
    let mut touched = crate::throttles::Touched::default();
    let mut failed = false;
    for (i, outcome) in planned {
        let t = &req.partitions[i];
        let (topic, p) = (t.topic.as_str(), t.partition);
        match outcome {
            Ok((c, moved)) => {
                changes.push(c);
                if let Some(state) = moved {
                    touched.add(topic, &state);
                }
            }
            Err(Refusal { code, message }) => {
                failed |= !answered_alone(code);
                refused.push((i, refusal(topic, p, code, message)));
            }
        }
    }
    // Answered in the request's order; an accepted partition is not answered on its own (a
    // million `NONE`s would only double what the client sends and reads).
    refused.sort_unstable_by_key(|(i, _)| *i);
    let results: Vec<PartitionResult> = refused.into_iter().map(|(_, r)| r).collect();
    if failed {
        return Decided::Refused(refused_whole(results));
    }
    Decided::Write(changes, results, touched)
}

/// The guards and ops of `changes`, after `guards`, in the order given (planners hand them in
/// key order, [`key_order`]).
pub(crate) fn merge(changes: Vec<Change>, mut guards: Vec<pb::Guard>) -> (Vec<pb::Guard>, Vec<pb::Op>) {
    guards.reserve(changes.len());
    // Room for the few ops callers append (the submit epoch, the cancel marker), so that no
    // push copies a million-op vector.
    let mut ops = Vec::with_capacity(changes.len() + 2);
    for c in changes {
        guards.push(c.guard);
        ops.push(c.op);
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
    let (changes, results, touched) = match plan_alter(req, &m.view, m.marker, now_ms) {
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

/// ListPartitionReassignments: of the partitions asked about (every partition when none is
/// named, as Kafka's controller walks its whole image), those whose state holds a reassignment.
pub async fn list(
    client: &Client,
    req: ListPartitionReassignmentsRequest,
) -> Result<ListPartitionReassignmentsResponse, metastore::ClientError> {
    let wanted: BTreeSet<(String, u32)> = req
        .partitions
        .iter()
        .map(|tp| (tp.topic.clone(), tp.partition))
        .collect();
    let read = async {
        if wanted.is_empty() {
            crate::store::load_view(client).await
        } else {
            let topics = topics_of(wanted.iter().map(|(t, _)| t.as_str()));
            load_topics_view(client, &topics, TopicDepth::AllPartitions).await
        }
    };
    let (view, marker) = tokio::try_join!(read, load_marker(client))?;
    let reassignments = crate::off_runtime(move || {
        // Every partition, or only those named (looked up, not searched for).
        let partitions: Box<dyn Iterator<Item = (&String, u32, &PartitionState)>> = if wanted.is_empty() {
            Box::new(
                view.topics
                    .iter()
                    .flat_map(|(topic, t)| t.partitions.iter().map(move |(p, e)| (topic, *p, &e.state))),
            )
        } else {
            Box::new(
                wanted
                    .iter()
                    .filter_map(|(topic, p)| Some((topic, *p, &view.partition(topic, *p)?.state))),
            )
        };
        partitions
            .filter_map(|(topic, p, state)| {
                let r = state.reassignment.clone()?;
                Some(OngoingReassignment {
                    topic: topic.clone(),
                    partition: p,
                    replicas: state.replicas.clone(),
                    adding: state.adding.clone(),
                    removing: state.removing.clone(),
                    original_replicas: r.original,
                    target: r.target,
                    throttle_rate: r.throttle_rate,
                    progress: vec![],
                    target_log_dirs: r.target_log_dirs,
                    dir_pending: state.dir_pending.clone(),
                })
            })
            .collect()
    })
    .await;
    Ok(ListPartitionReassignmentsResponse {
        reassignments,
        cancel_in_progress: marker != 0,
        ..Default::default()
    })
}

#[cfg(test)]
#[path = "reassign_admin_tests.rs"]
mod tests;
