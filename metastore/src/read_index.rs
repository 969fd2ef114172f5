//! Linearizable reads: the leader confirms its leadership with one quorum round, shared by every
//! read that arrived before the round started. A follower's concurrent reads likewise share one
//! request to the leader for its read index.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openraft::error::{CheckIsLeaderError, RaftError};
use proto::raft::ReadIndexRequest;
use tokio::sync::{mpsc, oneshot};

use crate::peers::Peers;
use crate::types::{NodeId, Raft};

/// Why no read index could be had.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReadIndexError {
    /// No leader could answer (none known, or this node was asked to answer as leader and is not).
    #[error("not the leader")]
    NotLeader,
    /// The quorum round or the request to the leader failed.
    #[error("read index unavailable: {0}")]
    Unavailable(String),
}

struct Waiter {
    /// Whether a follower may ask the leader on this waiter's behalf.
    forward: bool,
    tx: oneshot::Sender<Result<u64, ReadIndexError>>,
}

/// Batches read-index requests: one quorum round (or one request to the leader) per batch.
#[derive(Clone)]
pub struct ReadIndex {
    tx: mpsc::UnboundedSender<Waiter>,
    rounds: Arc<AtomicU64>,
}

impl ReadIndex {
    /// Starts the batching task for `raft`.
    pub fn start(id: NodeId, raft: Raft, peers: Peers) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let rounds = Arc::new(AtomicU64::new(0));
        tokio::spawn(run(id, raft, peers, rx, rounds.clone()));
        Self { tx, rounds }
    }

    /// How many batches (quorum rounds or requests to the leader) were taken so far.
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }

    /// The index this node must have applied before a read is linearizable; asks the leader
    /// when this node is a follower.
    pub async fn read_index(&self) -> Result<u64, ReadIndexError> {
        self.ask(true).await
    }

    /// Like [`ReadIndex::read_index`], but only as leader (for followers' requests).
    pub async fn read_index_as_leader(&self) -> Result<u64, ReadIndexError> {
        self.ask(false).await
    }

    async fn ask(&self, forward: bool) -> Result<u64, ReadIndexError> {
        let (tx, rx) = oneshot::channel();
        let gone = || ReadIndexError::Unavailable("node is shutting down".into());
        self.tx.send(Waiter { forward, tx }).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }
}

async fn run(id: NodeId, raft: Raft, peers: Peers, mut rx: mpsc::UnboundedReceiver<Waiter>, rounds: Arc<AtomicU64>) {
    let mut waiters = Vec::new();
    while let Some(first) = rx.recv().await {
        // Every waiter queued now arrived before this round begins, so the round covers it.
        waiters.push(first);
        while let Ok(w) = rx.try_recv() {
            waiters.push(w);
        }
        rounds.fetch_add(1, Ordering::Relaxed);
        let (as_leader, from_leader) = match raft.get_read_log_id().await {
            Ok((read_log_id, _)) => {
                let i = read_log_id.map_or(0, |l| l.index);
                (Ok(i), Ok(i))
            }
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                let leader = f.leader_id.filter(|l| *l != id).zip(f.leader_node.map(|n| n.addr));
                let from_leader = match leader {
                    Some((_, addr)) if waiters.iter().any(|w| w.forward) => ask_leader(&peers, &addr).await,
                    _ => Err(ReadIndexError::NotLeader),
                };
                (Err(ReadIndexError::NotLeader), from_leader)
            }
            Err(e) => {
                let e = ReadIndexError::Unavailable(e.to_string());
                (Err(e.clone()), Err(e))
            }
        };
        for w in waiters.drain(..) {
            let res = if w.forward {
                from_leader.clone()
            } else {
                as_leader.clone()
            };
            let _ = w.tx.send(res);
        }
    }
}

async fn ask_leader(peers: &Peers, addr: &str) -> Result<u64, ReadIndexError> {
    let mut c = peers
        .raft(addr)
        .map_err(|e| ReadIndexError::Unavailable(e.to_string()))?;
    match c.read_index(ReadIndexRequest {}).await {
        Ok(r) => Ok(r.into_inner().index),
        Err(s) if s.code() == tonic::Code::FailedPrecondition => Err(ReadIndexError::NotLeader),
        Err(s) => Err(ReadIndexError::Unavailable(s.message().to_string())),
    }
}
