//! Brokers' per-partition reports served in batches (AlterPartitions, AssignReplicaDirs): every
//! item decided on ONE read of the brokers and the items' partitions, the writes in ONE
//! transaction. A broker catching up on thousands of partitions then costs the controller a
//! read and a write per batch, not per partition. Whatever the batch cannot settle (a guard that
//! failed, a cancel-all in force, a partition named twice) is served item by item, by the same
//! rules as a request of one.

use std::collections::HashSet;
use std::future::Future;

use futures::future::{join_all, try_join_all};
use metastore::Client;
use proto::cluster_view::ClusterView;
use proto::errors::{ErrorCode, Refusal};
use proto::keys;

use crate::store::{apply_kvs, load_brokers_view};
use crate::write_runner::Plan;

/// Most items one batch request may carry.
pub const MAX_BATCH: usize = proto::MAX_REPORT_BATCH;

/// Refuses a batch of more than [`MAX_BATCH`] items; `what` names them in the message.
pub fn within_batch(n: usize, what: &str) -> Result<(), Refusal> {
    if n > MAX_BATCH {
        return Err(Refusal::new(
            ErrorCode::INVALID_REQUEST,
            format!("items: {n} {what} in one request; at most {MAX_BATCH}"),
        ));
    }
    Ok(())
}

/// A batch item's write, decided on the batch's read.
pub struct BatchWrite<A> {
    /// Its guards, ops and answer.
    pub plan: Plan<A>,
    /// Whether it must not land under a cancel-all: a batch holding one reads the marker, and
    /// when it is there each item is served alone, under its own rule.
    pub cancel_sensitive: bool,
    /// The partition and its replicas when the write completes a reassignment (logged).
    pub completes: Option<(String, Vec<i32>)>,
}

/// A batch item decided: answered without a write, or a write.
pub enum Decided<A> {
    /// Answered at once (an unknown partition, a refusal, nothing to change).
    Answer(A),
    /// Written with the batch.
    Write(BatchWrite<A>),
}

/// Serves `reqs`: each decided by `decide` on one view holding the brokers and the partitions
/// `partition_of` names, the writes in one transaction. If a guard failed, nothing was written
/// and each write is served by `alone`; so is every later item of a partition named twice, after
/// the batch. Answers come in request order.
pub async fn serve<R, A, D, F, Fut>(
    client: &Client,
    reqs: &[R],
    partition_of: impl Fn(&R) -> (&str, u32),
    decide: D,
    alone: F,
) -> Result<Vec<A>, metastore::ClientError>
where
    R: Clone,
    D: Fn(&R, &ClusterView) -> Decided<A>,
    F: Fn(R) -> Fut,
    Fut: Future<Output = Result<A, metastore::ClientError>>,
{
    let keys: Vec<String> = reqs
        .iter()
        .map(|r| {
            let (t, p) = partition_of(r);
            keys::partition(t, p)
        })
        .collect();
    let mut view = load_brokers_view(client).await?;
    let read = try_join_all(keys.iter().map(|k| client.get(k))).await?;
    apply_kvs(&mut view, &read.into_iter().flatten().collect::<Vec<_>>());
    let mut answers: Vec<Option<A>> = reqs.iter().map(|_| None).collect();
    let mut writes = Vec::new();
    let mut seen = HashSet::new();
    for (i, req) in reqs.iter().enumerate() {
        if !seen.insert(&keys[i]) {
            continue;
        }
        match decide(req, &view) {
            Decided::Answer(a) => answers[i] = Some(a),
            Decided::Write(w) => writes.push((i, w)),
        }
    }
    let sensitive = writes.iter().any(|(_, w)| w.cancel_sensitive);
    let cancel_all = sensitive && client.get(keys::REASSIGN_CANCEL).await?.is_some();
    let written = !writes.is_empty() && !cancel_all && {
        let (mut guards, mut ops) = (Vec::new(), Vec::new());
        for (_, w) in &writes {
            guards.extend(w.plan.guards.iter().cloned());
            ops.extend(w.plan.ops.iter().cloned());
        }
        crate::store::write(client, guards, ops).await?
    };
    if written {
        for (i, w) in writes {
            if let Some((partition, replicas)) = w.completes {
                tracing::info!(partition, ?replicas, "reassignment completed");
            }
            answers[i] = Some(w.plan.answer);
        }
    } else {
        let retried = join_all(writes.iter().map(|(i, _)| alone(reqs[*i].clone()))).await;
        for ((i, _), answer) in writes.iter().zip(retried) {
            answers[*i] = Some(answer?);
        }
    }
    for (i, answer) in answers.iter_mut().enumerate() {
        if answer.is_none() {
            *answer = Some(alone(reqs[i].clone()).await?);
        }
    }
    Ok(answers.into_iter().flatten().collect())
}
