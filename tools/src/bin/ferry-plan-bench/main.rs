//! Plan-driven drains, measured: on a fresh 4-broker cluster of `ferry node` processes per
//! variant (data in real files), broker 4 is drained by a plan uncapped, capped, and capped with
//! a throttle, and by the same moves submitted at once with AlterPartitionReassignments. Each
//! drain's wall time is set against the disk's own figure (`cp -r` of broker 4's log dir plus
//! `sync`) and, throttled, against the throttle's ideal; a steady acks=all producer to a topic
//! on broker 4 and others gives its p50/p99/max idle and during each drain. With
//! `--scale-partitions`, a plan of that many empty partitions: the time to store it, its stored
//! size, the memory of a queued move, the time until done and the controller's CPU meanwhile.

mod cluster;
mod drain;
mod load;
mod producer;
mod report;
mod scale;
mod variant;

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

use crate::drain::Variant;

/// Broker 4's bytes by default, spread over `--partitions`.
const DEFAULT_BROKER_BYTES: u64 = 256 << 20;

/// Flags of the benchmark.
#[derive(Parser, Debug, Clone)]
pub struct Args {
    /// The `ferry` binary the nodes run [default: `ferry` beside this program].
    #[arg(long)]
    ferry_bin: Option<PathBuf>,
    /// Where the clusters keep their data; each cluster's folder is removed after its run
    /// [default: a new folder in the system's temp dir].
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Keep each cluster's data and node logs.
    #[arg(long)]
    keep: bool,
    /// Partitions of the data topic, each with a replica on broker 4.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    partitions: u32,
    /// Bytes written to each data partition [default: 256 MiB over --partitions].
    #[arg(long)]
    partition_bytes: Option<u64>,
    /// Replication factor of the data topic.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(2..=3))]
    replication_factor: u32,
    /// The drains to run, each on a fresh cluster.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "uncapped,capped,throttled,bulk"
    )]
    variants: Vec<Variant>,
    /// Run no drain (only the scale run, with --scale-partitions).
    #[arg(long)]
    no_drains: bool,
    /// Moves into and out of each broker at once in the capped drains.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(i64).range(1..=100_000))]
    cap: i64,
    /// The throttled drain's replication throttle, bytes/s.
    #[arg(long, default_value_t = 4_000_000, value_parser = clap::value_parser!(i64).range(1..))]
    throttle: i64,
    /// Records/s of the steady producer.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    rate: u32,
    /// Bytes of each produced record.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    record_bytes: u64,
    /// Seconds the producer runs before each drain (the idle figures).
    #[arg(long, default_value_t = 10.0)]
    idle_seconds: f64,
    /// Give up on a load, a drain or the scale plan after this many seconds.
    #[arg(long, default_value_t = 900)]
    timeout_s: u64,
    /// Empty partitions of the scale run, each with its one replica on broker 4 (0 skips it).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    scale_partitions: u32,
    /// Also print a JSON line per figure.
    #[arg(long)]
    json: bool,
}

impl Args {
    /// Bytes of each data partition.
    pub fn partition_bytes(&self) -> u64 {
        self.partition_bytes
            .unwrap_or(DEFAULT_BROKER_BYTES / u64::from(self.partitions.max(1)))
    }

    /// Bytes of each produced record.
    pub fn record_bytes(&self) -> usize {
        self.record_bytes as usize
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let ferry = match &a.ferry_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("ferry"),
    };
    if !ferry.exists() {
        anyhow::bail!(
            "{} not found: build it (cargo build --release --bin ferry) or give --ferry-bin",
            ferry.display()
        );
    }
    let work = a
        .work_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("ferry-plan-bench-{}", std::process::id())));
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let work = work.canonicalize()?;
    println!(
        "ferry-plan-bench: {} partitions x {} bytes, replication factor {}, cap {}, throttle {} B/s, producer {} x {} B/s",
        a.partitions,
        a.partition_bytes(),
        a.replication_factor,
        a.cap,
        a.throttle,
        a.rate,
        a.record_bytes
    );
    let mut outcomes = Vec::new();
    let mut disk = None;
    let variants = if a.no_drains { &[][..] } else { &a.variants[..] };
    for v in variants {
        let (o, d) = variant::run(&a, &ferry, &work.join(v.name()), *v, disk.is_none()).await?;
        disk = disk.or(d);
        outcomes.push(o);
    }
    if !outcomes.is_empty() {
        report::drains(&outcomes, disk, a.json);
    }
    if a.scale_partitions > 0 {
        let s = scale::run(&a, &ferry, &work.join("scale")).await?;
        report::scale(&s, a.json);
    }
    if !a.keep && a.work_dir.is_none() {
        std::fs::remove_dir_all(&work)?;
    }
    Ok(())
}
