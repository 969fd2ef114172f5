//! The plans' Prometheus metrics, set by the active controller's plan driver:
//! `ferry_plan_moves{state}` (moves of plans not ended, by state) and `ferry_plan_bytes_left`.
//! Each node has its own set in its own registry; only the active controller's moves.

use prometheus::{IntGauge, IntGaugeVec, Opts, Registry};

use crate::plan::{MoveState, Plan};

/// The move states counted, as the label spells them.
pub const STATES: [&str; 5] = ["queued", "running", "done", "skipped", "failed"];

/// One node's plan metrics.
#[derive(Clone)]
pub struct PlanMetrics {
    /// `ferry_plan_moves{state}`.
    pub moves: IntGaugeVec,
    /// `ferry_plan_bytes_left`.
    pub bytes_left: IntGauge,
}

impl Default for PlanMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for PlanMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlanMetrics")
    }
}

impl PlanMetrics {
    /// Fresh metrics, registered nowhere yet.
    pub fn new() -> Self {
        // Constant valid names and labels: construction cannot fail (the unit test builds them).
        let moves = IntGaugeVec::new(
            Opts::new(
                "ferry_plan_moves",
                "Moves of the plans the controller runs, by state (plans not ended).",
            ),
            &["state"],
        )
        .expect("valid gauge");
        let bytes_left = IntGauge::new(
            "ferry_plan_bytes_left",
            "Bytes the running plans' moves not ended have left to copy.",
        )
        .expect("valid gauge");
        Self { moves, bytes_left }
    }

    /// Registers these metrics.
    pub fn register(&self, registry: &Registry) -> prometheus::Result<()> {
        registry.register(Box::new(self.moves.clone()))?;
        registry.register(Box::new(self.bytes_left.clone()))
    }

    /// Sets the gauges from the plans not ended (ended plans count nothing).
    pub fn set<'a>(&self, plans: impl IntoIterator<Item = &'a Plan>) {
        let (counts, left) = tally(plans);
        for (state, n) in STATES.iter().zip(counts) {
            self.moves.with_label_values(&[state]).set(n);
        }
        self.bytes_left.set(left);
    }

    /// Zeroes the gauges (the node stopped leading).
    pub fn clear(&self) {
        self.set([]);
    }
}

/// Moves per [`STATES`] entry and bytes left (of moves not ended) over the plans not ended.
pub fn tally<'a>(plans: impl IntoIterator<Item = &'a Plan>) -> ([i64; 5], i64) {
    let mut counts = [0i64; 5];
    let mut left: u64 = 0;
    for p in plans.into_iter().filter(|p| !p.state.is_terminal()) {
        for m in &p.moves {
            let i = match m.state {
                MoveState::Queued | MoveState::Waiting(_) => 0,
                MoveState::Running { .. } => 1,
                MoveState::Done => 2,
                MoveState::Skipped(_) => 3,
                MoveState::Failed(_) => 4,
            };
            counts[i] += 1;
            if !m.state.is_terminal() {
                left = left.saturating_add(m.bytes);
            }
        }
    }
    (counts, i64::try_from(left).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gauges_register_and_count_nothing_without_plans() {
        let m = PlanMetrics::new();
        let r = Registry::new();
        m.register(&r).expect("registers");
        m.clear();
        let text = prometheus::TextEncoder::new().encode_to_string(&r.gather()).unwrap();
        assert!(text.contains("ferry_plan_moves{state=\"queued\"} 0"), "{text}");
        assert!(text.contains("ferry_plan_bytes_left 0"), "{text}");
    }
}
