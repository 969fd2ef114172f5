//! A broker's report that its replica reached the log dir a reassignment named
//! (AssignReplicaDir): the partition leaves `dir_pending`, which may complete the move in the
//! same transaction. [`assign_replica_dirs`] takes many at once ([`crate::batch`]): a bulk move
//! reports thousands of replicas together.

use proto::cluster_view::ClusterView;
use proto::errors::{ErrorCode, Refusal};
use proto::ferry::*;
use proto::keys;

use metastore::Client;

use crate::batch::{self, BatchWrite, Decided};
use crate::reassign_admin::{change, merge};
use crate::reassignment;
use crate::store::at_revision;
use crate::write_runner::{Plan, Runner};

/// AssignReplicaDir's answer, and whether its write completes the reassignment (`None`: nothing
/// was written).
struct DirAnswer {
    response: AssignReplicaDirResponse,
    completes: Option<bool>,
}

/// A dir report's writes and answer, on the partition (and brokers) and whether the cancel-all
/// marker is present.
fn dir_writes(req: &AssignReplicaDirRequest, view: &ClusterView, cancel_marker: bool) -> Plan<DirAnswer> {
    let answer = |response| {
        Plan::answer(DirAnswer {
            response,
            completes: None,
        })
    };
    let name = format!("{}-{}", req.topic, req.partition);
    let Some(entry) = view.partition(&req.topic, req.partition) else {
        return answer(AssignReplicaDirResponse {
            error_code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0,
            error_message: format!("partition {name} does not exist"),
            state: None,
        });
    };
    let Some(next) = reassignment::dir_reached(&entry.state, req.broker, &req.log_dir, &view.live_brokers()) else {
        return answer(AssignReplicaDirResponse {
            state: Some(entry.state.clone()),
            ..Default::default()
        });
    };
    if cancel_marker {
        return answer(AssignReplicaDirResponse {
            error_code: ErrorCode::REASSIGNMENT_CANCEL_IN_PROGRESS.0,
            error_message: format!("{name}: a cancel-all is rolling back its reassignment"),
            state: Some(entry.state.clone()),
        });
    }
    let completes = !next.is_moving();
    // Completion drops the record from the state; otherwise it stays as it is.
    let c = change(&req.topic, req.partition, entry.mod_revision, &next);
    let marker_guard = at_revision(keys::REASSIGN_CANCEL.into(), 0);
    let (guards, ops) = merge(vec![c], vec![marker_guard]);
    let response = AssignReplicaDirResponse {
        state: Some(next),
        ..Default::default()
    };
    Plan::write(
        guards,
        ops,
        DirAnswer {
            response,
            completes: Some(completes),
        },
    )
}

/// AssignReplicaDir: a broker's replica is in the log dir its reassignment named, which may
/// complete the reassignment in the same transaction. A report that changes nothing (a repeat,
/// or a dir no longer named) answers the current state.
pub async fn assign_replica_dir(
    client: &Client,
    req: AssignReplicaDirRequest,
) -> Result<AssignReplicaDirResponse, metastore::ClientError> {
    let name = format!("{}-{}", req.topic, req.partition);
    let kept_changing = Refusal::new(
        ErrorCode::INVALID_UPDATE_VERSION,
        format!("{name}: the partition kept changing; retry"),
    );
    let read = || async {
        tokio::try_join!(
            crate::store::load_partition_view(client, &req.topic, req.partition),
            client.get(keys::REASSIGN_CANCEL)
        )
    };
    let outcome = Runner::new(client, "replica dir report", kept_changing)
        .run(read, |(view, marker)| Ok(dir_writes(&req, &view, marker.is_some())))
        .await?;
    let answer = match outcome {
        Ok(a) => a,
        Err(e) => {
            return Ok(AssignReplicaDirResponse {
                error_code: e.code.0,
                error_message: e.message,
                state: None,
            })
        }
    };
    if let Some(completes) = answer.completes {
        if completes {
            let replicas = answer.response.state.as_ref().map(|s| s.replicas.clone());
            tracing::info!(partition = name, replicas = ?replicas.unwrap_or_default(), "reassignment completed");
        }
        tracing::info!(
            partition = name,
            broker = req.broker,
            dir = req.log_dir,
            "replica reached its named log dir"
        );
    }
    Ok(answer.response)
}

/// AssignReplicaDirs: the reports decided on one read and written in one transaction
/// ([`batch::serve`]); what the batch cannot settle (a cancel-all in force, a partition that
/// changed, a partition named twice) is served by [`assign_replica_dir`]. Answers are in
/// request order.
pub async fn assign_replica_dirs(
    client: &Client,
    reqs: Vec<AssignReplicaDirRequest>,
) -> Result<Vec<AssignReplicaDirResponse>, metastore::ClientError> {
    let decide = |req: &AssignReplicaDirRequest, view: &ClusterView| {
        let plan = dir_writes(req, view, false);
        let Some(completes) = plan.answer.completes else {
            return Decided::Answer(plan.answer.response);
        };
        let completes = completes.then(|| {
            let replicas = plan.answer.response.state.as_ref().map(|s| s.replicas.clone());
            (format!("{}-{}", req.topic, req.partition), replicas.unwrap_or_default())
        });
        Decided::Write(BatchWrite {
            plan: Plan::write(plan.guards, plan.ops, plan.answer.response),
            // The write guards the cancel-all marker's absence.
            cancel_sensitive: true,
            completes,
        })
    };
    batch::serve(
        client,
        &reqs,
        |r| (r.topic.as_str(), r.partition),
        decide,
        |r| assign_replica_dir(client, r),
    )
    .await
}
