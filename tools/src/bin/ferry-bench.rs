//! `ferry-bench`: a load generator for the metastore, with one backend trait so that other
//! stores (etcd, ZooKeeper) can be driven by the same workloads, and for the brokers' produce
//! path (`--workload produce`).

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use broker::ClusterClient;
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
    /// The keys were written before (by `ferry-kv-load`): skip writing them again.
    #[arg(long)]
    preloaded: bool,
    /// Largest N tried by the bigvalue search.
    #[arg(long, default_value_t = 1_000_000)]
    max_partitions: usize,
    /// Print JSON lines only (no table).
    #[arg(long)]
    json: bool,
    /// Server process ids; their CPU time over each run is reported per operation.
    #[arg(long, value_delimiter = ',')]
    server_pids: Vec<u32>,
    /// produce: the topic, which must exist (`ferry topics --create`).
    #[arg(long, default_value = "ferry-bench")]
    topic: String,
    /// produce: spread the requests over partitions 0..N (default: all of the topic's).
    #[arg(long)]
    partitions: Option<u32>,
    /// produce: acks, comma-separated list of all, 1, 0; the workload runs once per value.
    #[arg(long, value_delimiter = ',', default_value = "all", value_parser = parse_acks)]
    acks: Vec<i32>,
    /// produce: bytes per record.
    #[arg(long, default_value_t = 1024)]
    record_bytes: usize,
    /// produce: records per produce request (an operation is one request).
    #[arg(long, default_value_t = 100)]
    batch_records: usize,
}

fn parse_acks(s: &str) -> Result<i32, String> {
    match s.trim() {
        "all" | "-1" => Ok(-1),
        "1" => Ok(1),
        "0" => Ok(0),
        other => Err(format!("{other:?} is not one of all, 1, 0")),
    }
}

fn acks_name(acks: i32) -> String {
    if acks == -1 {
        "all".to_string()
    } else {
        acks.to_string()
    }
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
    /// Batches of records to the brokers' partition leaders (Ferry only).
    Produce,
}

impl Workload {
    /// Whether the workload reads or writes the preloaded keys.
    fn uses_keys(self) -> bool {
        matches!(self, Workload::Put | Workload::Txn10 | Workload::Get)
    }
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

/// The measured part of a run: requests that start in it are counted.
#[derive(Clone, Copy)]
struct Window {
    warm_until: Instant,
    end: Instant,
}

impl Window {
    /// From now: the warm-up, then the measured seconds.
    fn starting_now(args: &Args) -> Self {
        let warm_until = Instant::now() + Duration::from_secs_f64(args.warmup);
        Self {
            warm_until,
            end: warm_until + Duration::from_secs_f64(args.duration),
        }
    }
}

/// Counts and latencies of one client, or of a whole run once merged.
struct Meter {
    window: Window,
    ops: u64,
    errors: u64,
    first_error: Option<String>,
    hist: Histogram<u64>,
}

impl Meter {
    fn new(window: Window) -> Self {
        Self {
            window,
            ops: 0,
            errors: 0,
            first_error: None,
            hist: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds"),
        }
    }

    /// The start of the next request, or None once the run is over.
    fn next(&self) -> Option<Instant> {
        let now = Instant::now();
        (now < self.window.end).then_some(now)
    }

    /// Counts a request that started at `started`, unless it started in the warm-up.
    fn record<E: std::fmt::Display>(&mut self, started: Instant, res: Result<(), E>) {
        if started < self.window.warm_until {
            return;
        }
        match res {
            Ok(()) => {
                self.ops += 1;
                let _ = self.hist.record(started.elapsed().as_micros().max(1) as u64);
            }
            Err(e) => {
                self.errors += 1;
                self.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }

    /// Waits for the clients and merges what they measured.
    async fn join(window: Window, tasks: Vec<tokio::task::JoinHandle<Meter>>) -> anyhow::Result<Meter> {
        let mut all = Meter::new(window);
        for t in tasks {
            let m = t.await?;
            all.ops += m.ops;
            all.errors += m.errors;
            all.first_error = all.first_error.or(m.first_error);
            all.hist.add(m.hist)?;
        }
        Ok(all)
    }
}

/// What a produce run sends.
#[derive(Clone, Copy)]
struct ProduceShape {
    acks: i32,
    batch_records: usize,
    record_bytes: usize,
}

/// One measured run.
struct Report {
    workload: Workload,
    clients: usize,
    /// Set for produce runs.
    produce: Option<ProduceShape>,
    meter: Meter,
    secs: f64,
}

async fn run_load<B: Backend>(
    args: &Args,
    endpoints: &[String],
    w: Workload,
    clients: usize,
) -> anyhow::Result<Report> {
    let value = Bytes::from(vec![b'v'; args.value_size]);
    let window = Window::starting_now(args);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let backend = B::connect(endpoints, c).await?;
        let value = value.clone();
        let keys = args.keys;
        let seed = args.seed.wrapping_add(c as u64);
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut m = Meter::new(window);
            while let Some(started) = m.next() {
                let res = match w {
                    Workload::Put => backend.put(&key(rng.random_range(0..keys)), value.clone()).await,
                    Workload::Txn10 => {
                        // Ten distinct keys: etcd refuses a transaction that names a key twice.
                        let kvs = rand::seq::index::sample(&mut rng, keys, 10.min(keys))
                            .iter()
                            .map(|k| (key(k), value.clone()))
                            .collect();
                        backend.put_all(kvs).await
                    }
                    Workload::Get => backend.get(&key(rng.random_range(0..keys))).await,
                    Workload::Bigvalue | Workload::Produce => unreachable!("{w:?} is not a key workload"),
                };
                m.record(started, res);
            }
            m
        }));
    }
    Ok(Report {
        workload: w,
        clients,
        produce: None,
        meter: Meter::join(window, tasks).await?,
        secs: args.duration,
    })
}

