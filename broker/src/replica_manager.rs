//! The replicas this broker hosts, and reconciling them with the metadata: create the replicas
//! the metadata assigns here, set each one's role, start or stop its fetcher, and delete from
//! disk the replicas no longer assigned here.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use proto::clock::Clock;
use proto::cluster_view::ClusterView;
use proto::errors::ErrorCode;
use proto::ferry::PartitionState;
use tokio::task::JoinHandle;

use crate::dir_move_recovery;
use crate::dir_moves::DirMoves;
use crate::log_dir_move::{self, MoveHost};
use crate::log_dirs::{replica_folder, LogDirs, TopicPartition};
use crate::partition_log::LogConfig;
use crate::reconcile_plan::{assigned_here, fetcher_step, unassigned, FetcherStep};
use crate::replica::{Replica, ReplicaError, Role};

/// Replicas a reconcile pass creates (and syncs) before it applies their roles.
const CREATE_CHUNK: usize = 2048;

/// Settings of the broker's data plane.
#[derive(Debug, Clone)]
pub struct DataConfig {
    /// Segment size and fsync policy of new and opened logs.
    pub log: LogConfig,
    /// `replica.lag.time.max.ms`: an ISR member not caught up for this long is removed.
    pub replica_lag_max_ms: u64,
    /// How long a follower's fetch waits at the leader for new records.
    pub replica_fetch_wait_ms: u32,
    /// Bytes a follower asks for per fetch.
    pub replica_fetch_max_bytes: u32,
    /// How many log dir moves copy at once.
    pub dir_move_parallelism: usize,
    /// How often each log dir is probed with a small synced write.
    pub dir_probe_interval_ms: u64,
    /// Test hook: a dir move's swap waits this long between its two renames, so that a test can
    /// kill the broker there. 0 (the default) in normal use.
    pub swap_pause_ms: u64,
    /// Delete retention's broker settings.
    pub retention: crate::retention_config::RetentionConfig,
    /// The log cleaner's settings.
    pub cleaner: crate::cleaner::CleanerConfig,
    /// The group coordinator's settings.
    pub group: crate::coordinator::group::GroupConfig,
    /// The clock replicas time lag and leases with.
    pub clock: Clock,
    /// Static broker configs by Kafka name (the node's flags), beneath the dynamic ones.
    pub static_configs: HashMap<String, String>,
}

impl Default for DataConfig {
    fn default() -> Self {
        Self {
            log: LogConfig::default(),
            replica_lag_max_ms: 10_000,
            // A parked fetch returns as soon as records arrive, so a long wait costs no latency;
            // it only spares idle partitions a round trip.
            replica_fetch_wait_ms: 10_000,
            replica_fetch_max_bytes: 8 << 20,
            dir_move_parallelism: 4,
            dir_probe_interval_ms: 5_000,
            swap_pause_ms: 0,
            retention: Default::default(),
            cleaner: Default::default(),
            group: Default::default(),
            clock: Clock::system(),
            static_configs: HashMap::new(),
        }
    }
}

