//! The fault suite's client process (see `tests::fault_client`). It runs where the suite puts it,
//! inside the clients' network namespace when there is one, so that it only reaches the nodes
//! through the test's own network.

use std::time::Duration;

use clap::{Parser, Subcommand};
use tests::fault_client::{self, Workload};

/// The fault suite's client.
#[derive(Parser)]
struct Args {
    /// The nodes, HOST:PORT,...
    #[arg(long, value_delimiter = ',', global = true)]
    endpoints: Vec<String>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Waits until the cluster takes a write.
    Ready {
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 60)]
        secs: u64,
    },
    /// Runs the register workload and writes its history as JSON lines to `out`.
    Workload {
        #[arg(long, default_value_t = 5)]
        clients: u32,
        #[arg(long, default_value_t = 4)]
        keys: u32,
        /// Seconds during which clients start operations.
        #[arg(long)]
        secs: f64,
        #[arg(long, default_value_t = 1000)]
        attempt_timeout_ms: u64,
        #[arg(long, default_value_t = 5000)]
        op_timeout_ms: u64,
        #[arg(long, default_value_t = 10)]
        think_ms: u64,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Serializable (possibly stale) reads, to see the checker catch them.
        #[arg(long)]
        serializable_reads: bool,
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Prints each answering node's status as a JSON line.
    Probe {
        #[arg(long, default_value_t = 500)]
        timeout_ms: u64,
    },
    /// Writes the end state (see `fault_client::final_state`) as JSON to `out`.
    Final {
        #[arg(long, default_value_t = 4)]
        keys: u32,
        /// Give up the closing write and the catching up after this many seconds.
        #[arg(long, default_value_t = 60)]
        secs: u64,
        /// Give up the closing linearizable reads after this many seconds.
        #[arg(long, default_value_t = 60)]
        read_secs: u64,
        #[arg(long)]
        out: std::path::PathBuf,
    },
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let endpoints = args.endpoints;
    anyhow::ensure!(!endpoints.is_empty(), "--endpoints is required");
    match args.cmd {
        Cmd::Ready { secs } => fault_client::wait_ready(&endpoints, Duration::from_secs(secs)).await?,
        Cmd::Workload {
            clients,
            keys,
            secs,
            attempt_timeout_ms,
            op_timeout_ms,
            think_ms,
            seed,
            serializable_reads,
            out,
        } => {
            let w = Workload {
                endpoints,
                clients,
                keys,
                duration: Duration::from_secs_f64(secs),
                attempt_timeout: Duration::from_millis(attempt_timeout_ms),
                op_timeout: Duration::from_millis(op_timeout_ms),
                think: Duration::from_millis(think_ms),
                serializable_reads,
                seed,
            };
            let ops = fault_client::run_workload(&w).await?;
            std::fs::write(&out, tests::history::to_json_lines(&ops))?;
        }
        Cmd::Probe { timeout_ms } => {
            for v in fault_client::probe(&endpoints, Duration::from_millis(timeout_ms)).await? {
                println!("{}", serde_json::to_string(&v)?);
            }
        }
        Cmd::Final {
            keys,
            secs,
            read_secs,
            out,
        } => {
            let (within, reads) = (Duration::from_secs(secs), Duration::from_secs(read_secs));
            let state = fault_client::final_state(&endpoints, keys, within, reads).await?;
            std::fs::write(&out, serde_json::to_string(&state)?)?;
        }
    }
    Ok(())
}
