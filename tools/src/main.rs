//! `ferry`: runs nodes and a local dev cluster, and talks to the metastore.

mod certs;
mod cluster_node;
mod command_config;
mod config_file;
mod console;
mod coordinators;
mod data;
mod dev;
mod dev_secure;
mod group_consume;
mod group_plan;
mod kafka_client;
mod kv;
mod listener_config;
mod listeners;
mod log_dirs;
mod members;
mod metrics_http;
mod migrate_zk;
mod node_args;
mod node_cmd;
mod plan_cmd;
mod plan_text;
mod plan_watch;
mod reassign;
mod reassign_file;
mod reassign_progress;
mod security_args;
mod throttles;
mod topics;
mod users_cmd;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

// The metastore and controller allocate many small objects per key (a 100,000-partition request
// holds hundreds of thousands); mimalloc serves that faster than the system allocator.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Ferry moves Kafka-style partition replicas between brokers and disks, with its coordination
/// state in an embedded Raft quorum.
#[derive(Parser)]
#[command(name = "ferry", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one node: a quorum member, a broker, or both (--roles).
    Node(Box<node_cmd::NodeArgs>),
    /// Run a local cluster in this process (3 nodes unless --nodes/--brokers), with data in ./ferry-dev.
    Dev(dev::DevArgs),
    /// Read and write the metastore's keys.
    Kv(kv::KvArgs),
    /// Administer the metastore.
    Metastore(members::MetastoreArgs),
    /// Create, delete, describe, list and alter topics (like kafka-topics.sh).
    Topics(topics::TopicsArgs),
    /// Send lines from stdin as records, one record per line.
    Produce(data::ProduceArgs),
    /// Print records, one per line.
    Consume(data::ConsumeArgs),
    /// Move partition replicas (like kafka-reassign-partitions.sh).
    Reassign(reassign::ReassignArgs),
    /// Import a Kafka cluster's metadata from ZooKeeper, in-flight reassignments included.
    MigrateZk(migrate_zk::MigrateZkArgs),
    /// Describe brokers' log dirs and move replicas between them (like kafka-log-dirs.sh).
    LogDirs(log_dirs::LogDirsArgs),
    /// Set or remove replication throttles by hand, kept or removed after the moves they cover.
    Throttles(throttles::ThrottlesArgs),
    /// Plans the controller writes and runs: drain, balance, balance-dirs, undrain, show, pause, resume, cancel.
    Plan(plan_cmd::PlanArgs),
    /// Users' SCRAM credentials, for Kafka clients' SASL logins.
    Users(users_cmd::UsersArgs),
    /// Write a throwaway CA and certificates for a local TLS listener (not for production).
    Certs(certs::CertsArgs),
}

fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Turns transparent huge pages off for this process. mimalloc asks for them and returns freed
/// memory to the kernel, so every later touch of such a region faults in and zeroes 2 MiB: about
/// 7% of a metastore node's CPU under a put load. Without them, 7-10% more puts per second.
fn no_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and touches no memory of ours; a failure
    // (an old kernel) only leaves huge pages on.
    let _ = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

/// mimalloc's `mi_option_purge_delay`: its place in `mi_option_t` (mimalloc.h, v2 and v3 alike).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps memory the process freed for its own reuse instead of returning it to the kernel after
/// a second (mimalloc's default). A 1,000,000-partition submit applies for tens of seconds on
/// each node, and memory returned meanwhile was faulted in and zeroed again: that zeroing took
/// 40% of the applying thread's time; kept, the submit takes about half as long, for a higher
/// peak RSS. `MIMALLOC_PURGE_DELAY` in the environment still wins.
fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one integer option of the allocator; any value is valid, and -1 means
        // never purge.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    }
}

fn main() {
    no_huge_pages();
    keep_freed_memory();
    let matches = Cli::command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut Cli::command()).exit());
    // `ferry node --config FILE` fills what no flag or FERRY_* variable gave, before the runtime
    // is built: the file may set the worker threads.
    if let (Command::Node(a), Some(m)) = (&mut cli.command, matches.subcommand_matches("node")) {
        if let Err(e) = a.apply_config_file(m) {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
    // A node's tasks talk to each other constantly; on one thread that costs no cross-thread
    // wake-ups (futex calls), which dominated a node's CPU time on a 2-core machine.
    let threads = match &cli.command {
        Command::Node(a) => a.threads,
        _ => 0,
    };
    let runtime = if threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        if threads > 1 {
            b.worker_threads(threads);
        }
        b.enable_all().build()
    };
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    runtime.block_on(run(cli));
    // The node has stopped its roles: a blocking task still in a loop (a log being cleaned, a
    // copy) must not keep the process alive, so it gets a short grace and then the process ends.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
}

async fn run(cli: Cli) {
    let result = match cli.command {
        Command::Node(a) => {
            init_tracing("info,openraft=warn,sled=warn");
            node_cmd::run(*a).await
        }
        Command::Dev(a) => {
            // Peers refuse connections while the nodes start; openraft logs that loudly.
            init_tracing("warn,openraft=off");
            dev::run(a).await
        }
        Command::Kv(a) => {
            init_tracing("warn");
            kv::run(a).await
        }
        Command::Metastore(a) => {
            init_tracing("warn");
            members::run(a).await
        }
        Command::Topics(a) => {
            init_tracing("warn");
            topics::run(a).await
        }
        Command::Produce(a) => {
            init_tracing("warn");
            data::produce(a).await
        }
        Command::Consume(a) => {
            init_tracing("warn");
            data::consume(a).await
        }
        Command::Reassign(a) => {
            init_tracing("warn");
            reassign::run(a).await
        }
        Command::MigrateZk(a) => {
            init_tracing("warn");
            migrate_zk::run(a).await
        }
        Command::LogDirs(a) => {
            init_tracing("warn");
            log_dirs::run(a).await
        }
        Command::Throttles(a) => {
            init_tracing("warn");
            throttles::run(a).await
        }
        Command::Plan(a) => {
            init_tracing("warn");
            plan_cmd::run(a).await
        }
        Command::Users(a) => {
            init_tracing("warn");
            users_cmd::run(a).await
        }
        Command::Certs(a) => certs::run(a),
    };
    if let Err(e) = result {
        match e.downcast_ref::<ExitCode>() {
            // The command already said what went wrong.
            Some(code) => std::process::exit(code.0),
            None => {
                eprintln!("error: {e:#}");
                if let Some(hint) = tls_hint(&format!("{e:#}")) {
                    eprintln!("hint: {hint}");
                }
                std::process::exit(1);
            }
        }
    }
}

