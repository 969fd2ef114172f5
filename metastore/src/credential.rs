//! The cluster credential: the keys the cluster writes itself (`/brokers`, `/admin`, `/config`,
//! `/controller`, `/cluster`) are refused to the generic KV API unless a request carries the
//! credential, or comes from the node's own process. The first leader of a cluster creates the
//! credential (`credential_ensure.rs`) and stores it under [`CREDENTIAL_KEY`], which only a
//! credentialed caller can read; every quorum node learns it by replication and writes it to a
//! file in its data dir for its operators and broker-only nodes. A first step towards
//! authentication and ACLs.

use std::sync::Arc;
use std::time::Duration;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::{Request, Status};

use crate::state_machine::SmShared;
use crate::types::{Op, Txn};

/// Where the credential is stored.
pub const CREDENTIAL_KEY: &str = "/cluster/credential";
/// The request metadata key that carries the credential.
pub const CREDENTIAL_HEADER: &str = "x-ferry-credential";
/// The file in a quorum node's data dir that holds the credential.
pub const CREDENTIAL_FILE: &str = "cluster-credential";
/// The prefixes the cluster writes itself (the ACLs too: a client that could write them could
/// grant itself anything).
pub const INTERNAL_PREFIXES: [&str; 7] = [
    "/brokers",
    "/admin",
    "/config",
    "/controller",
    "/cluster",
    "/kafka-acl",
    "/kafka-acl-extended",
];

/// Marks a request made by the node's own process (a request extension: it cannot come from
/// the network).
#[derive(Debug, Clone, Copy)]
pub struct Trusted;

/// The internal prefix that holds `key`, if any.
pub fn internal_prefix_of(key: &str) -> Option<&'static str> {
    INTERNAL_PREFIXES
        .into_iter()
        .find(|p| key == *p || key.strip_prefix(p).is_some_and(|rest| rest.starts_with('/')))
}

/// The internal prefix that a delete-prefix of `prefix` would reach into, if any.
pub fn prefix_reaches_internal(prefix: &str) -> Option<&'static str> {
    internal_prefix_of(prefix).or_else(|| INTERNAL_PREFIXES.into_iter().find(|p| p.starts_with(prefix)))
}

/// A fresh credential: 256 random bits, hex.
pub fn new_token() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// The credential stored in `sm`, once the cluster has one.
pub fn stored(sm: &SmShared) -> Option<String> {
    let g = sm.inner.read();
    let e = g.state.kv.get(CREDENTIAL_KEY)?;
    String::from_utf8(e.value.to_vec()).ok()
}

/// Compares without an early exit, so that timing does not tell how much of a guess matched.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `req` may touch internal keys: it comes from this process, or it carries the
/// credential the cluster stores.
pub fn authorized<T>(req: &Request<T>, sm: &SmShared) -> bool {
    if req.extensions().get::<Trusted>().is_some() {
        return true;
    }
    let Some(given) = req.metadata().get(CREDENTIAL_HEADER) else {
        return false;
    };
    stored(sm).is_some_and(|s| same(s.as_bytes(), given.as_bytes()))
}

/// The refusal of a request that touches an internal prefix without the credential.
pub fn denied(field: &str, prefix: &str) -> Status {
    Status::permission_denied(format!(
        "{field}: {prefix} is written by the cluster itself; give the cluster credential \
         (--cluster-credential-file) to change it"
    ))
}

/// The first internal key a transaction's operations write, with the field that names it.
pub fn first_internal_op(txn: &Txn) -> Option<(String, &'static str)> {
    txn.ops.iter().enumerate().find_map(|(i, op)| match op {
        Op::Put { key, .. } => internal_prefix_of(key).map(|p| (format!("ops[{i}].put.key"), p)),
        Op::Delete { key } => internal_prefix_of(key).map(|p| (format!("ops[{i}].delete.key"), p)),
        Op::DeletePrefix { prefix } => {
            prefix_reaches_internal(prefix).map(|p| (format!("ops[{i}].delete_prefix.prefix"), p))
        }
    })
}

