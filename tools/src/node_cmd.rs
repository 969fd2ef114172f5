//! `ferry node`: one node (quorum member, broker, or both) as its own process.

use broker::coordinator::group::GroupConfig;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args};
use controller::limits::RequestLimits;
use metastore::RaftTuning;

use crate::cluster_node::{self, NodeOptions, Roles};

/// Flags of `ferry node`. Each may also come from a `FERRY_<NAME>` environment variable (the
/// long name in upper case with `_` for `-`) or from the `--config` file (the long name with `_`
/// for `-`); a flag beats the variable, which beats the file, which beats the default.
#[derive(Args)]
pub struct NodeArgs {
    /// A TOML file with any of these flags as keys: `session_timeout_ms = 2000`,
    /// `log_dirs = ["/a", "/b"]`. Flags and FERRY_* variables override it.
    #[arg(long, env = "FERRY_CONFIG")]
    config: Option<PathBuf>,
    /// This node's id (> 0). Required.
    #[arg(long, env = "FERRY_ID")]
    id: Option<u64>,
    /// Where the node keeps its log, vote and snapshots. Required.
    #[arg(long, env = "FERRY_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Address to serve gRPC on, HOST:PORT. Required.
    #[arg(long, env = "FERRY_LISTEN")]
    listen: Option<SocketAddr>,
    /// The founding voters: 1=HOST:PORT,2=HOST:PORT,...
    #[arg(long, default_value = "", env = "FERRY_PEERS")]
    peers: String,
    /// Join an existing cluster (added with `ferry metastore members add-learner`) instead of forming one.
    #[arg(long, env = "FERRY_JOIN")]
    join: bool,
    /// Worker threads of the node's async runtime (0 = one per core).
    #[arg(long, default_value_t = 1, env = "FERRY_THREADS")]
    pub threads: usize,
    /// Raft heartbeat interval in ms.
    #[arg(long, default_value_t = RaftTuning::default().heartbeat_ms, env = "FERRY_HEARTBEAT_MS")]
    heartbeat_ms: u64,
    /// Minimum election timeout in ms.
    #[arg(long, default_value_t = RaftTuning::default().election_min_ms, env = "FERRY_ELECTION_MIN_MS")]
    election_min_ms: u64,
    /// Maximum election timeout in ms.
    #[arg(long, default_value_t = RaftTuning::default().election_max_ms, env = "FERRY_ELECTION_MAX_MS")]
    election_max_ms: u64,
    /// Build a snapshot every this many log entries.
    #[arg(long, default_value_t = RaftTuning::default().snapshot_every, env = "FERRY_SNAPSHOT_EVERY")]
    snapshot_every: u64,
    /// Log entries kept behind a snapshot, for followers a little behind (beyond them, a
    /// lagging or new node gets the snapshot).
    #[arg(long, default_value_t = RaftTuning::default().keep_behind_snapshot, env = "FERRY_KEEP_BEHIND_SNAPSHOT")]
    keep_behind_snapshot: u64,
    /// Roles of this node: quorum, broker, or quorum,broker.
    #[arg(long, default_value = "quorum,broker", env = "FERRY_ROLES")]
    roles: Roles,
    /// The quorum's addresses, for a broker-only node: HOST:PORT,...
    #[arg(long, default_value = "", env = "FERRY_QUORUM")]
    quorum: String,
    /// Broker log dirs, comma-separated (default: <data dir>/logs).
    #[arg(long, value_delimiter = ',', env = "FERRY_LOG_DIRS")]
    log_dirs: Vec<PathBuf>,
    /// Broker rack.
    #[arg(long, env = "FERRY_RACK")]
    rack: Option<String>,
    /// A broker silent this long loses its registration and its leaderships.
    #[arg(long, default_value_t = 6000, env = "FERRY_SESSION_TIMEOUT_MS")]
    session_timeout_ms: u64,
    /// `replica.lag.time.max.ms`: an in-sync follower not caught up for this long leaves the ISR.
    #[arg(long, default_value_t = broker::DataConfig::default().replica_lag_max_ms, env = "FERRY_REPLICA_LAG_TIME_MAX_MS")]
    replica_lag_time_max_ms: u64,
    /// Segment size of partition logs in bytes.
    #[arg(long, default_value_t = 64 << 20, env = "FERRY_SEGMENT_BYTES")]
    segment_bytes: u64,
    /// Move leadership back to preferred replicas (auto.leader.rebalance.enable).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "FERRY_AUTO_LEADER_REBALANCE")]
    auto_leader_rebalance: bool,
    /// How often preferred leaders are checked, in ms.
    #[arg(long, default_value_t = 5000, env = "FERRY_LEADER_IMBALANCE_CHECK_INTERVAL_MS")]
    leader_imbalance_check_interval_ms: u64,
    /// How often each log dir is probed with a small synced write, in ms; a dir that fails goes
    /// offline.
    #[arg(long, default_value_t = broker::DataConfig::default().dir_probe_interval_ms, env = "FERRY_LOG_DIR_PROBE_INTERVAL_MS")]
    log_dir_probe_interval_ms: u64,
    /// How often each replica's log is checked for segments to delete by retention, in ms
    /// (log.retention.check.interval.ms).
    #[arg(long, default_value_t = broker::retention::RetentionConfig::default().check_interval_ms, env = "FERRY_LOG_RETENTION_CHECK_INTERVAL_MS")]
    log_retention_check_interval_ms: u64,
    /// How long a new group waits for more members before its first rebalance, in ms
    /// (group.initial.rebalance.delay.ms).
    #[arg(long, default_value_t = GroupConfig::default().initial_rebalance_delay_ms, env = "FERRY_GROUP_INITIAL_REBALANCE_DELAY_MS")]
    group_initial_rebalance_delay_ms: i64,
    /// The shortest session a group member may ask for, in ms (group.min.session.timeout.ms).
    #[arg(long, default_value_t = GroupConfig::default().min_session_timeout_ms, env = "FERRY_GROUP_MIN_SESSION_TIMEOUT_MS")]
    group_min_session_timeout_ms: i32,
    /// The longest session a group member may ask for, in ms (group.max.session.timeout.ms).
    #[arg(long, default_value_t = GroupConfig::default().max_session_timeout_ms, env = "FERRY_GROUP_MAX_SESSION_TIMEOUT_MS")]
    group_max_session_timeout_ms: i32,
    /// Members a group may have (group.max.size).
    #[arg(long, default_value_t = GroupConfig::default().max_size, env = "FERRY_GROUP_MAX_SIZE")]
    group_max_size: usize,
    /// How long an empty group's offsets are kept, in minutes (offsets.retention.minutes).
    #[arg(long, default_value_t = GroupConfig::default().offsets_retention_ms / 60_000, env = "FERRY_OFFSETS_RETENTION_MINUTES")]
    offsets_retention_minutes: i64,
    /// How many log dir moves copy at once (num.replica.alter.log.dirs.threads).
    #[arg(long, default_value_t = broker::DataConfig::default().dir_move_parallelism, env = "FERRY_NUM_REPLICA_ALTER_LOG_DIRS_THREADS")]
    num_replica_alter_log_dirs_threads: usize,
    /// Compact the logs of topics whose cleanup.policy holds compact (log.cleaner.enable).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "FERRY_LOG_CLEANER_ENABLE")]
    log_cleaner_enable: bool,
    /// Logs cleaned at once (log.cleaner.threads).
    #[arg(long, default_value_t = broker::cleaner::CleanerConfig::default().threads, env = "FERRY_LOG_CLEANER_THREADS")]
    log_cleaner_threads: usize,
    /// How long the cleaner waits when no log needs cleaning, in ms (log.cleaner.backoff.ms).
    #[arg(long, default_value_t = broker::cleaner::CleanerConfig::default().backoff_ms, env = "FERRY_LOG_CLEANER_BACKOFF_MS")]
    log_cleaner_backoff_ms: u64,
    /// Memory for the cleaner's key maps, in bytes, shared by its threads
    /// (log.cleaner.dedupe.buffer.size).
    #[arg(long, default_value_t = broker::cleaner::CleanerConfig::default().dedupe_buffer_size, env = "FERRY_LOG_CLEANER_DEDUPE_BUFFER_SIZE")]
    log_cleaner_dedupe_buffer_size: u64,
    /// The cleaner's reads and writes in bytes/s (log.cleaner.io.max.bytes.per.second; default:
    /// unbounded).
    #[arg(long, env = "FERRY_LOG_CLEANER_IO_MAX_BYTES_PER_SECOND")]
    log_cleaner_io_max_bytes_per_second: Option<u64>,
    /// Serve Prometheus metrics at http://HOST:PORT/metrics (default: not served).
    #[arg(long, env = "FERRY_METRICS_LISTEN")]
    metrics_listen: Option<SocketAddr>,
    /// The cluster credential for a broker-only node (the file `cluster-credential` in a quorum
    /// node's data dir); a quorum node learns it from the cluster.
    #[arg(long, env = "FERRY_CLUSTER_CREDENTIAL_FILE")]
    cluster_credential_file: Option<PathBuf>,
    /// Serve Kafka clients at HOST:PORT (listeners; default: no Kafka listener).
    #[arg(long, env = "FERRY_KAFKA_LISTEN")]
    kafka_listen: Option<SocketAddr>,
    /// The HOST:PORT Kafka clients are told to connect to (advertised.listeners; default: the
    /// address --kafka-listen bound).
    #[arg(long, env = "FERRY_KAFKA_ADVERTISED_LISTENER")]
    kafka_advertised_listener: Option<String>,
    /// Most partitions a topic may have (max.partitions.per.topic).
    #[arg(long, default_value_t = RequestLimits::default().max_partitions_per_topic, env = "FERRY_MAX_PARTITIONS_PER_TOPIC")]
    max_partitions_per_topic: u32,
    /// Most partitions one admin request may create, move or name (max.partitions.per.request).
    #[arg(long, default_value_t = RequestLimits::default().max_partitions_per_request, env = "FERRY_MAX_PARTITIONS_PER_REQUEST")]
    max_partitions_per_request: u32,
    /// The largest replication factor or replica list (max.replicas.per.partition).
    #[arg(long, default_value_t = RequestLimits::default().max_replicas_per_partition, env = "FERRY_MAX_REPLICAS_PER_PARTITION")]
    max_replicas_per_partition: u32,
    /// Most topics, configs, brokers or throttles in one list-like admin request
    /// (max.items.per.request).
    #[arg(long, default_value_t = RequestLimits::default().max_items_per_request, env = "FERRY_MAX_ITEMS_PER_REQUEST")]
    max_items_per_request: u32,
    /// The largest admin or broker request, in bytes (socket.request.max.bytes).
    #[arg(long, default_value_t = RequestLimits::default().max_request_bytes, env = "FERRY_SOCKET_REQUEST_MAX_BYTES")]
    socket_request_max_bytes: usize,
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
    num_replica_alter_log_dirs_threads: Option<usize>,
    log_cleaner_enable: Option<bool>,
    log_cleaner_threads: Option<usize>,
    log_cleaner_backoff_ms: Option<u64>,
    log_cleaner_dedupe_buffer_size: Option<u64>,
    log_cleaner_io_max_bytes_per_second: Option<u64>,
    metrics_listen: Option<SocketAddr>,
    cluster_credential_file: Option<PathBuf>,
    kafka_listen: Option<SocketAddr>,
    kafka_advertised_listener: Option<String>,
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
            num_replica_alter_log_dirs_threads,
            log_cleaner_enable,
            log_cleaner_threads,
            log_cleaner_backoff_ms,
            log_cleaner_dedupe_buffer_size,
            log_cleaner_io_max_bytes_per_second,
            metrics_listen,
            cluster_credential_file,
            kafka_listen,
            kafka_advertised_listener,
            max_partitions_per_topic,
            max_partitions_per_request,
            max_replicas_per_partition,
            max_items_per_request,
            socket_request_max_bytes,
        );
    }
}

