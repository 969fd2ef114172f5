//! AlterPartition: a leader's ISR change, decided by the partition change builder and written in
//! a transaction guarded by the revision read, completing a reassignment when it puts the last
//! target replica in sync. [`alter_partitions`] takes many at once, as Kafka's AlterPartition
//! request does, through [`crate::batch`].

use metastore::Client;
use proto::cluster_view::ClusterView;
use proto::errors::{ErrorCode, Refusal};
use proto::ferry::{AlterPartitionRequest, AlterPartitionResponse, PartitionState};
use proto::keys;

use crate::batch::{self, BatchWrite, Decided};
use crate::partition_change::IsrChange;
use crate::partition_change_builder::{joins_adding, Built, Joiners, PartitionChangeBuilder};
use crate::reassign_admin;
use crate::store::{at_revision, load_partition_view};
use crate::write_runner::{Plan, Runner};

/// An ISR change as decided: its writes (answering the partition's next state), the state it was
/// decided on, whether it lets an adding replica join the ISR, and whether it completes a move.
struct IsrWrite {
    plan: Plan<PartitionState>,
    joins_adding: bool,
    completes: bool,
}

/// An AlterPartition decided: answered at once (an unknown partition, a refused change), or a
/// write.
// One per AlterPartition, moved once and never stored: the size of a variant costs nothing.
#[allow(clippy::large_enum_variant)]
enum IsrDecision {
    Answer(AlterPartitionResponse),
    Write(IsrWrite),
}

/// Decides an AlterPartition on the partition's view; `cancel_all` whether a cancel-all is in
/// force (the builder's rule then keeps adding replicas out of the ISR).
fn isr_writes(req: &AlterPartitionRequest, view: &ClusterView, cancel_all: bool) -> IsrDecision {
    let Some(entry) = view.partition(&req.topic, req.partition) else {
        return IsrDecision::Answer(AlterPartitionResponse {
            error_code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0,
            error_message: format!("partition {}-{} does not exist", req.topic, req.partition),
            state: None,
        });
    };
    let change = IsrChange {
        leader: req.leader,
        leader_epoch: req.leader_epoch,
        partition_epoch: req.partition_epoch,
        new_isr: req.new_isr.clone(),
    };
    let live = view.live_brokers();
    let joiners = Joiners {
        incarnations: &req.joining_incarnations,
        registered: &view.brokers,
    };
    // Completion is decided in the same transaction as the ISR change that allows it.
    let built = PartitionChangeBuilder::new(&entry.state, &live)
        .isr(&change, Some(joiners))
        .cancel_all(cancel_all)
        .complete()
        .build();
    let (new, completes) = match built {
        Ok(Some(Built { state, completes })) => (state, completes),
        // The ISR asked for is the ISR stored.
        Ok(None) => (entry.state.clone(), false),
        Err(e) => {
            return IsrDecision::Answer(AlterPartitionResponse {
                error_code: e.code.0,
                error_message: e.message,
                state: Some(entry.state.clone()),
            })
        }
    };
    // A completing state carries no record: the one put ends the move.
    let c = reassign_admin::change(&req.topic, req.partition, entry.mod_revision, &new);
    let (mut guards, ops) = (vec![c.guard], vec![c.op]);
    // While a cancel-all rolls moves back, their adding replicas do not join the ISR: that
    // would complete (or change) the very partitions the rollback is writing. The marker's
    // absence is a guard of the write, so a cancel-all that lands first fails it.
    let joins_adding = joins_adding(&entry.state, &new);
    if joins_adding {
        guards.push(at_revision(keys::REASSIGN_CANCEL.into(), 0));
    }
    IsrDecision::Write(IsrWrite {
        plan: Plan::write(guards, ops, new),
        joins_adding,
        completes,
    })
}

/// AlterPartition: a leader's ISR change, written once (the leader asks again with what it
/// learns), completing a reassignment when it puts the last target replica in sync.
pub async fn alter_partition(
    client: &Client,
    req: AlterPartitionRequest,
) -> Result<AlterPartitionResponse, metastore::ClientError> {
    // The cancel-all marker is read only for a change that lets an adding replica in, and the
    // write guards its absence: a cancel-all that lands in between fails the write, and the
    // change is decided again, when the builder's rule refuses it.
    let mut cancel_all = false;
    loop {
        let view = load_partition_view(client, &req.topic, req.partition).await?;
        let w = match isr_writes(&req, &view, cancel_all) {
            IsrDecision::Write(w)
                if w.joins_adding && !cancel_all && client.get(keys::REASSIGN_CANCEL).await?.is_some() =>
            {
                cancel_all = true;
                continue;
            }
            IsrDecision::Write(w) => w,
            IsrDecision::Answer(answer) => return Ok(named(&req, answer)),
        };
        let changed = Refusal::new(ErrorCode::INVALID_UPDATE_VERSION, "the partition changed meanwhile");
        match Runner::new(client, "ISR change", changed).write(w.plan).await? {
            Ok(new) => {
                if w.completes {
                    tracing::info!(topic = req.topic, partition = req.partition, replicas = ?new.replicas, "reassignment completed");
                }
                return Ok(AlterPartitionResponse {
                    error_code: 0,
                    error_message: String::new(),
                    state: Some(new),
                });
            }
            Err(e) => {
                if w.joins_adding && !cancel_all && client.get(keys::REASSIGN_CANCEL).await?.is_some() {
                    cancel_all = true;
                    continue;
                }
                return Ok(AlterPartitionResponse {
                    error_code: e.code.0,
                    error_message: e.message,
                    state: None,
                });
            }
        }
    }
}

/// AlterPartitions: the changes decided on one read and written in one transaction
/// ([`batch::serve`]); what the batch cannot settle is served by [`alter_partition`]. Answers
/// are in request order.
pub async fn alter_partitions(
    client: &Client,
    reqs: Vec<AlterPartitionRequest>,
) -> Result<Vec<AlterPartitionResponse>, metastore::ClientError> {
    let decide = |req: &AlterPartitionRequest, view: &ClusterView| match isr_writes(req, view, false) {
        IsrDecision::Answer(answer) => Decided::Answer(named(req, answer)),
        IsrDecision::Write(w) => {
            let completes = w.completes.then(|| {
                (
                    format!("{}-{}", req.topic, req.partition),
                    w.plan.answer.replicas.clone(),
                )
            });
            let Plan { guards, ops, answer } = w.plan;
            Decided::Write(BatchWrite {
                plan: Plan::write(
                    guards,
                    ops,
                    AlterPartitionResponse {
                        error_code: 0,
                        error_message: String::new(),
                        state: Some(answer),
                    },
                ),
                // Under a cancel-all each change is decided with its rule, on its own.
                cancel_sensitive: w.joins_adding,
                completes,
            })
        }
    };
    batch::serve(
        client,
        &reqs,
        |r| (r.topic.as_str(), r.partition),
        decide,
        |r| alter_partition(client, r),
    )
    .await
}

/// A refusal that names the partition when the builder's message does not.
fn named(req: &AlterPartitionRequest, mut answer: AlterPartitionResponse) -> AlterPartitionResponse {
    if answer.error_code == ErrorCode::REASSIGNMENT_CANCEL_IN_PROGRESS.0 {
        answer.error_message = format!("{}-{}: {}", req.topic, req.partition, answer.error_message);
    }
    answer
}
