//! Log dir move benchmark: the throughput of moving one partition between two log dirs,
//! unthrottled, against `cp -r` of the same folder between the same dirs in the same run; and
//! the rate a throttled move achieves at each given throttle.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use broker::log_dir_move;
use broker::partition_log::PartitionLog;
use broker::replica_manager::{BrokerCore, DataConfig};
use clap::Parser;

/// Flags of the benchmark.
#[derive(Parser)]
struct Args {
    /// Where the two log dirs are made (removed afterwards).
    #[arg(long, default_value = "ferry-dirmove-bench")]
    work_dir: PathBuf,
    /// Size of the partition for the unthrottled comparison, in MiB.
    #[arg(long, default_value_t = 1024)]
    size_mib: u64,
    /// Rounds of (move, cp) for the comparison.
    #[arg(long, default_value_t = 6)]
    rounds: usize,
    /// Throttles to check, in MB/s (10^6 bytes).
    #[arg(long, value_delimiter = ',', default_value = "1,10,50")]
    throttles_mb: Vec<u64>,
    /// Seconds each throttled move should take.
    #[arg(long, default_value_t = 8)]
    throttled_seconds: u64,
}

const BATCH_RECORDS: usize = 1000;
const RECORD: usize = 1024;

fn config() -> DataConfig {
    DataConfig::default()
}

/// Writes about `bytes` into `<dir>/t-0`.
fn preload(dir: &Path, bytes: u64) -> anyhow::Result<u64> {
    let mut log = PartitionLog::open(&dir.join("t-0"), config().log)?;
    let recs: Vec<Vec<u8>> = (0..BATCH_RECORDS).map(|i| vec![(i % 251) as u8; RECORD]).collect();
    while log.size_bytes() < bytes {
        log.append_as_leader(&recs, 1, 0)?;
    }
    log.flush()?;
    Ok(log.size_bytes())
}

/// Moves t-0 to `to` and returns the seconds it took.
async fn move_to(core: &Arc<BrokerCore>, to: &Path) -> anyhow::Result<f64> {
    let r = core.replica("t", 0).map_err(|e| anyhow::anyhow!("{e}"))?;
    let started = Instant::now();
    log_dir_move::start(core, &r, to, false)?;
    let tp = ("t".to_string(), 0);
    while r.future().is_some() || core.moves.is_moving(&tp) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let took = started.elapsed().as_secs_f64();
    if r.log().dir() != to.join("t-0") {
        bail!("the move to {} did not finish", to.display());
    }
    Ok(took)
}

/// `cp -r` of the folder into the other dir; returns the seconds it took, and the seconds until
/// a `sync` after it returned (the copy on disk, as a move leaves it).
fn cp(from: &Path, to: &Path) -> anyhow::Result<(f64, f64)> {
    let dest = to.join("t-0.cp");
    let started = Instant::now();
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(from)
        .arg(&dest)
        .status()
        .context("running cp")?;
    let took = started.elapsed().as_secs_f64();
    if !status.success() {
        bail!("cp failed: {status}");
    }
    sync()?;
    let durable = started.elapsed().as_secs_f64();
    std::fs::remove_dir_all(&dest)?;
    Ok((took, durable))
}

/// Writes every dirty page back (`sync`).
fn sync() -> anyhow::Result<()> {
    let status = std::process::Command::new("sync").status().context("running sync")?;
    if !status.success() {
        bail!("sync failed: {status}");
    }
    Ok(())
}

