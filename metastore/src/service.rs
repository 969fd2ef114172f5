//! The `Metastore` gRPC service: validates each request, proposes writes (forwarding them to the
//! leader from a follower), serves reads after a read index, and streams watches.

use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::ChangeMembers;
use proto::metastore as pb;
use proto::metastore::metastore_client::MetastoreClient;
use proto::metastore::metastore_server::Metastore;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use crate::credential;
use crate::kv_state::{Event, KvEntry};
use crate::lease::{KeepAliveError, LeaseKeeper};
use crate::peers::Peers;
use crate::proposer::{ProposeError, Proposer};
use crate::read_index::{ReadIndex, ReadIndexError};
use crate::staging;
use crate::state_machine::{RevisionEvents, SmShared};
use crate::types::{Command, CommandKind, CommandResult, Node, NodeId, Op, Raft, Txn};
use crate::validate::{self, InvalidRequest, Limits};

/// Metadata key set on a request a follower forwards, so it is forwarded at most once.
const FORWARDED: &str = "x-ferry-forwarded";
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
/// Operations and guards past which a transaction is checked on a blocking thread.
const BIG_TXN_ITEMS: usize = 10_000;
/// Chunks of one staged transaction proposed at once.
const STAGE_PARALLEL: usize = 4;

/// How long a node waits on a peer before it gives up on a call.
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    /// A read-index request to the leader (at most one election timeout, so that reads are
    /// served again within one election timeout of a fault's end).
    pub read_index: Duration,
    /// A batch of writes forwarded to the leader.
    pub forward: Duration,
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
    /// Connections to the other nodes.
    pub peers: Peers,
    /// Set when the node stops, so long-lived streams end and clients move on.
    closing: tokio::sync::watch::Sender<bool>,
}

impl From<InvalidRequest> for Status {
    fn from(e: InvalidRequest) -> Self {
        Status::invalid_argument(e.to_string())
    }
}

impl NodeCore {
    /// Starts a node's request-side tasks (read index, proposer, lease and stage expiry) around
    /// its Raft and state machine; the proposer times its commits into `commit_latency`.
    pub fn start(
        id: NodeId,
        raft: Raft,
        sm: Arc<SmShared>,
        limits: Limits,
        peers: Peers,
        commit_latency: prometheus::Histogram,
        deadlines: Deadlines,
    ) -> Self {
        let read_index = ReadIndex::start(id, raft.clone(), peers.clone(), deadlines.read_index);
        let proposer = Proposer::start(id, raft.clone(), peers.clone(), commit_latency, deadlines.forward);
        let leases = LeaseKeeper::start(id, raft.clone(), proposer.clone(), sm.clone());
        staging::start_expiry(id, raft.clone(), proposer.clone(), sm.clone());
        credential::start_ensure(id, raft.clone(), proposer.clone(), sm.clone());
        Self {
            id,
            raft,
            sm,
            limits,
            read_index,
            leases,
            proposer,
            peers,
            closing: tokio::sync::watch::channel(false).0,
        }
    }

