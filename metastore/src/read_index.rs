//! Linearizable reads: the leader confirms its leadership with one quorum round, shared by every
//! read that arrived before the round started.

use openraft::error::{CheckIsLeaderError, RaftError};
use tokio::sync::{mpsc, oneshot};

use crate::types::{Node, NodeId, Raft};

/// Why no read index could be had.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReadIndexError {
    /// This node is not the leader; the leader, if known, is given.
    #[error("not the leader")]
    NotLeader {
        /// The leader's id and address.
        leader: Option<(NodeId, String)>,
    },
    /// The quorum round failed.
    #[error("read index unavailable: {0}")]
    Unavailable(String),
}

type Waiter = oneshot::Sender<Result<u64, ReadIndexError>>;

/// Batches read-index requests: one quorum round per batch.
#[derive(Clone)]
pub struct ReadIndex {
    tx: mpsc::UnboundedSender<Waiter>,
}

impl ReadIndex {
    /// Starts the batching task for `raft`.
    pub fn start(raft: Raft) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(raft, rx));
        Self { tx }
    }

    /// The index this node must have applied before a read is linearizable (leader only).
    pub async fn read_index(&self) -> Result<u64, ReadIndexError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(tx)
            .map_err(|_| ReadIndexError::Unavailable("node is shutting down".into()))?;
        rx.await
            .map_err(|_| ReadIndexError::Unavailable("node is shutting down".into()))?
    }
}

async fn run(raft: Raft, mut rx: mpsc::UnboundedReceiver<Waiter>) {
    let mut waiters = Vec::new();
    while let Some(first) = rx.recv().await {
        // Every waiter queued now arrived before this round begins, so the round covers it.
        waiters.push(first);
        while let Ok(w) = rx.try_recv() {
            waiters.push(w);
        }
        let res = match raft.get_read_log_id().await {
            Ok((read_log_id, _)) => Ok(read_log_id.map_or(0, |l| l.index)),
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                Err(ReadIndexError::NotLeader {
                    leader: f.leader_id.zip(f.leader_node.map(|n: Node| n.addr)),
                })
            }
            Err(e) => Err(ReadIndexError::Unavailable(e.to_string())),
        };
        for w in waiters.drain(..) {
            let _ = w.send(res.clone());
        }
    }
}
