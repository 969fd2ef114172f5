//! The active controller: runs on the metastore's Raft leader and keeps partitions led. It
//! follows the metadata, and when brokers come or go it writes each partition's next state
//! (decided by [`crate::partition_change`]). Every write goes through a runner fenced by the
//! Raft term ([`crate::write_runner::term_guard`]), so a controller deposed mid-pass can never
//! write.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;
use metastore::types::Raft;
use metastore::{Client, FollowEvent};
use proto::cluster_view::{ClusterView, PartitionEntry, TopicEntry};
use proto::errors::{ErrorCode, Refusal};
use proto::ferry::{ControllerRecord, PartitionState};
use proto::{keys, topic_config};
use tokio::sync::mpsc::Receiver;
use tokio::task::JoinHandle;

use crate::partition_change::Election;
use crate::partition_change_builder::{Built, Elect, PartitionChangeBuilder};
use crate::reassign_admin;
use crate::store::put_op;
use crate::write_runner::{Plan, Runner};

/// How the active controller behaves.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Move leadership back to the preferred replica once it is in sync again
    /// (`auto.leader.rebalance.enable`).
    pub auto_leader_rebalance: bool,
    /// How often preferred leaders are checked (`leader.imbalance.check.interval`).
    pub rebalance_interval: Duration,
    /// The gauges the plan driver sets while this node leads.
    pub plan_metrics: crate::plan_metrics::PlanMetrics,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            auto_leader_rebalance: true,
            rebalance_interval: Duration::from_secs(5),
            plan_metrics: Default::default(),
        }
    }
}

/// One partition change the controller writes.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionWrite {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// The partition key's revision the change was decided on.
    pub revision: u64,
    /// The next state.
    pub state: PartitionState,
    /// It completes a reassignment (its record goes in the same transaction).
    pub completes: bool,
}

/// The partition changes a pass makes, over every partition or only those in `only`.
pub fn plan_pass(view: &ClusterView, rebalance: bool, only: Option<&BTreeSet<(String, u32)>>) -> Vec<PartitionWrite> {
    let live: BTreeSet<i32> = view.live_brokers();
    let offline = view.offline_replicas();
    let mut out = Vec::new();
    let mut plan_one = |topic: &str, t: &TopicEntry, p: u32, e: &PartitionEntry| {
        let election = match t.record.as_ref() {
            Some(r) if topic_config::unclean_election_allowed(&r.config) => Election::Unclean,
            _ => Election::Clean,
        };
        // A replica in a failed log dir counts as gone: it leaves the ISR and cannot lead.
        let off = (!offline.is_empty())
            .then(|| offline.get(&(topic.to_string(), p)))
            .flatten();
        let live_here = match off {
            Some(off) => std::borrow::Cow::Owned(live.difference(off).copied().collect()),
            None => std::borrow::Cow::Borrowed(&live),
        };
        let live = live_here.as_ref();
        // A move whose targets are all in sync completes here too (for example after a
        // controller failover between the ISR change and its completion).
        let elect = if rebalance {
            Elect::PreferredIfPossible
        } else {
            Elect::Needed
        };
        let built = PartitionChangeBuilder::new(&e.state, live)
            .election(election)
            .brokers_changed()
            .elect(elect)
            .complete()
            .build();
        // Only asked-for elections refuse, and none is asked for here.
        let Ok(Some(Built { state, completes })) = built else {
            return;
        };
        out.push(PartitionWrite {
            topic: topic.to_string(),
            partition: p,
            revision: e.mod_revision,
            state,
            completes,
        });
    };
    match only {
        // Looked up one by one: a pass after a few ISR changes must not walk every partition of
        // a 100,000-partition topic (it made ISR changes during a large move quadratic).
        Some(only) => {
            for (topic, p) in only {
                let Some(t) = view.topics.get(topic) else { continue };
                if let Some(e) = t.partitions.get(p) {
                    plan_one(topic, t, *p, e);
                }
            }
        }
        None => {
            for (topic, t) in &view.topics {
                for (p, e) in &t.partitions {
                    plan_one(topic, t, *p, e);
                }
            }
        }
    }
    out
}

