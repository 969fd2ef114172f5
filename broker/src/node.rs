//! Running a broker: register under a lease, follow the metadata and reconcile replicas with
//! it, and ask the controller for ISR changes. The gRPC service is served by whoever hosts the
//! broker (its own server, or a node that is also a quorum member).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::controller_channels::ControllerChannels;
use metastore::Client;
use proto::ferry::broker_server::BrokerServer;
use proto::ferry::BrokerRegistration;
use proto::keys::{self, TopicKey};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::fetcher;
use crate::replica_manager::{BrokerCore, DataConfig, OpenError};
use crate::service::BrokerService;

/// How to run a broker.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Broker id, as in Kafka.
    pub id: i32,
    /// Log dirs (absolute paths are stored in the registration).
    pub log_dirs: Vec<PathBuf>,
    /// Rack, if any.
    pub rack: Option<String>,
    /// The quorum's addresses.
    pub quorum: Vec<String>,
    /// Registration lease: a broker silent this long is considered gone.
    pub session_timeout_ms: u64,
    /// Data-plane settings.
    pub data: DataConfig,
}

impl BrokerConfig {
    /// A config with defaults.
    pub fn new(id: i32, log_dirs: Vec<PathBuf>, quorum: Vec<String>) -> Self {
        Self {
            id,
            log_dirs,
            rack: None,
            quorum,
            session_timeout_ms: 6_000,
            data: DataConfig::default(),
        }
    }
}

/// An opened broker, not yet registered.
pub struct Broker {
    cfg: BrokerConfig,
    core: Arc<BrokerCore>,
    kafka: Option<KafkaListeners>,
}

/// The bound Kafka listeners and what they share.
struct KafkaListeners {
    listeners: Vec<crate::kafka::listeners::Listener>,
    max_request_bytes: usize,
    security: crate::auth::ListenerSecurity,
}

/// A running broker's tasks.
pub struct BrokerHandle {
    core: Arc<BrokerCore>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    lease: watch::Receiver<u64>,
    client: Client,
}

impl Broker {
    /// Opens the log dirs and every replica in them.
    pub fn open(mut cfg: BrokerConfig) -> Result<Self, OpenError> {
        cfg.log_dirs = cfg
            .log_dirs
            .iter()
            .map(|d| {
                std::fs::create_dir_all(d)?;
                d.canonicalize()
            })
            .collect::<Result<_, _>>()?;
        // Another broker's dirs are refused before anything in them is opened.
        crate::meta_properties::check_broker_id(&crate::meta_properties::read(&cfg.log_dirs), cfg.id)
            .map_err(|why| OpenError::Dir(std::io::Error::new(std::io::ErrorKind::InvalidInput, why)))?;
        let names: Vec<String> = cfg.log_dirs.iter().map(|d| d.to_string_lossy().into_owned()).collect();
        crate::broker_configs::check_static(&cfg.data.static_configs, &names, &crate::broker_configs::work_dir())
            .map_err(|why| OpenError::Dir(std::io::Error::new(std::io::ErrorKind::InvalidInput, why)))?;
        let core = Arc::new(BrokerCore::open(cfg.id, cfg.log_dirs.clone(), cfg.data.clone())?);
        core.apply_cordon();
        Ok(Self { cfg, core, kafka: None })
    }

    /// [`check_kafka_dirs`] for this broker's dirs, before [`Broker::start`].
    pub async fn check_kafka_dirs(&self, client: &Client) -> Result<(), String> {
        check_kafka_dirs(&self.cfg.log_dirs, self.cfg.id, client).await
    }

    /// Serves Kafka clients on `listeners` once started (none: no Kafka listener), each
    /// advertised in the registration under its name, with the `security` they share; requests
    /// over `max_request_bytes` (`socket.request.max.bytes`) are refused.
    pub fn with_kafka_listeners(
        mut self,
        listeners: Vec<crate::kafka::listeners::Listener>,
        max_request_bytes: usize,
        security: crate::auth::ListenerSecurity,
    ) -> Self {
        self.kafka = (!listeners.is_empty()).then_some(KafkaListeners {
            listeners,
            max_request_bytes,
            security,
        });
        self
    }

    /// The shared state, for tests and tools.
    pub fn core(&self) -> &Arc<BrokerCore> {
        &self.core
    }

