//! The gRPC guard: once a node runs the authorizer, every call to a guarded gRPC service
//! (`Admin`, `Broker`) must come from a principal allowed what the method needs
//! (`grpc_rules.rs`): an operation on the cluster, checked here, or on the topics a produce or
//! fetch names, checked by the method with the [`Caller`] the guard hands it. Decided from the
//! node's own view of users and ACLs, with no call to the quorum. Refusals are counted; admin
//! calls that change the cluster, and every refused one, are logged as audit lines.

use std::sync::Arc;
use std::task::{Context, Poll};

use proto::acl::{Operation, ResourceType};
use tonic::codegen::{http, BoxFuture, Service};
use tonic::server::NamedService;
use tonic::Status;

use super::grpc_rules::{self, Claim, Need};
use super::view::SecurityView;
use super::ANONYMOUS;

/// The cluster resource's name in Kafka's ACLs.
const CLUSTER: &str = "kafka-cluster";

/// Counters of the guard's refusals.
#[derive(Clone)]
pub struct GuardMetrics {
    authentication_failures: prometheus::IntCounter,
    authorization_denials: prometheus::IntCounter,
}

impl GuardMetrics {
    /// `ferry_grpc_authentication_failures_total` and `ferry_grpc_authorization_denials_total`,
    /// registered in `registry` when given.
    pub fn new(registry: Option<&prometheus::Registry>) -> Self {
        // Fixed names and help texts: these constructors fail only on an invalid name.
        let counter = |name: &str, help: &str| {
            let c = prometheus::IntCounter::new(name, help).expect("a valid metric name");
            if let Some(r) = registry {
                if let Err(e) = r.register(Box::new(c.clone())) {
                    tracing::warn!(metric = name, error = %e, "metric not registered");
                }
            }
            c
        };
        Self {
            authentication_failures: counter(
                "ferry_grpc_authentication_failures_total",
                "gRPC calls refused because their credentials did not check out",
            ),
            authorization_denials: counter("ferry_grpc_authorization_denials_total", "gRPC calls an ACL refused"),
        }
    }
}

/// Tells whether bytes are the cluster credential.
type CredentialCheck = Box<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// Decides who may call what.
pub struct GrpcGuard {
    view: Arc<SecurityView>,
    credential_ok: CredentialCheck,
    metrics: GuardMetrics,
}

impl GrpcGuard {
    /// A guard over `view`; `credential_ok` tells whether bytes are the cluster credential.
    pub fn new(
        view: Arc<SecurityView>,
        credential_ok: impl Fn(&[u8]) -> bool + Send + Sync + 'static,
        metrics: GuardMetrics,
    ) -> Self {
        Self {
            view,
            credential_ok: Box::new(credential_ok),
            metrics,
        }
    }

    /// Admits or refuses a call of `path` from `remote` with `headers`; a method that checks its
    /// topics gets the caller to check them with.
    pub async fn admit(
        &self,
        path: &str,
        headers: &http::HeaderMap,
        remote: Option<std::net::SocketAddr>,
        certified: Option<String>,
    ) -> Result<Option<Caller>, Status> {
        if !self.view.settings().authorizer {
            return Ok(None);
        }
        let Some(need) = grpc_rules::need(path) else {
            return Ok(None);
        };
        let header = |name: &str| headers.get(name).map(|v| v.as_bytes());
        let claim = grpc_rules::claim(
            header(metastore::credential::CREDENTIAL_HEADER),
            header(grpc_rules::AUTHORIZATION),
        );
        let principal = match claim {
            Err(reason) => return Err(self.unauthenticated(reason).await),
            // Another node, or an operator with the credential file: the cluster itself.
            Ok(Claim::Credential(c)) if (self.credential_ok)(&c) => return Ok(None),
            Ok(Claim::Credential(_)) => {
                let why = format!(
                    "{}: not this cluster's credential",
                    metastore::credential::CREDENTIAL_HEADER
                );
                return Err(self.unauthenticated(why).await);
            }
            // No login: the verified TLS client certificate names the caller, as on Kafka's
            // SSL listener.
            Ok(Claim::Anonymous) => certified.unwrap_or_else(|| ANONYMOUS.to_string()),
            Ok(Claim::User { name, password }) => {
                let view = self.view.clone();
                let plain = format!("\0{name}\0{password}").into_bytes();
                // PBKDF2 takes milliseconds: off the async workers.
                let checked =
                    tokio::task::spawn_blocking(move || crate::sasl::plain::authenticate(&plain, view.as_ref())).await;
                match checked {
                    Ok(Ok(user)) => format!("User:{user}"),
                    failed => {
                        // The log tells an unknown user from a wrong password; the caller is not told.
                        let why = match failed {
                            Ok(Err(e)) => e.to_string(),
                            Err(e) => e.to_string(),
                            Ok(Ok(_)) => String::new(),
                        };
                        tracing::info!(target: "ferry::audit", user = %name, error = %why, "gRPC login refused");
                        let status = self.unauthenticated(format!("{name}: wrong user name or password"));
                        return Err(status.await);
                    }
                }
            }
        };
        // For ACLs that name hosts.
        let host = remote.map_or_else(|| "*".to_string(), |a| a.ip().to_string());
        let host = host.as_str();
        match need {
            Need::Cluster(op) => self.authorize(path, &principal, host, op).map(|()| None),
            Need::Topic(_) => Ok(Some(Caller {
                principal,
                host: host.to_string(),
                view: self.view.clone(),
                denials: self.metrics.authorization_denials.clone(),
            })),
        }
    }