/// Everything the broker's tasks and services share.
pub struct BrokerCore {
    /// This broker's id.
    pub id: i32,
    /// This process: random, never 0, in the registration and in every fetch as a follower.
    pub incarnation: u64,
    /// Its log dirs.
    pub dirs: LogDirs,
    /// Data-plane settings.
    pub config: DataConfig,
    /// Hosted replicas.
    pub replicas: RwLock<HashMap<TopicPartition, Arc<Replica>>>,
    /// The metadata as last seen.
    pub view: RwLock<ClusterView>,
    /// Holds back replication traffic to throttled followers.
    pub throttle: crate::throttle::Throttle,
    /// Holds back this broker's fetches for throttled replicas it follows, across all of them.
    pub follower_throttle: crate::throttle::Throttle,
    /// This broker's dynamic configs (`/config/brokers/<id>`), set by the operator.
    pub dynamic_config: RwLock<HashMap<String, String>>,
    /// The config levels beneath them (`broker_configs`).
    pub levels: crate::config_levels::ConfigLevels,
    /// One connection per peer broker, shared by every partition's replication.
    pub channels: metastore::peers::Peers,
    /// This broker's replication sessions as a follower, one per leader.
    pub fetch_sessions: crate::fetch_session::FetchSessions,
    /// Moves of replicas between this broker's dirs.
    pub moves: DirMoves,
    /// Byte counters for the broker's metrics.
    pub metrics: crate::byte_counters::BrokerMetrics,
    /// Future logs found at start, resumed when the broker starts.
    resume_at_start: Mutex<Vec<(TopicPartition, PathBuf)>>,
    /// Replicas taken offline with their failed dir; not recreated until the broker restarts.
    pub offline_replicas: RwLock<BTreeSet<TopicPartition>>,
    /// Bumped when a log dir fails, by whoever saw the error.
    pub dir_failed: tokio::sync::watch::Sender<u64>,
    /// Bumped once a failed dir's replicas are offline, for the registration to publish.
    pub offline_published: tokio::sync::watch::Sender<u64>,
    fetchers: Mutex<HashMap<TopicPartition, JoinHandle<()>>>,
    /// Partitions whose ISR may grow, for the ISR driver's next tick.
    pub isr_candidates: crate::isr::Candidates,
    /// What the group coordinator holds here, for the metrics.
    pub coordinator: crate::coordinator::Stats,
    /// The folder in which each replica's `partition.metadata` was last made right.
    pub(crate) topic_ids_recorded: Mutex<HashMap<TopicPartition, PathBuf>>,
}

/// Why the broker could not open its data.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// A log dir could not be read or created.
    #[error("log dir: {0}")]
    Dir(#[from] std::io::Error),
    /// A replica's log could not be opened.
    #[error("replica {name}: {source}")]
    Log {
        /// `<topic>-<partition>`.
        name: String,
        /// The cause.
        source: crate::partition_log::LogError,
    },
}

impl BrokerCore {
    /// Opens every replica found in the dirs (recovering each log's tail), after finishing any
    /// log dir swap a crash interrupted.
    pub fn open(id: i32, dirs: Vec<PathBuf>, config: DataConfig) -> Result<Self, OpenError> {
        let dirs = LogDirs::open(dirs)?;
        let resume_at_start = dir_move_recovery::recover(dirs.dirs())?;
        let (found, duplicates) = dirs.scan()?;
        for d in duplicates {
            tracing::warn!(path = %d.display(), "replica folder found in a second log dir; ignored");
        }
        let mut replicas = HashMap::new();
        let mut checkpoints = crate::checkpoint_file::OpenCheckpoints::default();
        for ((topic, p), dir) in found {
            let (log, hw) = checkpoints
                .open(&dir, &topic, p, config.log.clone())
                .map_err(|source| OpenError::Log {
                    name: replica_folder(&topic, p),
                    source,
                })?;
            let r = Replica::new(topic.clone(), p, id, log, config.clock.clone());
            if let Some(hw) = hw {
                r.restore_high_watermark(hw);
            }
            replicas.insert((topic, p), Arc::new(r));
        }
        Ok(Self {
            id,
            incarnation: uuid::Uuid::new_v4().as_u64_pair().0 | 1,
            dirs,
            replicas: RwLock::new(replicas),
            view: RwLock::new(ClusterView::default()),
            throttle: Default::default(),
            follower_throttle: Default::default(),
            dynamic_config: RwLock::new(HashMap::new()),
            levels: Default::default(),
            channels: Default::default(),
            fetch_sessions: Default::default(),
            moves: DirMoves::new(config.dir_move_parallelism),
            metrics: Default::default(),
            resume_at_start: Mutex::new(resume_at_start),
            offline_replicas: RwLock::new(BTreeSet::new()),
            dir_failed: tokio::sync::watch::channel(0).0,
            offline_published: tokio::sync::watch::channel(0).0,
            config,
            fetchers: Mutex::new(HashMap::new()),
            isr_candidates: Default::default(),
            coordinator: Default::default(),
            topic_ids_recorded: Mutex::new(HashMap::new()),
        })
    }

