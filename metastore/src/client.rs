//! The metastore client: talks to any node, moves to another when one fails, retries writes with
//! the same request id (so each applies once), and resumes watches where they stopped.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use proto::metastore as pb;
use proto::metastore::metastore_client::MetastoreClient;
use tokio::sync::mpsc;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Status};

use crate::credential::CredentialInterceptor;
use crate::local_node::trusted;
pub use crate::local_node::LocalNode;
use crate::peers::{self, MAX_MESSAGE};

/// What a client call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No endpoint was given, or one is malformed.
    #[error("invalid endpoint: {0}")]
    Endpoint(String),
    /// The server refused the request; the message says why.
    #[error("{}", .0.message())]
    Server(Status),
    /// The cluster credential could not be read or is malformed.
    #[error("cluster credential: {0}")]
    Credential(String),
    /// No node answered in time; a write may or may not have applied.
    #[error("no metastore node reachable: {0}")]
    Unavailable(String),
    /// No node answered in time, and no attempt of the write reached the leader's log: it
    /// surely did not apply.
    #[error("no metastore node reachable, not applied: {0}")]
    NotApplied(String),
}

impl ClientError {
    /// The gRPC code behind the error.
    pub fn code(&self) -> Code {
        match self {
            ClientError::Endpoint(_) | ClientError::Credential(_) => Code::InvalidArgument,
            ClientError::Server(s) => s.code(),
            ClientError::Unavailable(_) | ClientError::NotApplied(_) => Code::Unavailable,
        }
    }
}

/// A connection to one node, carrying the credential.
pub type Conn = InterceptedService<Channel, CredentialInterceptor>;

/// A client of a metastore cluster. Clones share connections.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    /// This process's own node, once attached.
    local: std::sync::OnceLock<LocalNode>,
    endpoints: Vec<String>,
    channels: Vec<Channel>,
    current: AtomicUsize,
    client_id: String,
    seq: AtomicU64,
    retry_for: Duration,
    /// The first and the longest pause between two attempts.
    backoff: (Duration, Duration),
    credential: CredentialInterceptor,
}

fn retryable(s: &Status) -> bool {
    matches!(
        s.code(),
        Code::Unavailable | Code::Unknown | Code::Cancelled | Code::DeadlineExceeded
    )
}

/// Whether a failed attempt surely did not apply: the server said so, or it was never sent.
fn not_applied(s: &Status) -> bool {
    let said = s
        .metadata()
        .get(crate::node_core::WRITE_OUTCOME)
        .is_some_and(|v| v.as_bytes() == crate::node_core::NOT_APPLIED.as_bytes());
    said || peers::never_sent(s)
}

/// The error after the last retryable failure: [`ClientError::NotApplied`] when no attempt may
/// have applied.
fn gave_up(s: &Status, maybe_applied: bool) -> ClientError {
    if maybe_applied {
        ClientError::Unavailable(s.message().to_string())
    } else {
        ClientError::NotApplied(s.message().to_string())
    }
}

/// The first pause after a failed attempt.
const FIRST_BACKOFF: Duration = Duration::from_millis(10);

/// Longest pause between two attempts: short, so that a client finds a new leader soon after
/// an election (a follower asked meanwhile waits for the election itself).
const MAX_BACKOFF: Duration = Duration::from_millis(200);

impl Client {
    /// A client of the nodes at `endpoints` (HOST:PORT each). Connections open lazily.
    pub fn new(endpoints: &[String]) -> Result<Self, ClientError> {
        if endpoints.is_empty() {
            return Err(ClientError::Endpoint("no endpoint given".into()));
        }
        let channels = endpoints
            .iter()
            .map(|e| peers::channel(e).map_err(|err| ClientError::Endpoint(format!("{e}: {err}"))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            inner: Arc::new(Inner {
                local: std::sync::OnceLock::new(),
                endpoints: endpoints.to_vec(),
                channels,
                current: AtomicUsize::new(0),
                client_id: uuid::Uuid::new_v4().simple().to_string(),
                seq: AtomicU64::new(0),
                retry_for: Duration::from_secs(15),
                backoff: (FIRST_BACKOFF, MAX_BACKOFF),
                credential: CredentialInterceptor::default(),
            }),
        })
    }

