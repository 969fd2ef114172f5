//! `ferry-bench`'s flags, stores and workloads.

use clap::{Parser, ValueEnum};

/// Drive a metastore with a fixed workload and report throughput and latency.
#[derive(Parser, Clone)]
#[command(name = "ferry-bench")]
pub struct Args {
    /// Store to drive.
    #[arg(long, value_enum, default_value_t = BackendKind::Ferry)]
    pub backend: BackendKind,
    /// The store's members, HOST:PORT[,HOST:PORT...]; clients are spread over them.
    #[arg(long)]
    pub endpoints: String,
    /// Workloads to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "put,txn10,get")]
    pub workload: Vec<Workload>,
    /// Concurrent clients, comma-separated list; each workload runs once per value.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    pub clients: Vec<usize>,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Unmeasured seconds before each run.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Seed for key choice.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Keys the workloads spread over.
    #[arg(long, default_value_t = 10_000)]
    pub keys: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 256)]
    pub value_size: usize,
    /// The keys were written before (by `ferry-kv-load`): skip writing them again.
    #[arg(long)]
    pub preloaded: bool,
    /// Largest N tried by the bigvalue search.
    #[arg(long, default_value_t = 1_000_000)]
    pub max_partitions: usize,
    /// Print JSON lines only (no table).
    #[arg(long)]
    pub json: bool,
    /// Server process ids; their CPU time over each run is reported per operation.
    #[arg(long, value_delimiter = ',')]
    pub server_pids: Vec<u32>,
    /// produce: the topic, which must exist (`ferry topics --create`).
    #[arg(long, default_value = "ferry-bench")]
    pub topic: String,
    /// produce: spread the requests over partitions 0..N (default: all of the topic's).
    #[arg(long)]
    pub partitions: Option<u32>,
    /// produce: acks, comma-separated list of all, 1, 0; the workload runs once per value.
    #[arg(long, value_delimiter = ',', default_value = "all", value_parser = parse_acks)]
    pub acks: Vec<i32>,
    /// produce: bytes per record.
    #[arg(long, default_value_t = 1024)]
    pub record_bytes: usize,
    /// produce: records per produce request (an operation is one request).
    #[arg(long, default_value_t = 100)]
    pub batch_records: usize,
}

/// Parses one value of `--acks`; `all` is -1.
fn parse_acks(s: &str) -> Result<i32, String> {
    match s.trim() {
        "all" | "-1" => Ok(-1),
        "1" => Ok(1),
        "0" => Ok(0),
        other => Err(format!("{other:?} is not one of all, 1, 0")),
    }
}

/// The stores ferry-bench can drive.
#[derive(Clone, Copy, ValueEnum, PartialEq, Debug)]
pub enum BackendKind {
    /// Ferry's metastore, through its client library.
    Ferry,
    /// ZooKeeper, through zookeeper-client.
    Zookeeper,
    /// etcd, through etcd-client (build with `--features etcd`).
    Etcd,
}

/// What each run sends.
#[derive(Clone, Copy, ValueEnum, PartialEq, Debug)]
pub enum Workload {
    /// One key per request.
    Put,
    /// One atomic update of 10 keys.
    Txn10,
    /// Linearizable reads.
    Get,
    /// The largest Kafka-style reassignment one atomic request can write.
    Bigvalue,
    /// Batches of records to the brokers' partition leaders (Ferry only).
    Produce,
}

impl Workload {
    /// Whether the workload reads or writes the preloaded keys.
    pub fn uses_keys(self) -> bool {
        matches!(self, Workload::Put | Workload::Txn10 | Workload::Get)
    }
}