/// A required setting, or an error that says the three places it can come from.
fn required<T>(v: Option<T>, flag: &str) -> anyhow::Result<T> {
    v.with_context(|| {
        let key = flag.replace('-', "_");
        format!(
            "--{flag} is required (or FERRY_{}, or `{key}` in the --config file)",
            key.to_uppercase()
        )
    })
}

/// Parses `1=HOST:PORT,2=HOST:PORT`.
pub fn parse_peers(s: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    let mut peers = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, addr) = part
            .split_once('=')
            .with_context(|| format!("--peers: {part:?} is not ID=HOST:PORT"))?;
        let id: u64 = id
            .parse()
            .with_context(|| format!("--peers: {id:?} is not a node id"))?;
        if id == 0 {
            bail!("--peers: node ids start at 1");
        }
        if !addr.contains(':') {
            bail!("--peers: {addr:?} is not HOST:PORT");
        }
        if peers.insert(id, addr.to_string()).is_some() {
            bail!("--peers: node {id} is named twice");
        }
    }
    Ok(peers)
}

/// Runs the node until Ctrl-C or SIGTERM.
pub async fn run(a: NodeArgs) -> anyhow::Result<()> {
    if let Some(path) = &a.config {
        tracing::info!(config = %path.display(), "settings not given as flags or FERRY_* variables come from the config file");
    }
    let options = node_options(a)?;
    let id = options.id;
    let node = cluster_node::start(options).await?;
    let stop = crate::shutdown_signal();
    println!("node {id} listening on {}", node.addr);
    if let Some(m) = node.metrics_addr() {
        println!("  metrics: http://{m}/metrics");
    }
    stop.await;
    node.shutdown().await;
    Ok(())
}