/// What to try when a call failed the way a TLS port answers a plaintext caller (its first bytes
/// are a TLS alert, not HTTP/2), or a certificate was refused.
fn tls_hint(error: &str) -> Option<&'static str> {
    let plaintext = metastore::grpc_tls::client().is_none();
    if plaintext && error.contains("http2 error") {
        Some(
            "if the node's gRPC port uses TLS, give --command-config with security.protocol=SSL (or \
             SASL_SSL) and ssl.truststore.location",
        )
    } else if error.contains("certificate") {
        Some("check ssl.truststore.location (the CA of the node's certificate) and ssl.keystore.location")
    } else {
        None
    }
}

/// An error that asks for a particular exit code.
#[derive(Debug, thiserror::Error)]
#[error("exit code {0}")]
pub struct ExitCode(pub i32);

/// Waits for Ctrl-C or SIGTERM.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    // Handlers are installed here, not at the first poll: a caller that prints "ready" between
    // the two must not be killed by a SIGTERM sent on seeing it.
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let term = signal(SignalKind::terminate());
        let int = signal(SignalKind::interrupt());
        async move {
            match (term, int) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => {},
                        _ = int.recv() => {},
                    }
                }
                // Outside a runtime (not reached): fall back to Ctrl-C alone.
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The `--bootstrap-server` flag of the client commands.
#[derive(clap::Args)]
pub struct Bootstrap {
    /// Any metastore node(s), HOST:PORT[,HOST:PORT...].
    #[arg(
        long = "bootstrap-server",
        global = true,
        env = "FERRY_BOOTSTRAP_SERVER",
        default_value = "127.0.0.1:7701"
    )]
    servers: String,
    /// The cluster credential (the file `cluster-credential` in a quorum node's data dir): lets
    /// `ferry kv` and `ferry migrate-zk` write the keys the cluster writes itself, for repairs.
    #[arg(long, global = true, env = "FERRY_CLUSTER_CREDENTIAL_FILE")]
    cluster_credential_file: Option<std::path::PathBuf>,
    /// A Kafka client config (`client.properties`): its `sasl.jaas.config` user and password
    /// log the admin commands in, on a cluster that runs the authorizer; with
    /// `security.protocol` SSL or SASL_SSL they reach the cluster over TLS.
    #[arg(long, global = true, env = "FERRY_COMMAND_CONFIG")]
    command_config: Option<std::path::PathBuf>,
    /// Reach the gRPC port in plaintext even when `--command-config` says SSL or SASL_SSL (a
    /// cluster whose Kafka listeners use TLS and whose gRPC port does not).
    #[arg(long, global = true, env = "FERRY_GRPC_PLAINTEXT")]
    grpc_plaintext: bool,
}

impl Bootstrap {
    pub fn endpoints(&self) -> Vec<String> {
        self.servers
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(String::from)
            .collect()
    }

    /// Reaches the gRPC ports over TLS when `--command-config` asks for it (before any channel
    /// is made: each takes the process's setting when it is).
    fn use_tls(&self) -> anyhow::Result<()> {
        if let Some(path) = self.command_config.as_ref().filter(|_| !self.grpc_plaintext) {
            if let Some(files) = command_config::read_tls(path)? {
                metastore::grpc_tls::set_client(Some(files));
            }
        }
        Ok(())
    }

    /// A metastore client of the named nodes.
    pub fn client(&self) -> anyhow::Result<metastore::Client> {
        self.use_tls()?;
        let c = metastore::Client::new(&self.endpoints())?;
        if let Some(path) = &self.cluster_credential_file {
            c.set_credential_file(path)?;
        }
        Ok(c)
    }

    /// A data and admin client of the named quorum nodes, calling as the cluster (with the
    /// credential file) or as the `--command-config` user.
    pub fn cluster(&self) -> anyhow::Result<broker::ClusterClient> {
        use broker::auth::call_identity::CallIdentity;
        self.use_tls()?;
        let identity = match (&self.cluster_credential_file, &self.command_config) {
            (Some(_), _) => CallIdentity::credential(self.client()?.credential_interceptor()),
            (None, Some(path)) => match command_config::read_user(path)? {
                Some((user, password)) => {
                    CallIdentity::user(&user, &password).map_err(|e| anyhow::anyhow!("--command-config: {e}"))?
                }
                None => CallIdentity::default(),
            },
            (None, None) => CallIdentity::default(),
        };
        Ok(broker::ClusterClient::new(&self.endpoints())?.with_identity(identity))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // mimalloc v3's default purge delay is 1,000 ms, and no option next to it defaults to
        // that: reading 1,000 at the index proves it names the purge delay.
        // SAFETY: reads one integer option.
        let default = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(default, 1000);
        keep_freed_memory();
        // SAFETY: as above.
        assert_eq!(unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) }, -1);
    }
}
