//! The settings of `ferry node`: its flags, and the `--config` file that may give each of them.

use std::net::SocketAddr;
use std::path::PathBuf;

use broker::coordinator::group::GroupConfig;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args};
use controller::limits::RequestLimits;
use metastore::RaftTuning;

use crate::cluster_node::Roles;

/// Flags of `ferry node`. Each may also come from a `FERRY_<NAME>` environment variable (the
/// long name in upper case with `_` for `-`) or from the `--config` file (the long name with `_`
/// for `-`); a flag beats the variable, which beats the file, which beats the default.
#[derive(Args)]
pub struct NodeArgs {
    /// A TOML file with any of these flags as keys: `session_timeout_ms = 2000`,
    /// `log_dirs = ["/a", "/b"]`. Flags and FERRY_* variables override it.
    #[arg(long, env = "FERRY_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// This node's id (> 0). Required.
    #[arg(long, env = "FERRY_ID")]
    pub(crate) id: Option<u64>,
    /// Where the node keeps its log, vote and snapshots. Required.
    #[arg(long, env = "FERRY_DATA_DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// Address to serve gRPC on, HOST:PORT. Required.
    #[arg(long, env = "FERRY_LISTEN")]
    pub(crate) listen: Option<SocketAddr>,
    /// The founding voters: 1=HOST:PORT,2=HOST:PORT,...
    #[arg(long, default_value = "", env = "FERRY_PEERS")]
    pub(crate) peers: String,
    /// Join an existing cluster (added with `ferry metastore members add-learner`) instead of forming one.
    #[arg(long, env = "FERRY_JOIN")]
    pub(crate) join: bool,
    /// Worker threads of the node's async runtime (0 = one per core).
    #[arg(long, default_value_t = 1, env = "FERRY_THREADS")]
    pub threads: usize,
    /// Raft heartbeat interval in ms.
    #[arg(long, default_value_t = RaftTuning::default().heartbeat_ms, env = "FERRY_HEARTBEAT_MS")]
    pub(crate) heartbeat_ms: u64,
    /// Minimum election timeout in ms.
    #[arg(long, default_value_t = RaftTuning::default().election_min_ms, env = "FERRY_ELECTION_MIN_MS")]
    pub(crate) election_min_ms: u64,
    /// Maximum election timeout in ms.
    #[arg(long, default_value_t = RaftTuning::default().election_max_ms, env = "FERRY_ELECTION_MAX_MS")]
    pub(crate) election_max_ms: u64,
    /// Build a snapshot every this many log entries.
    #[arg(long, default_value_t = RaftTuning::default().snapshot_every, env = "FERRY_SNAPSHOT_EVERY")]
    pub(crate) snapshot_every: u64,
    /// Log entries kept behind a snapshot, for followers a little behind (beyond them, a
    /// lagging or new node gets the snapshot).
    #[arg(long, default_value_t = RaftTuning::default().keep_behind_snapshot, env = "FERRY_KEEP_BEHIND_SNAPSHOT")]
    pub(crate) keep_behind_snapshot: u64,
    /// Roles of this node: quorum, broker, or quorum,broker.
    #[arg(long, default_value = "quorum,broker", env = "FERRY_ROLES")]
    pub(crate) roles: Roles,
    /// The quorum's addresses, for a broker-only node: HOST:PORT,...
    #[arg(long, default_value = "", env = "FERRY_QUORUM")]
    pub(crate) quorum: String,
    /// Broker log dirs, comma-separated (default: <data dir>/logs).
    #[arg(long, value_delimiter = ',', env = "FERRY_LOG_DIRS")]
    pub(crate) log_dirs: Vec<PathBuf>,
    /// Broker rack.
    #[arg(long, env = "FERRY_RACK")]
    pub(crate) rack: Option<String>,
    /// A static broker config, KEY=VALUE by Kafka's name, repeatable: one of the dynamic broker
    /// configs (`cordoned.log.dirs`, the throttle rates), beneath the values set at run time.
    #[arg(long = "broker-config", value_name = "KEY=VALUE")]
    pub(crate) broker_config: Vec<String>,
    /// A broker silent this long loses its registration and its leaderships.
    #[arg(long, default_value_t = 6000, env = "FERRY_SESSION_TIMEOUT_MS")]
    pub(crate) session_timeout_ms: u64,
    /// `replica.lag.time.max.ms`: an in-sync follower not caught up for this long leaves the ISR.
    #[arg(long, default_value_t = broker::DataConfig::default().replica_lag_max_ms, env = "FERRY_REPLICA_LAG_TIME_MAX_MS")]
    pub(crate) replica_lag_time_max_ms: u64,
    /// Segment size of partition logs in bytes.
    #[arg(long, default_value_t = 64 << 20, env = "FERRY_SEGMENT_BYTES")]
    pub(crate) segment_bytes: u64,
    /// Move leadership back to preferred replicas (auto.leader.rebalance.enable).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "FERRY_AUTO_LEADER_REBALANCE")]
    pub(crate) auto_leader_rebalance: bool,
    /// How often preferred leaders are checked, in ms.
    #[arg(long, default_value_t = 5000, env = "FERRY_LEADER_IMBALANCE_CHECK_INTERVAL_MS")]
    pub(crate) leader_imbalance_check_interval_ms: u64,
    /// How often each log dir is probed with a small synced write, in ms; a dir that fails goes
    /// offline.
    #[arg(long, default_value_t = broker::DataConfig::default().dir_probe_interval_ms, env = "FERRY_LOG_DIR_PROBE_INTERVAL_MS")]
    pub(crate) log_dir_probe_interval_ms: u64,
    /// How often each replica's log is checked for segments to delete by retention, in ms
    /// (log.retention.check.interval.ms).
    #[arg(long, default_value_t = broker::retention::RetentionConfig::default().check_interval_ms, env = "FERRY_LOG_RETENTION_CHECK_INTERVAL_MS")]
    pub(crate) log_retention_check_interval_ms: u64,
    /// How long a new group waits for more members before its first rebalance, in ms
    /// (group.initial.rebalance.delay.ms).
    #[arg(long, default_value_t = GroupConfig::default().initial_rebalance_delay_ms, env = "FERRY_GROUP_INITIAL_REBALANCE_DELAY_MS")]
    pub(crate) group_initial_rebalance_delay_ms: i64,
    /// The shortest session a group member may ask for, in ms (group.min.session.timeout.ms).
    #[arg(long, default_value_t = GroupConfig::default().min_session_timeout_ms, env = "FERRY_GROUP_MIN_SESSION_TIMEOUT_MS")]
    pub(crate) group_min_session_timeout_ms: i32,
    /// The longest session a group member may ask for, in ms (group.max.session.timeout.ms).
    #[arg(long, default_value_t = GroupConfig::default().max_session_timeout_ms, env = "FERRY_GROUP_MAX_SESSION_TIMEOUT_MS")]
    pub(crate) group_max_session_timeout_ms: i32,
    /// Members a group may have (group.max.size).
    #[arg(long, default_value_t = GroupConfig::default().max_size, env = "FERRY_GROUP_MAX_SIZE")]
    pub(crate) group_max_size: usize,
    /// How long an empty group's offsets are kept, in minutes (offsets.retention.minutes).
    #[arg(long, default_value_t = GroupConfig::default().offsets_retention_ms / 60_000, env = "FERRY_OFFSETS_RETENTION_MINUTES")]
    pub(crate) offsets_retention_minutes: i64,
    /// Partitions of `__consumer_offsets` when the first group creates it
    /// (offsets.topic.num.partitions).
    #[arg(long, default_value_t = GroupConfig::default().offsets_topic_num_partitions, value_parser = clap::value_parser!(i32).range(1..=10_000), env = "FERRY_OFFSETS_TOPIC_NUM_PARTITIONS")]
    pub(crate) offsets_topic_num_partitions: i32,
    /// Replicas of `__consumer_offsets`, fewer when fewer brokers live
    /// (offsets.topic.replication.factor).
    #[arg(long, default_value_t = GroupConfig::default().offsets_topic_replication_factor, value_parser = clap::value_parser!(i16).range(1..), env = "FERRY_OFFSETS_TOPIC_REPLICATION_FACTOR")]
    pub(crate) offsets_topic_replication_factor: i16,
    /// How many log dir moves copy at once (num.replica.alter.log.dirs.threads).
    #[arg(long, default_value_t = broker::DataConfig::default().dir_move_parallelism, env = "FERRY_NUM_REPLICA_ALTER_LOG_DIRS_THREADS")]
    pub(crate) num_replica_alter_log_dirs_threads: usize,
    /// Compact the logs of topics whose cleanup.policy holds compact (log.cleaner.enable).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "FERRY_LOG_CLEANER_ENABLE")]
    pub(crate) log_cleaner_enable: bool,
    /// Logs cleaned at once (log.cleaner.threads).
    #[arg(long, default_value_t = broker::cleaner::CleanerConfig::default().threads, env = "FERRY_LOG_CLEANER_THREADS")]
    pub(crate) log_cleaner_threads: usize,
    /// How long the cleaner waits when no log needs cleaning, in ms (log.cleaner.backoff.ms).
    #[arg(long, default_value_t = broker::cleaner::CleanerConfig::default().backoff_ms, env = "FERRY_LOG_CLEANER_BACKOFF_MS")]
    pub(crate) log_cleaner_backoff_ms: u64,
    /// Memory for the cleaner's key maps, in bytes, shared by its threads
    /// (log.cleaner.dedupe.buffer.size).
    #[arg(long, default_value_t = broker::cleaner::CleanerConfig::default().dedupe_buffer_size, env = "FERRY_LOG_CLEANER_DEDUPE_BUFFER_SIZE")]
    pub(crate) log_cleaner_dedupe_buffer_size: u64,
    /// The cleaner's reads and writes in bytes/s (log.cleaner.io.max.bytes.per.second; default:
    /// unbounded).
    #[arg(long, env = "FERRY_LOG_CLEANER_IO_MAX_BYTES_PER_SECOND")]
    pub(crate) log_cleaner_io_max_bytes_per_second: Option<u64>,
    /// Serve Prometheus metrics at http://HOST:PORT/metrics and the web console at
    /// http://HOST:PORT/ (default: not served; --metrics-listen is the old name).
    #[arg(long, alias = "metrics-listen", env = "FERRY_HTTP_LISTEN")]
    pub(crate) http_listen: Option<SocketAddr>,
    /// The cluster credential for a broker-only node (the file `cluster-credential` in a quorum
    /// node's data dir); a quorum node learns it from the cluster.
    #[arg(long, env = "FERRY_CLUSTER_CREDENTIAL_FILE")]
    pub(crate) cluster_credential_file: Option<PathBuf>,
    /// Serve Kafka clients at HOST:PORT, one listener whose protocol is
    /// --kafka-security-protocol (default: no Kafka listener; --listeners names several).
    #[arg(long, env = "FERRY_KAFKA_LISTEN", conflicts_with = "listeners")]
    pub(crate) kafka_listen: Option<SocketAddr>,
    /// The HOST:PORT Kafka clients are told to connect to on --kafka-listen (default: the
    /// address bound).
    #[arg(long, env = "FERRY_KAFKA_ADVERTISED_LISTENER", conflicts_with = "listeners")]
    pub(crate) kafka_advertised_listener: Option<String>,
    /// Kafka listeners, NAME://HOST:PORT separated by commas, e.g.
    /// `INTERNAL://10.0.0.1:9092,EXTERNAL://:9093` (listeners; an empty host binds every
    /// interface). Clients are answered with the addresses of the listener they came in on.
    #[arg(long, env = "FERRY_LISTENERS")]
    pub(crate) listeners: Option<String>,
    /// What clients are told to connect to, per listener name (advertised.listeners; default:
    /// the address each listener bound).
    #[arg(long, env = "FERRY_ADVERTISED_LISTENERS")]
    pub(crate) advertised_listeners: Option<String>,
    /// Each listener's security protocol, NAME:PROTOCOL separated by commas
    /// (listener.security.protocol.map); PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL name
    /// themselves.
    #[arg(long, env = "FERRY_LISTENER_SECURITY_PROTOCOL_MAP")]
    pub(crate) listener_security_protocol_map: Option<String>,
    /// The Kafka listener's security.
    #[command(flatten)]
    pub(crate) security: crate::security_args::SecurityArgs,
    /// TLS on the gRPC port.
    #[command(flatten)]
    pub(crate) grpc_tls: crate::security_args::GrpcTlsArgs,
    /// TLS on the HTTP port with a certificate of its own.
    #[command(flatten)]
    pub(crate) http_tls: crate::security_args::HttpTlsArgs,
    /// Most partitions a topic may have (max.partitions.per.topic).
    #[arg(long, default_value_t = RequestLimits::default().max_partitions_per_topic, env = "FERRY_MAX_PARTITIONS_PER_TOPIC")]
    pub(crate) max_partitions_per_topic: u32,
    /// Most partitions one admin request may create, move or name (max.partitions.per.request).
    #[arg(long, default_value_t = RequestLimits::default().max_partitions_per_request, env = "FERRY_MAX_PARTITIONS_PER_REQUEST")]
    pub(crate) max_partitions_per_request: u32,
    /// The largest replication factor or replica list (max.replicas.per.partition).
    #[arg(long, default_value_t = RequestLimits::default().max_replicas_per_partition, env = "FERRY_MAX_REPLICAS_PER_PARTITION")]
    pub(crate) max_replicas_per_partition: u32,
    /// Most topics, configs, brokers or throttles in one list-like admin request
    /// (max.items.per.request).
    #[arg(long, default_value_t = RequestLimits::default().max_items_per_request, env = "FERRY_MAX_ITEMS_PER_REQUEST")]
    pub(crate) max_items_per_request: u32,
    /// The largest admin or broker request, in bytes (socket.request.max.bytes).
    #[arg(long, default_value_t = RequestLimits::default().max_request_bytes, env = "FERRY_SOCKET_REQUEST_MAX_BYTES")]
    pub(crate) socket_request_max_bytes: usize,
}

