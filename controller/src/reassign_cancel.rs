//! Cancelling reassignments: of named partitions, and all of them (cancel-all with its marker).
//! What one partition rolls back to is decided by [`reassignment::cancel`]; this module plans
//! and writes it.
//!
//! A cancel of named partitions answers each partition on its own, as Kafka does. It is planned
//! from one read and validated whole (bad input refuses it before anything is written), then
//! written in transactions of [`BATCH`] partitions. A transaction whose guard failed wrote
//! nothing: one of its partitions changed meanwhile (an ISR change, a move completing). Its
//! partitions are cancelled again one at a time, each from a fresh read. Written as one
//! transaction for the whole request, a cancel of 10,000 moving partitions lost every attempt to
//! the ISR changes of the moves it was cancelling.
//!
//! Cancel-all puts its marker first, which stops submissions and adding replicas joining ISRs,
//! then rolls every move back in one transaction.

use std::sync::Arc;

use futures::StreamExt;
use metastore::{Client, ClientError};
use proto::cluster_view::ClusterView;
use proto::errors::{ErrorCode, Refusal};
use proto::ferry::*;
use proto::keys;
use proto::metastore as pb;

use crate::reassign_admin::{
    alter_writes, change, key_order, load_marker, load_moves, merge, plan_alter, topics_of, unclean_allowed, Change,
    Decided, Moves, PLAN_CHUNK,
};
use crate::reassignment;
use crate::store::{at_revision, load_partition_view, load_view, put_op};
use crate::write_runner::{Plan, Runner};

/// Most partitions written in one transaction of a cancel of named partitions.
pub const BATCH: usize = 512;
/// Transactions of one cancel written at once.
const BATCHES_IN_FLIGHT: usize = 4;
/// Partitions cancelled again one at a time, at once.
const SINGLES_IN_FLIGHT: usize = 64;

/// Whether `req` cancels named partitions and nothing else (every target is None) and is meant
/// to be written: [`cancel`] answers such a request.
pub fn is_cancel(req: &AlterPartitionReassignmentsRequest) -> bool {
    !req.validate_only && !req.partitions.is_empty() && req.partitions.iter().all(|t| t.replicas.is_none())
}

/// Splits changes into transactions of at most `size` partitions each, in request order.
fn batches(changes: Vec<Change>, size: usize) -> Vec<Vec<Change>> {
    assert!(size > 0, "a batch holds at least one partition");
    let mut out: Vec<Vec<Change>> = Vec::with_capacity(changes.len().div_ceil(size));
    for c in changes {
        match out.last_mut() {
            Some(b) if b.len() < size => b.push(c),
            _ => out.push(vec![c]),
        }
    }
    out
}

/// The request's answers: its refused partitions, then those cancelled again one at a time that
/// were refused then (an accepted partition is not answered on its own).
fn answer(mut results: Vec<PartitionResult>, again: Vec<PartitionResult>) -> Vec<PartitionResult> {
    results.extend(again.into_iter().filter(|r| r.error_code != 0));
    results
}

/// AlterPartitionReassignments that only cancels ([`is_cancel`]): each partition rolled back
/// and answered on its own.
pub async fn cancel(
    client: &Client,
    req: AlterPartitionReassignmentsRequest,
    now_ms: u64,
) -> Result<AlterPartitionReassignmentsResponse, ClientError> {
    debug_assert!(is_cancel(&req));
    let topics = topics_of(req.partitions.iter().map(|t| t.topic.as_str()));
    let req = Arc::new(req);
    let m = load_moves(client, &topics).await?;
    let planned = {
        let req = req.clone();
        crate::off_runtime(move || plan_alter(&req, &m.view, m.marker, now_ms)).await
    };
    let (changes, results) = match planned {
        Decided::Refused(r) => return Ok(r),
        Decided::Write(changes, results, _) => (changes, results),
    };
    let planned = changes.len();
    let changed = write_batches(client, changes).await?;
    let again: Vec<Result<PartitionResult, ClientError>> = futures::stream::iter(changed)
        .map(|(topic, p)| cancel_one(client, topic, p, now_ms))
        .buffer_unordered(SINGLES_IN_FLIGHT)
        .collect()
        .await;
    let again = again.into_iter().collect::<Result<Vec<_>, _>>()?;
    tracing::info!(
        partitions = planned,
        one_at_a_time = again.len(),
        "reassignments cancelled"
    );
    Ok(AlterPartitionReassignmentsResponse {
        results: answer(results, again),
        ..Default::default()
    })
}

/// A batch's partitions, and whether its transaction was written.
type Written = (Vec<(String, u32)>, bool);

