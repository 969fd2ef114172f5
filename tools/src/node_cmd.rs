//! `ferry node`: one node (quorum member, broker, or both) as its own process.

use broker::coordinator::group::GroupConfig;
use std::collections::BTreeMap;

use anyhow::{bail, Context};
use controller::limits::RequestLimits;
use metastore::RaftTuning;

use crate::cluster_node::{self, NodeOptions};

pub use crate::node_args::NodeArgs;

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
    if let Some(m) = node.http_url() {
        println!("  metrics: {m}/metrics");
        println!("  console: {m}/");
    }
    stop.await;
    node.shutdown().await;
    Ok(())
}

/// The node's options from its settings, refusing a node that lacks one it needs.
fn node_options(a: NodeArgs) -> anyhow::Result<NodeOptions> {
    // A config file's values skip the flags' own range checks.
    if !(1..=10_000).contains(&a.offsets_topic_num_partitions) {
        bail!(
            "--offsets-topic-num-partitions: {} is not from 1 to 10000",
            a.offsets_topic_num_partitions
        );
    }
    if a.offsets_topic_replication_factor < 1 {
        bail!(
            "--offsets-topic-replication-factor: {} is below 1",
            a.offsets_topic_replication_factor
        );
    }
    let kafka_listeners = kafka_listeners(&a)?;
    let mut data = data_config(&a);
    data.static_configs = static_broker_configs(&a.broker_config)?;
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
    let grpc_tls = a.grpc_tls.files()?;
    let http_tls = a.http_tls.files(grpc_tls.as_ref())?;
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
            plan_metrics: Default::default(),
        },
        limits: RequestLimits {
            max_partitions_per_topic: a.max_partitions_per_topic,
            max_partitions_per_request: a.max_partitions_per_request,
            max_replicas_per_partition: a.max_replicas_per_partition,
            max_items_per_request: a.max_items_per_request,
            max_request_bytes: a.socket_request_max_bytes,
        },
        http_listen: match a.http_listen {
            Some(l) => Some(l),
            // The variable's old name, read when no other source gives the address.
            None => match std::env::var("FERRY_METRICS_LISTEN") {
                Ok(v) => Some(
                    v.parse()
                        .with_context(|| format!("FERRY_METRICS_LISTEN: {v:?} is not HOST:PORT"))?,
                ),
                Err(_) => None,
            },
        },
        credential_file: a.cluster_credential_file,
        kafka_security: a.security.settings(&kafka_listeners)?,
        kafka_listeners,
        grpc_tls,
        http_tls,
    })
}

/// The Kafka listeners: --listeners with its advertised addresses and protocols, or the one
/// of --kafka-listen, or none.
fn kafka_listeners(a: &NodeArgs) -> anyhow::Result<Vec<crate::listeners::ListenerSpec>> {
    match (&a.listeners, a.kafka_listen) {
        (Some(_), Some(_)) => bail!("--kafka-listen: give either it or --listeners"),
        (Some(l), None) => crate::listeners::parse(
            l,
            a.advertised_listeners.as_deref(),
            a.listener_security_protocol_map.as_deref(),
        )
        .map_err(anyhow::Error::msg),
        (None, _) if a.advertised_listeners.is_some() => bail!("--advertised-listeners: needs --listeners"),
        (None, _) if a.listener_security_protocol_map.is_some() => {
            bail!("--listener-security-protocol-map: needs --listeners")
        }
        (None, Some(bind)) => Ok(vec![crate::listeners::single(
            bind,
            a.kafka_advertised_listener.clone(),
            a.security.protocol()?,
        )]),
        (None, None) => Ok(Vec::new()),
    }
}

/// The `--broker-config KEY=VALUE` settings, checked as a dynamic change of them is.
fn static_broker_configs(given: &[String]) -> anyhow::Result<std::collections::HashMap<String, String>> {
    let mut out = std::collections::HashMap::new();
    for kv in given {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("--broker-config: {kv:?} is not KEY=VALUE");
        };
        if out.insert(k.trim().to_string(), v.trim().to_string()).is_some() {
            bail!("--broker-config: {k} is given twice");
        }
    }
    proto::topic_config::validate_broker(&out).map_err(|e| anyhow::anyhow!("--broker-config: {e}"))?;
    Ok(out)
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
        offsets_topic_num_partitions: a.offsets_topic_num_partitions,
        offsets_topic_replication_factor: a.offsets_topic_replication_factor,
        ..Default::default()
    };
    data
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_node::Roles;
    use clap::{CommandFactory, FromArgMatches, Parser};
    use std::path::PathBuf;

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
        assert_eq!(a.http_listen, Some("127.0.0.1:9101".parse().unwrap()), "file");
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
        assert_eq!(a.http_listen, Some("127.0.0.1:9101".parse().unwrap()), "the old key");
        let a = parse(&["--metrics-listen", "127.0.0.1:9200"], FILE).unwrap();
        assert_eq!(
            a.http_listen,
            Some("127.0.0.1:9200".parse().unwrap()),
            "the old flag, over the file"
        );
        let a = parse(
            &["--http-listen", "127.0.0.1:9300"],
            "http_listen = \"127.0.0.1:9301\"\n",
        )
        .unwrap();
        assert_eq!(a.http_listen, Some("127.0.0.1:9300".parse().unwrap()), "flag over file");
        let a = parse(&[], "http_listen = \"127.0.0.1:9301\"\n").unwrap();
        assert_eq!(a.http_listen, Some("127.0.0.1:9301".parse().unwrap()), "file");
        let m = Cli::command().try_get_matches_from(["node"]).unwrap();
        assert_eq!(
            Cli::from_arg_matches(&m).unwrap().node.http_listen,
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

    #[test]
    fn static_broker_configs_are_checked_by_name_and_value() {
        let given = |v: &[&str]| static_broker_configs(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let ok = given(&["cordoned.log.dirs=*", "leader.replication.throttled.rate=100"]).unwrap();
        assert_eq!(ok["cordoned.log.dirs"], "*");
        assert!(given(&["log.dirs=/x"]).unwrap_err().to_string().contains("log.dirs"));
        assert!(given(&["cordoned.log.dirs"])
            .unwrap_err()
            .to_string()
            .contains("KEY=VALUE"));
        assert!(given(&["leader.replication.throttled.rate=0"]).is_err());
    }
}