    /// Resumes the moves whose future logs were found when the dirs were opened (once); needs
    /// the runtime.
    pub fn resume_found_moves(self: &Arc<Self>) {
        let found = std::mem::take(&mut *self.resume_at_start.lock());
        for (tp, folder) in found {
            let Some(r) = self.replicas.read().get(&tp).cloned() else {
                continue;
            };
            if let Err(e) = log_dir_move::resume(self, &r, &folder) {
                tracing::error!(replica = %r.name(), error = %e, "cannot resume log dir move");
            }
        }
    }

    /// Why `dir` cannot take a replica here, or `None` (see [`log_dir_move::unusable_dir`]).
    pub fn unusable_dir(&self, dir: &std::path::Path) -> Option<(ErrorCode, String)> {
        log_dir_move::unusable_dir(&self.dirs, self.id, dir)
    }

    /// A hosted replica, or the error a client should see.
    pub fn replica(&self, topic: &str, partition: u32) -> Result<Arc<Replica>, ReplicaError> {
        let tp = (topic.to_string(), partition);
        if let Some(r) = self.replicas.read().get(&tp) {
            return Ok(r.clone());
        }
        if self.offline_replicas.read().contains(&tp) {
            return Err(ReplicaError::new(
                ErrorCode::KAFKA_STORAGE_ERROR,
                format!("{topic}-{partition} is in an offline log dir of broker {}", self.id),
            ));
        }
        let view = self.view.read();
        match view.partition(topic, partition) {
            None => Err(ReplicaError::new(
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                format!("This server does not host this topic-partition: {topic}-{partition} does not exist."),
            )),
            Some(e) => Err(ReplicaError {
                code: ErrorCode::NOT_LEADER_OR_FOLLOWER,
                message: format!("broker {} has no replica of {topic}-{partition}", self.id),
                leader_hint: e.state.leader,
            }),
        }
    }

    /// The rate (bytes/s) at which this broker, leading `r`, sends to `follower`, or `None` when
    /// the follower is not throttled (see [`BrokerCore::replica_throttle`]).
    pub fn leader_throttle(&self, r: &Replica, follower: i32) -> Option<u64> {
        self.replica_throttle(
            r,
            follower,
            self.id,
            proto::topic_config::LEADER_THROTTLED_REPLICAS,
            proto::topic_config::LEADER_THROTTLED_RATE,
        )
    }

    /// The rate (bytes/s) at which this broker, following `r`, may fetch, or `None`: both ends of
    /// a throttled copy hold it back, as Kafka throttles both (see [`BrokerCore::replica_throttle`]).
    pub fn follower_throttle(&self, r: &Replica) -> Option<u64> {
        self.replica_throttle(
            r,
            self.id,
            self.id,
            proto::topic_config::FOLLOWER_THROTTLED_REPLICAS,
            proto::topic_config::FOLLOWER_THROTTLED_RATE,
        )
    }