/// Writes the changes in batches; returns the partitions of the batches whose guard failed
/// (nothing of those was written).
async fn write_batches(client: &Client, changes: Vec<Change>) -> Result<Vec<(String, u32)>, ClientError> {
    let changed = Refusal::new(ErrorCode::INVALID_UPDATE_VERSION, "a partition changed meanwhile");
    let runner = Runner::new(client, "reassignment cancel", changed);
    let runner = &runner;
    let written: Vec<Result<Written, ClientError>> = futures::stream::iter(batches(changes, BATCH))
        .map(|batch| async move {
            let partitions: Vec<(String, u32)> = batch.iter().map(|c| c.partition.clone()).collect();
            let (guards, ops) = merge(batch, Vec::new());
            let outcome = runner.write(Plan::write(guards, ops, ())).await?;
            Ok((partitions, outcome.is_ok()))
        })
        .buffer_unordered(BATCHES_IN_FLIGHT)
        .collect()
        .await;
    let mut changed = Vec::new();
    for w in written {
        let (partitions, ok) = w?;
        if !ok {
            changed.extend(partitions);
        }
    }
    Ok(changed)
}

/// Cancels one partition from fresh reads of it, as a request of its own.
async fn cancel_one(client: &Client, topic: String, p: u32, now_ms: u64) -> Result<PartitionResult, ClientError> {
    let req = AlterPartitionReassignmentsRequest {
        partitions: vec![ReassignmentTarget {
            topic: topic.clone(),
            partition: p,
            replicas: None,
            log_dirs: vec![],
        }],
        ..Default::default()
    };
    let kept_changing = Refusal::new(
        ErrorCode::INVALID_UPDATE_VERSION,
        format!("{topic}-{p}: the partition kept changing while cancelling; retry"),
    );
    let outcome = Runner::new(client, "reassignment cancel of one partition", kept_changing)
        .run(
            || load_partition_moves(client, &topic, p),
            |m| Ok(alter_writes(&req, &m, now_ms)),
        )
        .await?;
    let (error_code, error_message) = match outcome {
        Ok(mut r) if r.results.len() == 1 => return Ok(r.results.remove(0)),
        Ok(r) => (r.error_code, r.error_message),
        Err(e) => (e.code.0, e.message),
    };
    Ok(PartitionResult {
        topic,
        partition: p,
        error_code,
        error_message,
    })
}

/// What one partition's cancel is planned on: the partition (with its reassignment record), its
/// topic, the brokers and the cancel-all marker.
async fn load_partition_moves(client: &Client, topic: &str, p: u32) -> Result<Moves, ClientError> {
    let topic_key = keys::topic(topic);
    let (mut view, topic_kv, marker) = tokio::try_join!(
        load_partition_view(client, topic, p),
        client.get(&topic_key),
        load_marker(client)
    )?;
    if let Some(kv) = topic_kv {
        view.apply(&kv.key, Some(kv.value.as_ref()), kv.mod_revision);
    }
    Ok(Moves {
        view,
        marker,
        brokers: Default::default(),
    })
}

/// CancelAllReassignments: sets the marker, then rolls every reassignment it can back in one
/// transaction that puts the marker again.
pub async fn cancel_all(client: &Client) -> Result<CancelAllReassignmentsResponse, metastore::ClientError> {
    let kept_changing = || {
        Refusal::new(
            ErrorCode::INVALID_UPDATE_VERSION,
            "the partitions kept changing while cancelling; retry",
        )
    };
    let refused = |e: Refusal| CancelAllReassignmentsResponse {
        error_code: e.code.0,
        error_message: e.message,
        cancelled: vec![],
    };
    // The marker goes in first, on its own: it stops new submissions and the ISR expansions
    // that would complete the moves being undone, so the rollback below is not raced by them.
    // Put even when present (one write, no read first, no guard): a second cancel-all racing
    // this one only sees its guard fail and reads again.
    let runner = Runner::new(client, "cancel-all", kept_changing());
    let marker = Plan::write(vec![], vec![marker_op()], ());
    if let Err(e) = runner.write(marker).await? {
        return Ok(refused(e));
    }
    let outcome = runner
        .run_off_runtime(
            || async { tokio::try_join!(load_view(client), load_marker(client)) },
            |(view, marker)| Ok(cancel_all_writes(&view, marker)),
        )
        .await?;
    Ok(outcome.unwrap_or_else(refused))
}

fn marker_op() -> pb::Op {
    put_op(keys::REASSIGN_CANCEL.into(), &ReassignmentRecord::default())
}

/// Cancel-all's writes and answer: every move it can roll back and the marker put again, guarded
/// by the marker's revision as read.
fn cancel_all_writes(view: &ClusterView, marker: u64) -> Plan<CancelAllReassignmentsResponse> {
    let (changes, cancelled, refused) = plan_cancel_all(view);
    let (guards, mut ops) = merge(changes, vec![at_revision(keys::REASSIGN_CANCEL.into(), marker)]);
    ops.push(marker_op());
    let answer = CancelAllReassignmentsResponse {
        error_code: if refused.is_empty() {
            0
        } else {
            ErrorCode::ELIGIBLE_LEADERS_NOT_AVAILABLE.0
        },
        error_message: refused.join("; "),
        cancelled,
    };
    Plan::write(guards, ops, answer)
}

