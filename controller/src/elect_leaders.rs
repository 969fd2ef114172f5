//! ElectLeaders: each partition decided with the builder's election rule and written in its
//! own guarded transaction, answered per partition as Kafka does.

use std::collections::BTreeSet;

use metastore::Client;
use proto::cluster_view::PartitionEntry;
use proto::errors::{ErrorCode, Refusal};
use proto::ferry::*;

use proto::keys;

use crate::limits::RequestLimits;
use crate::partition_change::Election;
use crate::partition_change_builder::{Built, Elect, PartitionChangeBuilder};
use crate::store::{at_revision, load_view, put_op};
use crate::write_runner::{Plan, Runner};

fn refuse<T>(code: ErrorCode, message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal::new(code, message))
}

fn partition_result(topic: &str, partition: u32, r: Result<(), Refusal>) -> PartitionResult {
    let (code, message) = match r {
        Ok(()) => (0, String::new()),
        Err(e) => (e.code.0, e.message),
    };
    PartitionResult {
        topic: topic.to_string(),
        partition,
        error_code: code,
        error_message: message,
    }
}

/// ElectLeaders: each partition decided and written in its own transaction, with its own result
/// (as Kafka answers per partition); one that fails does not stop the others.
pub async fn elect_leaders(
    client: &Client,
    limits: &RequestLimits,
    req: ElectLeadersRequest,
) -> Result<ElectLeadersResponse, metastore::ClientError> {
    if let Err(e) = limits.partitions_in_request("partitions", req.partitions.len() as u64) {
        return Ok(ElectLeadersResponse {
            results: vec![],
            error_code: e.code.0,
            error_message: e.message,
        });
    }
    let view = load_view(client).await?;
    let live = view.live_brokers();
    let targets: Vec<(String, u32)> = if req.partitions.is_empty() {
        view.topics
            .iter()
            .flat_map(|(t, e)| e.partitions.keys().map(move |p| (t.clone(), *p)))
            .collect()
    } else {
        req.partitions
            .iter()
            .map(|tp| (tp.topic.clone(), tp.partition))
            .collect()
    };
    let mut results = Vec::new();
    for (topic, p) in targets {
        let r = match election_writes(&topic, p, view.partition(&topic, p), &live, req.unclean) {
            Ok(plan) => {
                let changed = Refusal::new(
                    ErrorCode::INVALID_UPDATE_VERSION,
                    format!("partition {topic}-{p} changed during the election; retry"),
                );
                Runner::new(client, "election", changed).write(plan).await?
            }
            Err(e) => Err(e),
        };
        results.push(partition_result(&topic, p, r));
    }
    Ok(ElectLeadersResponse {
        results,
        ..Default::default()
    })
}

/// One partition's election: its next state, guarded by the revision it was decided on.
fn election_writes(
    topic: &str,
    p: u32,
    entry: Option<&PartitionEntry>,
    live: &BTreeSet<i32>,
    unclean: bool,
) -> Result<Plan<()>, Refusal> {
    let Some(PartitionEntry { state, mod_revision }) = entry else {
        return refuse(
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            format!("partition {topic}-{p} does not exist"),
        );
    };
    let (election, elect) = if unclean {
        (Election::Unclean, Elect::Any)
    } else {
        (Election::Clean, Elect::Preferred)
    };
    let decided = PartitionChangeBuilder::new(state, live)
        .election(election)
        .elect(elect)
        .build()?;
    let Some(Built { state: new, .. }) = decided else {
        return refuse(
            ErrorCode::ELECTION_NOT_NEEDED,
            format!("partition {topic}-{p} needs no election"),
        );
    };
    let key = keys::partition(topic, p);
    Ok(Plan::write(
        vec![at_revision(key.clone(), *mod_revision)],
        vec![put_op(key, &new)],
        (),
    ))
}