async fn describe_topic(client: &ClusterClient, topic: &str) -> anyhow::Result<proto::ferry::TopicDescription> {
    client
        .refresh(topic)
        .await
        .with_context(|| format!("describing topic {topic:?} (create it with `ferry topics --create`)"))
}

/// Partitions 0..`partitions` of the topic that lack a leader or have replicas outside the ISR.
fn unsynced(t: &proto::ferry::TopicDescription, partitions: u32) -> Vec<String> {
    t.partitions
        .iter()
        .filter(|p| p.partition < partitions)
        .filter_map(|p| {
            let s = p.state.clone().unwrap_or_default();
            (s.leader < 0 || s.isr.len() < s.replicas.len()).then(|| {
                format!(
                    "{}-{} (leader {}, isr {:?} of {:?})",
                    t.topic, p.partition, s.leader, s.isr, s.replicas
                )
            })
        })
        .collect()
}

/// The number of partitions to produce to, once they all have a leader and a full ISR (or after
/// 30 s, with a warning).
async fn prepare_topic(args: &Args, endpoints: &[String]) -> anyhow::Result<u32> {
    let client = ClusterClient::new(endpoints)?;
    let count = describe_topic(&client, &args.topic).await?.partitions.len() as u32;
    let n = args.partitions.unwrap_or(count);
    if n == 0 || n > count {
        bail!("--partitions {n}: topic {:?} has {count} partitions", args.topic);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let lagging = unsynced(&describe_topic(&client, &args.topic).await?, n);
        if lagging.is_empty() {
            return Ok(n);
        }
        if Instant::now() >= deadline {
            eprintln!("ferry-bench: producing although not in sync: {}", lagging.join(", "));
            return Ok(n);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `clients` producers, each with its own connections, sending batches round-robin over
/// partitions 0..`partitions`.
async fn run_produce(
    args: &Args,
    endpoints: &[String],
    clients: usize,
    acks: i32,
    partitions: u32,
) -> anyhow::Result<Report> {
    let batch = vec![Bytes::from(vec![b'r'; args.record_bytes]); args.batch_records];
    let window = Window::starting_now(args);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = ClusterClient::new(endpoints)?;
        let (topic, batch) = (args.topic.clone(), batch.clone());
        tasks.push(tokio::spawn(async move {
            let mut m = Meter::new(window);
            let mut partition = c as u32 % partitions;
            while let Some(started) = m.next() {
                let res = client.produce_once(&topic, partition, batch.clone(), acks).await;
                m.record(started, res.map(drop));
                partition = (partition + 1) % partitions;
            }
            m
        }));
    }
    Ok(Report {
        workload: Workload::Produce,
        clients,
        produce: Some(ProduceShape {
            acks,
            batch_records: args.batch_records,
            record_bytes: args.record_bytes,
        }),
        meter: Meter::join(window, tasks).await?,
        secs: args.duration,
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
    if args.workload.contains(&Workload::Produce) && args.backend != BackendKind::Ferry {
        bail!("the produce workload needs --backend ferry");
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

/// A produce run's records, records/s and payload MB/s (10^6 bytes to the MB).
struct Produced {
    shape: ProduceShape,
    records: u64,
    per_sec: f64,
    mb_per_sec: f64,
}

/// Prints one run as a table row (unless `--json`) and a JSON line.
fn print_report(args: &Args, r: &Report, cpu_us_per_op: Option<f64>) {
    let backend = format!("{:?}", args.backend).to_lowercase();
    let workload = format!("{:?}", r.workload).to_lowercase();
    let m = &r.meter;
    let rate = m.ops as f64 / r.secs;
    let (p50, p99, max) = (
        m.hist.value_at_quantile(0.5),
        m.hist.value_at_quantile(0.99),
        m.hist.max(),
    );
    let produced = r.produce.map(|shape| {
        let records = m.ops * shape.batch_records as u64;
        Produced {
            shape,
            records,
            per_sec: records as f64 / r.secs,
            mb_per_sec: (records * shape.record_bytes as u64) as f64 / r.secs / 1e6,
        }
    });
    if !args.json {
        let cpu = cpu_us_per_op.map_or("-".to_string(), |c| format!("{c:.0}"));
        let (label, rec_s, mb_s) = match &produced {
            Some(p) => (
                format!("{workload}/{}", acks_name(p.shape.acks)),
                format!("{:.0}", p.per_sec),
                format!("{:.1}", p.mb_per_sec),
            ),
            None => (workload.clone(), "-".to_string(), "-".to_string()),
        };
        println!(
            "{backend:<8} {label:<11} {:>7} {rate:>11.0} {:>9.3} {:>9.3} {:>9.3} {:>7} {cpu:>13} {rec_s:>11} {mb_s:>8}",
            r.clients,
            ms(p50),
            ms(p99),
            ms(max),
            m.errors,
        );
    }
    let cpu_json = cpu_us_per_op.map_or("null".to_string(), |c| format!("{c:.1}"));
    let produce_json = produced.map_or(String::new(), |p| {
        format!(
            ",\"acks\":\"{}\",\"batch_records\":{},\"record_bytes\":{},\"records\":{},\"records_per_sec\":{:.1},\"mb_per_sec\":{:.2}",
            acks_name(p.shape.acks),
            p.shape.batch_records,
            p.shape.record_bytes,
            p.records,
            p.per_sec,
            p.mb_per_sec
        )
    });
    println!(
        "{{\"backend\":\"{backend}\",\"workload\":\"{workload}\",\"clients\":{},\"ops\":{},\"errors\":{},\"ops_per_sec\":{rate:.1},\"p50_us\":{p50},\"p99_us\":{p99},\"max_us\":{max},\"server_cpu_us_per_op\":{cpu_json}{produce_json}}}",
        r.clients,
        m.ops,
        m.errors,
    );
    if let Some(e) = &m.first_error {
        eprintln!(
            "ferry-bench: {workload} at {} clients: {} errors, the first: {e}",
            r.clients, m.errors
        );
    }
}

async fn run_all<B: Backend>(args: &Args, endpoints: &[String]) -> anyhow::Result<()> {
    let backend = format!("{:?}", args.backend).to_lowercase();
    if !args.preloaded && args.workload.iter().any(|w| w.uses_keys()) {
        preload::<B>(args, endpoints).await.context("preloading keys")?;
    }
    let partitions = if args.workload.contains(&Workload::Produce) {
        prepare_topic(args, endpoints).await?
    } else {
        0
    };
    if !args.json {
        println!(
            "{:<8} {:<11} {:>7} {:>11} {:>9} {:>9} {:>9} {:>7} {:>13} {:>11} {:>8}",
            "backend",
            "workload",
            "clients",
            "ops/s",
            "p50 ms",
            "p99 ms",
            "max ms",
            "errors",
            "srv cpu µs/op",
            "records/s",
            "MB/s"
        );
    }
    let term_at_start = raft_term(&backend, endpoints).await;
    for &w in &args.workload {
        if w == Workload::Bigvalue {
            let (n, took) = bigvalue::<B>(args, endpoints).await?;
            if !args.json {
                println!(
                    "{backend:<8} bigvalue    largest atomic reassignment: {n} partitions ({:.2} s to commit)",
                    took.as_secs_f64()
                );
            }
            println!(
                "{{\"backend\":\"{backend}\",\"workload\":\"bigvalue\",\"partitions\":{n},\"commit_ms\":{:.1}}}",
                took.as_secs_f64() * 1000.0
            );
            continue;
        }
        // Key workloads run once per client count; produce once per acks and client count.
        let acks: Vec<Option<i32>> = if w == Workload::Produce {
            args.acks.iter().copied().map(Some).collect()
        } else {
            vec![None]
        };
        for &a in &acks {
            for &c in &args.clients {
                let cpu_before = cpu_seconds(&args.server_pids);
                let r = match a {
                    Some(a) => run_produce(args, endpoints, c, a, partitions).await?,
                    None => run_load::<B>(args, endpoints, w, c).await?,
                };
                // Includes the warm-up, so divide by the operations done in it too (estimated).
                let cpu_us_per_op = cpu_before.zip(cpu_seconds(&args.server_pids)).map(|(b, a)| {
                    let ops_in_run = r.meter.ops as f64 * (args.duration + args.warmup) / args.duration;
                    (a - b) * 1e6 / ops_in_run.max(1.0)
                });
                print_report(args, &r, cpu_us_per_op);
                if r.produce.is_some() {
                    let t = describe_topic(&ClusterClient::new(endpoints)?, &args.topic).await?;
                    let lagging = unsynced(&t, partitions);
                    if !lagging.is_empty() {
                        eprintln!("ferry-bench: after the run, not in sync: {}", lagging.join(", "));
                    }
                }
            }
        }
    }
    // A term that moved means elections happened during the runs, with no fault injected.
    if let (Some(start), Some(end)) = (term_at_start, raft_term(&backend, endpoints).await) {
        if !args.json {
            println!("{backend:<8} raft term: {start} at start, {end} at end");
        }
        println!("{{\"backend\":\"{backend}\",\"raft_term_start\":{start},\"raft_term_end\":{end}}}");
    }
    Ok(())
}

/// The highest Raft term any Ferry node reports (none for other backends).
async fn raft_term(backend: &str, endpoints: &[String]) -> Option<u64> {
    if backend != "ferry" {
        return None;
    }
    Client::new(endpoints).ok()?.highest_term().await
}
