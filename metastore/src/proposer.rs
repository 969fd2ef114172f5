//! Batches concurrent client commands into one Raft proposal: one log entry, one fsync and one
//! replication round then serve many clients. While the in-flight limit is reached, commands wait
//! and the next proposal carries all of them, so batches grow with load and a lone client is
//! never delayed.

use std::sync::Arc;

use openraft::error::{ClientWriteError, RaftError};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::types::{Command, CommandKind, CommandResult, NodeId, Op, Proposal, Raft};

/// Most commands in one proposal.
const MAX_BATCH_COMMANDS: usize = 4096;
/// A proposal stops growing past this many bytes (a single larger command goes alone).
const MAX_BATCH_BYTES: usize = 4 << 20;
/// Proposals in flight at once.
const MAX_IN_FLIGHT: usize = 4;

/// Why a command was not applied.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProposeError {
    /// This node is not the leader; the leader, if known, is given.
    #[error("not the leader")]
    NotLeader {
        /// The leader's id and address.
        leader: Option<(NodeId, String)>,
    },
    /// Raft could not take the proposal (shutting down, for example).
    #[error("cannot propose: {0}")]
    Unavailable(String),
}

type Pending = (
    Command,
    usize,
    oneshot::Sender<Result<CommandResult, ProposeError>>,
);

/// Hands commands to the batching task.
#[derive(Clone)]
pub struct Proposer {
    tx: mpsc::UnboundedSender<Pending>,
}

/// A rough size of a command in the log, to bound a batch.
fn approx_size(cmd: &Command) -> usize {
    let ops = match &cmd.kind {
        CommandKind::Txn(t) => {
            t.ops
                .iter()
                .map(|op| match op {
                    Op::Put { key, value, .. } => key.len() + value.len(),
                    Op::Delete { key } => key.len(),
                    Op::DeletePrefix { prefix } => prefix.len(),
                })
                .sum::<usize>()
                + t.guards.iter().map(|g| g.key.len() + 16).sum::<usize>()
        }
        _ => 0,
    };
    ops + 64
}

impl Proposer {
    /// Starts the batching task for `raft`.
    pub fn start(raft: Raft) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(raft, rx));
        Self { tx }
    }

    /// Proposes one command and waits until it is applied.
    pub async fn propose(&self, cmd: Command) -> Result<CommandResult, ProposeError> {
        let (tx, rx) = oneshot::channel();
        let size = approx_size(&cmd);
        self.tx
            .send((cmd, size, tx))
            .map_err(|_| ProposeError::Unavailable("node is shutting down".into()))?;
        rx.await
            .map_err(|_| ProposeError::Unavailable("node is shutting down".into()))?
    }
}

async fn run(raft: Raft, mut rx: mpsc::UnboundedReceiver<Pending>) {
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
        let mut bytes = first.1;
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH_COMMANDS {
            match rx.try_recv() {
                Ok(p) if bytes + p.1 > MAX_BATCH_BYTES => {
                    carry = Some(p);
                    break;
                }
                Ok(p) => {
                    bytes += p.1;
                    batch.push(p);
                }
                Err(_) => break,
            }
        }
        let raft = raft.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let (commands, waiters): (Vec<Command>, Vec<_>) =
                batch.into_iter().map(|(c, _, t)| (c, t)).unzip();
            match raft.client_write(Proposal { commands }).await {
                Ok(resp) => {
                    for (w, r) in waiters.into_iter().zip(resp.data.results) {
                        let _ = w.send(Ok(r));
                    }
                }
                Err(e) => {
                    let err = match e {
                        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
                            ProposeError::NotLeader {
                                leader: f.leader_id.zip(f.leader_node.map(|n| n.addr)),
                            }
                        }
                        other => ProposeError::Unavailable(other.to_string()),
                    };
                    for w in waiters {
                        let _ = w.send(Err(err.clone()));
                    }
                }
            }
        });
    }
}
