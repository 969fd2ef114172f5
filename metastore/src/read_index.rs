//! Linearizable reads: the leader confirms its leadership with one quorum round, shared by every
//! read that arrived before the round started. A follower's concurrent reads likewise share one
//! request to the leader for its read index.
//!
//! Two batch loops, so that no node ever waits on a peer that waits on it: the leader loop only
//! asks this node's Raft (it serves this node's reads and its peers' asks, and never calls a
//! peer itself), and the forward loop sends this node's reads to the leader, each request under
//! a deadline. Two nodes that each think the other leads then answer each other `NotLeader` at
//! once instead of waiting on each other.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{CheckIsLeaderError, RaftError};
use proto::raft::ReadIndexRequest;
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::leader_view::LeaderView;
use crate::raft_peers::RaftPeers;
use crate::types::Raft;

/// Requests to the leader in flight at once: a slow one does not hold up the next batch.
const FORWARD_IN_FLIGHT: usize = 4;

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

type Reply = oneshot::Sender<Result<u64, ReadIndexError>>;

/// The leader this node's last local round named, when it is another node.
#[derive(Debug, Clone, PartialEq)]
struct Hint {
    addr: String,
}

/// What the local round told a waiter: the index, or where the leader is.
type LocalAnswer = Result<u64, (ReadIndexError, Option<Hint>)>;

/// Batches read-index requests: one quorum round (or one request to the leader) per batch.
#[derive(Clone)]
pub struct ReadIndex {
    local: mpsc::UnboundedSender<oneshot::Sender<LocalAnswer>>,
    forward: mpsc::UnboundedSender<(String, Reply)>,
    rounds: Arc<AtomicU64>,
}

impl ReadIndex {
    /// Starts the batching tasks for `raft`; a request to the leader gives up after `deadline`.
    pub fn start(view: LeaderView, raft: Raft, peers: RaftPeers, deadline: Duration) -> Self {
        let (local, local_rx) = mpsc::unbounded_channel();
        let (forward, forward_rx) = mpsc::unbounded_channel();
        let rounds = Arc::new(AtomicU64::new(0));
        tokio::spawn(run_local(view, raft, local_rx, rounds.clone(), deadline));
        tokio::spawn(run_forward(peers, forward_rx, deadline));
        Self { local, forward, rounds }
    }

    /// How many quorum rounds this node took so far as leader.
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }

    /// The index this node must have applied before a read is linearizable; asks the leader
    /// when this node is a follower.
    pub async fn read_index(&self) -> Result<u64, ReadIndexError> {
        match self.ask_local().await {
            Ok(i) => Ok(i),
            Err((_, Some(hint))) => {
                let (tx, rx) = oneshot::channel();
                self.forward.send((hint.addr, tx)).map_err(|_| gone())?;
                rx.await.map_err(|_| gone())?
            }
            Err((e, None)) => Err(e),
        }
    }

    /// Like [`ReadIndex::read_index`], but only as leader (for followers' requests).
    pub async fn read_index_as_leader(&self) -> Result<u64, ReadIndexError> {
        self.ask_local().await.map_err(|(e, _)| e)
    }

    async fn ask_local(&self) -> LocalAnswer {
        let (tx, rx) = oneshot::channel();
        self.local.send(tx).map_err(|_| (gone(), None))?;
        rx.await.map_err(|_| (gone(), None))?
    }
}

fn gone() -> ReadIndexError {
    ReadIndexError::Unavailable("node is shutting down".into())
}

/// Takes every waiter queued behind `first`.
fn drain<T>(first: T, rx: &mut mpsc::UnboundedReceiver<T>) -> Vec<T> {
    let mut batch = vec![first];
    while let Ok(w) = rx.try_recv() {
        batch.push(w);
    }
    batch
}

async fn run_local(
    view: LeaderView,
    raft: Raft,
    mut rx: mpsc::UnboundedReceiver<oneshot::Sender<LocalAnswer>>,
    rounds: Arc<AtomicU64>,
    deadline: Duration,
) {
    while let Some(first) = rx.recv().await {
        // Every waiter queued now arrived before this round begins, so the round covers it.
        let waiters = drain(first, &mut rx);
        let answer = local_round(&view, &raft, &rounds, deadline).await;
        for w in waiters {
            let _ = w.send(answer.clone());
        }
    }
}

/// One round on this node's Raft: the read index as leader, or the leader's address.
async fn local_round(view: &LeaderView, raft: &Raft, rounds: &AtomicU64, deadline: Duration) -> LocalAnswer {
    // openraft bounds its heartbeat round itself; the deadline guards against a core that is
    // stuck, so that no read waits on it forever.
    match tokio::time::timeout(deadline, raft.get_read_log_id()).await {
        Ok(Ok((read_log_id, _))) => {
            rounds.fetch_add(1, Ordering::Relaxed);
            Ok(read_log_id.map_or(0, |l| l.index))
        }
        Ok(Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(_)))) => {
            // The leader as this node sees it: none once it has heard from none for a while.
            let hint = view.remote_leader().map(|addr| Hint { addr });
            Err((ReadIndexError::NotLeader, hint))
        }
        Ok(Err(e)) => Err((ReadIndexError::Unavailable(e.to_string()), None)),
        Err(_) => Err((
            ReadIndexError::Unavailable(format!("no quorum round within {deadline:?}")),
            None,
        )),
    }
}

async fn run_forward(peers: RaftPeers, mut rx: mpsc::UnboundedReceiver<(String, Reply)>, deadline: Duration) {
    let permits = Arc::new(Semaphore::new(FORWARD_IN_FLIGHT));
    while let Some(first) = rx.recv().await {
        // Waiting for a slot is what lets the next batch fill up.
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let batch = drain(first, &mut rx);
        let peers = peers.clone();
        tokio::spawn(async move {
            let _permit = permit;
            // Waiters may name different leaders when leadership just moved: one request each.
            let mut by_leader: Vec<(String, Vec<Reply>)> = Vec::new();
            for (addr, tx) in batch {
                match by_leader.iter_mut().find(|(a, _)| *a == addr) {
                    Some((_, txs)) => txs.push(tx),
                    None => by_leader.push((addr, vec![tx])),
                }
            }
            for (addr, txs) in by_leader {
                let res = ask_leader(&peers, &addr, deadline).await;
                for tx in txs {
                    let _ = tx.send(res.clone());
                }
            }
        });
    }
}

async fn ask_leader(peers: &RaftPeers, addr: &str, deadline: Duration) -> Result<u64, ReadIndexError> {
    let mut c = peers
        .raft(addr)
        .map_err(|e| ReadIndexError::Unavailable(e.to_string()))?;
    let mut req = tonic::Request::new(ReadIndexRequest {});
    req.set_timeout(deadline);
    match tokio::time::timeout(deadline, c.read_index(req)).await {
        Ok(Ok(r)) => Ok(r.into_inner().index),
        Ok(Err(s)) if s.code() == tonic::Code::FailedPrecondition => Err(ReadIndexError::NotLeader),
        Ok(Err(s)) => Err(ReadIndexError::Unavailable(format!(
            "leader at {addr}: {}",
            s.message()
        ))),
        Err(_) => Err(ReadIndexError::Unavailable(format!(
            "leader at {addr} gave no read index within {deadline:?}"
        ))),
    }
}