/// Waits for the background removal of the replaced folder, so the next step starts clean.
async fn settle(dirs: &[PathBuf]) {
    while dirs.iter().any(|d| d.join("t-0.delete").exists()) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn mb(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs / 1e6
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let _ = std::fs::remove_dir_all(&a.work_dir);
    let dirs = vec![a.work_dir.join("d1"), a.work_dir.join("d2")];
    for d in &dirs {
        std::fs::create_dir_all(d)?;
    }
    let dirs: Vec<PathBuf> = dirs.iter().map(|d| d.canonicalize()).collect::<Result<_, _>>()?;

    unthrottled(&a, &dirs).await?;
    throttled(&a, &dirs).await?;
    std::fs::remove_dir_all(&a.work_dir)?;
    Ok(())
}

/// Rounds of one partition moved between the dirs, each against `cp -r` (with and without a
/// sync); prints each round and the median ratios, then removes the work dir.
async fn unthrottled(a: &Args, dirs: &[PathBuf]) -> anyhow::Result<()> {
    let size = preload(&dirs[0], a.size_mib << 20)?;
    let core = Arc::new(BrokerCore::open(1, dirs.to_vec(), config())?);
    println!(
        "unthrottled: a {:.0} MiB partition between two dirs",
        size as f64 / (1 << 20) as f64
    );
    println!("round  ferry move MB/s  cp -r MB/s  cp -r+sync MB/s  move/cp  move/(cp+sync)");
    let mut ratios = Vec::new();
    let mut durable_ratios = Vec::new();
    let mut at = 0;
    for round in 1..=a.rounds {
        let from = dirs[at].join("t-0");
        // Each timing starts with no dirty pages from the step before, and the two take turns
        // going first, so neither always inherits the other's writeback.
        let (c, cs, m);
        if round % 2 == 1 {
            sync()?;
            (c, cs) = cp(&from, &dirs[1 - at])?;
            sync()?;
            m = move_to(&core, &dirs[1 - at]).await?;
            settle(dirs).await;
        } else {
            sync()?;
            m = move_to(&core, &dirs[1 - at]).await?;
            settle(dirs).await;
            sync()?;
            (c, cs) = cp(&dirs[1 - at].join("t-0"), &dirs[at])?;
        }
        at = 1 - at;
        ratios.push(c / m);
        durable_ratios.push(cs / m);
        println!(
            "{round:>5}  {:>15.1}  {:>10.1}  {:>15.1}  {:>7.2}  {:>14.2}",
            mb(size, m),
            mb(size, c),
            mb(size, cs),
            c / m,
            cs / m
        );
    }
    ratios.sort_by(f64::total_cmp);
    durable_ratios.sort_by(f64::total_cmp);
    println!(
        "median ratio: move / cp -r = {:.2}, move / (cp -r + sync) = {:.2}",
        ratios[ratios.len() / 2],
        durable_ratios[durable_ratios.len() / 2]
    );
    drop(core);
    std::fs::remove_dir_all(&a.work_dir)?;

    Ok(())
}

/// One move per throttle, sized to take about `--throttled-seconds`; prints the rate achieved.
async fn throttled(a: &Args, dirs: &[PathBuf]) -> anyhow::Result<()> {
    println!("throttled: each move sized to take about {} s", a.throttled_seconds);
    println!("throttle MB/s  moved MB  took s  achieved MB/s  achieved/throttle");
    for rate_mb in &a.throttles_mb {
        let _ = std::fs::remove_dir_all(&a.work_dir);
        for d in dirs {
            std::fs::create_dir_all(d)?;
        }
        let rate = rate_mb * 1_000_000;
        let size = preload(&dirs[0], rate * a.throttled_seconds)?;
        let core = Arc::new(BrokerCore::open(1, dirs.to_vec(), config())?);
        core.dynamic_config
            .write()
            .insert(proto::topic_config::ALTER_LOG_DIRS_RATE.to_string(), rate.to_string());
        let took = move_to(&core, &dirs[1]).await?;
        let achieved = mb(size, took);
        println!(
            "{rate_mb:>13}  {:>8.1}  {took:>6.2}  {achieved:>13.2}  {:>17.3}",
            size as f64 / 1e6,
            achieved / *rate_mb as f64
        );
        drop(core);
    }
    Ok(())
}
