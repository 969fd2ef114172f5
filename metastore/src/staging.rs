//! Transactions too large for one log entry: their operations go to the log in chunks that the
//! state machine holds aside, and one final entry applies them all, so the transaction stays
//! atomic while no single entry (or replication message) grows past a chunk.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use proto::clock::Clock;
use tonic::Status;

use crate::proposer::Proposer;
use crate::state_machine::SmShared;
use crate::types::{Command, CommandKind, CommandResult, Guard, NodeId, Op, Raft, Txn};

/// A transaction larger than this is staged in chunks of about this size.
pub const CHUNK_BYTES: usize = 1 << 20;
/// A staged transaction not committed within this time is dropped.
const STAGE_TTL: Duration = Duration::from_secs(600);
/// Chunks of one staged transaction proposed at once.
const STAGE_PARALLEL: usize = 4;

/// Splits items (operations or guards) into consecutive chunks of at most `max_bytes` each, by
/// `size`, in order (a larger single item gets a chunk of its own).
pub fn split_by_size<T>(items: Vec<T>, max_bytes: usize, size: impl Fn(&T) -> usize) -> Vec<Vec<T>> {
    let mut chunks = Vec::new();
    let mut cur = Vec::new();
    let mut bytes = 0;
    for item in items {
        let n = size(&item);
        if !cur.is_empty() && bytes + n > max_bytes {
            chunks.push(std::mem::take(&mut cur));
            bytes = 0;
        }
        bytes += n;
        cur.push(item);
    }
    if !cur.is_empty() {
        chunks.push(cur);
    }
    chunks
}

/// Operations in chunks of at most `max_bytes`.
pub fn split_ops(ops: Vec<Op>, max_bytes: usize) -> Vec<Vec<Op>> {
    split_by_size(ops, max_bytes, Op::approx_size)
}

/// Guards in chunks of at most `max_bytes`.
pub fn split_guards(guards: Vec<Guard>, max_bytes: usize) -> Vec<Vec<Guard>> {
    split_by_size(guards, max_bytes, Guard::approx_size)
}

/// Applies a transaction of any size through `write` (one proposal through the leader): one
/// entry when it fits, else staged in chunks and committed by one final entry, which is when it
/// becomes visible, all at once.
pub(crate) async fn write_txn<W, F>(
    write: W,
    request_id: Option<String>,
    txn: Txn,
    started_ms: u64,
) -> Result<CommandResult, Status>
where
    W: Fn(Option<String>, CommandKind) -> F,
    F: Future<Output = Result<CommandResult, Status>>,
{
    let bytes: usize =
        txn.ops.iter().map(Op::approx_size).sum::<usize>() + txn.guards.iter().map(Guard::approx_size).sum::<usize>();
    if bytes <= CHUNK_BYTES {
        return write(request_id, CommandKind::Txn(txn)).await;
    }
    // A fresh staging id for each attempt: a retry of a request whose first attempt was
    // aborted must stage every chunk again, which reusing the ids would skip as duplicates.
    // The commit carries the request id, so the transaction applies at most once, and drops
    // every attempt's stages (their ids start with the request id).
    let attempt = uuid::Uuid::new_v4().simple().to_string();
    let txn_id = match &request_id {
        Some(r) => format!("{r}/{attempt}"),
        None => attempt,
    };
    let timer = std::time::Instant::now();
    // Chunks go in concurrently (the proposer keeps a few proposals in flight); each
    // carries its place, so the order they apply in does not matter.
    let chunks = chunks_of(txn);
    let chunk_count =
        u32::try_from(chunks.len()).map_err(|_| Status::invalid_argument("transaction has too many chunks"))?;
    let stages = chunks.into_iter().enumerate().map(|(i, (guards, ops))| {
        let stage = CommandKind::TxnStage {
            txn_id: txn_id.clone(),
            seq: i as u32,
            guards,
            ops,
            started_ms,
        };
        write(Some(format!("{txn_id}#stage{i}")), stage)
    });
    let staged: Vec<Result<CommandResult, Status>> = futures::stream::iter(stages)
        .buffer_unordered(STAGE_PARALLEL)
        .collect()
        .await;
    if let Some(Err(e)) = staged.into_iter().find(Result::is_err) {
        let abort = CommandKind::TxnAbort { txn_id: txn_id.clone() };
        let _ = write(None, abort).await;
        return Err(e);
    }
    let staged_in = timer.elapsed();
    let commit = CommandKind::TxnCommitCounted {
        txn_id,
        chunks: chunk_count,
        txn: Txn::default(),
    };
    let r = write(request_id, commit).await;
    tracing::debug!(
        bytes,
        staged_ms = staged_in.as_millis() as u64,
        total_ms = timer.elapsed().as_millis() as u64,
        "staged transaction committed"
    );
    r
}

/// A transaction's guards, then its operations, in chunks of at most [`CHUNK_BYTES`] each.
fn chunks_of(txn: Txn) -> Vec<(Vec<Guard>, Vec<Op>)> {
    // Guards are staged too: a request guarding every key it writes carries as many guards
    // as operations, and no entry may outgrow a chunk (a follower must take it within one
    // heartbeat interval).
    split_guards(txn.guards, CHUNK_BYTES)
        .into_iter()
        .map(|guards| (guards, Vec::new()))
        .chain(split_ops(txn.ops, CHUNK_BYTES).into_iter().map(|ops| (Vec::new(), ops)))
        .collect()
}

/// On the leader, drops staged transactions whose writer gave up (crashed or disconnected).
pub fn start_expiry(id: NodeId, raft: Raft, proposer: Proposer, sm: Arc<SmShared>, clock: Clock) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(10));
        loop {
            tick.tick().await;
            if raft.metrics().borrow().current_leader != Some(id) {
                continue;
            }
            let cutoff = clock.wall_ms().saturating_sub(STAGE_TTL.as_millis() as u64);
            let stale: Vec<String> = sm
                .inner
                .read()
                .state
                .staged
                .iter()
                .filter(|(_, t)| t.started_ms < cutoff)
                .map(|(id, _)| id.clone())
                .collect();
            for txn_id in stale {
                let cmd = Command {
                    request_id: None,
                    kind: CommandKind::TxnAbort { txn_id },
                };
                if let Err(e) = proposer.propose(cmd).await {
                    tracing::debug!(error = %e, "dropping a stale staged transaction failed; will retry");
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(n: usize) -> Op {
        Op::Put {
            key: format!("/k/{n}"),
            value: vec![0u8; 100].into(),
            lease: 0,
        }
    }

    #[test]
    fn chunks_keep_order_and_stay_under_the_bound() {
        let ops: Vec<Op> = (0..1000).map(put).collect();
        let chunks = split_ops(ops.clone(), 10_000);
        assert!(chunks.len() > 1);
        assert!(chunks
            .iter()
            .all(|c| c.iter().map(Op::approx_size).sum::<usize>() <= 10_000));
        let joined: Vec<Op> = chunks.into_iter().flatten().collect();
        assert_eq!(joined, ops);
    }

    #[test]
    fn an_oversized_op_gets_its_own_chunk() {
        let big = Op::Put {
            key: "/big".into(),
            value: vec![0u8; 50].into(),
            lease: 0,
        };
        let chunks = split_ops(vec![put(1), big.clone(), put(2)], 60);
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[1], vec![big]);
    }
}
