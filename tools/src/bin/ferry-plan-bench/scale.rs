//! The scale run: a topic of many empty partitions, each with its one replica on broker 4, then
//! an uncapped drain plan of broker 4 (one move per partition): the time to store it, its stored
//! size, the memory of a queued move in the plan core, the time until it is done, and the
//! active controller's CPU time meanwhile.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use controller::plan::{Move, MoveState, Plan, PlanState, Replica};
use proto::keys;

use crate::cluster::{cpu_seconds, rss_mib, BenchCluster, DRAINED};
use crate::drain;
use crate::Args;

/// The scale run's topic.
pub const SCALE_TOPIC: &str = "bench-scale";

/// What the scale run measured.
#[derive(Debug, Clone, Default)]
pub struct ScaleOutcome {
    /// Partitions, all on broker 4.
    pub partitions: u32,
    /// Seconds to create the topic (the answer).
    pub create_s: f64,
    /// Seconds until broker 4 held every replica.
    pub exist_s: f64,
    /// Moves in the plan.
    pub moves: u32,
    /// Seconds from CreatePlan sent to its answer (the plan stored).
    pub store_s: f64,
    /// Bytes of the stored plan (`/admin/plans/<id>`).
    pub stored_bytes: usize,
    /// Bytes a queued move takes in the plan core: the struct and its two replica slices.
    pub move_mem_bytes: f64,
    /// Seconds from the CreatePlan answer until the plan was seen done.
    pub done_s: f64,
    /// The active controller's node.
    pub controller: i32,
    /// Its process's CPU seconds from CreatePlan sent until done.
    pub controller_cpu_s: f64,
    /// Every node's CPU seconds over the same time.
    pub all_cpu_s: f64,
    /// The controller's resident memory before CreatePlan and when done, MiB.
    pub controller_rss_mib: (f64, f64),
    /// Whether the controller stayed the same node throughout.
    pub same_controller: bool,
}

/// Bytes one move takes in memory: the struct inline, and its two boxed replica slices.
pub fn move_mem(m: &Move) -> usize {
    std::mem::size_of::<Move>() + std::mem::size_of::<Replica>() * (m.from.len() + m.to.len())
}

/// Runs the scale figures on a fresh cluster under `root`.
pub async fn run(a: &Args, ferry: &Path, root: &Path) -> anyhow::Result<ScaleOutcome> {
    let n = a.scale_partitions;
    let timeout = Duration::from_secs(a.timeout_s);
    let cluster = BenchCluster::start(ferry, root).await?;
    let c = cluster.client.clone();
    let mut o = ScaleOutcome {
        partitions: n,
        ..Default::default()
    };
    let t = Instant::now();
    crate::load::create_topic(&c, SCALE_TOPIC, vec![vec![DRAINED]; n as usize]).await?;
    o.create_s = t.elapsed().as_secs_f64();
    crate::load::wait_held(&c, DRAINED, &[SCALE_TOPIC], n as usize, timeout).await?;
    o.exist_s = t.elapsed().as_secs_f64();
    eprintln!(
        "scale: {n} partitions created in {:.1} s, on broker {DRAINED} after {:.1} s",
        o.create_s, o.exist_s
    );

    o.controller = cluster.controller_id().await?;
    let pid = cluster
        .pid(o.controller)
        .context("the controller is not one of the nodes")?;
    let pids = cluster.pids();
    let cpu = |p: u32| cpu_seconds(p).unwrap_or(f64::NAN);
    let (cpu0, all0): (f64, f64) = (cpu(pid), pids.iter().map(|p| cpu(*p)).sum());
    let rss0 = rss_mib(pid).unwrap_or(f64::NAN);
    let t = Instant::now();
    let plan = drain::create_plan(&c, drain::drain_request(drain::uncapped(), None, false)).await?;
    o.store_s = t.elapsed().as_secs_f64();
    let answered = Instant::now();
    o.moves = plan.moves_total;
    let stored = cluster
        .meta
        .get(&keys::plan(plan.id))
        .await?
        .context("the plan is not stored")?
        .value;
    o.stored_bytes = stored.len();
    let core = Plan::decode(&stored).map_err(|e| anyhow::anyhow!("the stored plan: {e}"))?;
    o.move_mem_bytes = core.moves.iter().map(move_mem).sum::<usize>() as f64 / core.moves.len().max(1) as f64;
    eprintln!(
        "scale: plan {} of {} moves stored in {:.2} s ({} bytes)",
        plan.id, o.moves, o.store_s, o.stored_bytes
    );
    let end = wait_stored(&cluster.meta, plan.id, timeout).await?;
    o.done_s = answered.elapsed().as_secs_f64();
    o.controller_cpu_s = cpu(pid) - cpu0;
    o.all_cpu_s = pids.iter().map(|p| cpu(*p)).sum::<f64>() - all0;
    o.controller_rss_mib = (rss0, rss_mib(pid).unwrap_or(f64::NAN));
    o.same_controller = cluster.controller_id().await? == o.controller;
    let done = end.moves.iter().filter(|m| m.state == MoveState::Done).count();
    if end.state != PlanState::Done || done != o.moves as usize {
        bail!(
            "the scale plan ended {:?} with {done} of {} moves done",
            end.state,
            o.moves
        );
    }
    cluster.stop(a.keep)?;
    Ok(o)
}

/// Waits until the stored plan `id` has ended, reading its key every second. ListPlans would
/// also measure each running move's progress, which over the whole cluster costs the
/// controller what the run measures.
async fn wait_stored(meta: &metastore::Client, id: u64, timeout: Duration) -> anyhow::Result<Plan> {
    let deadline = Instant::now() + timeout;
    loop {
        // A failed read (a node busy or changing leader) only means asking again.
        if let Ok(Some(kv)) = meta.get(&keys::plan(id)).await {
            let plan = Plan::decode(&kv.value).map_err(|e| anyhow::anyhow!("the stored plan: {e}"))?;
            if plan.state.is_terminal() {
                return Ok(plan);
            }
        }
        if Instant::now() > deadline {
            bail!("plan {id} not ended after {} s", timeout.as_secs());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use controller::plan::{DirId, PartitionRef};

    #[test]
    fn a_move_of_one_replica_takes_its_struct_and_two_replicas() {
        let m = Move {
            partition: PartitionRef { topic: 0, partition: 0 },
            from: vec![Replica::new(4, DirId::ANY)].into(),
            to: vec![Replica::new(1, DirId::ANY)].into(),
            bytes: 0,
            state: MoveState::Queued,
        };
        assert_eq!(move_mem(&m), std::mem::size_of::<Move>() + 16);
    }
}
