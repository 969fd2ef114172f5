//! The drains of broker 4: a plan (uncapped, capped, capped and throttled) followed through
//! `ListPlans`, or the same moves submitted at once with AlterPartitionReassignments, as
//! `kafka-reassign-partitions --execute` would; and a sampler of the moves in flight per broker,
//! read from the partitions' states in the metastore.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use broker::ClusterClient;
use controller::plan::caps::MAX_CAP;
use prost::Message;
use proto::ferry::*;
use proto::keys;

use crate::cluster::DRAINED;

/// How a drain runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Variant {
    /// A plan with every cap at its maximum, no throttle.
    Uncapped,
    /// A plan with `--cap` moves into and out of each broker, no throttle.
    Capped,
    /// The capped plan with `--throttle`.
    Throttled,
    /// The uncapped plan's moves (from a dry run) submitted at once with
    /// AlterPartitionReassignments, no throttle.
    Bulk,
}

impl Variant {
    /// Its name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Uncapped => "uncapped",
            Variant::Capped => "capped",
            Variant::Throttled => "throttled",
            Variant::Bulk => "bulk",
        }
    }

    /// The caps its plan (or dry run) asks for.
    pub fn caps(self, cap: i64) -> PlanCaps {
        match self {
            Variant::Uncapped | Variant::Bulk => uncapped(),
            Variant::Capped | Variant::Throttled => PlanCaps {
                max_moves_into_broker: Some(cap),
                max_moves_out_of_broker: Some(cap),
                ..Default::default()
            },
        }
    }

    /// The per-broker cap a sample is checked against, if any.
    pub fn broker_cap(self, cap: i64) -> Option<i64> {
        matches!(self, Variant::Capped | Variant::Throttled).then_some(cap)
    }
}

/// Every cap at the largest value a plan accepts.
pub fn uncapped() -> PlanCaps {
    let max = Some(i64::from(MAX_CAP));
    PlanCaps {
        max_moves_into_broker: max,
        max_moves_out_of_broker: max,
        max_dir_moves_per_broker: max,
        max_moves_in_cluster: max,
    }
}

/// A drain request of broker 4.
pub fn drain_request(caps: PlanCaps, throttle: Option<i64>, dry_run: bool) -> CreatePlanRequest {
    CreatePlanRequest {
        kind: Some(create_plan_request::Kind::DrainBroker(DrainBrokerPlan {
            broker: DRAINED,
        })),
        caps: Some(caps),
        throttle_rate: throttle,
        dry_run,
    }
}

/// Sends CreatePlan; the plan it answers, or its refusal as an error.
pub async fn create_plan(c: &ClusterClient, req: CreatePlanRequest) -> anyhow::Result<PlanInfo> {
    let r = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.create_plan(req).await }
        })
        .await
        .context("CreatePlan")?;
    if r.error_code != 0 {
        bail!("CreatePlan refused ({}): {}", r.error_code, r.error_message);
    }
    r.plan.context("CreatePlan answered no plan")
}

/// One plan as ListPlans shows it.
pub async fn show(c: &ClusterClient, id: u64, with_moves: bool) -> anyhow::Result<PlanInfo> {
    let r = c
        .admin_call(|mut a| async move {
            a.list_plans(ListPlansRequest {
                id: Some(id),
                with_moves,
            })
            .await
        })
        .await
        .context("ListPlans")?;
    if r.error_code != 0 {
        bail!("ListPlans: {}", r.error_message);
    }
    r.plans
        .into_iter()
        .next()
        .with_context(|| format!("plan {id} is not listed"))
}