/// The `--config` file of `ferry node`: every flag but `--config`, named with `_` for `-`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    id: Option<u64>,
    data_dir: Option<PathBuf>,
    listen: Option<SocketAddr>,
    peers: Option<String>,
    join: Option<bool>,
    threads: Option<usize>,
    heartbeat_ms: Option<u64>,
    election_min_ms: Option<u64>,
    election_max_ms: Option<u64>,
    snapshot_every: Option<u64>,
    keep_behind_snapshot: Option<u64>,
    #[serde(default, deserialize_with = "roles_from_str")]
    roles: Option<Roles>,
    quorum: Option<String>,
    log_dirs: Option<Vec<PathBuf>>,
    rack: Option<String>,
    broker_config: Option<Vec<String>>,
    session_timeout_ms: Option<u64>,
    replica_lag_time_max_ms: Option<u64>,
    segment_bytes: Option<u64>,
    auto_leader_rebalance: Option<bool>,
    leader_imbalance_check_interval_ms: Option<u64>,
    log_dir_probe_interval_ms: Option<u64>,
    log_retention_check_interval_ms: Option<u64>,
    group_initial_rebalance_delay_ms: Option<i64>,
    group_min_session_timeout_ms: Option<i32>,
    group_max_session_timeout_ms: Option<i32>,
    group_max_size: Option<usize>,
    offsets_retention_minutes: Option<i64>,
    offsets_topic_num_partitions: Option<i32>,
    offsets_topic_replication_factor: Option<i16>,
    num_replica_alter_log_dirs_threads: Option<usize>,
    log_cleaner_enable: Option<bool>,
    log_cleaner_threads: Option<usize>,
    log_cleaner_backoff_ms: Option<u64>,
    log_cleaner_dedupe_buffer_size: Option<u64>,
    log_cleaner_io_max_bytes_per_second: Option<u64>,
    /// `metrics_listen` is the old name.
    #[serde(alias = "metrics_listen")]
    http_listen: Option<SocketAddr>,
    cluster_credential_file: Option<PathBuf>,
    kafka_listen: Option<SocketAddr>,
    kafka_advertised_listener: Option<String>,
    listeners: Option<String>,
    advertised_listeners: Option<String>,
    listener_security_protocol_map: Option<String>,
    max_partitions_per_topic: Option<u32>,
    max_partitions_per_request: Option<u32>,
    max_replicas_per_partition: Option<u32>,
    max_items_per_request: Option<u32>,
    socket_request_max_bytes: Option<usize>,
}