/// The first guard on the credential itself (a value guard would let a caller test guesses).
pub fn first_credential_guard(txn: &Txn) -> Option<String> {
    txn.guards
        .iter()
        .position(|g| g.key == CREDENTIAL_KEY)
        .map(|i| format!("guards[{i}].key"))
}

/// Adds the cluster credential, once a client has one, to every request it sends.
#[derive(Clone, Default)]
pub struct CredentialInterceptor {
    token: Arc<std::sync::OnceLock<MetadataValue<Ascii>>>,
}

impl CredentialInterceptor {
    /// Takes `token`; the first one given stays.
    pub(crate) fn set(&self, token: MetadataValue<Ascii>) {
        let _ = self.token.set(token);
    }

    /// Whether `given` is the token held (compared without an early exit); false with none.
    pub(crate) fn carries(&self, given: &[u8]) -> bool {
        self.token.get().is_some_and(|t| same(t.as_bytes(), given))
    }
}

impl tonic::service::Interceptor for CredentialInterceptor {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, Status> {
        if let Some(t) = self.token.get() {
            req.metadata_mut().insert(CREDENTIAL_HEADER, t.clone());
        }
        Ok(req)
    }
}

/// The credential as this node knows it, for the Raft service between nodes: from its data dir
/// at start, then from the replicated state. Empty until the cluster has one: nodes forming a
/// cluster talk before the first leader creates it.
#[derive(Clone, Default)]
pub struct PeerCredential {
    token: Arc<parking_lot::RwLock<Option<MetadataValue<Ascii>>>>,
    /// When a peer last refused this node for not giving the credential.
    refused_at: Arc<parking_lot::Mutex<Option<std::time::Instant>>>,
}

impl PeerCredential {
    /// Learns `token`; a token that is not a valid header value is ignored (ours are hex).
    pub fn set(&self, token: &str) {
        if let Ok(v) = MetadataValue::try_from(token.trim()) {
            *self.token.write() = Some(v);
        }
    }

    /// Learns the token stored in `path`, if the file is there.
    pub fn load(&self, path: &std::path::Path) {
        if let Ok(token) = std::fs::read_to_string(path) {
            self.set(&token);
        }
    }

    /// Refuses a call from a peer that does not give the credential this node knows. Raft's
    /// own messages and forwarded proposals bypass the KV API's checks, so without this any
    /// client could write internal keys through the Raft port.
    pub fn check<T>(&self, req: &Request<T>) -> Result<(), Status> {
        let Some(known) = self.token.read().clone() else {
            return Ok(());
        };
        match req.metadata().get(CREDENTIAL_HEADER) {
            Some(given) if same(given.as_bytes(), known.as_bytes()) => Ok(()),
            _ => Err(Status::unauthenticated(
                "the Raft service is for the cluster's own nodes: the cluster credential is missing or wrong",
            )),
        }
    }

    /// Records that a peer refused this node's call for a missing or wrong credential: the
    /// cluster has one this node has not learned yet.
    pub fn note_refused(&self) {
        *self.refused_at.lock() = Some(std::time::Instant::now());
    }

    /// Whether this node may start elections now (see [`may_campaign`]).
    pub fn may_campaign(&self) -> bool {
        let known = self.token.read().is_some();
        let since = self.refused_at.lock().map(|t| t.elapsed());
        may_campaign(known, since)
    }
}

/// How long a node that peers refused stays out of elections before it tries again.
pub const REFUSAL_HOLD: Duration = Duration::from_secs(5);

