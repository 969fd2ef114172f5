//! `ferry-bench`: a load generator for the metastore, with one backend trait so that other
//! stores (etcd, ZooKeeper) can be driven by the same workloads.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use hdrhistogram::Histogram;
use metastore::Client;
use proto::metastore as pb;
use rand::{Rng, SeedableRng};

/// Drive a metastore with a fixed workload and report throughput and latency.
#[derive(Parser, Clone)]
#[command(name = "ferry-bench")]
struct Args {
    /// Store to drive.
    #[arg(long, value_enum, default_value_t = BackendKind::Ferry)]
    backend: BackendKind,
    /// The store's members, HOST:PORT[,HOST:PORT...]; clients are spread over them.
    #[arg(long)]
    endpoints: String,
    /// Workloads to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "put,txn10,get")]
    workload: Vec<Workload>,
    /// Concurrent clients, comma-separated list; each workload runs once per value.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    clients: Vec<usize>,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Unmeasured seconds before each run.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Seed for key choice.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Keys the workloads spread over.
    #[arg(long, default_value_t = 10_000)]
    keys: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 256)]
    value_size: usize,
    /// Largest N tried by the bigvalue search.
    #[arg(long, default_value_t = 1_000_000)]
    max_partitions: usize,
    /// Print JSON lines only (no table).
    #[arg(long)]
    json: bool,
    /// Server process ids; their CPU time over each run is reported per operation.
    #[arg(long, value_delimiter = ',')]
    server_pids: Vec<u32>,
}

/// CPU seconds (user + system) that the given processes have used, from /proc.
fn cpu_seconds(pids: &[u32]) -> Option<f64> {
    if pids.is_empty() {
        return None;
    }
    let ticks = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<f64>().ok())
        .unwrap_or(100.0);
    let mut total = 0.0;
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command name, which is in parentheses and may hold spaces.
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let utime: f64 = f.get(11)?.parse().ok()?;
        let stime: f64 = f.get(12)?.parse().ok()?;
        total += (utime + stime) / ticks;
    }
    Some(total)
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Debug)]
enum BackendKind {
    /// Ferry's metastore, through its client library.
    Ferry,
    /// ZooKeeper, through zookeeper-client.
    Zookeeper,
    /// etcd, through etcd-client (build with `--features etcd`).
    Etcd,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Debug)]
enum Workload {
    /// One key per request.
    Put,
    /// One atomic update of 10 keys.
    Txn10,
    /// Linearizable reads.
    Get,
    /// The largest Kafka-style reassignment one atomic request can write.
    Bigvalue,
}

/// What every store offers the workloads. One value per client connection.
trait Backend: Send + Sync + Sized + 'static {
    /// Connects client number `i` (spread over the members).
    fn connect(endpoints: &[String], i: usize) -> impl Future<Output = anyhow::Result<Self>> + Send;
    /// Writes one key.
    fn put(&self, key: &str, value: Bytes) -> impl Future<Output = anyhow::Result<()>> + Send;
    /// Writes several keys atomically.
    fn put_all(&self, kvs: Vec<(String, Bytes)>) -> impl Future<Output = anyhow::Result<()>> + Send;
    /// Reads one key linearizably.
    fn get(&self, key: &str) -> impl Future<Output = anyhow::Result<()>> + Send;
    /// Creates the keys the workloads use, with `value`.
    fn preload(&self, keys: &[String], value: Bytes) -> impl Future<Output = anyhow::Result<()>> + Send;
    /// Writes a Kafka-style reassignment of `n` partitions in one atomic request.
    fn write_reassignment(&self, n: usize, round: usize) -> impl Future<Output = anyhow::Result<()>> + Send;
}

/// Writes the keys with `value` in transactions of `per_txn` keys.
async fn preload_in_txns<B: Backend>(b: &B, keys: &[String], value: Bytes, per_txn: usize) -> anyhow::Result<()> {
    for chunk in keys.chunks(per_txn) {
        b.put_all(chunk.iter().map(|k| (k.clone(), value.clone())).collect())
            .await?;
    }
    Ok(())
}

