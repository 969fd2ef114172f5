//! Batches concurrent client commands into one Raft proposal: one log entry, one fsync and one
//! replication round then serve many clients. While the in-flight limit is reached, commands wait
//! and the next proposal carries all of them, so batches grow with load and a lone client is
//! never delayed. On a follower the batch goes to the leader in one internal request, so the
//! leader handles one request per batch instead of one per client command.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use openraft::error::{ClientWriteError, RaftError};
use prometheus::Histogram;
use proto::raft::RaftPayload;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::codec;
use crate::leader_view::LeaderView;
use crate::raft_peers::RaftPeers;
use crate::types::{encode_segment, Command, CommandResult, Proposal, ProposalResult, Raft};

/// Most callers' segments in one proposal.
const MAX_BATCH_SEGMENTS: usize = 4096;
/// A proposal stops growing past this many bytes (a single larger command goes alone).
const MAX_BATCH_BYTES: usize = 1 << 20;
/// Proposals in flight at once. openraft's core appends and fsyncs each proposal before it
/// takes the next, so few large proposals beat many small ones.
const MAX_IN_FLIGHT: usize = 4;

/// Why a command was not applied.
#[derive(Debug, Clone, thiserror::Error, Serialize, Deserialize)]
pub enum ProposeError {
    /// No leader could take it (none known, or leadership moved while it was sent).
    #[error("not the leader")]
    NotLeader,
    /// Raft or the request to the leader failed; the command may or may not have applied.
    #[error("cannot propose: {0}")]
    Unavailable(String),
    /// The command never reached the leader's log (the leader could not be reached at all), so
    /// it did not apply: a retry cannot apply it twice.
    #[error("not applied: {0}")]
    NotSent(String),
}

impl ProposeError {
    /// Whether the command surely did not apply.
    pub fn surely_not_applied(&self) -> bool {
        matches!(self, ProposeError::NotLeader | ProposeError::NotSent(_))
    }
}

/// Commands from one caller, encoded: a client command, or a follower's whole batch.
struct Pending {
    segments: Vec<Bytes>,
    bytes: usize,
    /// A follower's batch must not be forwarded again.
    may_forward: bool,
    tx: oneshot::Sender<Result<Vec<Vec<CommandResult>>, ProposeError>>,
}

/// Hands commands to the batching task.
#[derive(Clone)]
pub struct Proposer {
    tx: mpsc::UnboundedSender<Pending>,
}

impl Proposer {
    /// Starts the batching task for `raft`.
    /// Proposals made here as leader are timed into `commit_latency`.
    /// A batch sent to the leader gives up after `forward`, and one proposed here after
    /// `commit`; then it may or may not have applied.
    pub fn start(
        view: LeaderView,
        raft: Raft,
        peers: RaftPeers,
        commit_latency: Histogram,
        forward: Duration,
        commit: Duration,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let waits = Waits { forward, commit };
        tokio::spawn(run(view, raft, peers, commit_latency, waits, rx));
        Self { tx }
    }

    /// Proposes one command and waits until it is applied.
    pub async fn propose(&self, cmd: Command) -> Result<CommandResult, ProposeError> {
        let segment = encode_segment(std::slice::from_ref(&cmd));
        let results = self.submit(vec![segment], true).await?;
        results
            .into_iter()
            .flatten()
            .next()
            .ok_or_else(|| ProposeError::Unavailable("no result for the command".into()))
    }

    /// Proposes a follower's batch (its encoded segments) here, merged with this node's own
    /// commands, without decoding it; only as leader. Results come per segment.
    pub async fn propose_forwarded(&self, segments: Vec<Bytes>) -> Result<Vec<Vec<CommandResult>>, ProposeError> {
        self.submit(segments, false).await
    }

    async fn submit(&self, segments: Vec<Bytes>, may_forward: bool) -> Result<Vec<Vec<CommandResult>>, ProposeError> {
        let (tx, rx) = oneshot::channel();
        let bytes = segments.iter().map(Bytes::len).sum();
        let gone = || ProposeError::Unavailable("node is shutting down".into());
        self.tx
            .send(Pending {
                segments,
                bytes,
                may_forward,
                tx,
            })
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }
}

/// How long a batch may wait for its answer.
#[derive(Clone, Copy)]
struct Waits {
    forward: Duration,
    commit: Duration,
}

/// Proposes a batch as this node, if it leads; a committed proposal's latency is observed.
/// A leader that cannot reach its quorum keeps the entry, which may still commit, so giving up
/// after `deadline` without a quorum answers "maybe applied".
async fn propose_as_leader(
    raft: &Raft,
    proposal: Proposal,
    commit_latency: &Histogram,
    deadline: Duration,
) -> Result<ProposalResult, ProposeError> {
    let started = std::time::Instant::now();
    let write = raft.client_write(proposal);
    tokio::pin!(write);
    loop {
        match tokio::time::timeout(deadline, &mut write).await {
            Ok(Ok(resp)) => {
                commit_latency.observe(started.elapsed().as_secs_f64());
                return Ok(resp.data);
            }
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => return Err(ProposeError::NotLeader),
            Ok(Err(e)) => return Err(ProposeError::Unavailable(e.to_string())),
            // Still leading with its quorum: the entry commits, and is being applied (a staged
            // commit of a million keys takes seconds). Cutting it short here made the client
            // send the whole transaction again.
            Err(_) if started.elapsed() < MAX_COMMIT_WAIT && still_leads(raft, deadline).await => {}
            Err(_) => {
                return Err(ProposeError::Unavailable(format!(
                    "the proposal did not commit within {:?} and this leader does not reach its quorum",
                    started.elapsed()
                )))
            }
        }
    }
}