/// Whether a node may start elections. One that has not learned the credential while its
/// peers already have it cannot win (they refuse its votes), yet each try raised its term; the
/// peers then saw that term in its answers to their own votes and appends, stepped down or
/// lost their elections, and the cluster stayed leaderless for seconds. Such a node waits
/// instead: the others elect a leader, whose appends give it the credential. Without a recent
/// refusal it campaigns as usual (a forming cluster has no credential yet), and after
/// [`REFUSAL_HOLD`] it tries again, should the refusal have come from a stranger on a
/// peer's old address.
pub fn may_campaign(knows_credential: bool, since_refused: Option<Duration>) -> bool {
    knows_credential || since_refused.is_none_or(|d| d >= REFUSAL_HOLD)
}

impl tonic::service::Interceptor for PeerCredential {
    /// Adds the credential, once known, to a call to a peer.
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(v) = self.token.read().clone() {
            req.metadata_mut().insert(CREDENTIAL_HEADER, v);
        }
        Ok(req)
    }
}

/// How often a wait for the credential looks again when it cannot be told of new entries; also
/// how often a leader looks whether the cluster has one yet (`credential_ensure.rs`).
pub const LOOK_AGAIN: Duration = Duration::from_millis(50);

/// Waits until the cluster has a credential and returns it.
pub async fn wait(sm: &SmShared) -> String {
    let mut applied = sm.applied.subscribe();
    loop {
        if let Some(c) = stored(sm) {
            return c;
        }
        // Either a new entry applied or the sender went away (then poll slowly).
        if applied.changed().await.is_err() {
            tokio::time::sleep(LOOK_AGAIN).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_keys_are_those_under_the_cluster_prefixes() {
        assert_eq!(internal_prefix_of("/brokers/ids/1"), Some("/brokers"));
        assert_eq!(internal_prefix_of("/controller"), Some("/controller"));
        assert_eq!(internal_prefix_of("/cluster/credential"), Some("/cluster"));
        assert_eq!(internal_prefix_of("/brokersx/1"), None);
        assert_eq!(internal_prefix_of("/controller_epoch"), None);
        assert_eq!(internal_prefix_of("/hello"), None);
    }

    #[test]
    fn a_prefix_reaches_internal_keys_from_above_and_below() {
        assert_eq!(prefix_reaches_internal("/"), Some("/brokers"));
        assert_eq!(prefix_reaches_internal("/ad"), Some("/admin"));
        assert_eq!(prefix_reaches_internal("/config/topics/"), Some("/config"));
        assert_eq!(prefix_reaches_internal("/tmp/"), None);
        assert_eq!(prefix_reaches_internal("/brokersx"), None);
    }

    #[test]
    fn a_peer_call_is_checked_once_the_credential_is_known() {
        let known = PeerCredential::default();
        let bare = Request::new(());
        assert!(known.check(&bare).is_ok(), "a cluster without a credential yet");
        known.set("abc123\n");
        assert_eq!(known.check(&bare).unwrap_err().code(), tonic::Code::Unauthenticated);
        let mut wrong = Request::new(());
        wrong
            .metadata_mut()
            .insert(CREDENTIAL_HEADER, MetadataValue::from_static("abc124"));
        assert_eq!(known.check(&wrong).unwrap_err().code(), tonic::Code::Unauthenticated);
        let mut sender = known.clone();
        let given = tonic::service::Interceptor::call(&mut sender, Request::new(())).unwrap();
        assert!(known.check(&given).is_ok());
    }

    #[test]
    fn a_node_refused_for_its_credential_waits_out_elections() {
        assert!(may_campaign(false, None), "a forming cluster elects");
        assert!(!may_campaign(false, Some(Duration::ZERO)));
        assert!(!may_campaign(false, Some(REFUSAL_HOLD - Duration::from_millis(1))));
        assert!(may_campaign(false, Some(REFUSAL_HOLD)), "tries again after the hold");
        assert!(
            may_campaign(true, Some(Duration::ZERO)),
            "a node with the credential always may"
        );
        let c = PeerCredential::default();
        assert!(c.may_campaign());
        c.note_refused();
        assert!(!c.may_campaign());
        c.set("abc");
        assert!(c.may_campaign());
    }

    #[test]
    fn comparison_needs_every_byte() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
    }
}
