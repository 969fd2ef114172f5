//! The part of a node every request goes through: its Raft handle and state, the write path
//! (proposing through the leader, and what a failed write's answer says), read indexes, and
//! membership changes.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::ChangeMembers;
use proto::clock::Clock;
use proto::metastore as pb;
use proto::metastore::metastore_client::MetastoreClient;
use tonic::transport::Channel;
use tonic::Status;

use crate::credential_ensure;
use crate::follower_acks::FollowerAcks;
use crate::heard::Heard;
use crate::leader_view::LeaderView;
use crate::lease::LeaseKeeper;
use crate::proposer::{ProposeError, Proposer};
use crate::raft_peers::RaftPeers;
use crate::read_index::{ReadIndex, ReadIndexError};
use crate::staging;
use crate::state_machine::SmShared;
use crate::types::{Command, CommandKind, CommandResult, Node, NodeId, Raft, Txn};
use crate::validate::Limits;

/// Metadata key on a failed write's answer: [`NOT_APPLIED`] or [`MAYBE_APPLIED`].
pub const WRITE_OUTCOME: &str = "x-ferry-write";
/// The write surely did not reach the leader's log: a retry cannot apply it twice.
pub const NOT_APPLIED: &str = "not-applied";
/// The write may or may not have applied: retry it with the same request id.
pub const MAYBE_APPLIED: &str = "maybe-applied";

/// The answer to a write that failed to propose, saying whether it may have applied.
fn write_failed(e: &ProposeError) -> Status {
    let (outcome, msg) = if e.surely_not_applied() {
        (NOT_APPLIED, format!("not applied: {e}"))
    } else {
        (MAYBE_APPLIED, format!("maybe applied: {e}"))
    };
    let mut s = Status::unavailable(msg);
    s.metadata_mut()
        .insert(WRITE_OUTCOME, tonic::metadata::MetadataValue::from_static(outcome));
    s
}

/// How long a request waits for a leader to be elected.
const LEADER_WAIT: Duration = Duration::from_secs(5);

/// How long a node waits on a peer before it gives up on a call.
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    /// A read-index request to the leader (at most one election timeout, so that reads are
    /// served again within one election timeout of a fault's end).
    pub read_index: Duration,
    /// A batch of writes forwarded to the leader.
    pub forward: Duration,
    /// The leader's wait for its own proposal to commit: a leader cut off from its quorum
    /// answers "maybe applied" instead of holding the client forever.
    pub commit: Duration,
}

/// The settings of a node's request side.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// Request limits.
    pub limits: Limits,
    /// How long calls to peers may take.
    pub deadlines: Deadlines,
    /// The node's clock.
    pub clock: Clock,
    /// How long a follower names a leader it no longer hears from ([`LeaderView`]).
    pub forget_leader_after: Duration,
}

/// Everything a node's services share.
pub struct NodeCore {
    /// This node's id.
    pub id: NodeId,
    /// The Raft handle.
    pub raft: Raft,
    /// The state machine's shared state.
    pub sm: Arc<SmShared>,
    /// Request limits.
    pub limits: Limits,
    /// The read-index batcher.
    pub read_index: ReadIndex,
    /// The lease keeper.
    pub leases: LeaseKeeper,
    /// Batches writes into proposals.
    pub proposer: Proposer,
    /// Connections to the other nodes, and the credential its Raft calls give.
    pub peers: RaftPeers,
    /// When its Raft service last heard a leader or candidate (read by the leader view, the
    /// pre-vote answer and the election watch).
    pub heard: Heard,
    /// Who leads, as this node sees it.
    pub leader: LeaderView,
    /// The node's clock: a staged transaction's age is judged on it.
    pub clock: Clock,
    /// The followers' answers to this node's appends while it leads (DescribeQuorum's times).
    pub acks: FollowerAcks,
    /// Set when the node stops, so long-lived streams end and clients move on.
    closing: tokio::sync::watch::Sender<bool>,
}