/// Longest a leader waits for its own proposal while it keeps its quorum.
const MAX_COMMIT_WAIT: Duration = Duration::from_secs(120);

/// Whether this node still leads with a quorum that answers its heartbeats within `deadline`.
async fn still_leads(raft: &Raft, deadline: Duration) -> bool {
    matches!(tokio::time::timeout(deadline, raft.get_read_log_id()).await, Ok(Ok(_)))
}

async fn forward(
    peers: &RaftPeers,
    addr: &str,
    proposal: &Proposal,
    deadline: Duration,
) -> Result<ProposalResult, ProposeError> {
    let mut c = peers.raft(addr).map_err(|e| ProposeError::NotSent(e.to_string()))?;
    let mut req = tonic::Request::new(RaftPayload {
        data: codec::encode(proposal).into(),
    });
    req.set_timeout(deadline);
    let resp = match tokio::time::timeout(deadline, c.propose(req)).await {
        Ok(Ok(r)) => r,
        // Refused before the leader looked at it: a connection that failed to open, or a
        // node that has not learned the cluster credential yet.
        Ok(Err(s)) if crate::peers::never_sent(&s) || s.code() == tonic::Code::Unauthenticated => {
            return Err(ProposeError::NotSent(format!("leader at {addr}: {}", s.message())))
        }
        Ok(Err(s)) => return Err(ProposeError::Unavailable(format!("leader at {addr}: {}", s.message()))),
        Err(_) => {
            return Err(ProposeError::Unavailable(format!(
                "leader at {addr} did not answer within {deadline:?}"
            )))
        }
    };
    codec::decode::<Result<ProposalResult, ProposeError>>(&resp.into_inner().data)
        .map_err(|e| ProposeError::Unavailable(format!("leader at {addr}: {e}")))?
}

/// Proposes the batch here when this node leads, or sends it to the leader. Callers whose
/// commands must not travel again get `NotLeader` on a follower.
async fn submit(
    view: &LeaderView,
    raft: &Raft,
    peers: &RaftPeers,
    commit_latency: &Histogram,
    waits: Waits,
    batch: Vec<Pending>,
) {
    let leader = view.remote_leader();
    // A follower that knows no leader proposes nothing: its Raft would only refuse, and may be
    // too busy to say so quickly. The caller waits for a leader and tries again.
    let knows_a_leader = leader.is_some() || view.leads();
    let (batch, refused): (Vec<Pending>, Vec<Pending>) = batch
        .into_iter()
        .partition(|p| knows_a_leader && (leader.is_none() || p.may_forward));
    for p in refused {
        let _ = p.tx.send(Err(ProposeError::NotLeader));
    }
    if batch.is_empty() {
        return;
    }
    let mut segments = Vec::with_capacity(batch.iter().map(|p| p.segments.len()).sum());
    let mut waiters = Vec::with_capacity(batch.len());
    for p in batch {
        waiters.push((p.segments.len(), p.tx));
        segments.extend(p.segments);
    }
    let total = segments.len();
    let proposal = Proposal { segments };
    tracing::debug!(?leader, total, "proposing a batch");
    let res = match &leader {
        Some(addr) => forward(peers, addr, &proposal, waits.forward).await,
        None => propose_as_leader(raft, proposal, commit_latency, waits.commit).await,
    };
    tracing::debug!(?leader, ok = res.is_ok(), "batch answered");
    match res {
        Ok(done) if done.results.len() == total => {
            let mut results = done.results.into_iter();
            for (n, tx) in waiters {
                let _ = tx.send(Ok(results.by_ref().take(n).collect()));
            }
        }
        Ok(done) => {
            let e = ProposeError::Unavailable(format!("{} results for {total} segments", done.results.len()));
            for (_, tx) in waiters {
                let _ = tx.send(Err(e.clone()));
            }
        }
        Err(e) => {
            for (_, tx) in waiters {
                let _ = tx.send(Err(e.clone()));
            }
        }
    }
}

async fn run(
    view: LeaderView,
    raft: Raft,
    peers: RaftPeers,
    commit_latency: Histogram,
    waits: Waits,
    mut rx: mpsc::UnboundedReceiver<Pending>,
) {
    let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut carry: Option<Pending> = None;
    loop {
        let first = match carry.take() {
            Some(p) => p,
            None => match rx.recv().await {
                Some(p) => p,
                None => return,
            },
        };
        // Waiting for a slot is what lets the next batch fill up.
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let mut bytes = first.bytes;
        let mut batch = vec![first];
        let mut count = batch[0].segments.len();
        while count < MAX_BATCH_SEGMENTS {
            match rx.try_recv() {
                Ok(p) if bytes + p.bytes > MAX_BATCH_BYTES => {
                    carry = Some(p);
                    break;
                }
                Ok(p) => {
                    bytes += p.bytes;
                    count += p.segments.len();
                    batch.push(p);
                }
                Err(_) => break,
            }
        }
        let raft = raft.clone();
        let view = view.clone();
        let peers = peers.clone();
        let commit_latency = commit_latency.clone();
        tokio::spawn(async move {
            let _permit = permit;
            submit(&view, &raft, &peers, &commit_latency, waits, batch).await;
        });
    }
}
