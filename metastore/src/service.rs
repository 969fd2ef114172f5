//! The `Metastore` gRPC service: validates each request, proposes writes (forwarding them to the
//! leader from a follower), serves reads after a read index, and streams watches.

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use proto::metastore as pb;
use proto::metastore::metastore_server::Metastore;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::credential;
use crate::kv_pb::to_pb;
use crate::kv_state::KvEntry;
use crate::lease::KeepAliveError;
use crate::node_core::MembershipChange;
use crate::types::{CommandKind, CommandResult, Txn};
use crate::validate::{self, InvalidRequest};
use crate::watch;

// Also reachable here, so code that names them through `service::` keeps compiling.
pub use crate::node_core::{Deadlines, NodeCore, MAYBE_APPLIED, NOT_APPLIED, WRITE_OUTCOME};

/// Metadata key set on a request a follower forwards, so it is forwarded at most once.
const FORWARDED: &str = "x-ferry-forwarded";
/// Operations and guards past which a transaction is checked on a blocking thread.
pub(crate) const BIG_TXN_ITEMS: usize = 10_000;

impl From<InvalidRequest> for Status {
    fn from(e: InvalidRequest) -> Self {
        Status::invalid_argument(e.to_string())
    }
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
        let hide = (!trusted).then_some(credential::CREDENTIAL_KEY);
        let rx = watch::open(
            self.core.sm.clone(),
            r.prefix,
            r.start_revision,
            hide,
            self.core.closing(),
        )?;
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

    async fn quorum(&self, req: Request<pb::QuorumRequest>) -> Result<Response<pb::QuorumResponse>, Status> {
        let fwd = is_forwarded(&req);
        // Only the leader knows where each member's log ends.
        if let Some(addr) = self.core.remote_leader().await {
            forward!(self, fwd, addr, quorum, pb::QuorumRequest {})
        }
        let inputs = crate::quorum::QuorumInputs::of(&self.core.raft, &self.core.acks)
            .ok_or_else(|| Status::unavailable("no leader elected"))?;
        Ok(Response::new(pb::QuorumResponse {
            header: Some(self.core.header()),
            ..crate::quorum::view(&inputs)
        }))
    }
}

fn deleted_of(r: &CommandResult) -> u64 {
    match r {
        CommandResult::Txn { deleted, .. } => *deleted,
        _ => 0,
    }
}