/// Starts the controller loop of this node; it acts only while the node is Raft leader.
pub fn spawn(node_id: u64, raft: Raft, client: Client, cfg: ControllerConfig) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut metrics = raft.metrics();
        loop {
            let (leader, term) = {
                let m = metrics.borrow();
                (m.current_leader == Some(node_id), m.current_term)
            };
            if leader {
                tokio::select! {
                    _ = lead(node_id, term, &client, &cfg) => {}
                    _ = wait_until_deposed(&mut metrics, node_id, term) => {}
                }
            }
            if metrics.changed().await.is_err() {
                return;
            }
        }
    })
}

async fn wait_until_deposed(
    metrics: &mut tokio::sync::watch::Receiver<openraft::RaftMetrics<u64, metastore::types::Node>>,
    node_id: u64,
    term: u64,
) {
    loop {
        if metrics.changed().await.is_err() {
            return;
        }
        let m = metrics.borrow();
        if m.current_leader != Some(node_id) || m.current_term != term {
            return;
        }
    }
}

async fn remove_auto_throttles(client: &Client, view: &ClusterView, term: u64) {
    if let Err(e) = crate::throttles::remove_due(client, view, term).await {
        tracing::debug!(error = %e, "removing auto-remove throttles failed; retried at the next pass");
    }
}