/// Waits until plan `id` ends; its last answer.
pub async fn wait_plan(c: &ClusterClient, id: u64, every: Duration, timeout: Duration) -> anyhow::Result<PlanInfo> {
    let deadline = Instant::now() + timeout;
    loop {
        // A failed call (a node busy or changing leader) only means asking again.
        if let Ok(p) = show(c, id, false).await {
            if matches!(p.state.as_str(), "done" | "failed" | "cancelled") {
                return Ok(p);
            }
            if Instant::now() > deadline {
                bail!(
                    "plan {id} still {} after {} s: {} queued, {} running, {} done",
                    p.state,
                    timeout.as_secs(),
                    p.queued,
                    p.running,
                    p.done
                );
            }
        } else if Instant::now() > deadline {
            bail!("plan {id} not listed for {} s", timeout.as_secs());
        }
        tokio::time::sleep(every).await;
    }
}

/// Submits `moves` at once with AlterPartitionReassignments (no throttle) and waits until no
/// reassignment is left.
pub async fn submit_all(c: &ClusterClient, moves: &[PlanMove], timeout: Duration) -> anyhow::Result<()> {
    let req = AlterPartitionReassignmentsRequest {
        partitions: moves
            .iter()
            .map(|m| ReassignmentTarget {
                topic: m.topic.clone(),
                partition: m.partition,
                replicas: Some(Replicas {
                    brokers: m.to_replicas.clone(),
                }),
                log_dirs: vec![],
            })
            .collect(),
        throttle_rate: None,
        validate_only: false,
    };
    let r = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.alter_partition_reassignments(req).await }
        })
        .await
        .context("AlterPartitionReassignments")?;
    if r.error_code != 0 {
        bail!("AlterPartitionReassignments refused: {}", r.error_message);
    }
    if let Some(e) = r.results.iter().find(|r| r.error_code != 0) {
        bail!("AlterPartitionReassignments refused a partition: {e:?}");
    }
    let deadline = Instant::now() + timeout;
    loop {
        let left = c
            .admin_call(|mut a| async move {
                a.list_partition_reassignments(ListPartitionReassignmentsRequest::default())
                    .await
            })
            .await
            .map(|r| r.reassignments.len());
        if left.as_ref().is_ok_and(|n| *n == 0) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("reassignments still pending after {} s: {left:?}", timeout.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Bytes each broker receives and sends over `moves`: a move copies the partition's size into
/// each broker it adds, from the partition's leader (its first replica as planned).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flows {
    /// Bytes into each receiving broker.
    pub into: BTreeMap<i32, u64>,
    /// Bytes out of each sending broker.
    pub out: BTreeMap<i32, u64>,
}

/// The bytes each broker receives and sends over `moves`.
pub fn flows(moves: &[PlanMove]) -> Flows {
    let mut f = Flows::default();
    for m in moves {
        let added: Vec<i32> = m
            .to_replicas
            .iter()
            .copied()
            .filter(|b| !m.from_replicas.contains(b))
            .collect();
        // A move's bytes are the partition's size once per replica added.
        let each = m.bytes / added.len().max(1) as u64;
        for b in &added {
            *f.into.entry(*b).or_default() += each;
        }
        if let Some(leader) = m.from_replicas.first() {
            *f.out.entry(*leader).or_default() += each * added.len() as u64;
        }
    }
    f
}

/// The throttle's ideal time: the bytes spread evenly over the receiving brokers, each at
/// `rate` (bytes / (rate x receivers)); and the busiest broker's bytes, sent or received, at
/// `rate` (a throttle limits both a leader's sending and a follower's fetching).
pub fn throttle_ideal(f: &Flows, rate: i64) -> (f64, f64) {
    let rate = rate.max(1) as f64;
    let total: u64 = f.into.values().sum();
    let receivers = f.into.len().max(1) as f64;
    let busiest = f.into.values().chain(f.out.values()).copied().max().unwrap_or(0);
    (total as f64 / (rate * receivers), busiest as f64 / rate)
}

/// The most moves seen at once, from the samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Peak {
    /// Into any one broker.
    pub into: usize,
    /// Out of any one broker.
    pub out: usize,
    /// In the whole cluster.
    pub cluster: usize,
    /// Samples taken.
    pub samples: usize,
}