/// The reassignment JSON a ZooKeeper-era controller keeps in one value.
fn reassignment_json(n: usize) -> Vec<u8> {
    let mut out = String::from("{\"version\":1,\"partitions\":[");
    for p in 0..n {
        if p > 0 {
            out.push(',');
        }
        out.push_str(std::str::from_utf8(&reassignment_value(p)).unwrap_or_default());
    }
    out.push_str("]}");
    out.into_bytes()
}

struct FerryBackend {
    client: Client,
}

impl Backend for FerryBackend {
    async fn connect(endpoints: &[String], i: usize) -> anyhow::Result<Self> {
        Ok(Self {
            client: Client::new(endpoints)?.starting_at(i),
        })
    }

    async fn put(&self, key: &str, value: Bytes) -> anyhow::Result<()> {
        self.client.put(key, value).await?;
        Ok(())
    }

    async fn put_all(&self, kvs: Vec<(String, Bytes)>) -> anyhow::Result<()> {
        let ops = kvs
            .into_iter()
            .map(|(key, value)| pb::Op {
                op: Some(pb::op::Op::Put(pb::PutOp { key, value, lease: 0 })),
            })
            .collect();
        let r = self
            .client
            .txn(pb::TxnRequest {
                guards: vec![],
                ops,
                request_id: String::new(),
            })
            .await?;
        if !r.succeeded {
            bail!("transaction failed: {}", r.failed_reason);
        }
        Ok(())
    }

    async fn get(&self, key: &str) -> anyhow::Result<()> {
        self.client.get(key).await?;
        Ok(())
    }

    async fn preload(&self, keys: &[String], value: Bytes) -> anyhow::Result<()> {
        preload_in_txns(self, keys, value, 1000).await
    }

    async fn write_reassignment(&self, n: usize, round: usize) -> anyhow::Result<()> {
        // One key per partition, as the controller stores it.
        let kvs = (0..n)
            .map(|p| {
                (
                    format!("/bench/reassign/{round}/topic-{}/{p}", p / 1000),
                    reassignment_value(p),
                )
            })
            .collect();
        self.put_all(kvs).await
    }
}

struct ZkBackend {
    client: zookeeper_client::Client,
}

impl Backend for ZkBackend {
    async fn connect(endpoints: &[String], i: usize) -> anyhow::Result<Self> {
        let member = &endpoints[i % endpoints.len()];
        Ok(Self {
            client: zookeeper_client::Client::connect(member).await?,
        })
    }

    async fn put(&self, key: &str, value: Bytes) -> anyhow::Result<()> {
        self.client.set_data(key, &value, None).await?;
        Ok(())
    }

    async fn put_all(&self, kvs: Vec<(String, Bytes)>) -> anyhow::Result<()> {
        let mut w = self.client.new_multi_writer();
        for (k, v) in &kvs {
            w.add_set_data(k, v, None)?;
        }
        w.commit().await?;
        Ok(())
    }

    async fn get(&self, key: &str) -> anyhow::Result<()> {
        self.client.sync(key).await?;
        self.client.get_data(key).await?;
        Ok(())
    }