    /// The broker's gRPC service.
    pub fn service(&self) -> BrokerServer<BrokerService> {
        BrokerServer::new(BrokerService::new(self.core.clone()))
            .max_decoding_message_size(1 << 30)
            .max_encoding_message_size(1 << 30)
    }

    /// Registers as reachable at `endpoint` and starts following the metadata, through
    /// `client` (a client of the quorum that carries the cluster credential, or will).
    pub fn start(self, endpoint: String, client: Client) -> Result<BrokerHandle, metastore::ClientError> {
        self.core.resume_found_moves();
        let (stop, stop_rx) = watch::channel(false);
        let (lease_tx, lease) = watch::channel(0u64);
        let reg = BrokerRegistration {
            id: self.cfg.id,
            endpoint,
            rack: self.cfg.rack.clone().unwrap_or_default(),
            log_dirs: self
                .cfg
                .log_dirs
                .iter()
                .map(|d| d.to_string_lossy().into_owned())
                .collect(),
            incarnation: self.core.incarnation,
            registered_ms: self.core.config.clock.wall_ms(),
            kafka_listeners: self
                .kafka
                .as_ref()
                .map(|k| crate::kafka::listeners::advertised(&k.listeners))
                .unwrap_or_default(),
            work_dir: self.core.levels.work_dir.clone(),
            ..Default::default()
        };
        // The first listener's endpoint, for readers that know one endpoint per broker.
        let reg = BrokerRegistration {
            kafka_endpoint: reg
                .kafka_listeners
                .first()
                .map(|l| l.endpoint.clone())
                .unwrap_or_default(),
            ..reg
        };
        // Every call to the controller and to other brokers carries the cluster credential, once
        // the client has it.
        self.core.fetch_sessions.set_credential(client.credential_interceptor());
        let controller =
            ControllerChannels::new(&self.cfg.quorum).map(|c| c.with_credential(client.credential_interceptor()));
        let mut tasks = vec![
            tokio::spawn(crate::registration::register(
                self.core.clone(),
                client.clone(),
                reg,
                self.cfg.session_timeout_ms,
                lease_tx,
                stop_rx.clone(),
            )),
            tokio::spawn(follow_metadata(self.core.clone(), client.clone())),
            tokio::spawn(crate::broker_configs::follow_config(self.core.clone(), client.clone())),
            tokio::spawn(crate::isr_driver::isr_loop(self.core.clone(), controller.clone())),
            tokio::spawn(crate::named_dir::run(self.core.clone(), controller.clone())),
            tokio::spawn(watch_dirs(self.core.clone())),
            tokio::spawn(crate::dir_checkpoints::run(self.core.clone())),
            tokio::spawn(crate::retention::run(self.core.clone())),
        ];
        tasks.extend(crate::cleaner::start(self.core.clone()));
        if let Some(k) = self.kafka {
            tasks.push(tokio::spawn(crate::kafka::serve(
                k.listeners,
                self.core.clone(),
                controller,
                client.clone(),
                k.max_request_bytes,
                k.security,
            )));
        }
        Ok(BrokerHandle {
            core: self.core,
            stop,
            tasks,
            lease,
            client,
        })
    }
}

