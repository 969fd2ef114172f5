//! The metastore's Prometheus metrics: Raft commit latency, leader changes seen, and the store's
//! revision. Each node has its own set, registered in the node's own registry.

use std::sync::{Arc, Weak};

use prometheus::{Histogram, HistogramOpts, IntCounter, PullingGauge, Registry};
use tokio::task::JoinHandle;

use crate::state_machine::SmShared;
use crate::types::{NodeId, Raft};

/// Upper bounds of the commit latency buckets, in seconds: 0.5 ms to 10 s.
const COMMIT_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// One node's metastore metrics.
#[derive(Clone)]
pub struct MetastoreMetrics {
    /// `ferry_raft_commit_latency_seconds`: from a proposal on the leader to its commit and apply.
    pub commit_latency: Histogram,
    /// `ferry_raft_leader_changes_total`: changes of the Raft leader this node has seen.
    pub leader_changes: IntCounter,
}

impl Default for MetastoreMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl MetastoreMetrics {
    /// Fresh metrics, registered nowhere yet.
    pub fn new() -> Self {
        let opts = HistogramOpts::new(
            "ferry_raft_commit_latency_seconds",
            "Time from a proposal on the Raft leader to its commit and apply.",
        )
        .buckets(COMMIT_BUCKETS.to_vec());
        Self {
            // Constant valid names and strictly increasing buckets: construction cannot fail
            // (the unit test below builds them).
            commit_latency: Histogram::with_opts(opts).expect("valid histogram"),
            leader_changes: IntCounter::new(
                "ferry_raft_leader_changes_total",
                "Changes of the Raft leader seen by this node.",
            )
            .expect("valid counter"),
        }
    }

    /// Registers these metrics and a `ferry_metastore_revision` gauge that reads `sm` when scraped.
    pub fn register(&self, registry: &Registry, sm: &Arc<SmShared>) -> prometheus::Result<()> {
        registry.register(Box::new(self.commit_latency.clone()))?;
        registry.register(Box::new(self.leader_changes.clone()))?;
        // Process-wide: `ferry dev`'s nodes in one process share it.
        registry.register(Box::new(crate::grpc_tls::handshake_failures().clone()))?;
        let sm: Weak<SmShared> = Arc::downgrade(sm);
        let revision = PullingGauge::new(
            "ferry_metastore_revision",
            "The metastore's current revision, as applied on this node.",
            Box::new(move || sm.upgrade().map_or(0.0, |sm| sm.inner.read().revision() as f64)),
        )?;
        registry.register(Box::new(revision))
    }
}

/// Whether `now` is a new leader after `last`, remembering it. Losing the leader (an election
/// under way) is not a change; the next leader is, unless the same node wins again.
pub fn leader_changed(last: &mut Option<NodeId>, now: Option<NodeId>) -> bool {
    match now {
        Some(l) if *last != Some(l) => {
            *last = Some(l);
            true
        }
        _ => false,
    }
}

/// Counts leader changes seen on `raft`'s metrics until Raft stops.
pub fn watch_leader(raft: &Raft, counter: IntCounter) -> JoinHandle<()> {
    let mut rx = raft.metrics();
    tokio::spawn(async move {
        let mut last = None;
        loop {
            let now = rx.borrow_and_update().current_leader;
            if leader_changed(&mut last, now) {
                counter.inc();
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_changes_ignore_elections_and_repeats() {
        let mut last = None;
        let seen: Vec<bool> = [None, Some(1), Some(1), None, Some(1), Some(2), None, Some(3)]
            .into_iter()
            .map(|l| leader_changed(&mut last, l))
            .collect();
        assert_eq!(seen, [false, true, false, false, false, true, false, true]);
    }

    #[test]
    fn metrics_build_and_register_once() {
        let m = MetastoreMetrics::new();
        let r = Registry::new();
        r.register(Box::new(m.commit_latency.clone())).unwrap();
        r.register(Box::new(m.leader_changes.clone())).unwrap();
        m.commit_latency.observe(0.003);
        let names: Vec<String> = r.gather().iter().map(|f| f.name().to_string()).collect();
        assert_eq!(
            names,
            ["ferry_raft_commit_latency_seconds", "ferry_raft_leader_changes_total"]
        );
    }
}