impl NodeCore {
    /// Starts a node's request-side tasks (read index, proposer, lease and stage expiry) around
    /// its Raft and state machine; the proposer times its commits into `commit_latency`.
    pub fn start(
        id: NodeId,
        raft: Raft,
        sm: Arc<SmShared>,
        peers: RaftPeers,
        acks: FollowerAcks,
        commit_latency: prometheus::Histogram,
        config: CoreConfig,
    ) -> Self {
        let CoreConfig {
            limits,
            deadlines,
            clock,
            forget_leader_after,
        } = config;
        let heard = Heard::default();
        let leader = LeaderView::new(id, raft.clone(), heard.clone(), forget_leader_after);
        let read_index = ReadIndex::start(leader.clone(), raft.clone(), peers.clone(), deadlines.read_index);
        let proposer = Proposer::start(
            leader.clone(),
            raft.clone(),
            peers.clone(),
            commit_latency,
            deadlines.forward,
            deadlines.commit,
        );
        let leases = LeaseKeeper::start(id, raft.clone(), proposer.clone(), sm.clone());
        staging::start_expiry(id, raft.clone(), proposer.clone(), sm.clone(), clock.clone());
        credential_ensure::start(id, raft.clone(), proposer.clone(), sm.clone());
        Self {
            id,
            raft,
            sm,
            limits,
            read_index,
            leases,
            proposer,
            peers,
            heard,
            leader,
            clock,
            acks,
            closing: tokio::sync::watch::channel(false).0,
        }
    }

    /// Ends every open watch stream; called when the node stops.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Tells a long-lived stream when the node stops (see [`NodeCore::close`]).
    pub(crate) fn closing(&self) -> tokio::sync::watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// The header for a read: this node's revision, leader and term.
    pub(crate) fn header(&self) -> pb::ResponseHeader {
        self.header_after(0)
    }

    /// The header of a read taken at `revision`. It must be the revision of the state the read
    /// saw, not a later one: a follower (`Client::follow`) watches from the next revision, so
    /// a change applied between the read and its header would be skipped for good.
    pub(crate) fn header_at(&self, revision: u64) -> pb::ResponseHeader {
        pb::ResponseHeader {
            revision,
            ..self.header_after(0)
        }
    }

    /// The header for a write: its revision is at least the write's own, even when this node
    /// (a follower that forwarded it) has not applied it yet, so a client can wait for it.
    pub(crate) fn header_after(&self, written: u64) -> pb::ResponseHeader {
        let revision = self.sm.inner.read().revision().max(written);
        let raft_term = self.raft.metrics().borrow().current_term;
        pb::ResponseHeader {
            revision,
            member_id: self.id,
            leader_id: self.leader.leader().unwrap_or(0),
            raft_term,
        }
    }

    /// A client of the node at `addr` (the leader, for a request forwarded to it).
    pub(crate) fn metastore_client(&self, addr: &str) -> Result<MetastoreClient<Channel>, Status> {
        self.peers
            .channels()
            .metastore(addr)
            .map_err(|e| Status::unavailable(format!("leader at {addr}: {e}")))
    }

    /// The leader's address when the leader is another node (waiting a while for an election).
    pub(crate) async fn remote_leader(&self) -> Option<String> {
        self.leader_addr()
            .await
            .filter(|(id, _)| *id != self.id)
            .map(|(_, addr)| addr)
    }

    /// The leader's address, waiting a while for an election to end.
    pub(crate) async fn leader_addr(&self) -> Option<(NodeId, String)> {
        tokio::time::timeout(LEADER_WAIT, self.leader.wait_leader(None))
            .await
            .ok()
    }

    /// Applies a command through the leader (the proposer forwards from a follower), retrying
    /// while leadership moves.
    pub(crate) async fn write(&self, request_id: Option<String>, kind: CommandKind) -> Result<CommandResult, Status> {
        let cmd = Command { request_id, kind };
        let mut last = ProposeError::NotSent("no leader elected".into());
        for _ in 0..3 {
            let res = self.proposer.propose(cmd.clone()).await;
            tracing::debug!(?res, "write attempt");
            match res {
                Ok(CommandResult::Rejected { reason }) => return Err(Status::failed_precondition(reason)),
                Ok(r) => return Ok(r),
                Err(ProposeError::NotLeader) => {
                    if self.leader_addr().await.is_none() {
                        return Err(write_failed(&ProposeError::NotSent("no leader elected".into())));
                    }
                    last = ProposeError::NotSent("leadership is changing".into());
                }
                Err(e) => return Err(write_failed(&e)),
            }
        }
        Err(write_failed(&last))
    }