/// Checks that log dirs a Kafka broker wrote (`meta.properties`) belong to broker `id` of a
/// cluster the metastore holds an import of (reading `/cluster/id`, retrying while the quorum
/// does not answer). Without one, following the metadata would delete their replicas as
/// unassigned. Dirs without the file pass without a read. A broker-only node checks before it
/// opens the dirs, so that a refusal changes nothing in them.
pub async fn check_kafka_dirs(dirs: &[std::path::PathBuf], id: i32, client: &Client) -> Result<(), String> {
    let found = crate::meta_properties::read(dirs);
    if found.iter().all(|(_, m)| m.cluster_id.is_none()) {
        return crate::meta_properties::check(&found, id, None);
    }
    let imported = loop {
        match client.get(proto::keys::CLUSTER_ID).await {
            Ok(kv) => break kv,
            Err(e) => {
                tracing::warn!(error = %e, "reading the imported cluster id; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    };
    let cluster = match imported {
        Some(kv) => {
            let r = <proto::ferry::ClusterIdRecord as prost::Message>::decode(kv.value.as_ref())
                .map_err(|e| format!("{}: undecodable: {e}", proto::keys::CLUSTER_ID))?;
            // The id Ferry gave itself when it formed is no import.
            (!r.generated).then_some(r.id)
        }
        None => None,
    };
    crate::meta_properties::check(&found, id, cluster.as_deref())
}

impl BrokerHandle {
    /// The shared state, for tests and tools.
    pub fn core(&self) -> &Arc<BrokerCore> {
        &self.core
    }

    /// A controlled shutdown, as Kafka's: deregisters (the controller then moves every
    /// leadership away), waits until the metadata shows none left here that another in-sync
    /// replica could take, for at most `controlled.shutdown.max.retries` times
    /// `controlled.shutdown.retry.backoff.ms` (3 x 5 s), then stops the tasks and flushes the logs.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let lease = *self.lease.borrow();
        if lease != 0 {
            let _ = tokio::time::timeout(Duration::from_secs(2), self.client.lease_revoke(lease)).await;
            let deadline = tokio::time::Instant::now() + CONTROLLED_SHUTDOWN_WAIT;
            while movable_leaderships(&self.core.view.read(), self.core.id) > 0
                && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        for t in &self.tasks {
            t.abort();
        }
        self.core.close();
    }
}

/// The longest a controlled shutdown waits for leadership to move: Kafka's
/// `controlled.shutdown.max.retries` (3) times `controlled.shutdown.retry.backoff.ms` (5000).
const CONTROLLED_SHUTDOWN_WAIT: Duration = Duration::from_secs(15);

/// Partitions `me` leads that another live in-sync replica could lead instead.
fn movable_leaderships(view: &proto::cluster_view::ClusterView, me: i32) -> usize {
    let live = view.live_brokers();
    view.topics
        .values()
        .flat_map(|t| t.partitions.values())
        .filter(|p| p.state.leader == me && p.state.isr.iter().any(|b| *b != me && live.contains(b)))
        .count()
}

/// Probes the log dirs now and then, and takes the replicas of a failed dir offline as soon as
/// any part of the broker reports the failure.
async fn watch_dirs(core: Arc<BrokerCore>) {
    let mut failed = core.dir_failed.subscribe();
    let every = Duration::from_millis(core.config.dir_probe_interval_ms.max(10));
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            r = failed.changed() => if r.is_err() { return },
        }
        let core2 = core.clone();
        let _ = tokio::task::spawn_blocking(move || {
            core2.probe_dirs();
            core2.take_offline_replicas();
        })
        .await;
    }
}

async fn follow_metadata(core: Arc<BrokerCore>, client: Client) {
    let mut events = client.follow("/brokers/");
    // A full pass now and then retries what failed before (a replica that could not be created).
    let mut sweep = tokio::time::interval(Duration::from_secs(10));
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut loaded = false;
    loop {
        let first = tokio::select! {
            ev = events.recv() => match ev {
                Some(ev) => Some(ev),
                None => return,
            },
            _ = sweep.tick() => None,
        };
        // Take everything already queued, then reconcile once: all partitions after a reset or
        // on a sweep, else only those that changed.
        let mut full = first.is_none();
        let mut changed = BTreeSet::new();
        let mut next = first;
        while let Some(ev) = next {
            full |= ev.is_reset();
            loaded = true;
            let changes = ev.changes();
            for (key, _, _) in &changes {
                if let Some(TopicKey::Partition(t, p)) = keys::parse_topic_key(key) {
                    changed.insert((t.to_string(), p));
                }
            }
            core.view.write().apply_all(ev.is_reset(), changes);
            next = events.try_recv().ok();
        }
        if !loaded {
            continue; // never delete anything before the metadata has been read once
        }
        // Creating and deleting replicas is file-system work (with fsyncs): keep it off the
        // async workers, which also serve the metastore and replication.
        let core2 = core.clone();
        let done = tokio::task::spawn_blocking(move || {
            let spawn = |core, r, leader, epoch| tokio::spawn(fetcher::run(core, r, leader, epoch));
            core2.reconcile((!full).then_some(&changed), spawn);
        })
        .await;
        if let Err(e) = done {
            tracing::error!(error = %e, "reconciling replicas failed");
        }
    }
}