impl Peak {
    /// Takes one sample of the partition states in flight.
    pub fn take(&mut self, states: &[PartitionState]) {
        let (mut into, mut out) = (BTreeMap::<i32, usize>::new(), BTreeMap::<i32, usize>::new());
        let mut moving = 0;
        for s in states.iter().filter(|s| s.reassignment.is_some()) {
            moving += 1;
            for b in &s.adding {
                *into.entry(*b).or_default() += 1;
            }
            for b in &s.removing {
                *out.entry(*b).or_default() += 1;
            }
        }
        self.into = self.into.max(into.values().copied().max().unwrap_or(0));
        self.out = self.out.max(out.values().copied().max().unwrap_or(0));
        self.cluster = self.cluster.max(moving);
        self.samples += 1;
    }
}

/// Samples every partition state every 250 ms until `stop`.
pub fn sample_peaks(meta: metastore::Client, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Peak> {
    tokio::spawn(async move {
        let mut peak = Peak::default();
        while !stop.load(Ordering::Relaxed) {
            // A failed read skips one sample.
            if let Ok(r) = meta.range(keys::TOPICS, 0).await {
                let states: Vec<PartitionState> = r
                    .kvs
                    .iter()
                    .filter(|kv| matches!(keys::parse_topic_key(&kv.key), Some(keys::TopicKey::Partition(..))))
                    .filter_map(|kv| PartitionState::decode(kv.value.as_ref()).ok())
                    .collect();
                peak.take(&states);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        peak
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mv(from: &[i32], to: &[i32], bytes: u64) -> PlanMove {
        PlanMove {
            from_replicas: from.to_vec(),
            to_replicas: to.to_vec(),
            bytes,
            ..Default::default()
        }
    }

    #[test]
    fn the_throttle_ideal_spreads_bytes_over_the_receivers_and_names_the_busiest_broker() {
        let moves = [
            mv(&[4, 1], &[1, 2], 100),
            mv(&[1, 4], &[1, 3], 100),
            mv(&[4, 1], &[1, 3], 200),
        ];
        let f = flows(&moves);
        assert_eq!(f.into, BTreeMap::from([(2, 100), (3, 300)]));
        assert_eq!(f.out, BTreeMap::from([(1, 100), (4, 300)]));
        let (even, busiest) = throttle_ideal(&f, 50);
        assert!((even - 4.0).abs() < 1e-9, "{even}");
        assert!((busiest - 6.0).abs() < 1e-9, "{busiest}");
        // The drained broker, sending the most, bounds the drain.
        let f = flows(&[mv(&[4, 1], &[1, 2], 100), mv(&[4, 2], &[2, 3], 100)]);
        assert_eq!(throttle_ideal(&f, 50), (2.0, 4.0));
    }

    #[test]
    fn a_peak_counts_moves_per_broker_and_in_the_cluster() {
        let moving = |adding: Vec<i32>, removing: Vec<i32>| PartitionState {
            adding,
            removing,
            reassignment: Some(Default::default()),
            ..Default::default()
        };
        let mut p = Peak::default();
        p.take(&[
            moving(vec![1], vec![4]),
            moving(vec![1], vec![4]),
            moving(vec![2], vec![4]),
            PartitionState::default(),
        ]);
        p.take(&[moving(vec![3], vec![4])]);
        assert_eq!((p.into, p.out, p.cluster, p.samples), (2, 3, 3, 2));
    }

    #[test]
    fn only_the_capped_variants_are_checked_against_the_cap() {
        assert_eq!(Variant::Capped.broker_cap(5), Some(5));
        assert_eq!(Variant::Throttled.caps(4).max_moves_into_broker, Some(4));
        assert_eq!(Variant::Uncapped.broker_cap(5), None);
        assert_eq!(Variant::Bulk.caps(5), uncapped());
    }
}