    /// Ends every open watch stream; called when the node stops.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    fn header(&self) -> pb::ResponseHeader {
        self.header_after(0)
    }

    /// The header of a read taken at `revision`. It must be the revision of the state the read
    /// saw, not a later one: a follower (`Client::follow`) watches from the next revision, so
    /// a change applied between the read and its header would be skipped for good.
    fn header_at(&self, revision: u64) -> pb::ResponseHeader {
        pb::ResponseHeader {
            revision,
            ..self.header_after(0)
        }
    }

    /// The header for a write: its revision is at least the write's own, even when this node
    /// (a follower that forwarded it) has not applied it yet, so a client can wait for it.
    fn header_after(&self, written: u64) -> pb::ResponseHeader {
        let revision = self.sm.inner.read().revision().max(written);
        let rx = self.raft.metrics();
        let m = rx.borrow();
        pb::ResponseHeader {
            revision,
            member_id: self.id,
            leader_id: m.current_leader.unwrap_or(0),
            raft_term: m.current_term,
        }
    }

    fn metastore_client(&self, addr: &str) -> Result<MetastoreClient<Channel>, Status> {
        self.peers
            .metastore(addr)
            .map_err(|e| Status::unavailable(format!("leader at {addr}: {e}")))
    }

    /// The leader's address when the leader is another node (waiting a while for an election).
    async fn remote_leader(&self) -> Option<String> {
        self.leader_addr()
            .await
            .filter(|(id, _)| *id != self.id)
            .map(|(_, addr)| addr)
    }

    /// The leader's address, waiting a while for an election to end.
    async fn leader_addr(&self) -> Option<(NodeId, String)> {
        let mut rx = self.raft.metrics();
        let deadline = tokio::time::Instant::now() + LEADER_WAIT;
        loop {
            {
                let m = rx.borrow_and_update();
                if let Some(l) = m.current_leader {
                    if let Some(n) = m.membership_config.membership().get_node(&l) {
                        return Some((l, n.addr.clone()));
                    }
                }
            }
            if tokio::time::timeout_at(deadline, rx.changed()).await.is_err() {
                return None;
            }
        }
    }

    /// Applies a command through the leader (the proposer forwards from a follower), retrying
    /// while leadership moves.
    async fn write(&self, request_id: Option<String>, kind: CommandKind) -> Result<CommandResult, Status> {
        let cmd = Command { request_id, kind };
        let mut last = ProposeError::NotSent("no leader elected".into());
        for _ in 0..3 {
            match self.proposer.propose(cmd.clone()).await {
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
    async fn write_txn(&self, request_id: Option<String>, txn: Txn) -> Result<CommandResult, Status> {
        let bytes: usize = txn.ops.iter().map(Op::approx_size).sum::<usize>()
            + txn.guards.iter().map(crate::types::Guard::approx_size).sum::<usize>();
        if bytes <= staging::CHUNK_BYTES {
            return self.write(request_id, CommandKind::Txn(txn)).await;
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
        let started_ms = staging::now_ms();
        let timer = std::time::Instant::now();
        // Guards are staged too: a request guarding every key it writes carries as many guards
        // as operations, and no entry may outgrow a chunk (a follower must take it within one
        // heartbeat interval).
        let chunks = staging::split_guards(txn.guards, staging::CHUNK_BYTES)
            .into_iter()
            .map(|guards| (guards, Vec::new()))
            .chain(
                staging::split_ops(txn.ops, staging::CHUNK_BYTES)
                    .into_iter()
                    .map(|ops| (Vec::new(), ops)),
            );
        // Chunks go in concurrently (the proposer keeps a few proposals in flight); each
        // carries its place, so the order they apply in does not matter.
        let chunks: Vec<_> = chunks.collect();
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
            self.write(Some(format!("{txn_id}#stage{i}")), stage)
        });
        let staged: Vec<Result<CommandResult, Status>> = futures::stream::iter(stages)
            .buffer_unordered(STAGE_PARALLEL)
            .collect()
            .await;
        if let Some(Err(e)) = staged.into_iter().find(Result::is_err) {
            let abort = CommandKind::TxnAbort { txn_id: txn_id.clone() };
            let _ = self.write(None, abort).await;
            return Err(e);
        }
        let staged_in = timer.elapsed();
        let commit = CommandKind::TxnCommitCounted {
            txn_id,
            chunks: chunk_count,
            txn: Txn::default(),
        };
        let r = self.write(request_id, commit).await;
        tracing::debug!(
            bytes,
            staged_ms = staged_in.as_millis() as u64,
            total_ms = timer.elapsed().as_millis() as u64,
            "staged transaction committed"
        );
        r
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

    async fn membership_change(&self, change: MembershipChange) -> Result<Result<(), String>, Status> {
        // A change while another is still committing (a fresh cluster's first membership, say)
        // waits for it instead of failing.
        let deadline = tokio::time::Instant::now() + LEADER_WAIT;
        loop {
            let res = self.try_membership_change(&change).await;
            match res {
                Ok(()) => return Ok(Ok(())),
                Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                    return match f.leader_node {
                        Some(n) => Ok(Err(n.addr)),
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

    fn members(&self) -> Vec<pb::Member> {
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

enum MembershipChange {
    AddLearner(NodeId, String),
    Promote(NodeId),
    Remove(NodeId),
}

/// The gRPC `Metastore` service of one node.
#[derive(Clone)]
pub struct MetastoreService {
    core: Arc<NodeCore>,
}

impl MetastoreService {
    /// Serves `core`.
    pub fn new(core: Arc<NodeCore>) -> Self {
        Self { core }
    }
}

fn is_forwarded<T>(req: &Request<T>) -> bool {
    req.metadata().contains_key(FORWARDED)
}

fn forwarded<T>(msg: T) -> Request<T> {
    let mut r = Request::new(msg);
    r.metadata_mut()
        .insert(FORWARDED, tonic::metadata::MetadataValue::from_static("1"));
    r
}

fn not_leader(addr: &str) -> Status {
    Status::unavailable(format!("not the leader; the leader is at {addr}"))
}

/// Sends a write a follower received to the leader, once.
macro_rules! forward {
    ($self:ident, $was_forwarded:expr, $addr:expr, $method:ident, $msg:expr) => {{
        if $was_forwarded {
            return Err(not_leader(&$addr));
        }
        let mut client = $self.core.metastore_client(&$addr)?;
        return client.$method(forwarded($msg)).await;
    }};
}

fn to_pb(key: &str, e: &KvEntry) -> pb::KeyValue {
    pb::KeyValue {
        key: key.to_string(),
        value: e.value.clone(),
        create_revision: e.create_revision,
        mod_revision: e.mod_revision,
        version: e.version,
        lease: e.lease,
    }
}

/// The keys of a range request, and whether more match past its limit.
fn collect_range(kv: &im::OrdMap<String, KvEntry>, r: &pb::RangeRequest, trusted: bool) -> (Vec<pb::KeyValue>, bool) {
    let limit = if r.limit == 0 { usize::MAX } else { r.limit as usize };
    let start = if r.start_after.is_empty() || r.start_after < r.prefix {
        r.prefix.clone()
    } else {
        r.start_after.clone()
    };
    let mut kvs = Vec::new();
    for (k, e) in kv.range(start..) {
        if !k.starts_with(&r.prefix) {
            break;
        }
        if !r.start_after.is_empty() && *k <= r.start_after {
            continue;
        }
        if k == credential::CREDENTIAL_KEY && !trusted {
            continue;
        }
        if kvs.len() == limit {
            return (kvs, true);
        }
        let mut kv = to_pb(k, e);
        if r.keys_only {
            kv.value = Default::default();
        }
        kvs.push(kv);
    }
    (kvs, false)
}

fn event_to_pb(ev: &Event) -> pb::WatchEvent {
    match &ev.entry {
        Some(e) => pb::WatchEvent {
            kind: pb::watch_event::Kind::Put as i32,
            kv: Some(to_pb(&ev.key, e)),
        },
        None => pb::WatchEvent {
            kind: pb::watch_event::Kind::Delete as i32,
            kv: Some(pb::KeyValue {
                key: ev.key.clone(),
                mod_revision: ev.revision,
                ..Default::default()
            }),
        },
    }
}

fn compacted(asked: u64, oldest: u64) -> Status {
    Status::out_of_range(format!(
        "revision {asked} was compacted; the oldest revision this node can replay is {oldest}"
    ))
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::WatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Metastore for MetastoreService {
    async fn put(&self, req: Request<pb::PutRequest>) -> Result<Response<pb::PutResponse>, Status> {
        let trusted = credential::authorized(&req, &self.core.sm);
        let r = req.into_inner();
        let txn = validate::put(&r.key, &r.value, r.lease, &self.core.limits)?;
        if let Some(p) = credential::internal_prefix_of(&r.key).filter(|_| !trusted) {
            return Err(credential::denied("key", p));
        }
        let rid = validate::request_id(&r.request_id, &self.core.limits)?;
        let res = self.core.write(rid, CommandKind::Txn(txn)).await?;
        Ok(Response::new(pb::PutResponse {
            header: Some(self.core.header_after(res.revision())),
        }))
    }

    async fn get(&self, req: Request<pb::GetRequest>) -> Result<Response<pb::GetResponse>, Status> {
        let trusted = credential::authorized(&req, &self.core.sm);
        let r = req.into_inner();
        validate::key("key", &r.key, &self.core.limits)?;
        if r.key == credential::CREDENTIAL_KEY && !trusted {
            return Err(credential::denied("key", credential::CREDENTIAL_KEY));
        }
        if !r.serializable {
            self.core.linearize().await?;
        }
        let (kv, revision) = {
            let sm = self.core.sm.inner.read();
            (sm.state.kv.get(&r.key).map(|e| to_pb(&r.key, e)), sm.revision())
        };
        Ok(Response::new(pb::GetResponse {
            header: Some(self.core.header_at(revision)),
            kv,
        }))
    }

    async fn range(&self, req: Request<pb::RangeRequest>) -> Result<Response<pb::RangeResponse>, Status> {
        let trusted = credential::authorized(&req, &self.core.sm);
        let r = req.into_inner();
        validate::prefix("prefix", &r.prefix, &self.core.limits)?;
        if !r.serializable {
            self.core.linearize().await?;
        }
        // A snapshot of the map (an O(1) clone) is walked off the runtime's threads and outside
        // the state machine's lock: a range over a million partitions takes seconds, which
        // would otherwise hold up Raft's tasks on this thread and every apply.
        let (kv, revision) = {
            let sm = self.core.sm.inner.read();
            (sm.state.kv.clone(), sm.revision())
        };
        let (kvs, more) = tokio::task::spawn_blocking(move || collect_range(&kv, &r, trusted))
            .await
            .map_err(|e| Status::internal(format!("range: {e}")))?;
        Ok(Response::new(pb::RangeResponse {
            header: Some(self.core.header_at(revision)),
            kvs,
            more,
        }))
    }

    async fn delete(&self, req: Request<pb::DeleteRequest>) -> Result<Response<pb::DeleteResponse>, Status> {
        let trusted = credential::authorized(&req, &self.core.sm);
        let r = req.into_inner();
        validate::key("key", &r.key, &self.core.limits)?;
        if let Some(p) = credential::internal_prefix_of(&r.key).filter(|_| !trusted) {
            return Err(credential::denied("key", p));
        }
        let rid = validate::request_id(&r.request_id, &self.core.limits)?;
        let txn = Txn {
            guards: vec![],
            ops: vec![crate::types::Op::Delete { key: r.key.clone() }],
        };
        let res = self.core.write(rid, CommandKind::Txn(txn)).await?;
        Ok(Response::new(pb::DeleteResponse {
            header: Some(self.core.header_after(res.revision())),
            deleted: deleted_of(&res),
        }))
    }

    async fn delete_prefix(
        &self,
        req: Request<pb::DeletePrefixRequest>,
    ) -> Result<Response<pb::DeleteResponse>, Status> {
        let trusted = credential::authorized(&req, &self.core.sm);
        let r = req.into_inner();
        validate::prefix("prefix", &r.prefix, &self.core.limits)?;
        if let Some(p) = credential::prefix_reaches_internal(&r.prefix).filter(|_| !trusted) {
            return Err(credential::denied("prefix", p));
        }
        let rid = validate::request_id(&r.request_id, &self.core.limits)?;
        let txn = Txn {
            guards: vec![],
            ops: vec![crate::types::Op::DeletePrefix {
                prefix: r.prefix.clone(),
            }],
        };
        let res = self.core.write(rid, CommandKind::Txn(txn)).await?;
        Ok(Response::new(pb::DeleteResponse {
            header: Some(self.core.header_after(res.revision())),
            deleted: deleted_of(&res),
        }))
    }

    async fn txn(&self, req: Request<pb::TxnRequest>) -> Result<Response<pb::TxnResponse>, Status> {
        let trusted = credential::authorized(&req, &self.core.sm);
        let mut r = req.into_inner();
        let rid = validate::request_id(&std::mem::take(&mut r.request_id), &self.core.limits)?;
        let limits = self.core.limits.clone();
        let check = move |r: pb::TxnRequest| -> Result<Txn, Status> {
            let txn = validate::txn(r, &limits)?;
            if !trusted {
                if let Some((field, p)) = credential::first_internal_op(&txn) {
                    return Err(credential::denied(&field, p));
                }
                if let Some(field) = credential::first_credential_guard(&txn) {
                    return Err(credential::denied(&field, credential::CREDENTIAL_KEY));
                }
            }
            Ok(txn)
        };
        // A million-partition request is checked and converted off the runtime's threads.
        let txn = if r.ops.len() + r.guards.len() > BIG_TXN_ITEMS {
            tokio::task::spawn_blocking(move || check(r))
                .await
                .map_err(|e| Status::internal(format!("txn: {e}")))??
        } else {
            check(r)?
        };
        match self.core.write_txn(rid, txn).await? {
            CommandResult::Txn {
                revision,
                succeeded,
                failed_guard,
                deleted,
            } => {
                let (failed_guard, failed_reason) = match failed_guard {
                    Some((i, why)) => (Some(i), why),
                    None => (None, String::new()),
                };
                Ok(Response::new(pb::TxnResponse {
                    header: Some(self.core.header_after(revision)),
                    succeeded,
                    failed_guard,
                    failed_reason,
                    deleted,
                }))
            }
            other => Err(Status::internal(format!("unexpected result {other:?}"))),
        }
    }

    type WatchStream = WatchStream;

    async fn watch(&self, req: Request<pb::WatchRequest>) -> Result<Response<WatchStream>, Status> {
        let trusted = credential::authorized(&req, &self.core.sm);
        let r = req.into_inner();
        validate::prefix("prefix", &r.prefix, &self.core.limits)?;
        let sm = self.core.sm.clone();
        let (sub, backlog, next) = subscribe(&sm, r.start_revision)?;
        let (tx, rx) = mpsc::channel(256);
        let closing = self.core.closing.subscribe();
        let hide = (!trusted).then_some(credential::CREDENTIAL_KEY);
        tokio::spawn(run_watch(sm, r.prefix, hide, sub, backlog, next, tx, closing));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn lease_grant(
        &self,
        req: Request<pb::LeaseGrantRequest>,
    ) -> Result<Response<pb::LeaseGrantResponse>, Status> {
        let r = req.into_inner();
        validate::lease_ttl(r.ttl_ms, &self.core.limits)?;
        let rid = validate::request_id(&r.request_id, &self.core.limits)?;
        match self
            .core
            .write(rid, CommandKind::LeaseGrant { ttl_ms: r.ttl_ms })
            .await?
        {
            CommandResult::LeaseGranted { id, ttl_ms } => Ok(Response::new(pb::LeaseGrantResponse {
                header: Some(self.core.header_after(id)),
                id,
                ttl_ms,
            })),
            other => Err(Status::internal(format!("unexpected result {other:?}"))),
        }
    }

    async fn lease_keep_alive(
        &self,
        req: Request<pb::LeaseKeepAliveRequest>,
    ) -> Result<Response<pb::LeaseKeepAliveResponse>, Status> {
        let fwd = is_forwarded(&req);
        let r = req.into_inner();
        match self.core.leases.keep_alive(r.id) {
            Ok(ttl_ms) => Ok(Response::new(pb::LeaseKeepAliveResponse {
                header: Some(self.core.header()),
                id: r.id,
                ttl_ms,
            })),
            Err(KeepAliveError::NotFound(id)) => {
                Err(Status::not_found(format!("lease {id} not found (expired or revoked)")))
            }
            Err(KeepAliveError::NotLeader) => {
                let addr = self
                    .core
                    .leader_addr()
                    .await
                    .map(|(_, a)| a)
                    .ok_or_else(|| Status::unavailable("no leader elected"))?;
                forward!(self, fwd, addr, lease_keep_alive, r)
            }
        }
    }

    async fn lease_revoke(
        &self,
        req: Request<pb::LeaseRevokeRequest>,
    ) -> Result<Response<pb::LeaseRevokeResponse>, Status> {
        let r = req.into_inner();
        let rid = validate::request_id(&r.request_id, &self.core.limits)?;
        match self.core.write(rid, CommandKind::LeaseRevoke { id: r.id }).await? {
            CommandResult::LeaseRevoked { found: true, revision } => Ok(Response::new(pb::LeaseRevokeResponse {
                header: Some(self.core.header_after(revision)),
            })),
            _ => Err(Status::not_found(format!(
                "lease {} not found (expired or revoked)",
                r.id
            ))),
        }
    }

    async fn member_list(
        &self,
        _req: Request<pb::MemberListRequest>,
    ) -> Result<Response<pb::MemberListResponse>, Status> {
        Ok(Response::new(pb::MemberListResponse {
            header: Some(self.core.header()),
            members: self.core.members(),
        }))
    }

    async fn member_add_learner(
        &self,
        req: Request<pb::MemberAddLearnerRequest>,
    ) -> Result<Response<pb::MemberListResponse>, Status> {
        let fwd = is_forwarded(&req);
        let r = req.into_inner();
        if r.id == 0 {
            return Err(Status::invalid_argument("id: must be greater than 0"));
        }
        if r.addr.parse::<std::net::SocketAddr>().is_err() && !r.addr.contains(':') {
            return Err(Status::invalid_argument(format!("addr: {:?} is not HOST:PORT", r.addr)));
        }
        match self
            .core
            .membership_change(MembershipChange::AddLearner(r.id, r.addr.clone()))
            .await?
        {
            Ok(()) => self.member_list(Request::new(pb::MemberListRequest {})).await,
            Err(addr) => forward!(self, fwd, addr, member_add_learner, r),
        }
    }

    async fn member_promote(
        &self,
        req: Request<pb::MemberPromoteRequest>,
    ) -> Result<Response<pb::MemberListResponse>, Status> {
        let fwd = is_forwarded(&req);
        let r = req.into_inner();
        // Only the leader's view of the membership is current.
        if let Some(addr) = self.core.remote_leader().await {
            forward!(self, fwd, addr, member_promote, r)
        }
        if !self.core.members().iter().any(|m| m.id == r.id) {
            return Err(Status::not_found(format!(
                "id: node {} is not a member; add it as a learner first",
                r.id
            )));
        }
        match self.core.membership_change(MembershipChange::Promote(r.id)).await? {
            Ok(()) => self.member_list(Request::new(pb::MemberListRequest {})).await,
            Err(addr) => forward!(self, fwd, addr, member_promote, r),
        }
    }

    async fn member_remove(
        &self,
        req: Request<pb::MemberRemoveRequest>,
    ) -> Result<Response<pb::MemberListResponse>, Status> {
        let fwd = is_forwarded(&req);
        let r = req.into_inner();
        if let Some(addr) = self.core.remote_leader().await {
            forward!(self, fwd, addr, member_remove, r)
        }
        if !self.core.members().iter().any(|m| m.id == r.id) {
            return Err(Status::not_found(format!("id: node {} is not a member", r.id)));
        }
        match self.core.membership_change(MembershipChange::Remove(r.id)).await? {
            Ok(()) => self.member_list(Request::new(pb::MemberListRequest {})).await,
            Err(addr) => forward!(self, fwd, addr, member_remove, r),
        }
    }

    async fn status(&self, _req: Request<pb::StatusRequest>) -> Result<Response<pb::StatusResponse>, Status> {
        let m = self.core.raft.metrics().borrow().clone();
        let keys = self.core.sm.inner.read().state.kv.len() as u64;
        Ok(Response::new(pb::StatusResponse {
            header: Some(self.core.header()),
            applied_index: m.last_applied.map_or(0, |l| l.index),
            last_log_index: m.last_log_index.unwrap_or(0),
            snapshot_index: m.snapshot.map_or(0, |l| l.index),
            keys,
            state: format!("{:?}", m.state),
        }))
    }
}

fn deleted_of(r: &CommandResult) -> u64 {
    match r {
        CommandResult::Txn { deleted, .. } => *deleted,
        _ => 0,
    }
}

type Subscription = (broadcast::Receiver<Arc<RevisionEvents>>, Vec<Arc<RevisionEvents>>, u64);

/// Subscribes to live changes and copies the history from `start` under one lock, so that no
/// revision falls between the two and none is seen twice.
fn subscribe(sm: &SmShared, start: u64) -> Result<Subscription, Status> {
    let g = sm.inner.read();
    let sub = sm.events.subscribe();
    let current = g.revision();
    let next = if start == 0 { current + 1 } else { start };
    let backlog = if next > current {
        Vec::new()
    } else {
        g.history.since(next).ok_or_else(|| compacted(next, g.history.start))?
    };
    Ok((sub, backlog, next))
}

#[allow(clippy::too_many_arguments)]
async fn run_watch(
    sm: Arc<SmShared>,
    prefix: String,
    hide: Option<&'static str>,
    mut sub: broadcast::Receiver<Arc<RevisionEvents>>,
    backlog: Vec<Arc<RevisionEvents>>,
    mut next: u64,
    tx: mpsc::Sender<Result<pb::WatchResponse, Status>>,
    mut closing: tokio::sync::watch::Receiver<bool>,
) {
    // First message: the revision the watch is synced to, so a client can resume from it.
    if tx
        .send(Ok(pb::WatchResponse {
            revision: next - 1,
            events: vec![],
        }))
        .await
        .is_err()
    {
        return;
    }
    let mut pending: std::collections::VecDeque<Arc<RevisionEvents>> = backlog.into();
    loop {
        while let Some(re) = pending.pop_front() {
            if re.revision < next {
                continue;
            }
            if re.reset {
                let _ = tx.send(Err(compacted(next, re.revision + 1))).await;
                return;
            }
            next = re.revision + 1;
            let events: Vec<pb::WatchEvent> = re
                .events
                .iter()
                .filter(|e| e.key.starts_with(&prefix) && Some(e.key.as_str()) != hide)
                .map(event_to_pb)
                .collect();
            if events.is_empty() {
                continue;
            }
            let msg = pb::WatchResponse {
                revision: re.revision,
                events,
            };
            if tx.send(Ok(msg)).await.is_err() {
                return;
            }
        }
        tokio::select! {
            _ = tx.closed() => return,
            _ = async { let _ = closing.wait_for(|c| *c).await; } => {
                let _ = tx.send(Err(Status::unavailable("node is shutting down"))).await;
                return;
            }
            got = sub.recv() => match got {
                Ok(re) => pending.push_back(re),
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    // Too slow for the live feed: catch up from the history instead.
                    match subscribe(&sm, next) {
                        Ok((s, backlog, _)) => {
                            sub = s;
                            pending.extend(backlog);
                        }
                        Err(status) => {
                            let _ = tx.send(Err(status)).await;
                            return;
                        }
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}