/// The node's options from its settings, refusing a node that lacks one it needs.
fn node_options(a: NodeArgs) -> anyhow::Result<NodeOptions> {
    let data = data_config(&a);
    let id = required(a.id, "id")?;
    let data_dir = required(a.data_dir, "data-dir")?;
    let listen = required(a.listen, "listen")?;
    let peers = parse_peers(&a.peers)?;
    if a.roles.quorum && peers.is_empty() && !a.join {
        bail!("--peers is required for a quorum node unless --join is given");
    }
    if !a.roles.quorum {
        // A file that does not exist yet is waited for: nodes may be started all at once.
        match &a.cluster_credential_file {
            Some(_) => {}
            None => bail!(
                "a broker-only node needs --cluster-credential-file (the file {} in a quorum node's data dir)",
                metastore::credential::CREDENTIAL_FILE
            ),
        }
    }
    Ok(NodeOptions {
        id,
        data_dir,
        listen,
        peers,
        join: a.join,
        raft: RaftTuning {
            heartbeat_ms: a.heartbeat_ms,
            election_min_ms: a.election_min_ms,
            election_max_ms: a.election_max_ms,
            snapshot_every: a.snapshot_every,
            keep_behind_snapshot: a.keep_behind_snapshot,
        },
        roles: a.roles,
        quorum: a
            .quorum
            .split(',')
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .map(String::from)
            .collect(),
        log_dirs: a.log_dirs,
        rack: a.rack,
        session_timeout_ms: a.session_timeout_ms,
        data,
        controller: controller::active::ControllerConfig {
            auto_leader_rebalance: a.auto_leader_rebalance,
            rebalance_interval: std::time::Duration::from_millis(a.leader_imbalance_check_interval_ms.max(100)),
        },
        limits: RequestLimits {
            max_partitions_per_topic: a.max_partitions_per_topic,
            max_partitions_per_request: a.max_partitions_per_request,
            max_replicas_per_partition: a.max_replicas_per_partition,
            max_items_per_request: a.max_items_per_request,
            max_request_bytes: a.socket_request_max_bytes,
        },
        metrics_listen: a.metrics_listen,
        credential_file: a.cluster_credential_file,
        kafka_listen: a.kafka_listen.map(|l| (l, a.kafka_advertised_listener)),
    })
}