fn roles_from_str<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Roles>, D::Error> {
    let s = <String as serde::Deserialize>::deserialize(d)?;
    s.parse().map(Some).map_err(serde::de::Error::custom)
}

impl NodeArgs {
    /// Fills every setting given neither as a flag nor as a `FERRY_*` variable from the
    /// `--config` file, if there is one. `m` are the matches of the `node` subcommand.
    pub fn apply_config_file(&mut self, m: &ArgMatches) -> anyhow::Result<()> {
        let Some(path) = &self.config else {
            return Ok(());
        };
        let file: FileConfig = crate::config_file::read(path)?;
        self.merge(file, m);
        Ok(())
    }

    fn merge(&mut self, file: FileConfig, m: &ArgMatches) {
        let given = |id: &str| {
            matches!(
                m.value_source(id),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
        };
        macro_rules! from_file {
            ($($field:ident),* $(,)?) => {$(
                if !given(stringify!($field)) {
                    if let Some(v) = file.$field {
                        self.$field = v.into();
                    }
                }
            )*};
        }
        from_file!(
            id,
            data_dir,
            listen,
            peers,
            join,
            threads,
            heartbeat_ms,
            election_min_ms,
            election_max_ms,
            snapshot_every,
            keep_behind_snapshot,
            roles,
            quorum,
            log_dirs,
            rack,
            broker_config,
            session_timeout_ms,
            replica_lag_time_max_ms,
            segment_bytes,
            auto_leader_rebalance,
            leader_imbalance_check_interval_ms,
            log_dir_probe_interval_ms,
            log_retention_check_interval_ms,
            group_initial_rebalance_delay_ms,
            group_min_session_timeout_ms,
            group_max_session_timeout_ms,
            group_max_size,
            offsets_retention_minutes,
            offsets_topic_num_partitions,
            offsets_topic_replication_factor,
            num_replica_alter_log_dirs_threads,
            log_cleaner_enable,
            log_cleaner_threads,
            log_cleaner_backoff_ms,
            log_cleaner_dedupe_buffer_size,
            log_cleaner_io_max_bytes_per_second,
            http_listen,
            cluster_credential_file,
            kafka_listen,
            kafka_advertised_listener,
            listeners,
            advertised_listeners,
            listener_security_protocol_map,
            max_partitions_per_topic,
            max_partitions_per_request,
            max_replicas_per_partition,
            max_items_per_request,
            socket_request_max_bytes,
        );
    }
}