/// Claims `/controller` for `term`, retrying while the metastore is unreachable; false when the
/// fence failed (a later term leads).
async fn claim(node_id: u64, term: u64, client: &Client) -> bool {
    let record = ControllerRecord {
        id: node_id,
        epoch: term,
    };
    let deposed = Refusal::new(ErrorCode::NOT_CONTROLLER, format!("term {term} no longer leads"));
    let runner = Runner::new(client, "controller claim", deposed).fenced(term);
    loop {
        let plan = Plan::write(vec![], vec![put_op(keys::CONTROLLER.into(), &record)], ());
        match runner.write(plan).await {
            Ok(Ok(())) => return true,
            Ok(Err(_)) => return false,
            Err(e) => {
                tracing::debug!(error = %e, "controller: claiming /controller failed, retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Gives a new cluster its id (`/cluster/id`), as a Kafka cluster has one from its first start:
/// 16 random bytes in Kafka's text form, marked generated. The write is guarded absent, so it
/// never replaces an id; `ferry migrate-zk` replaces a generated one with the Kafka cluster's.
async fn ensure_cluster_id(client: &Client, term: u64) {
    let record = proto::ferry::ClusterIdRecord {
        id: proto::kafka_uuid::encode(uuid::Uuid::new_v4()),
        generated: true,
    };
    let deposed = Refusal::new(ErrorCode::NOT_CONTROLLER, format!("term {term} no longer leads"));
    let runner = Runner::new(client, "cluster id", deposed).fenced(term);
    let plan = Plan::write(
        vec![crate::store::at_revision(keys::CLUSTER_ID.into(), 0)],
        vec![put_op(keys::CLUSTER_ID.into(), &record)],
        (),
    );
    if let Err(e) = runner.write(plan).await {
        // Written at the next term's start; answers name no id until then.
        tracing::warn!(error = %e, "cannot write the cluster id");
    }
}

/// What a batch of followed events changed: the partitions, and whether every partition must be
/// looked at (after a reset or a broker change).
#[derive(Default)]
struct Changed {
    partitions: BTreeSet<(String, u32)>,
    full: bool,
}

/// Applies `first` and every event already queued behind it to `view`, noting what changed.
fn absorb(view: &mut ClusterView, first: FollowEvent, follow: &mut Receiver<FollowEvent>, changed: &mut Changed) {
    let mut next = Some(first);
    while let Some(ev) = next {
        changed.full |= ev.is_reset();
        let changes = ev.changes();
        for (key, _, _) in &changes {
            match keys::parse_topic_key(key) {
                Some(keys::TopicKey::Partition(t, p)) => {
                    changed.partitions.insert((t.to_string(), p));
                }
                Some(keys::TopicKey::Topic(_)) => {}
                None => changed.full |= keys::parse_broker_key(key).is_some(),
            }
        }
        view.apply_all(ev.is_reset(), changes);
        next = follow.try_recv().ok();
    }
}

/// Partition changes a pass writes in one transaction. After a broker is lost, a pass changes
/// every partition it led: one Raft entry per change made a failover of tens of thousands of
/// partitions seconds of entries, each fsynced on every node.
pub const PASS_BATCH: usize = 256;

/// How many of a pass's batches are in flight at once.
const BATCHES_IN_FLIGHT: usize = 4;

/// Writes a pass's partition changes in batches of [`PASS_BATCH`], each fenced by `term`.
/// Returns whether any write could not reach the metastore.
async fn write_pass(client: &Client, term: u64, mut plan: Vec<PartitionWrite>) -> bool {
    let mut batches = Vec::with_capacity(plan.len().div_ceil(PASS_BATCH));
    while !plan.is_empty() {
        let rest = plan.split_off(plan.len().min(PASS_BATCH));
        batches.push(std::mem::replace(&mut plan, rest));
    }
    let unreachable: Vec<bool> = futures::stream::iter(batches)
        .map(|b| write_batch(client, term, b))
        .buffer_unordered(BATCHES_IN_FLIGHT)
        .collect()
        .await;
    unreachable.into_iter().any(|u| u)
}

/// Writes `batch` in one transaction. A failed guard (one of its partitions changed since the
/// pass read it, or the term no longer leads) writes each change alone, so that the rest land;
/// a change whose own guard failed is decided again from the events that changed it. Returns
/// whether the metastore could not be reached.
async fn write_batch(client: &Client, term: u64, batch: Vec<PartitionWrite>) -> bool {
    let write = |ws: &[PartitionWrite]| {
        // A completed state carries no record: one put writes the move's end.
        let (guards, ops) = ws
            .iter()
            .map(|w| {
                let c = reassign_admin::change(&w.topic, w.partition, w.revision, &w.state);
                (c.guard, c.op)
            })
            .unzip();
        let changed = Refusal::new(ErrorCode::INVALID_UPDATE_VERSION, "a partition changed");
        async move {
            Runner::new(client, "partition changes", changed)
                .fenced(term)
                .write(Plan::write(guards, ops, ()))
                .await
        }
    };
    let done = |ws: &[PartitionWrite]| {
        for w in ws {
            tracing::info!(topic = w.topic, partition = w.partition, leader = w.state.leader, isr = ?w.state.isr, completes = w.completes, "partition changed");
        }
    };
    match write(&batch).await {
        Ok(Ok(())) => done(&batch),
        Err(_) => return true,
        Ok(Err(_)) if batch.len() == 1 => {}
        Ok(Err(_)) => {
            for w in batch.chunks(1) {
                match write(w).await {
                    Ok(Ok(())) => done(w),
                    Ok(Err(_)) => {}
                    Err(_) => return true,
                }
            }
        }
    }
    false
}

/// One pass's decision: the writes, and whether auto-remove throttles must be looked at.
struct Pass {
    plan: Vec<PartitionWrite>,
    check_throttles: bool,
}

/// Takes `first` (with the events queued behind it) into `view` and plans the pass. Pure CPU,
/// seconds of it over a million partitions, so the caller runs it off the runtime.
fn decide(
    view: &mut ClusterView,
    first: Option<FollowEvent>,
    follow: &mut Receiver<FollowEvent>,
    rebalance: bool,
) -> Pass {
    // After a reset, a tick or a broker change every partition is looked at; otherwise only the
    // partitions that changed.
    let mut changed = Changed {
        full: first.is_none(),
        ..Changed::default()
    };
    if let Some(ev) = first {
        absorb(view, ev, follow, &mut changed);
    }
    let Changed { partitions, full } = changed;
    let ended = partitions
        .iter()
        .any(|(t, p)| view.partition(t, *p).is_some_and(|e| !e.state.is_moving()));
    Pass {
        plan: plan_pass(view, rebalance, (!full).then_some(&partitions)),
        check_throttles: full || ended,
    }
}

async fn lead(node_id: u64, term: u64, client: &Client, cfg: &ControllerConfig) {
    if !claim(node_id, term, client).await {
        return;
    }
    tracing::info!(node_id, term, "active controller");
    ensure_cluster_id(client, term).await;
    // Plans run beside the partition passes, and stop with them when the node is deposed.
    tokio::join!(
        keep_partitions_led(term, client, cfg),
        crate::plan_driver::run(term, client, &cfg.plan_metrics)
    );
}

/// Follows `/brokers/` and writes each pass's partition changes, fenced by `term`.
async fn keep_partitions_led(term: u64, client: &Client, cfg: &ControllerConfig) {
    let mut follow = client.follow("/brokers/");
    let mut view = ClusterView::default();
    let mut loaded = false;
    let mut tick = tokio::time::interval(cfg.rebalance_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let (first, rebalance) = tokio::select! {
            ev = follow.recv() => {
                let Some(ev) = ev else { return };
                loaded = true;
                (Some(ev), false)
            }
            _ = tick.tick() => (None, cfg.auto_leader_rebalance),
        };
        if !loaded {
            continue;
        }
        let (v, f, pass) = crate::off_runtime(move || {
            let pass = decide(&mut view, first, &mut follow, rebalance);
            (view, follow, pass)
        })
        .await;
        (view, follow) = (v, f);
        if !pass.plan.is_empty() && write_pass(client, term, pass.plan).await {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Auto-remove throttles whose scope stopped moving go after this pass's writes (they must
        // not delay elections); looked at when a move may have ended and on every tick.
        if pass.check_throttles {
            remove_auto_throttles(client, &view, term).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use proto::ferry::{BrokerRegistration, TopicPartition, TopicRecord};

    #[test]
    fn a_replica_in_a_failed_dir_leaves_the_isr_and_loses_leadership() {
        let mut v = ClusterView::default();
        for id in [1, 2] {
            let mut reg = BrokerRegistration {
                id,
                ..Default::default()
            };
            if id == 1 {
                reg.offline_replicas = vec![TopicPartition {
                    topic: "t".into(),
                    partition: 0,
                }];
            }
            v.apply(&keys::broker(id), Some(&reg.encode_to_vec()), 1);
        }
        v.apply(&keys::topic("t"), Some(&TopicRecord::default().encode_to_vec()), 2);
        let st = |leader| PartitionState {
            replicas: vec![1, 2],
            leader,
            isr: vec![1, 2],
            ..Default::default()
        };
        v.apply(&keys::partition("t", 0), Some(&st(1).encode_to_vec()), 3);
        v.apply(&keys::partition("t", 1), Some(&st(1).encode_to_vec()), 3);
        let plan = plan_pass(&v, true, None);
        // Only t-0's replica on broker 1 is offline; t-1 stays as it is.
        assert_eq!(plan.len(), 1, "{plan:?}");
        assert_eq!((plan[0].partition, plan[0].state.leader), (0, 2));
        assert_eq!(plan[0].state.isr, vec![2]);
        // The preferred leader is not elected back while its replica is offline.
        v.apply(&keys::partition("t", 0), Some(&plan[0].state.encode_to_vec()), 4);
        assert!(plan_pass(&v, true, None).is_empty());
    }
}