/// The broker's data-plane settings.
fn data_config(a: &NodeArgs) -> broker::DataConfig {
    let mut data = broker::DataConfig {
        replica_lag_max_ms: a.replica_lag_time_max_ms,
        dir_probe_interval_ms: a.log_dir_probe_interval_ms,
        dir_move_parallelism: a.num_replica_alter_log_dirs_threads,
        // A test hook, not a setting: see `DataConfig::swap_pause_ms`.
        swap_pause_ms: std::env::var("FERRY_TEST_DIR_MOVE_SWAP_PAUSE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        ..Default::default()
    };
    data.log.segment_bytes = a.segment_bytes;
    data.cleaner = broker::cleaner::CleanerConfig {
        enable: a.log_cleaner_enable,
        threads: a.log_cleaner_threads,
        dedupe_buffer_size: a.log_cleaner_dedupe_buffer_size,
        io_max_bytes_per_second: a.log_cleaner_io_max_bytes_per_second,
        backoff_ms: a.log_cleaner_backoff_ms,
    };
    data.retention.check_interval_ms = a.log_retention_check_interval_ms;
    data.group = GroupConfig {
        initial_rebalance_delay_ms: a.group_initial_rebalance_delay_ms,
        min_session_timeout_ms: a.group_min_session_timeout_ms,
        max_session_timeout_ms: a.group_max_session_timeout_ms,
        max_size: a.group_max_size,
        offsets_retention_ms: a.offsets_retention_minutes.saturating_mul(60_000),
        ..Default::default()
    };
    data
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches, Parser};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        node: NodeArgs,
    }

    /// Parses `ferry node ARGS` with `file` as its --config file.
    fn parse(args: &[&str], file: &str) -> anyhow::Result<NodeArgs> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("ferry.toml");
        std::fs::write(&path, file)?;
        let path = path.display().to_string();
        let argv = ["node", "--config", path.as_str()]
            .into_iter()
            .chain(args.iter().copied());
        let m = Cli::command().try_get_matches_from(argv)?;
        let mut a = Cli::from_arg_matches(&m)?.node;
        a.apply_config_file(&m)?;
        Ok(a)
    }

    const FILE: &str = r#"
