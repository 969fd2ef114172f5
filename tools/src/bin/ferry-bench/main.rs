//! `ferry-bench`: a load generator for the metastore, with one backend trait so that other
//! stores (etcd, ZooKeeper) can be driven by the same workloads, and for the brokers' produce
//! path (`--workload produce`).

mod args;
mod backend;
mod load;
mod meter;
mod produce;
mod report;

use anyhow::{bail, Context};
use broker::ClusterClient;
use clap::Parser;
use metastore::Client;

use args::{Args, BackendKind, Workload};
#[cfg(feature = "etcd")]
use backend::EtcdBackend;
use backend::{Backend, FerryBackend, ZkBackend};
use report::{cpu_seconds, print_report};

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

/// Runs every workload in turn, after preloading the keys and waiting for the topic.
async fn run_all<B: Backend>(args: &Args, endpoints: &[String]) -> anyhow::Result<()> {
    let backend = format!("{:?}", args.backend).to_lowercase();
    if !args.preloaded && args.workload.iter().any(|w| w.uses_keys()) {
        load::preload::<B>(args, endpoints).await.context("preloading keys")?;
    }
    let partitions = if args.workload.contains(&Workload::Produce) {
        produce::prepare_topic(args, endpoints).await?
    } else {
        0
    };
    if !args.json {
        report::print_header();
    }
    let term_at_start = raft_term(&backend, endpoints).await;
    for &w in &args.workload {
        if w == Workload::Bigvalue {
            let (n, took) = load::bigvalue::<B>(args, endpoints).await?;
            report::print_bigvalue(args, &backend, n, took);
        } else {
            run_workload::<B>(args, endpoints, w, partitions).await?;
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

/// Runs a key workload once per client count, or produce once per acks and client count, and
/// reports each run.
async fn run_workload<B: Backend>(
    args: &Args,
    endpoints: &[String],
    w: Workload,
    partitions: u32,
) -> anyhow::Result<()> {
    let acks: Vec<Option<i32>> = if w == Workload::Produce {
        args.acks.iter().copied().map(Some).collect()
    } else {
        vec![None]
    };
    for &a in &acks {
        for &c in &args.clients {
            let cpu_before = cpu_seconds(&args.server_pids);
            let r = match a {
                Some(a) => produce::run_produce(args, endpoints, c, a, partitions).await?,
                None => load::run_load::<B>(args, endpoints, w, c).await?,
            };
            // Includes the warm-up, so divide by the operations done in it too (estimated).
            let cpu_us_per_op = cpu_before.zip(cpu_seconds(&args.server_pids)).map(|(b, a)| {
                let ops_in_run = r.meter.ops as f64 * (args.duration + args.warmup) / args.duration;
                (a - b) * 1e6 / ops_in_run.max(1.0)
            });
            print_report(args, &r, cpu_us_per_op);
            if r.produce.is_some() {
                let t = produce::describe_topic(&ClusterClient::new(endpoints)?, &args.topic).await?;
                let lagging = produce::unsynced(&t, partitions);
                if !lagging.is_empty() {
                    eprintln!("ferry-bench: after the run, not in sync: {}", lagging.join(", "));
                }
            }
        }
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