/// The changes that roll every move back: (changes, cancelled partitions, refusals).
fn plan_cancel_all(view: &ClusterView) -> (Vec<Change>, Vec<TopicPartition>, Vec<String>) {
    let live = view.live_brokers();
    let moves: Vec<(&String, u32, &proto::cluster_view::PartitionEntry)> = view
        .topics
        .iter()
        .flat_map(|(topic, t)| t.partitions.iter().map(move |(p, e)| (topic, *p, e)))
        .filter(|(_, _, e)| e.state.reassignment.is_some())
        .collect();
    // In key order, so that the changes are written in it.
    let order = key_order(moves.iter().map(|(t, p, _)| (t.as_str(), *p)));
    let moves: Vec<_> = order.into_iter().map(|(_, i)| moves[i]).collect();
    let planned = crate::par_map(&moves, PLAN_CHUNK, |(topic, p, entry)| {
        match reassignment::cancel(&entry.state, &live, unclean_allowed(view, topic)) {
            Ok(state) => Ok(change(topic, *p, entry.mod_revision, &state)),
            Err(e) => Err(format!("{topic}-{p}: {}", e.message)),
        }
    });
    let mut changes = Vec::with_capacity(moves.len());
    let mut cancelled = Vec::with_capacity(moves.len());
    let mut refused = Vec::new();
    for outcome in planned {
        match outcome {
            Ok(c) => {
                cancelled.push(TopicPartition {
                    topic: c.partition.0.clone(),
                    partition: c.partition.1,
                });
                changes.push(c);
            }
            Err(e) => refused.push(e),
        }
    }
    (changes, cancelled, refused)
}

/// RemoveCancel.
pub async fn remove_cancel(client: &Client) -> Result<RemoveCancelResponse, metastore::ClientError> {
    let deleted = client.delete(keys::REASSIGN_CANCEL).await?;
    Ok(RemoveCancelResponse { removed: deleted > 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(p: u32) -> Change {
        change("t", p, 0, &PartitionState::default())
    }

    fn result(p: u32, code: ErrorCode) -> PartitionResult {
        PartitionResult {
            topic: "t".into(),
            partition: p,
            error_code: code.0,
            error_message: String::new(),
        }
    }

    #[test]
    fn changes_go_in_batches_of_at_most_the_size_in_request_order() {
        let sizes = |n, size| {
            batches((0..n).map(c).collect(), size)
                .iter()
                .map(Vec::len)
                .collect::<Vec<_>>()
        };
        assert_eq!(sizes(0, 3), Vec::<usize>::new());
        assert_eq!(sizes(3, 3), vec![3]);
        assert_eq!(sizes(7, 3), vec![3, 3, 1]);
        let order: Vec<u32> = batches((0..5).map(c).collect(), 2)
            .into_iter()
            .flatten()
            .map(|c| c.partition.1)
            .collect();
        assert_eq!(order, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_partition_cancelled_again_and_refused_gets_its_own_answer_and_the_rest_stand() {
        // The planned request refused partition 2 alone; of those cancelled again one at a time,
        // 1 was refused and 3 went through.
        let first = vec![result(2, ErrorCode::NO_REASSIGNMENT_IN_PROGRESS)];
        let again = vec![
            result(1, ErrorCode::NO_REASSIGNMENT_IN_PROGRESS),
            result(3, ErrorCode::NONE),
        ];
        let answered: Vec<_> = answer(first, again)
            .iter()
            .map(|r| (r.partition, ErrorCode(r.error_code)))
            .collect();
        assert_eq!(
            answered,
            vec![
                (2, ErrorCode::NO_REASSIGNMENT_IN_PROGRESS),
                (1, ErrorCode::NO_REASSIGNMENT_IN_PROGRESS)
            ]
        );
    }

    #[test]
    fn only_a_written_request_of_cancels_alone_is_answered_partition_by_partition() {
        let t = |replicas: Option<Vec<i32>>| ReassignmentTarget {
            topic: "t".into(),
            partition: 0,
            replicas: replicas.map(|brokers| Replicas { brokers }),
            log_dirs: vec![],
        };
        let req = |partitions, validate_only| AlterPartitionReassignmentsRequest {
            partitions,
            validate_only,
            ..Default::default()
        };
        assert!(is_cancel(&req(vec![t(None), t(None)], false)));
        assert!(!is_cancel(&req(vec![t(None), t(Some(vec![1]))], false)));
        assert!(!is_cancel(&req(vec![t(None)], true)));
        assert!(!is_cancel(&req(vec![], false)));
    }
}