# A broker-only node.
id = 7
data_dir = "/d"
listen = "127.0.0.1:9000"
roles = "broker"
quorum = "127.0.0.1:1,127.0.0.1:2"
log_dirs = ["/a", "/b"]
rack = "r1"
session_timeout_ms = 2000
heartbeat_ms = 10
segment_bytes = 1000
join = true
auto_leader_rebalance = false
metrics_listen = "127.0.0.1:9101"
max_partitions_per_topic = 5000
"#;

    #[test]
    fn flags_beat_variables_beat_the_file_beats_defaults() {
        // The only test that sets FERRY_* variables; the others do not look at these settings.
        std::env::set_var("FERRY_SESSION_TIMEOUT_MS", "3000");
        std::env::set_var("FERRY_HEARTBEAT_MS", "20");
        std::env::set_var("FERRY_LOG_DIRS", "/x,/y");
        let a = parse(&["--heartbeat-ms", "30", "--threads", "1"], FILE);
        std::env::remove_var("FERRY_SESSION_TIMEOUT_MS");
        std::env::remove_var("FERRY_HEARTBEAT_MS");
        std::env::remove_var("FERRY_LOG_DIRS");
        let a = a.unwrap();
        assert_eq!(a.heartbeat_ms, 30, "flag over variable and file");
        assert_eq!(a.session_timeout_ms, 3000, "variable over file");
        assert_eq!(
            a.log_dirs,
            vec![PathBuf::from("/x"), PathBuf::from("/y")],
            "variable over file"
        );
        assert_eq!(a.segment_bytes, 1000, "file over default");
        assert_eq!(a.threads, 1, "a flag equal to the default still beats the file");
        assert_eq!(a.election_min_ms, RaftTuning::default().election_min_ms, "default");
        assert_eq!(a.id, Some(7));
        assert_eq!(a.data_dir, Some(PathBuf::from("/d")));
        assert_eq!(a.listen, Some("127.0.0.1:9000".parse().unwrap()));
        assert_eq!(
            a.roles,
            Roles {
                quorum: false,
                broker: true
            }
        );
        assert_eq!(a.quorum, "127.0.0.1:1,127.0.0.1:2");
        assert_eq!(a.rack.as_deref(), Some("r1"));
        assert!(a.join);
        assert!(!a.auto_leader_rebalance);
        assert_eq!(a.metrics_listen, Some("127.0.0.1:9101".parse().unwrap()), "file");
        assert_eq!(a.max_partitions_per_topic, 5000, "file");
        assert_eq!(
            a.max_partitions_per_request,
            RequestLimits::default().max_partitions_per_request,
            "default"
        );
    }

    #[test]
    fn flags_alone_need_no_file() {
        let m = Cli::command()
            .try_get_matches_from(["node", "--id", "2", "--segment-bytes", "5", "--log-dirs", "/p,/q"])
            .unwrap();
        let mut a = Cli::from_arg_matches(&m).unwrap().node;
        a.apply_config_file(&m).unwrap();
        assert_eq!((a.id, a.segment_bytes), (Some(2), 5));
        assert_eq!(a.log_dirs.len(), 2);
        assert_eq!(a.leader_imbalance_check_interval_ms, 5000);
        assert_eq!(a.roles, "quorum,broker".parse().unwrap());
        let a = parse(&["--id", "3", "--roles", "quorum", "--rack", "r2"], FILE).unwrap();
        assert_eq!((a.id, a.rack.as_deref(), a.roles.broker), (Some(3), Some("r2"), false));
        assert_eq!(a.segment_bytes, 1000);
        assert_eq!(a.metrics_listen, Some("127.0.0.1:9101".parse().unwrap()));
        let a = parse(&["--metrics-listen", "127.0.0.1:9200"], FILE).unwrap();
        assert_eq!(
            a.metrics_listen,
            Some("127.0.0.1:9200".parse().unwrap()),
            "flag over file"
        );
        let m = Cli::command().try_get_matches_from(["node"]).unwrap();
        assert_eq!(
            Cli::from_arg_matches(&m).unwrap().node.metrics_listen,
            None,
            "off by default"
        );
    }

    #[test]
    fn group_settings_reach_the_broker_from_flags_and_default_to_kafkas() {
        let a = parse(
            &[
                "--group-initial-rebalance-delay-ms",
                "0",
                "--offsets-retention-minutes",
                "5",
            ],
            "",
        )
        .unwrap();
        let g = data_config(&a).group;
        assert_eq!((g.initial_rebalance_delay_ms, g.offsets_retention_ms), (0, 300_000));
        let d = data_config(&parse(&[], "").unwrap()).group;
        assert_eq!(
            (
                d.initial_rebalance_delay_ms,
                d.min_session_timeout_ms,
                d.max_session_timeout_ms
            ),
            (3000, 6000, 1_800_000)
        );
        assert_eq!(d.offsets_retention_ms, 10_080 * 60_000);
    }

    #[test]
    fn a_bad_file_is_an_error_naming_the_key_and_line() {
        let err = |file: &str| match parse(&[], file) {
            Ok(_) => panic!("{file:?} was accepted"),
            Err(e) => format!("{e:#}"),
        };
        let e = err("id = 1\nsesion_timeout_ms = 2000\n");
        assert!(e.contains("line 2: key `sesion_timeout_ms`: unknown field"), "{e}");
        let e = err("id = 1\n\nsession_timeout_ms = \"2s\"\n");
        assert!(
            e.contains("line 3: key `session_timeout_ms`: invalid type: string \"2s\""),
            "{e}"
        );
        let e = err("log_dirs = \"/a\"\n");
        assert!(e.contains("line 1: key `log_dirs`: invalid type"), "{e}");
        let e = err("id = -1\n");
        assert!(e.contains("line 1: key `id`: invalid value"), "{e}");
        let e = err("roles = \"quorum,brokers\"\n");
        assert!(e.contains("line 1: key `roles`: unknown role \"brokers\""), "{e}");
        let e = err("listen = \"localhost\"\n");
        assert!(e.contains("line 1: key `listen`:"), "{e}");
        let e = err("session-timeout-ms = 1\n");
        assert!(e.contains("key `session-timeout-ms`: unknown field"), "{e}");
        let e = err("id = 1\nid = 2\n");
        assert!(e.contains("line 2"), "{e}");
        let e = err("[node]\nid = 1\n");
        assert!(e.contains("line 1: key `node`: unknown field"), "{e}");
        // A wrong key is an error even when a flag gives the setting.
        assert!(parse(&["--id", "1"], "id = \"x\"\n").is_err());
        let e = match parse(&[], "") {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        };
        assert_eq!(e, "", "an empty file is fine");
        let missing = Cli::command()
            .try_get_matches_from(["node", "--config", "/nonexistent/ferry.toml"])
            .unwrap();
        let mut a = Cli::from_arg_matches(&missing).unwrap().node;
        assert!(a
            .apply_config_file(&missing)
            .unwrap_err()
            .to_string()
            .contains("/nonexistent/ferry.toml"));
    }

    #[test]
    fn a_missing_required_setting_names_its_three_sources() {
        assert_eq!(
            required::<u64>(None, "data-dir").unwrap_err().to_string(),
            "--data-dir is required (or FERRY_DATA_DIR, or `data_dir` in the --config file)"
        );
    }
}