    /// The throttle on copying `r` to `replica`, which applies only while the replica is out of
    /// the ISR: a throttle owned by the partition's reassignment when the replica is being added,
    /// and the operator's `rate_key` on this broker when the topic's `replicas_key` names
    /// `listed`, this broker's own replica: the leader list names the sources and the follower
    /// list the destinations, as Kafka's tool writes them. The lower rate wins.
    fn replica_throttle(
        &self,
        r: &Replica,
        replica: i32,
        listed: i32,
        replicas_key: &str,
        rate_key: &str,
    ) -> Option<u64> {
        let owned = {
            let st = r.state();
            let m = &st.meta;
            if m.isr.contains(&replica) {
                return None;
            }
            (m.throttle_rate > 0 && m.adding.contains(&replica)).then_some(m.throttle_rate)
        };
        let manual = self.manual_throttle(r, replicas_key, rate_key, listed);
        match (owned, manual) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A throttle set by hand: the broker's `rate_key` when the topic's `replicas_key` lists
    /// `replica` of this partition.
    fn manual_throttle(&self, r: &Replica, replicas_key: &str, rate_key: &str, replica: i32) -> Option<u64> {
        let listed = self
            .view
            .read()
            .topics
            .get(&r.topic)
            .and_then(|t| t.config(replicas_key).map(String::from))
            .is_some_and(|list| proto::topic_config::lists_replica(&list, r.partition, replica));
        if !listed {
            return None;
        }
        self.effective_config(rate_key).and_then(|v| v.parse::<u64>().ok())
    }

    /// The gRPC endpoint of a registered broker.
    pub fn endpoint_of(&self, broker: i32) -> Option<String> {
        self.view.read().brokers.get(&broker).map(|b| b.endpoint.clone())
    }

    /// Brings the hosted replicas in line with the metadata in `self.view`: all of them, or only
    /// the partitions in `changed`. `spawn_fetcher` starts a follower's copy loop. Replicas not
    /// assigned here are deleted from disk. The decisions are in `reconcile_plan`.
    pub fn reconcile(
        self: &Arc<Self>,
        changed: Option<&BTreeSet<TopicPartition>>,
        spawn_fetcher: impl Fn(Arc<BrokerCore>, Arc<Replica>, i32, u32) -> JoinHandle<()>,
    ) {
        let assigned = assigned_here(self.id, &self.view.read(), changed);
        let items: Vec<_> = assigned.iter().collect();
        // In chunks, so that the first new replicas follow (and join the ISR) while the rest are
        // still being created: a pass that creates 30,000 replicas took half a minute.
        for chunk in items.chunks(CREATE_CHUNK) {
            for (tp, state, replica) in self.ensure_replicas(chunk) {
                self.apply_role(tp, state, &replica, &spawn_fetcher);
            }
        }
        let gone = unassigned(&self.replicas.read(), &assigned, changed);
        let retired = gone.iter().filter_map(|tp| self.delete_replica(tp)).collect();
        let delay = u64::try_from(self.config.retention.file_delete_delay_ms).unwrap_or(0);
        crate::folder_removal::remove_later(retired, std::time::Duration::from_millis(delay));
    }

    /// Applies `state` to a hosted replica, and starts or stops its copy loop to match.
    fn apply_role(
        self: &Arc<Self>,
        tp: &TopicPartition,
        state: &PartitionState,
        replica: &Arc<Replica>,
        spawn_fetcher: &impl Fn(Arc<BrokerCore>, Arc<Replica>, i32, u32) -> JoinHandle<()>,
    ) {
        let role = replica.apply_metadata(state);
        if let Some(role) = role {
            match role {
                Role::Leader { epoch } => tracing::info!(replica = %replica.name(), epoch, "leading"),
                Role::Follower { leader, epoch } => {
                    tracing::info!(replica = %replica.name(), leader, epoch, "following")
                }
            }
        }
        let mut fetchers = self.fetchers.lock();
        let running = fetchers.get(tp).is_some_and(|h| !h.is_finished());
        match fetcher_step(role.is_some(), replica.fetch_source(), running) {
            FetcherStep::Keep => {}
            FetcherStep::Start { leader, epoch } => {
                let h = spawn_fetcher(self.clone(), replica.clone(), leader, epoch);
                if let Some(old) = fetchers.insert(tp.clone(), h) {
                    old.abort();
                }
            }
            FetcherStep::Stop { removed } => {
                if let Some(h) = fetchers.remove(tp) {
                    h.abort();
                }
                if removed {
                    tracing::info!(replica = %replica.name(), "stopped fetching: being removed and not in sync");
                }
            }
        }
    }

    /// Drops a replica no longer assigned here; returns its folder, renamed for removal later
    /// (`folder_removal`).
    fn delete_replica(&self, tp: &TopicPartition) -> Option<PathBuf> {
        self.topic_ids_recorded.lock().remove(tp);
        if let Some(h) = self.fetchers.lock().remove(tp) {
            h.abort();
        }
        let r = self.replicas.write().remove(tp)?;
        self.moves.cancel(&r);
        r.state().role = Role::Follower { leader: -1, epoch: 0 };
        r.notify();
        let path = r.log().dir().to_path_buf();
        match crate::folder_removal::retire(&path) {
            Ok(to) => {
                tracing::info!(replica = %r.name(), "deleted replica no longer assigned here");
                Some(to)
            }
            Err(e) => {
                tracing::error!(replica = %r.name(), error = %e, "cannot delete replica");
                None
            }
        }
    }

    /// Takes the dir of a failed file operation offline (I/O errors only; a corrupt batch is not
    /// a failed disk).
    pub fn report_log_error(&self, e: &crate::partition_log::LogError) {
        if let crate::partition_log::LogError::Io { path, source, .. } = e {
            // A file gone because its replica was deleted meanwhile is not a failed disk (the
            // probe still catches a dir that vanished).
            if source.kind() == std::io::ErrorKind::NotFound {
                return;
            }
            if let Some(dir) = self.dirs.dir_of(path).cloned() {
                self.fail_dir(&dir, format!("{}: {source}", path.display()));
            }
        }
    }

    /// Marks a log dir offline; its replicas are taken offline by [`Self::take_offline_replicas`].
    pub fn fail_dir(&self, dir: &std::path::Path, reason: String) {
        if self.dirs.set_offline(dir, reason.clone()) {
            tracing::error!(dir = %dir.display(), reason, "log dir failed; taking it offline");
            self.dir_failed.send_modify(|v| *v += 1);
        }
    }

    /// Writes and syncs a small file in each online dir; a dir where that fails goes offline.
    pub fn probe_dirs(&self) {
        for d in self.dirs.dirs() {
            if self.dirs.offline_reason(d).is_some() {
                continue;
            }
            let probe = d.join(".ferry-probe");
            let result = std::fs::write(&probe, b"ok")
                .and_then(|()| std::fs::File::open(&probe)?.sync_all())
                .and_then(|()| std::fs::remove_file(&probe));
            if let Err(e) = result {
                self.fail_dir(d, format!("probe write failed: {e}"));
            }
        }
    }

    /// Stops serving the replicas in offline dirs: they leave the hosted set (so they neither
    /// lead nor fetch) and are published in the registration, so the controller moves their
    /// leadership and drops them from the ISR. Their files are left for the operator.
    pub fn take_offline_replicas(&self) {
        let offline = self.dirs.offline();
        if offline.is_empty() {
            return;
        }
        let in_offline = |p: &std::path::Path| offline.iter().any(|d| p.starts_with(d));
        let hosted: Vec<(TopicPartition, Arc<Replica>)> = self
            .replicas
            .read()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut taken = 0;
        for (tp, r) in hosted {
            let future_offline = r.future().as_ref().is_some_and(|f| in_offline(&f.dest));
            let current_offline = in_offline(r.log().dir());
            if future_offline || current_offline {
                self.moves.cancel(&r);
            }
            if !current_offline {
                continue;
            }
            if let Some(h) = self.fetchers.lock().remove(&tp) {
                h.abort();
            }
            self.replicas.write().remove(&tp);
            self.offline_replicas.write().insert(tp);
            r.state().role = Role::Follower { leader: -1, epoch: 0 };
            r.notify();
            taken += 1;
        }
        if taken > 0 {
            tracing::error!(replicas = taken, "replicas in failed log dirs are offline");
        }
        self.offline_published.send_modify(|v| *v += 1);
    }

    /// Stops every fetcher and flushes every log.
    pub fn close(&self) {
        for (_, h) in self.fetchers.lock().drain() {
            h.abort();
        }
        self.moves.stop_all();
        for r in self.replicas.read().values() {
            if let Err(e) = r.log().flush() {
                tracing::warn!(replica = %r.name(), error = %e, "flush at shutdown failed");
            }
            if let Some(f) = r.future().as_mut() {
                if let Err(e) = f.log.flush() {
                    tracing::warn!(replica = %r.name(), error = %e, "flush of a future log at shutdown failed");
                }
            }
        }
    }
}

/// The broker is the dir-move engine's host: its moves, settings, dynamic rate and failed dirs.
impl MoveHost for BrokerCore {
    fn moves(&self) -> &DirMoves {
        &self.moves
    }

    fn log_config(&self) -> LogConfig {
        self.config.log.clone()
    }

    fn rate(&self) -> Option<u64> {
        self.alter_log_dirs_rate()
    }

    fn copied(&self) -> &prometheus::IntCounter {
        &self.metrics.dir_move_bytes
    }

    fn swap_pause_ms(&self) -> u64 {
        self.config.swap_pause_ms
    }

    fn failed(&self, e: &crate::partition_log::LogError) {
        self.report_log_error(e);
    }
}