    /// Applies a transaction of any size: one entry when it fits, else staged in chunks and
    /// committed by one final entry, which is when it becomes visible, all at once.
    pub(crate) async fn write_txn(&self, request_id: Option<String>, txn: Txn) -> Result<CommandResult, Status> {
        staging::write_txn(|rid, kind| self.write(rid, kind), request_id, txn, self.clock.wall_ms()).await
    }

    /// Waits until this node has applied everything committed before the call (read index).
    pub async fn linearize(&self) -> Result<(), Status> {
        let mut tries = 0;
        let index = loop {
            match self.read_index.read_index().await {
                Ok(i) => break i,
                Err(ReadIndexError::NotLeader) if tries < 3 => {
                    tries += 1;
                    if self.leader_addr().await.is_none() {
                        return Err(Status::unavailable("no leader elected"));
                    }
                }
                Err(e) => return Err(Status::unavailable(e.to_string())),
            }
        };
        let mut rx = self.sm.applied.subscribe();
        let reached = matches!(
            tokio::time::timeout(LEADER_WAIT, rx.wait_for(|applied| *applied >= index)).await,
            Ok(Ok(_))
        );
        if reached {
            Ok(())
        } else {
            Err(Status::unavailable(format!(
                "this node has not applied up to read index {index}"
            )))
        }
    }

    /// Changes the membership through this node; `Ok(Err(addr))` when the leader is at `addr`.
    pub(crate) async fn membership_change(&self, change: MembershipChange) -> Result<Result<(), String>, Status> {
        // A change while another is still committing (a fresh cluster's first membership, say)
        // waits for it instead of failing.
        let deadline = tokio::time::Instant::now() + LEADER_WAIT;
        loop {
            let res = self.try_membership_change(&change).await;
            match res {
                Ok(()) => return Ok(Ok(())),
                Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => {
                    return match self.leader.remote_leader() {
                        Some(addr) => Ok(Err(addr)),
                        None => Err(Status::unavailable("no leader elected")),
                    }
                }
                Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
                    ChangeMembershipError::InProgress(_),
                ))) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e))) => {
                    return Err(Status::failed_precondition(e.to_string()))
                }
                Err(e) => return Err(Status::unavailable(e.to_string())),
            }
        }
    }

    async fn try_membership_change(
        &self,
        change: &MembershipChange,
    ) -> Result<(), RaftError<NodeId, ClientWriteError<NodeId, Node>>> {
        match change {
            MembershipChange::AddLearner(id, addr) => self
                .raft
                .add_learner(*id, Node::new(addr.clone()), true)
                .await
                .map(|_| ()),
            MembershipChange::Promote(id) => self
                .raft
                .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([*id])), false)
                .await
                .map(|_| ()),
            MembershipChange::Remove(id) => {
                let voter = self
                    .raft
                    .metrics()
                    .borrow()
                    .membership_config
                    .membership()
                    .voter_ids()
                    .any(|v| v == *id);
                let change = if voter {
                    ChangeMembers::RemoveVoters(BTreeSet::from([*id]))
                } else {
                    ChangeMembers::RemoveNodes(BTreeSet::from([*id]))
                };
                self.raft.change_membership(change, false).await.map(|_| ())
            }
        }
    }

    /// The members as this node sees them, each marked voter or learner.
    pub(crate) fn members(&self) -> Vec<pb::Member> {
        let m = self.raft.metrics().borrow().clone();
        let mem = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = mem.voter_ids().collect();
        mem.nodes()
            .map(|(id, n)| pb::Member {
                id: *id,
                addr: n.addr.clone(),
                voter: voters.contains(id),
            })
            .collect()
    }
}

/// A membership change a client asks for.
pub(crate) enum MembershipChange {
    AddLearner(NodeId, String),
    Promote(NodeId),
    Remove(NodeId),
}
