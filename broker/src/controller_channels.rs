//! Channels from a broker to the quorum nodes, for its requests to the controller.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use proto::ferry::admin_client::AdminClient;
use proto::ferry::security_client::SecurityClient;
use tonic::codegen::InterceptedService;

/// A channel whose calls carry the cluster credential.
pub type Credentialed = InterceptedService<tonic::transport::Channel, metastore::CredentialInterceptor>;

/// Channels to the quorum nodes for the broker's requests to the controller (any node answers),
/// moving on to the next node after a failure.
#[derive(Clone)]
pub struct ControllerChannels {
    /// The cluster credential, sent with every call.
    credential: metastore::CredentialInterceptor,
    channels: Arc<Vec<tonic::transport::Channel>>,
    /// The address of each channel, as configured, for leader hints.
    addrs: Arc<Vec<String>>,
    next: Arc<AtomicUsize>,
}

/// How long a broker's report to the controller may take before it counts as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Report batches of one kind a broker has in flight to the controller at once.
pub const REPORT_BATCHES_IN_FLIGHT: usize = 4;

/// The place in `addrs` (compared as written) of the leader an answer's hint names
/// ([`proto::LEADER_HINT`]); `None` without a hint or for an address not in `addrs`.
pub fn hinted(meta: &tonic::metadata::MetadataMap, addrs: &[String]) -> Option<usize> {
    let addr = meta.get(proto::LEADER_HINT)?.to_str().ok()?;
    let i = addrs.iter().position(|a| a == addr);
    if i.is_none() {
        tracing::debug!(leader = addr, "leader hint names no known quorum node; ignored");
    }
    i
}

impl ControllerChannels {
    /// Channels to `quorum`; `None` when no address parses.
    pub fn new(quorum: &[String]) -> Option<Self> {
        let (channels, addrs): (Vec<_>, Vec<_>) = quorum
            .iter()
            .filter_map(|q| Some((metastore::peers::channel(q).ok()?, q.clone())))
            .unzip();
        (!channels.is_empty()).then(|| Self {
            credential: Default::default(),
            channels: Arc::new(channels),
            addrs: Arc::new(addrs),
            next: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// A client of the node to ask next, carrying the cluster credential (a node under an
    /// authorizer admits the broker's calls by it).
    pub fn admin(&self) -> AdminClient<Credentialed> {
        AdminClient::with_interceptor(
            self.channels[self.next.load(Ordering::Relaxed) % self.channels.len()].clone(),
            self.credential.clone(),
        )
        .max_decoding_message_size(1 << 30)
        .max_encoding_message_size(1 << 30)
    }

    /// Sends `credential` (the broker's metastore client's) with every call.
    pub fn with_credential(mut self, credential: metastore::CredentialInterceptor) -> Self {
        self.credential = credential;
        self
    }

    /// A Security service client of the node to ask next, carrying the cluster credential.
    pub fn security(&self) -> SecurityClient<Credentialed> {
        SecurityClient::with_interceptor(
            self.channels[self.next.load(Ordering::Relaxed) % self.channels.len()].clone(),
            self.credential.clone(),
        )
    }

    /// The last call failed: the next goes to another node.
    pub fn failed(&self) {
        self.next.fetch_add(1, Ordering::Relaxed);
    }

    /// Sends `items` in one call by `batch`, or each alone by `one` when the node asked has no
    /// batch method (an older version, during a rolling upgrade). An answer per item, in order;
    /// `None` where none came (a failed call: the next goes to another node; `what` names the
    /// reports in the log).
    pub async fn send_batch<Req, Resp, B, BFut, O, OFut>(
        &self,
        what: &str,
        items: &[Req],
        batch: B,
        one: O,
    ) -> Vec<Option<Resp>>
    where
        Req: Clone,
        Resp: Clone,
        B: FnOnce(AdminClient<Credentialed>, Vec<Req>) -> BFut,
        BFut: Future<Output = Result<Vec<Resp>, tonic::Status>>,
        O: Fn(AdminClient<Credentialed>, Req) -> OFut,
        OFut: Future<Output = Result<Resp, tonic::Status>>,
    {
        match tokio::time::timeout(CALL_TIMEOUT, batch(self.admin(), items.to_vec())).await {
            // A short answer leaves the rest to the next pass.
            Ok(Ok(results)) => (0..items.len()).map(|i| results.get(i).cloned()).collect(),
            Ok(Err(e)) if e.code() == tonic::Code::Unimplemented => {
                let mut answers = Vec::with_capacity(items.len());
                for req in items {
                    answers.push(self.send_one(what, |a| one(a, req.clone())).await);
                }
                answers
            }
            failed => {
                if let Ok(Err(e)) = failed {
                    tracing::warn!(error = %e, "{what} failed");
                }
                self.failed();
                vec![None; items.len()]
            }
        }
    }

    /// One call by `call`; `None` when it failed or timed out (the next goes to another node).
    pub async fn send_one<Resp, Fut>(
        &self,
        what: &str,
        call: impl FnOnce(AdminClient<Credentialed>) -> Fut,
    ) -> Option<Resp>
    where
        Fut: Future<Output = Result<Resp, tonic::Status>>,
    {
        match tokio::time::timeout(CALL_TIMEOUT, call(self.admin())).await {
            Ok(Ok(resp)) => Some(resp),
            failed => {
                if let Ok(Err(e)) = failed {
                    tracing::warn!(error = %e, "{what} failed");
                }
                self.failed();
                None
            }
        }
    }

    /// An answer named the leader: the next calls go to it, so that a large request is not
    /// forwarded by the node asked (one more crossing of the request and of its answer).
    pub fn follow(&self, meta: &tonic::metadata::MetadataMap) {
        if let Some(i) = hinted(meta, &self.addrs) {
            self.next.store(i, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(addr: &str) -> tonic::metadata::MetadataMap {
        let mut m = tonic::metadata::MetadataMap::new();
        m.insert(proto::LEADER_HINT, addr.parse().expect("an ASCII address"));
        m
    }

    // A runtime: channels are made lazily on it.
    #[tokio::test]
    async fn calls_follow_a_hint_to_a_known_quorum_node_only() {
        let quorum: Vec<String> = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"].map(String::from).into();
        let ch = ControllerChannels::new(&quorum).expect("the addresses parse");
        let next = || ch.next.load(Ordering::Relaxed) % quorum.len();
        ch.follow(&hint("127.0.0.1:3"));
        assert_eq!(next(), 2);
        ch.follow(&hint("10.0.0.9:7701"));
        assert_eq!(next(), 2, "an unknown address is ignored");
        ch.follow(&tonic::metadata::MetadataMap::new());
        assert_eq!(next(), 2, "no hint changes nothing");
        ch.failed();
        assert_eq!(next(), 0);
    }
}
