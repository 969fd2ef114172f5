//! One Ferry node with its roles: a quorum member (metastore voter, admin service, active
//! controller when Raft leader), a broker, or both on one port. `ferry node` and `ferry dev`
//! both start nodes here.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use broker::{Broker, BrokerConfig, BrokerHandle, DataConfig};
use controller::active::ControllerConfig;
use controller::admin::AdminService;
use controller::limits::RequestLimits;
use metastore::{NodeConfig, NodeHandle, RaftTuning};
use proto::ferry::admin_server::AdminServer;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;

use crate::console::HttpServer;
use broker::auth::grpc_guard::Guarded;

/// Which roles a node takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roles {
    /// Metastore voter (and controller when leader).
    pub quorum: bool,
    /// Hosts partition replicas.
    pub broker: bool,
}

impl std::str::FromStr for Roles {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut r = Roles {
            quorum: false,
            broker: false,
        };
        for part in s.split(',').map(str::trim) {
            match part {
                "quorum" => r.quorum = true,
                "broker" => r.broker = true,
                other => return Err(format!("unknown role {other:?}: expected quorum, broker or both")),
            }
        }
        Ok(r)
    }
}

/// Everything needed to start a node.
pub struct NodeOptions {
    /// Node id; also the broker id.
    pub id: u64,
    /// Where its data lives.
    pub data_dir: PathBuf,
    /// gRPC address.
    pub listen: SocketAddr,
    /// Founding voters (quorum role).
    pub peers: BTreeMap<u64, String>,
    /// Join an existing quorum as a learner.
    pub join: bool,
    /// Raft timing.
    pub raft: RaftTuning,
    /// Roles.
    pub roles: Roles,
    /// Quorum addresses for a broker-only node.
    pub quorum: Vec<String>,
    /// Broker log dirs; empty means `<data dir>/logs`.
    pub log_dirs: Vec<PathBuf>,
    /// Broker rack.
    pub rack: Option<String>,
    /// Broker registration lease.
    pub session_timeout_ms: u64,
    /// Broker data-plane settings.
    pub data: DataConfig,
    /// Active controller settings.
    pub controller: ControllerConfig,
    /// Limits on the work of one admin request, and on the size of admin and broker requests.
    pub limits: RequestLimits,
    /// Serve Prometheus metrics at `http://<this>/metrics` and the web console at
    /// `http://<this>/`; none serves neither.
    pub http_listen: Option<SocketAddr>,
    /// The broker's Kafka listeners (none: no Kafka listener).
    pub kafka_listeners: Vec<crate::listeners::ListenerSpec>,
    /// The security the Kafka listeners share.
    pub kafka_security: broker::auth::ListenerSecurity,
    /// TLS on the gRPC port and on the node's channels to its peers.
    pub grpc_tls: Option<metastore::tls::TlsFiles>,
    /// The HTTP port's TLS (its own certificate, or the gRPC port's); none: plain HTTP.
    pub http_tls: Option<metastore::tls::TlsFiles>,
    /// Where a broker-only node reads the cluster credential (waited for until it exists); a
    /// quorum node learns it from its own store.
    pub credential_file: Option<PathBuf>,
}

/// A started node.
pub struct RunningNode {
    /// The address it serves on.
    pub addr: SocketAddr,
    http: Option<HttpServer>,
    kafka: Option<String>,
    metastore: Option<NodeHandle>,
    broker: Option<BrokerHandle>,
    controller: Option<JoinHandle<()>>,
    server: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
    /// Follows users and ACLs for the admin service's guard.
    security: Option<JoinHandle<()>>,
    /// Reloads a broker-only node's gRPC certificates.
    tls_watch: Option<JoinHandle<()>>,
}

impl RunningNode {
    /// The address its broker's Kafka listener advertises, if it has one.
    pub fn kafka_addr(&self) -> Option<&str> {
        self.kafka.as_deref()
    }

    /// Its HTTP server's (`/metrics` and the console) URL (`http://` or `https://`), if it serves one.
    pub fn http_url(&self) -> Option<String> {
        self.http.as_ref().map(|m| m.url())
    }