    fn authorize(&self, path: &str, principal: &str, host: &str, op: Operation) -> Result<(), Status> {
        let allowed = self.view.allowed(principal, host, op, ResourceType::Cluster, CLUSTER);
        if grpc_rules::changes(op) || !allowed {
            tracing::info!(
                target: "ferry::audit",
                principal,
                host,
                method = path,
                operation = %op,
                resource = "Cluster:kafka-cluster",
                outcome = if allowed { "allowed" } else { "denied" },
                "admin call"
            );
        }
        if allowed {
            return Ok(());
        }
        self.metrics.authorization_denials.inc();
        Err(Status::permission_denied(format!(
            "CLUSTER_AUTHORIZATION_FAILED: {principal} may not {} on the cluster ({})",
            op.cli_name(),
            path.rsplit('/').next().unwrap_or(path)
        )))
    }

    /// A failed login: counted, and answered after the failed-authentication delay, as Kafka's
    /// `connection.failed.authentication.delay.ms` slows a client that keeps guessing.
    async fn unauthenticated(&self, why: String) -> Status {
        self.metrics.authentication_failures.inc();
        tracing::info!(target: "ferry::audit", outcome = "denied", reason = %why, "gRPC authentication failed");
        tokio::time::sleep(self.view.settings().failed_authentication_delay).await;
        Status::unauthenticated(format!("SASL_AUTHENTICATION_FAILED: {why}"))
    }
}

/// The authenticated caller of a method that checks its own topics (a request extension, set
/// by the guard only under an authorizer).
#[derive(Clone)]
pub struct Caller {
    principal: String,
    host: String,
    view: Arc<SecurityView>,
    denials: prometheus::IntCounter,
}

impl Caller {
    /// Whether the caller may do `op` on `topic`; a refusal is counted.
    pub fn may_topic(&self, op: Operation, topic: &str) -> bool {
        let ok = self
            .view
            .allowed(&self.principal, &self.host, op, ResourceType::Topic, topic);
        if !ok {
            self.denials.inc();
        }
        ok
    }

    /// The refusal of `op` on `topic`, for the method's answer.
    pub fn refusal(&self, op: Operation, topic: &str) -> String {
        format!("{} may not {} topic {topic}", self.principal, op.cli_name())
    }
}

/// Whether the caller of `req` may do `op` on `topic`: yes when no guard asked the method to
/// check (no authorizer, or the cluster itself calling); else the refusal to answer.
pub fn check_topic<T>(req: &tonic::Request<T>, op: Operation, topic: &str) -> Result<(), String> {
    match req.extensions().get::<Caller>() {
        Some(c) if !c.may_topic(op, topic) => Err(c.refusal(op, topic)),
        _ => Ok(()),
    }
}

/// A service whose calls pass the guard first (all pass while no authorizer is configured).
#[derive(Clone)]
pub struct Guarded<S> {
    inner: S,
    guard: Arc<GrpcGuard>,
}

impl<S> Guarded<S> {
    /// Wraps `inner`.
    pub fn new(inner: S, guard: Arc<GrpcGuard>) -> Self {
        Self { inner, guard }
    }
}

impl<S: NamedService> NamedService for Guarded<S> {
    const NAME: &'static str = S::NAME;
}

/// The caller's address, over TLS or not.
fn remote_of<B>(req: &http::Request<B>) -> Option<std::net::SocketAddr> {
    use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
    let ext = req.extensions();
    ext.get::<TcpConnectInfo>().and_then(|i| i.remote_addr()).or_else(|| {
        ext.get::<TlsConnectInfo<TcpConnectInfo>>()
            .and_then(|i| i.get_ref().remote_addr())
    })
}

impl<S, B, R> Service<http::Request<B>> for Guarded<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        // The ready service serves this call; its clone waits for the next (tower's rule).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let guard = self.guard.clone();
        Box::pin(async move {
            let remote = remote_of(&req);
            let certified = metastore::grpc_tls::peer_principal(req.extensions());
            let mut req = req;
            match guard.admit(req.uri().path(), req.headers(), remote, certified).await {
                Ok(caller) => {
                    if let Some(c) = caller {
                        req.extensions_mut().insert(c);
                    }
                    inner.call(req).await
                }
                Err(status) => Ok(status.into_http()),
            }
        })
    }
}
