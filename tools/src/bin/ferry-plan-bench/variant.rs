//! One drain variant on a fresh cluster: create and fill the topics, time the disk's own copy
//! (first variant only), run the steady producer idle, then drain broker 4 and follow the drain
//! to its end with the producer still running and the moves in flight sampled.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::cluster::{BenchCluster, DRAINED};
use crate::drain::{self, Peak, Variant};
use crate::load::{self, DATA_TOPIC, PRODUCE_TOPIC};
use crate::producer::{self, Measured, Steady};
use crate::Args;

/// What one drain measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The variant.
    pub variant: Variant,
    /// Moves in the plan (or submitted).
    pub moves: u32,
    /// Moves done, skipped and failed at the end (a bulk submit counts every move done).
    pub done: u32,
    /// Skipped.
    pub skipped: u32,
    /// Failed.
    pub failed: u32,
    /// Bytes the moves copy.
    pub bytes: u64,
    /// Bytes broker 4 held before the drain, by DescribeLogDirs.
    pub broker_bytes: u64,
    /// Brokers receiving replicas.
    pub receivers: usize,
    /// From the request to the end seen.
    pub wall_s: f64,
    /// The throttle's ideal (even over the receivers, the busiest broker sending or
    /// receiving), for a throttled drain.
    pub ideal_s: Option<(f64, f64)>,
    /// Moves seen at once.
    pub peak: Peak,
    /// The cap the peaks must stay within, for a capped drain.
    pub cap: Option<i64>,
    /// Replicas broker 4 still held at the end.
    pub left_on_broker: usize,
    /// The steady producer's figures.
    pub produced: Measured,
}

/// Runs `v` on a fresh cluster under `root`; with `disk`, also times `cp -r` of broker 4's log
/// dir plus `sync` (seconds, and the bytes copied).
pub async fn run(
    a: &Args,
    ferry: &Path,
    root: &Path,
    v: Variant,
    disk: bool,
) -> anyhow::Result<(Outcome, Option<(f64, u64)>)> {
    let timeout = Duration::from_secs(a.timeout_s);
    let started = Instant::now();
    let cluster = BenchCluster::start(ferry, root).await?;
    let c = cluster.client.clone();
    load::create_topic(
        &c,
        DATA_TOPIC,
        load::data_assignment(a.partitions, a.replication_factor),
    )
    .await?;
    load::create_topic(&c, PRODUCE_TOPIC, load::produce_assignment()).await?;
    load::load(&c, a.partitions, a.partition_bytes(), timeout).await?;
    let (held, broker_bytes) = load::held(&c, DRAINED, &[DATA_TOPIC, PRODUCE_TOPIC]).await?;
    eprintln!(
        "{}: cluster up and {held} replicas with {:.0} MiB on broker {DRAINED} after {:.1} s",
        v.name(),
        broker_bytes as f64 / (1 << 20) as f64,
        started.elapsed().as_secs_f64()
    );
    let disk = if disk {
        let bytes = dir_bytes(&cluster.logs_dir(DRAINED));
        Some((load::cp_and_sync(&cluster.logs_dir(DRAINED))?, bytes))
    } else {
        load::sync()?;
        None
    };

    // A separate client, so that the producer's calls give up after their own time.
    let pc = broker::ClusterClient::new(cluster.meta.endpoints())?.with_timeout(Duration::from_secs(30));
    let idle = Duration::from_secs_f64(a.idle_seconds);
    let steady = Steady::start(pc, 3, a.rate, a.record_bytes(), idle + timeout);
    tokio::time::sleep(idle).await;
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = drain::sample_peaks(cluster.meta.clone(), stop.clone());
    steady.enter(producer::DRAIN);
    let drained = drain_with(a, &c, v, timeout).await;
    let wall_s = drained.as_ref().map_or(0.0, |d| d.from.elapsed().as_secs_f64());
    steady.enter(producer::AFTER);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let produced = steady.finish().await?;
    let peak = sampler.await?;
    let d = drained?;
    let left_on_broker = load::held(&c, DRAINED, &[DATA_TOPIC, PRODUCE_TOPIC]).await?.0;
    cluster.stop(a.keep)?;
    let flows = drain::flows(&d.moves);
    let ideal_s = (v == Variant::Throttled).then(|| drain::throttle_ideal(&flows, a.throttle));
    Ok((
        Outcome {
            variant: v,
            moves: d.moves.len() as u32,
            done: d.done,
            skipped: d.skipped,
            failed: d.failed,
            bytes: d.moves.iter().map(|m| m.bytes).sum(),
            broker_bytes,
            receivers: flows.into.len(),
            wall_s,
            ideal_s,
            peak,
            cap: v.broker_cap(a.cap),
            left_on_broker,
            produced,
        },
        disk,
    ))
}

/// The moves of a drain and how they ended.
struct Drained {
    /// When the moves were asked for: CreatePlan sent, or the bulk submit sent.
    from: Instant,
    moves: Vec<proto::ferry::PlanMove>,
    done: u32,
    skipped: u32,
    failed: u32,
}

/// Starts the drain of `v` and waits for its end.
async fn drain_with(a: &Args, c: &broker::ClusterClient, v: Variant, timeout: Duration) -> anyhow::Result<Drained> {
    let throttle = (v == Variant::Throttled).then_some(a.throttle);
    if v == Variant::Bulk {
        let dry = drain::create_plan(c, drain::drain_request(v.caps(a.cap), None, true)).await?;
        let from = Instant::now();
        drain::submit_all(c, &dry.moves, timeout).await?;
        let n = dry.moves.len() as u32;
        return Ok(Drained {
            from,
            moves: dry.moves,
            done: n,
            skipped: 0,
            failed: 0,
        });
    }
    let from = Instant::now();
    let plan = drain::create_plan(c, drain::drain_request(v.caps(a.cap), throttle, false)).await?;
    let moves = drain::show(c, plan.id, true).await?.moves;
    eprintln!(
        "{}: plan {} of {} moves stored after {:.2} s",
        v.name(),
        plan.id,
        plan.moves_total,
        from.elapsed().as_secs_f64()
    );
    let end = drain::wait_plan(c, plan.id, Duration::from_millis(200), timeout).await?;
    if end.state != "done" {
        bail!("plan {} ended {}: {:?}", plan.id, end.state, end.notes);
    }
    Ok(Drained {
        from,
        moves,
        done: end.done,
        skipped: end.skipped,
        failed: end.failed,
    })
}

/// Bytes of the files under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}