    async fn preload(&self, keys: &[String], value: Bytes) -> anyhow::Result<()> {
        let opts = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
        for parent in ["/bench", "/admin"] {
            match self.client.create(parent, &[], &opts).await {
                Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
                Err(e) => return Err(e.into()),
            }
        }
        for k in keys {
            match self.client.create(k, &value, &opts).await {
                Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    async fn write_reassignment(&self, n: usize, _round: usize) -> anyhow::Result<()> {
        let path = "/admin/reassign_partitions";
        let data = reassignment_json(n);
        let opts = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
        match self.client.set_data(path, &data, None).await {
            Ok(_) => Ok(()),
            Err(zookeeper_client::Error::NoNode) => {
                self.client.create(path, &data, &opts).await?;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(feature = "etcd")]
struct EtcdBackend {
    client: etcd_client::Client,
}

#[cfg(feature = "etcd")]
impl Backend for EtcdBackend {
    async fn connect(endpoints: &[String], i: usize) -> anyhow::Result<Self> {
        let member = endpoints[i % endpoints.len()].clone();
        Ok(Self {
            client: etcd_client::Client::connect([member], None).await?,
        })
    }

    async fn put(&self, key: &str, value: Bytes) -> anyhow::Result<()> {
        self.client.kv_client().put(key, value.to_vec(), None).await?;
        Ok(())
    }

    async fn put_all(&self, kvs: Vec<(String, Bytes)>) -> anyhow::Result<()> {
        let ops: Vec<etcd_client::TxnOp> = kvs
            .into_iter()
            .map(|(k, v)| etcd_client::TxnOp::put(k, v.to_vec(), None))
            .collect();
        self.client
            .kv_client()
            .txn(etcd_client::Txn::new().and_then(ops))
            .await?;
        Ok(())
    }

    async fn get(&self, key: &str) -> anyhow::Result<()> {
        self.client.kv_client().get(key, None).await?;
        Ok(())
    }

    async fn preload(&self, keys: &[String], value: Bytes) -> anyhow::Result<()> {
        // etcd refuses transactions of more than 128 operations by default.
        preload_in_txns(self, keys, value, 100).await
    }

    async fn write_reassignment(&self, n: usize, _round: usize) -> anyhow::Result<()> {
        self.client
            .kv_client()
            .put("/admin/reassign_partitions", reassignment_json(n), None)
            .await?;
        Ok(())
    }
}

fn key(i: usize) -> String {
    format!("/bench/k{i:07}")
}

/// One measured run.
struct Report {
    workload: Workload,
    clients: usize,
    ops: u64,
    errors: u64,
    secs: f64,
    hist: Histogram<u64>,
}

async fn run_load<B: Backend>(
    args: &Args,
    endpoints: &[String],
    w: Workload,
    clients: usize,
) -> anyhow::Result<Report> {
    let value = Bytes::from(vec![b'v'; args.value_size]);
    let start = Instant::now();
    let warm_until = start + Duration::from_secs_f64(args.warmup);
    let end = warm_until + Duration::from_secs_f64(args.duration);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let backend = B::connect(endpoints, c).await?;
        let value = value.clone();
        let keys = args.keys;
        let seed = args.seed.wrapping_add(c as u64);
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds");
            let (mut ops, mut errors) = (0u64, 0u64);
            loop {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                let res = match w {
                    Workload::Put => backend.put(&key(rng.random_range(0..keys)), value.clone()).await,
                    Workload::Txn10 => {
                        let kvs = (0..10)
                            .map(|_| (key(rng.random_range(0..keys)), value.clone()))
                            .collect();
                        backend.put_all(kvs).await
                    }
                    Workload::Get => backend.get(&key(rng.random_range(0..keys))).await,
                    Workload::Bigvalue => unreachable!("bigvalue is a search, not a timed load"),
                };
                if now >= warm_until {
                    match res {
                        Ok(()) => {
                            ops += 1;
                            let _ = hist.record(now.elapsed().as_micros().max(1) as u64);
                        }
                        Err(_) => errors += 1,
                    }
                }
            }
            (ops, errors, hist)
        }));
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let (mut ops, mut errors) = (0, 0);
    for t in tasks {
        let (o, e, h) = t.await?;
        ops += o;
        errors += e;
        hist.add(h)?;
    }
    Ok(Report {
        workload: w,
        clients,
        ops,
        errors,
        secs: args.duration,
        hist,
    })
}

async fn preload<B: Backend>(args: &Args, endpoints: &[String]) -> anyhow::Result<()> {
    let b = B::connect(endpoints, 0).await?;
    let keys: Vec<String> = (0..args.keys).map(key).collect();
    b.preload(&keys, Bytes::from(vec![b'v'; args.value_size])).await
}

/// A reassignment entry as Kafka's JSON has it, one per partition key.
fn reassignment_value(p: usize) -> Bytes {
    let r = |k: usize| (p + k) % 100;
    Bytes::from(format!(
        "{{\"topic\":\"topic-{t}\",\"partition\":{p},\"replicas\":[{},{},{}],\"original_replicas\":[{},{},{}]}}",
        r(1),
        r(2),
        r(3),
        r(0),
        r(1),
        r(2),
        t = p / 1000
    ))
}

/// Finds the largest N (up to the maximum) for which one atomic request of N partitions commits.
async fn bigvalue<B: Backend>(args: &Args, endpoints: &[String]) -> anyhow::Result<(usize, Duration)> {
    let b = B::connect(endpoints, 0).await?;
    let (mut ok, mut bad) = (0usize, None::<usize>);
    let mut n = 1000usize;
    let mut round = 0;
    let mut best_time = Duration::ZERO;
    loop {
        round += 1;
        let t = Instant::now();
        if b.write_reassignment(n, round).await.is_ok() {
            ok = n;
            best_time = t.elapsed();
        } else {
            bad = Some(n);
        }
        let next = match bad {
            None if n >= args.max_partitions => break,
            None => (n * 4).min(args.max_partitions),
            Some(b) if b - ok <= (ok / 20).max(1) => break,
            Some(b) => ok + (b - ok) / 2,
        };
        n = next;
    }
    Ok((ok, best_time))
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let endpoints: Vec<String> = args
        .endpoints
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if endpoints.is_empty() {
        bail!("--endpoints is empty");
    }
    match args.backend {
        BackendKind::Ferry => run_all::<FerryBackend>(&args, &endpoints).await,
        BackendKind::Zookeeper => run_all::<ZkBackend>(&args, &endpoints).await,
        #[cfg(feature = "etcd")]
        BackendKind::Etcd => run_all::<EtcdBackend>(&args, &endpoints).await,
        #[cfg(not(feature = "etcd"))]
        BackendKind::Etcd => bail!("this ferry-bench was built without etcd; rebuild with `--features etcd`"),
    }
}

async fn run_all<B: Backend>(args: &Args, endpoints: &[String]) -> anyhow::Result<()> {
    let backend = format!("{:?}", args.backend).to_lowercase();
    if args.workload.iter().any(|w| *w != Workload::Bigvalue) {
        preload::<B>(args, endpoints).await.context("preloading keys")?;
    }
    if !args.json {
        println!(
            "{:<8} {:<9} {:>7} {:>11} {:>9} {:>9} {:>9} {:>7} {:>12}",
            "backend", "workload", "clients", "ops/s", "p50 ms", "p99 ms", "max ms", "errors", "srv cpu µs/op"
        );
    }
    for &w in &args.workload {
        if w == Workload::Bigvalue {
            let (n, took) = bigvalue::<B>(args, endpoints).await?;
            if !args.json {
                println!(
                    "{backend:<8} bigvalue  largest atomic reassignment: {n} partitions ({:.2} s to commit)",
                    took.as_secs_f64()
                );
            }
            println!(
                "{{\"backend\":\"{backend}\",\"workload\":\"bigvalue\",\"partitions\":{n},\"commit_ms\":{:.1}}}",
                took.as_secs_f64() * 1000.0
            );
            continue;
        }
        for &c in &args.clients {
            let cpu_before = cpu_seconds(&args.server_pids);
            let r = run_load::<B>(args, endpoints, w, c).await?;
            // Includes the warm-up, so divide by the operations done in it too (estimated).
            let cpu_us_per_op = cpu_before.zip(cpu_seconds(&args.server_pids)).map(|(b, a)| {
                let ops_in_run = r.ops as f64 * (args.duration + args.warmup) / args.duration;
                (a - b) * 1e6 / ops_in_run.max(1.0)
            });
            let rate = r.ops as f64 / r.secs;
            let (p50, p99, max) = (
                r.hist.value_at_quantile(0.5),
                r.hist.value_at_quantile(0.99),
                r.hist.max(),
            );
            let cpu = cpu_us_per_op.map_or("-".to_string(), |c| format!("{c:.0}"));
            if !args.json {
                println!(
                    "{backend:<8} {:<9} {:>7} {:>11.0} {:>9.3} {:>9.3} {:>9.3} {:>7} {:>12}",
                    format!("{:?}", r.workload).to_lowercase(),
                    r.clients,
                    rate,
                    ms(p50),
                    ms(p99),
                    ms(max),
                    r.errors,
                    cpu
                );
            }
            let cpu_json = cpu_us_per_op.map_or("null".to_string(), |c| format!("{c:.1}"));
            println!(
                "{{\"backend\":\"{backend}\",\"workload\":\"{}\",\"clients\":{},\"ops\":{},\"errors\":{},\"ops_per_sec\":{:.1},\"p50_us\":{p50},\"p99_us\":{p99},\"max_us\":{max},\"server_cpu_us_per_op\":{cpu_json}}}",
                format!("{:?}", r.workload).to_lowercase(),
                r.clients,
                r.ops,
                r.errors,
                rate
            );
        }
    }
    Ok(())
}