    /// Stops the roles: the broker first (it deregisters, so leadership moves), then the quorum.
    pub async fn shutdown(self) {
        drop(self.http);
        if let Some(b) = self.broker {
            b.shutdown().await;
        }
        if let Some(c) = self.controller {
            c.abort();
        }
        for task in [self.security, self.tls_watch].into_iter().flatten() {
            task.abort();
        }
        if let Some((tx, h)) = self.server {
            let _ = tx.send(());
            // A graceful stop waits for every open stream (followers' replication sessions
            // never end on their own): give them a moment, then stop anyway.
            let abort = h.abort_handle();
            if tokio::time::timeout(std::time::Duration::from_secs(2), h)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        if let Some(m) = self.metastore {
            m.shutdown().await;
        }
    }
}

/// Binds each Kafka listener; one that does not bind stops the node, naming it.
async fn bind_kafka_listeners(
    specs: &[crate::listeners::ListenerSpec],
) -> anyhow::Result<Vec<broker::kafka::listeners::Listener>> {
    let mut out = Vec::with_capacity(specs.len());
    for s in specs {
        let socket = tokio::net::TcpListener::bind(&s.bind)
            .await
            .with_context(|| format!("Kafka listener {} at {}", s.name, s.bind))?;
        let bound = socket
            .local_addr()
            .with_context(|| format!("Kafka listener {}", s.name))?;
        out.push(broker::kafka::listeners::Listener {
            name: s.name.clone(),
            protocol: s.protocol,
            socket,
            advertised: s.advertised.clone().unwrap_or_else(|| bound.to_string()),
        });
    }
    Ok(out)
}

/// Starts a node with its roles.
pub async fn start(o: NodeOptions) -> anyhow::Result<RunningNode> {
    let quorum = quorum_addrs(&o)?;
    // Before any channel is made: each takes this process's TLS setting when it is.
    if let Some(files) = &o.grpc_tls {
        let client = metastore::grpc_tls::node_client(files).map_err(|e| anyhow::anyhow!("gRPC TLS: {e}"))?;
        metastore::grpc_tls::set_client(Some(client));
    }
    // The broker's own client of the quorum; it gets the cluster credential once known.
    let broker_client = metastore::Client::new(&quorum).or_else(|_| metastore::Client::new(&[o.listen.to_string()]))?;
    let broker_only = !o.roles.quorum && o.roles.broker;
    if broker_only {
        read_credential_file(&o, &broker_client)?;
        // Before the dirs are opened: a refused broker changes nothing in Kafka's files.
        broker::node::check_kafka_dirs(&broker_dirs(&o), broker_id(&o)?, &broker_client)
            .await
            .map_err(anyhow::Error::msg)?;
    }
    let mut kafka = None;
    let broker = match open_broker(&o, &quorum)? {
        Some(b) => {
            let listeners = bind_kafka_listeners(&o.kafka_listeners).await?;
            kafka = listeners.first().map(|l| l.advertised.clone());
            Some(b.with_kafka_listeners(listeners, o.limits.max_request_bytes, o.kafka_security.clone()))
        }
        None => None,
    };
    // One registry per node: `ferry dev` runs several nodes in one process.
    let registry = prometheus::Registry::new();
    if let Some(b) = &broker {
        broker::metrics::register(b.core(), &registry).context("registering the broker's metrics")?;
    }

    // Bound first, so that a port in use stops the node before any role starts; served once
    // every role has registered its metrics.
    let http_listener = match o.http_listen {
        Some(listen) => Some(crate::console::bind(listen).await?),
        None => None,
    };

    let mut running = RunningNode {
        addr: o.listen,
        http: None,
        kafka,
        metastore: None,
        broker: None,
        controller: None,
        server: None,
        security: None,
        tls_watch: None,
    };
    if o.roles.quorum {
        start_quorum(&o, &quorum, broker.as_ref(), &registry, &broker_client, &mut running).await?;
    } else if let Some(b) = &broker {
        serve_broker(&o, b, &broker_client, &registry, &mut running).await?;
    }
    if let Some(b) = broker {
        if !broker_only {
            b.check_kafka_dirs(&broker_client).await.map_err(anyhow::Error::msg)?;
        }
        running.broker = Some(b.start(running.addr.to_string(), broker_client)?);
    }
    if let Some(listener) = http_listener {
        // The console asks this node's own admin service first, when it has one.
        let mut admin = quorum.clone();
        if o.roles.quorum {
            let own = running.addr.to_string();
            admin.retain(|a| *a != own);
            admin.insert(0, own);
        }
        running.http = Some(crate::console::serve(listener, registry, &admin, o.http_tls.clone())?);
    }
    Ok(running)
}

/// The quorum's addresses: the peers for a quorum node, `--quorum` for a broker-only one.
fn quorum_addrs(o: &NodeOptions) -> anyhow::Result<Vec<String>> {
    if !o.roles.quorum && !o.roles.broker {
        bail!("--roles: give quorum, broker or both");
    }
    let quorum: Vec<String> = if o.roles.quorum {
        o.peers.values().cloned().collect()
    } else {
        o.quorum.clone()
    };
    if quorum.is_empty() && !(o.roles.quorum && o.join) {
        bail!("a broker-only node needs --quorum HOST:PORT,...");
    }
    Ok(quorum)
}

/// The broker's log dirs.
fn broker_dirs(o: &NodeOptions) -> Vec<std::path::PathBuf> {
    if o.log_dirs.is_empty() {
        vec![o.data_dir.join("logs")]
    } else {
        o.log_dirs.clone()
    }
}

fn broker_id(o: &NodeOptions) -> anyhow::Result<i32> {
    i32::try_from(o.id).context("--id: a broker id must fit in 31 bits")
}

/// Opens the broker's log dirs, if the node is a broker.
fn open_broker(o: &NodeOptions, quorum: &[String]) -> anyhow::Result<Option<Broker>> {
    if !o.roles.broker {
        return Ok(None);
    }
    let mut cfg = BrokerConfig::new(broker_id(o)?, broker_dirs(o), quorum.to_vec());
    cfg.rack = o.rack.clone();
    cfg.session_timeout_ms = o.session_timeout_ms;
    cfg.data = o.data.clone();
    Ok(Some(Broker::open(cfg).context("opening the broker's log dirs")?))
}

/// A broker-only node reads the cluster credential from its file, retrying until it exists.
fn read_credential_file(o: &NodeOptions, broker_client: &metastore::Client) -> anyhow::Result<()> {
    let Some(path) = o.credential_file.clone() else {
        bail!(
            "a broker-only node needs the cluster credential: --cluster-credential-file \
             (the file {} in a quorum node's data dir)",
            metastore::credential::CREDENTIAL_FILE
        );
    };
    let c = broker_client.clone();
    tokio::spawn(async move {
        // `ferry dev` starts broker-only nodes while its quorum is still forming.
        let mut warned = false;
        loop {
            match c.set_credential_file(&path) {
                Ok(()) => return,
                // Expected while a new cluster forms: said once, as information.
                Err(e) if !warned => {
                    tracing::info!(error = %e, "waiting for the cluster credential file");
                    warned = true;
                }
                Err(_) => {}
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    });
    Ok(())
}

/// Starts the metastore voter with the admin service (and the broker's, on the same port) and
/// the controller.
async fn start_quorum(
    o: &NodeOptions,
    quorum: &[String],
    broker: Option<&Broker>,
    registry: &prometheus::Registry,
    broker_client: &metastore::Client,
    running: &mut RunningNode,
) -> anyhow::Result<()> {
    let client = metastore::Client::new(quorum).or_else(|_| {
        // A joining node may not know its peers yet: talk to itself.
        metastore::Client::new(&[o.listen.to_string()])
    })?;
    // A request is read whole before any check can look at it: its size is the first limit.
    // One clock for the node's three parts (the broker's is `o.data.clock`).
    let admin = AdminService::new(client.clone())
        .with_limits(o.limits)
        .with_clock(o.data.clock.clone());
    let admin = AdminServer::new(admin)
        .max_decoding_message_size(o.limits.max_request_bytes)
        .max_encoding_message_size(1 << 30);
    let admin = controller::leader_hint::LeaderHinted::new(admin, client.clone());
    let guard = grpc_guard(o, &client, registry, running);
    let admin = Guarded::new(admin, guard.clone());
    let mut routes = tonic::service::Routes::new(admin);
    let security = controller::security_service::SecurityService::new(client.clone(), o.limits);
    routes = routes.add_service(
        proto::ferry::security_server::SecurityServer::new(security)
            .max_decoding_message_size(o.limits.max_request_bytes),
    );
    if let Some(b) = broker {
        let svc = b.service().max_decoding_message_size(o.limits.max_request_bytes);
        routes = routes.add_service(Guarded::new(svc, guard));
    }
    let mut cfg = NodeConfig::new(o.id, o.data_dir.clone(), o.listen, o.peers.clone());
    cfg.join = o.join;
    cfg.grpc_tls = o.grpc_tls.clone();
    cfg.raft = o.raft.clone();
    cfg.extra_services = Some(routes);
    cfg.registry = Some(registry.clone());
    cfg.clock = o.data.clock.clone();
    let node = metastore::start(cfg).await?;
    client.attach_local(node.local());
    let sm = node.sm.clone();
    let credentialed = vec![client.clone(), broker_client.clone()];
    tokio::spawn(async move {
        let token = metastore::credential::wait(&sm).await;
        for c in credentialed {
            if let Err(e) = c.set_credential(&token) {
                tracing::error!(error = %e, "cluster credential");
            }
        }
    });
    running.addr = node.addr;
    o.controller
        .plan_metrics
        .register(registry)
        .context("registering the plan metrics")?;
    running.controller = Some(controller::active::spawn(
        o.id,
        node.raft.clone(),
        client,
        o.controller.clone(),
    ));
    running.metastore = Some(node);
    Ok(())
}

/// The guard of the node's admin and broker services: under an authorizer, a call needs the
/// cluster credential or a user allowed what it does, decided from users and ACLs this node
/// follows.
fn grpc_guard(
    o: &NodeOptions,
    client: &metastore::Client,
    registry: &prometheus::Registry,
    running: &mut RunningNode,
) -> std::sync::Arc<broker::auth::grpc_guard::GrpcGuard> {
    use broker::auth::{grpc_guard, view};
    let view = std::sync::Arc::new(view::SecurityView::new(o.kafka_security.clone()));
    if o.kafka_security.authorizer {
        running.security = Some(tokio::spawn(view::follow(client.clone(), view.clone())));
    }
    let c = client.clone();
    let metrics = grpc_guard::GuardMetrics::new(Some(registry));
    std::sync::Arc::new(grpc_guard::GrpcGuard::new(
        view,
        move |given| c.carries_credential(given),
        metrics,
    ))
}

/// Serves a broker-only node's gRPC (the broker service and health) on its own listener.
async fn serve_broker(
    o: &NodeOptions,
    b: &Broker,
    client: &metastore::Client,
    registry: &prometheus::Registry,
    running: &mut RunningNode,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(o.listen)
        .await
        .with_context(|| format!("cannot listen on {}", o.listen))?;
    running.addr = listener.local_addr()?;
    let (health_reporter, health) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<proto::ferry::broker_server::BrokerServer<broker::service::BrokerService>>()
        .await;
    let svc = b.service().max_decoding_message_size(o.limits.max_request_bytes);
    let svc = Guarded::new(svc, grpc_guard(o, client, registry, running));
    let tls = match &o.grpc_tls {
        Some(files) => {
            let tls = metastore::grpc_tls::start_node(files).map_err(|e| anyhow::anyhow!("gRPC TLS: {e}"))?;
            registry
                .register(Box::new(metastore::grpc_tls::handshake_failures().clone()))
                .context("registering the gRPC TLS metrics")?;
            running.tls_watch = Some(tokio::spawn(tls.clone().watch(metastore::tls::RELOAD_EVERY)));
            Some(tls)
        }
        None => None,
    };
    let (tx, rx) = oneshot::channel::<()>();
    let h = tokio::spawn(async move {
        let router = tonic::transport::Server::builder()
            .tcp_nodelay(true)
            .max_concurrent_streams(metastore::node::MAX_STREAMS)
            .initial_connection_window_size(metastore::peers::CONNECTION_WINDOW)
            .add_service(health)
            .add_service(svc);
        let incoming = TcpListenerStream::new(listener);
        let shutdown = async {
            let _ = rx.await;
        };
        let res = metastore::grpc_tls::serve(router, incoming, tls, shutdown).await;
        if let Err(e) = res {
            tracing::error!(error = %e, "broker gRPC server stopped");
        }
    });
    running.server = Some((tx, h));
    Ok(())
}