    /// A client that pauses `first`, then twice as long each time up to `max`, between two
    /// attempts of a call (a client of a cluster under test may want other pauses). Only for a
    /// client not yet cloned.
    pub fn with_backoff(mut self, first: Duration, max: Duration) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.backoff = (first, max);
        }
        self
    }

    /// A client that starts at endpoint `i` (to spread clients over nodes).
    pub fn starting_at(self, i: usize) -> Self {
        self.inner
            .current
            .store(i % self.inner.endpoints.len(), Ordering::Relaxed);
        self
    }

    /// Calls `node` directly, without the network, while it leads (see [`LocalNode`]); for a
    /// client in the same process as a quorum node. Clones share it.
    pub fn attach_local(&self, node: LocalNode) {
        let _ = self.inner.local.set(node);
    }

    /// The leader's address, when this client is attached to a local node that does not lead:
    /// a request that writes a lot is better sent there whole (see [`LocalNode`]).
    pub fn remote_leader(&self) -> Option<String> {
        self.inner.local.get().and_then(LocalNode::remote_leader)
    }

    fn leading_local(&self) -> Option<&LocalNode> {
        self.inner.local.get().filter(|l| l.leads())
    }

    /// The endpoints this client knows.
    pub fn endpoints(&self) -> &[String] {
        &self.inner.endpoints
    }

    /// A fresh request id, unique to this client.
    pub fn new_request_id(&self) -> String {
        format!(
            "{}-{}",
            self.inner.client_id,
            self.inner.seq.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Sends the cluster credential with every request from now on (clones too), so that this
    /// client may write the keys the cluster writes itself. The first token given stays.
    pub fn set_credential(&self, token: &str) -> Result<(), ClientError> {
        let v = MetadataValue::try_from(token.trim())
            .map_err(|_| ClientError::Credential("the token is not printable ASCII".into()))?;
        self.inner.credential.set(v);
        Ok(())
    }

    /// Like [`Client::set_credential`], reading the token from a file.
    pub fn set_credential_file(&self, path: &std::path::Path) -> Result<(), ClientError> {
        let token =
            std::fs::read_to_string(path).map_err(|e| ClientError::Credential(format!("{}: {e}", path.display())))?;
        self.set_credential(&token)
    }

    /// The interceptor that adds this client's credential, for other services' clients.
    pub fn credential_interceptor(&self) -> CredentialInterceptor {
        self.inner.credential.clone()
    }

    /// Whether `given` is the credential this client carries (compared without an early exit);
    /// false while it has none.
    pub fn carries_credential(&self, given: &[u8]) -> bool {
        self.inner.credential.carries(given)
    }

    fn client_at(&self, i: usize) -> MetastoreClient<Conn> {
        MetastoreClient::with_interceptor(self.inner.channels[i].clone(), self.inner.credential.clone())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    /// Calls `f` on the current node; on a transport error or an unavailable node, moves on to
    /// the next node and calls again, for up to the retry window.
    pub async fn call<T, F, Fut>(&self, mut f: F) -> Result<T, ClientError>
    where
        F: FnMut(MetastoreClient<Conn>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let deadline = tokio::time::Instant::now() + self.inner.retry_for;
        let mut backoff = self.inner.backoff.0;
        let mut maybe_applied = false;
        let local = self.inner.local.get();
        loop {
            let i = self.inner.current.load(Ordering::Relaxed);
            let leader_before = local.and_then(LocalNode::leader);
            match f(self.client_at(i)).await {
                Ok(r) => return Ok(r.into_inner()),
                Err(s) if retryable(&s) => {
                    maybe_applied |= !not_applied(&s);
                    if tokio::time::Instant::now() >= deadline {
                        return Err(gave_up(&s, maybe_applied));
                    }
                    let n = self.inner.endpoints.len();
                    let _ = self
                        .inner
                        .current
                        .compare_exchange(i, (i + 1) % n, Ordering::Relaxed, Ordering::Relaxed);
                    backoff = self.pause(local, leader_before, backoff).await;
                }
                Err(s) => return Err(ClientError::Server(s)),
            }
        }
    }

    /// Waits `backoff` before the next attempt and returns the next backoff. With a local node,
    /// a new leader ends the wait early and the next attempt goes to it: after a leader is
    /// killed, a call is answered right after the election, not up to a backoff later.
    async fn pause(&self, local: Option<&LocalNode>, leader_before: Option<u64>, backoff: Duration) -> Duration {
        let (first, max) = self.inner.backoff;
        let next = (backoff * 2).min(max);
        let Some(local) = local else {
            tokio::time::sleep(backoff).await;
            return next;
        };
        tokio::select! {
            _ = tokio::time::sleep(backoff) => next,
            addr = local.new_leader(leader_before) => {
                if let Some(j) = self.inner.endpoints.iter().position(|e| *e == addr) {
                    self.inner.current.store(j, Ordering::Relaxed);
                }
                first
            }
        }
    }

    /// Calls one given endpoint, without retry.
    pub async fn call_endpoint<T, F, Fut>(&self, i: usize, f: F) -> Result<T, ClientError>
    where
        F: FnOnce(MetastoreClient<Conn>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        f(self.client_at(i)).await.map(|r| r.into_inner()).map_err(|s| {
            if retryable(&s) {
                gave_up(&s, !not_applied(&s))
            } else {
                ClientError::Server(s)
            }
        })
    }

    /// Puts a value; returns the revision after the write.
    pub async fn put(&self, key: &str, value: impl Into<Bytes>) -> Result<u64, ClientError> {
        self.put_with_lease(key, value, 0).await
    }

    /// Puts a value bound to a lease (0 for none).
    pub async fn put_with_lease(&self, key: &str, value: impl Into<Bytes>, lease: u64) -> Result<u64, ClientError> {
        let req = pb::PutRequest {
            key: key.to_string(),
            value: value.into(),
            lease,
            request_id: self.new_request_id(),
        };
        let r = self
            .call(|mut c| {
                let req = req.clone();
                async move { c.put(req).await }
            })
            .await?;
        Ok(r.header.map_or(0, |h| h.revision))
    }

    /// Reads a key, linearizably.
    pub async fn get(&self, key: &str) -> Result<Option<pb::KeyValue>, ClientError> {
        self.get_opt(key, false).await
    }

    /// Reads a key; `serializable` reads the local replica of whichever node answers.
    pub async fn get_opt(&self, key: &str, serializable: bool) -> Result<Option<pb::KeyValue>, ClientError> {
        let req = pb::GetRequest {
            key: key.to_string(),
            serializable,
        };
        if let Some(l) = self.leading_local() {
            use proto::metastore::metastore_server::Metastore;
            if let Ok(r) = l.service.get(trusted(req.clone())).await {
                return Ok(r.into_inner().kv);
            }
        }
        let r = self
            .call(|mut c| {
                let req = req.clone();
                async move { c.get(req).await }
            })
            .await?;
        Ok(r.kv)
    }

    /// Lists keys under a prefix (0 = no limit), linearizably.
    pub async fn range(&self, prefix: &str, limit: u64) -> Result<pb::RangeResponse, ClientError> {
        let req = pb::RangeRequest {
            prefix: prefix.to_string(),
            limit,
            ..Default::default()
        };
        self.range_req(req).await
    }

    /// Runs a range request as given.
    pub async fn range_req(&self, req: pb::RangeRequest) -> Result<pb::RangeResponse, ClientError> {
        if let Some(l) = self.leading_local() {
            use proto::metastore::metastore_server::Metastore;
            if let Ok(r) = l.service.range(trusted(req.clone())).await {
                return Ok(r.into_inner());
            }
        }
        self.call(|mut c| {
            let req = req.clone();
            async move { c.range(req).await }
        })
        .await
    }

    /// Deletes a key; returns how many keys went (0 or 1).
    pub async fn delete(&self, key: &str) -> Result<u64, ClientError> {
        let req = pb::DeleteRequest {
            key: key.to_string(),
            request_id: self.new_request_id(),
        };
        let r = self
            .call(|mut c| {
                let req = req.clone();
                async move { c.delete(req).await }
            })
            .await?;
        Ok(r.deleted)
    }

    /// Deletes every key under a prefix.
    pub async fn delete_prefix(&self, prefix: &str) -> Result<u64, ClientError> {
        let req = pb::DeletePrefixRequest {
            prefix: prefix.to_string(),
            request_id: self.new_request_id(),
        };
        let r = self
            .call(|mut c| {
                let req = req.clone();
                async move { c.delete_prefix(req).await }
            })
            .await?;
        Ok(r.deleted)
    }

    /// Runs a transaction; a request id is added when it has none.
    pub async fn txn(&self, mut req: pb::TxnRequest) -> Result<pb::TxnResponse, ClientError> {
        if req.request_id.is_empty() {
            req.request_id = self.new_request_id();
        }
        if let Some(l) = self.leading_local() {
            // Kept for a retry elsewhere should leadership move during the call (a copy, so a
            // large request briefly takes twice its memory); the commit's request id makes the
            // retry apply the transaction at most once.
            let retry = if req.ops.len() + req.guards.len() > crate::service::BIG_TXN_ITEMS {
                // Seconds of copying for a million-partition request: not on a runtime thread.
                let (r, copy) = tokio::task::spawn_blocking(move || {
                    let copy = req.clone();
                    (req, copy)
                })
                .await
                .map_err(|e| ClientError::Server(tonic::Status::internal(format!("copying a transaction: {e}"))))?;
                req = r;
                copy
            } else {
                req.clone()
            };
            use proto::metastore::metastore_server::Metastore;
            match l.service.txn(trusted(req)).await {
                Ok(r) => return Ok(r.into_inner()),
                Err(s) if retryable(&s) => {
                    tracing::debug!(error = %s.message(), "local transaction failed; retrying on the cluster");
                    req = retry;
                }
                Err(s) => return Err(ClientError::Server(s)),
            }
        }
        let req = Arc::new(req);
        self.call(|mut c| {
            let req = req.clone();
            async move { c.txn((*req).clone()).await }
        })
        .await
    }

    /// Grants a lease; returns its id.
    pub async fn lease_grant(&self, ttl_ms: u64) -> Result<u64, ClientError> {
        let req = pb::LeaseGrantRequest {
            ttl_ms,
            request_id: self.new_request_id(),
        };
        let r = self
            .call(|mut c| {
                let req = req.clone();
                async move { c.lease_grant(req).await }
            })
            .await?;
        Ok(r.id)
    }

    /// Renews a lease; returns its TTL.
    pub async fn lease_keep_alive(&self, id: u64) -> Result<u64, ClientError> {
        let r = self
            .call(|mut c| async move { c.lease_keep_alive(pb::LeaseKeepAliveRequest { id }).await })
            .await?;
        Ok(r.ttl_ms)
    }

    /// Revokes a lease, deleting its keys.
    pub async fn lease_revoke(&self, id: u64) -> Result<(), ClientError> {
        let req = pb::LeaseRevokeRequest {
            id,
            request_id: self.new_request_id(),
        };
        self.call(|mut c| {
            let req = req.clone();
            async move { c.lease_revoke(req).await }
        })
        .await?;
        Ok(())
    }

    /// Watches a prefix from `start_revision` (0 = from now). The stream survives node failures:
    /// it reconnects to another node and resumes after the last revision it delivered.
    pub fn watch(&self, prefix: &str, start_revision: u64) -> mpsc::Receiver<Result<pb::WatchResponse, ClientError>> {
        let (tx, rx) = mpsc::channel(1024);
        let client = self.clone();
        let prefix = prefix.to_string();
        tokio::spawn(async move { client.run_watch(prefix, start_revision, tx).await });
        rx
    }

    async fn run_watch(self, prefix: String, start: u64, tx: mpsc::Sender<Result<pb::WatchResponse, ClientError>>) {
        // `next` is 0 only until the first answer tells which revision "now" was.
        let mut next = start;
        let deadline_window = self.inner.retry_for;
        let mut failing_since: Option<tokio::time::Instant> = None;
        loop {
            let i = self.inner.current.load(Ordering::Relaxed);
            let req = pb::WatchRequest {
                prefix: prefix.clone(),
                start_revision: next,
            };
            let err = match self.client_at(i).watch(req).await {
                Ok(stream) => {
                    let mut stream = stream.into_inner();
                    loop {
                        match stream.message().await {
                            Ok(Some(msg)) => {
                                failing_since = None;
                                next = msg.revision + 1;
                                if msg.events.is_empty() {
                                    continue;
                                }
                                if tx.send(Ok(msg)).await.is_err() {
                                    return;
                                }
                            }
                            Ok(None) => break Status::unavailable("watch stream ended"),
                            Err(s) => break s,
                        }
                    }
                }
                Err(s) => s,
            };
            if !retryable(&err) {
                let _ = tx.send(Err(ClientError::Server(err))).await;
                return;
            }
            let since = *failing_since.get_or_insert_with(tokio::time::Instant::now);
            if since.elapsed() > deadline_window {
                let _ = tx.send(Err(ClientError::Unavailable(err.message().to_string()))).await;
                return;
            }
            let n = self.inner.endpoints.len();
            let _ = self
                .inner
                .current
                .compare_exchange(i, (i + 1) % n, Ordering::Relaxed, Ordering::Relaxed);
            if tx.is_closed() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The cluster's members.
    pub async fn member_list(&self) -> Result<Vec<pb::Member>, ClientError> {
        let r = self
            .call(|mut c| async move { c.member_list(pb::MemberListRequest {}).await })
            .await?;
        Ok(r.members)
    }

    /// Adds a non-voting member and waits until it has caught up.
    pub async fn member_add_learner(&self, id: u64, addr: &str) -> Result<Vec<pb::Member>, ClientError> {
        let req = pb::MemberAddLearnerRequest {
            id,
            addr: addr.to_string(),
        };
        let r = self
            .call(|mut c| {
                let req = req.clone();
                async move { c.member_add_learner(req).await }
            })
            .await?;
        Ok(r.members)
    }

    /// Makes a learner a voter.
    pub async fn member_promote(&self, id: u64) -> Result<Vec<pb::Member>, ClientError> {
        let r = self
            .call(|mut c| async move { c.member_promote(pb::MemberPromoteRequest { id }).await })
            .await?;
        Ok(r.members)
    }

    /// Removes a member.
    pub async fn member_remove(&self, id: u64) -> Result<Vec<pb::Member>, ClientError> {
        let r = self
            .call(|mut c| async move { c.member_remove(pb::MemberRemoveRequest { id }).await })
            .await?;
        Ok(r.members)
    }

    /// The status of endpoint `i`.
    pub async fn status_of(&self, i: usize) -> Result<pb::StatusResponse, ClientError> {
        self.call_endpoint(i, |mut c| async move { c.status(pb::StatusRequest {}).await })
            .await
    }

    /// The highest Raft term any of the endpoints reports; `None` when none answers. A term
    /// that moved over a run means elections happened in it.
    pub async fn highest_term(&self) -> Option<u64> {
        let mut term = None;
        for i in 0..self.endpoints().len() {
            if let Ok(s) = self.status_of(i).await {
                let t = s.header.map_or(0, |h| h.raft_term);
                term = Some(term.map_or(t, |m: u64| m.max(t)));
            }
        }
        term
    }
}

impl Client {
    /// The quorum as its leader sees it (a follower asks the leader for it).
    pub async fn quorum(&self) -> Result<pb::QuorumResponse, ClientError> {
        self.call(|mut c| async move { c.quorum(pb::QuorumRequest {}).await })
            .await
    }
}
