//! A plan as ListPlans, CreatePlan and AlterPlan answer it ([`PlanInfo`]): counts per state,
//! bytes in all and left, the load on each broker (moving in and out, queued, bytes left, rate,
//! ETA), each move with its state and reason, and notes. Bytes left of a running move come from
//! the progress the reassignments already measure ([`crate::reassign_progress`]). Pure.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proto::ferry::{PlanBrokerLoad, PlanCaps, PlanInfo, PlanMove, ReplicaProgress};

use crate::plan::{Move, MoveState, Plan, PlanKind, PlanState, Reason, Summary};
use crate::reassign_progress::eta_ms;

/// The progress of the plan's running moves: each partition's adding (or dir-moving) replicas.
pub type Progress = HashMap<(String, u32), Vec<ReplicaProgress>>;

/// Most partitions a note names; the rest are counted.
const NOTE_NAMES: usize = 10;

/// `drain-broker`, `drain-dir`, `balance`, `balance-dirs`.
pub fn kind_name(kind: &PlanKind) -> &'static str {
    match kind {
        PlanKind::DrainBroker { .. } => "drain-broker",
        PlanKind::DrainDir { .. } => "drain-dir",
        PlanKind::Balance { .. } => "balance",
        PlanKind::BalanceDirs { .. } => "balance-dirs",
    }
}

/// What a plan was made for, e.g. `broker 3` or `broker 3 dir /data/d1`.
pub fn target(plan: &Plan) -> String {
    match plan.kind {
        PlanKind::DrainBroker { broker } => format!("broker {broker}"),
        PlanKind::DrainDir { broker, dir } => format!("broker {broker} dir {}", plan.names.dir(dir)),
        PlanKind::Balance { tolerance_pct } => format!("all brokers within {tolerance_pct}%"),
        PlanKind::BalanceDirs { broker, tolerance_pct } => format!("dirs of broker {broker} within {tolerance_pct}%"),
    }
}

/// `running`, `paused`, `cancelling`, `done`, `cancelled`, `failed`.
pub fn state_name(state: PlanState) -> &'static str {
    match state {
        PlanState::Running => "running",
        PlanState::Paused => "paused",
        PlanState::Cancelling => "cancelling",
        PlanState::Done => "done",
        PlanState::Cancelled => "cancelled",
        PlanState::Failed => "failed",
    }
}

/// `queued` (waiting too), `running`, `done`, `skipped`, `failed`.
pub fn move_state_name(state: MoveState) -> &'static str {
    match state {
        MoveState::Queued | MoveState::Waiting(_) => "queued",
        MoveState::Running { .. } => "running",
        MoveState::Done => "done",
        MoveState::Skipped(_) => "skipped",
        MoveState::Failed(_) => "failed",
    }
}

/// Bytes a move has left: all of them before it starts, the measured remainder while it runs
/// (all of them until measured), none once it ended.
fn move_left(m: &Move, progress: Option<&Vec<ReplicaProgress>>) -> u64 {
    match m.state {
        MoveState::Running { .. } => progress.map_or(m.bytes, |ps| ps.iter().map(|p| p.bytes_left).sum()),
        s if s.is_pending() => m.bytes,
        _ => 0,
    }
}

/// The answer for `plan`, with its moves when `with_moves`, and `progress` of its running moves.
pub fn info(plan: &Plan, progress: &Progress, with_moves: bool) -> PlanInfo {
    let mut out = PlanInfo {
        id: plan.id,
        kind: kind_name(&plan.kind).into(),
        target: target(plan),
        state: state_name(plan.state).into(),
        caps: Some(PlanCaps {
            max_moves_into_broker: Some(i64::from(plan.caps.into_broker)),
            max_moves_out_of_broker: Some(i64::from(plan.caps.out_of_broker)),
            max_dir_moves_per_broker: Some(i64::from(plan.caps.dir_moves_per_broker)),
            max_moves_in_cluster: Some(i64::from(plan.caps.cluster)),
        }),
        throttle_rate: plan.throttle_rate,
        moves_total: plan.moves.len() as u32,
        ..Default::default()
    };
    let mut brokers: BTreeMap<i32, PlanBrokerLoad> = BTreeMap::new();
    let mut by_hand = Vec::new();
    for m in &plan.moves {
        let (topic, p) = (plan.names.topic(m.partition), m.partition.partition);
        let prog = progress.get(&(topic.to_string(), p));
        let left = move_left(m, prog);
        match m.state {
            MoveState::Queued | MoveState::Waiting(_) => out.queued += 1,
            MoveState::Running { .. } => out.running += 1,
            MoveState::Done => out.done += 1,
            MoveState::Skipped(r) => {
                out.skipped += 1;
                if matches!(r, Reason::MovedByHand | Reason::ChangedByHand) {
                    by_hand.push(format!("{topic}-{p}"));
                }
            }
            MoveState::Failed(_) => out.failed += 1,
        }
        out.bytes_total = out.bytes_total.saturating_add(m.bytes);
        out.bytes_left = out.bytes_left.saturating_add(left);
        if !m.state.is_terminal() {
            add_load(&mut brokers, m, left, prog);
        }
        if with_moves {
            out.moves.push(move_info(plan, m, left));
        }
    }
    for b in brokers.values_mut() {
        b.eta_ms = eta_ms(b.bytes_left, b.rate);
    }
    out.eta_ms = brokers
        .values()
        .map(|b| b.eta_ms)
        .try_fold(0i64, |acc, e| (e >= 0).then_some(acc.max(e)))
        .unwrap_or(-1);
    out.brokers = brokers.into_values().collect();
    if !by_hand.is_empty() {
        let shown: Vec<&str> = by_hand.iter().take(NOTE_NAMES).map(String::as_str).collect();
        let more = by_hand.len().saturating_sub(NOTE_NAMES);
        out.notes.push(format!(
            "{} partition(s) left out because they were moved by hand: {}{}",
            by_hand.len(),
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    out
}

/// The load entry of broker `b`.
fn load_of(brokers: &mut BTreeMap<i32, PlanBrokerLoad>, b: i32) -> &mut PlanBrokerLoad {
    brokers.entry(b).or_insert_with(|| PlanBrokerLoad {
        broker: b,
        ..Default::default()
    })
}

/// Adds a move not ended to the loads of the brokers it copies into, removes from, or moves
/// between dirs of.
fn add_load(brokers: &mut BTreeMap<i32, PlanBrokerLoad>, m: &Move, left: u64, prog: Option<&Vec<ReplicaProgress>>) {
    let load = m.load();
    let running = matches!(m.state, MoveState::Running { .. });
    let receivers = (load.into.len() + load.dir.len()).max(1) as u64;
    for b in load.into.iter().chain(&load.dir) {
        let measured = prog.and_then(|ps| ps.iter().find(|p| p.broker == *b));
        let e = load_of(brokers, *b);
        e.bytes_left = e
            .bytes_left
            .saturating_add(measured.map_or(left / receivers, |p| p.bytes_left));
        e.rate = e.rate.saturating_add(measured.map_or(0, |p| p.rate_bytes_per_sec));
    }
    for (list, what) in [(&load.into, 0), (&load.out, 1), (&load.dir, 2)] {
        for b in list {
            let e = load_of(brokers, *b);
            match (running, what) {
                (false, _) => e.queued += 1,
                (true, 0) => e.moving_in += 1,
                (true, 1) => e.moving_out += 1,
                (true, _) => e.dir_moves += 1,
            }
        }
    }
}

/// One move as answered.
fn move_info(plan: &Plan, m: &Move, left: u64) -> PlanMove {
    let reason = match m.state {
        MoveState::Waiting(r) | MoveState::Skipped(r) | MoveState::Failed(r) => r.describe(&plan.names),
        _ => String::new(),
    };
    PlanMove {
        topic: plan.names.topic(m.partition).to_string(),
        partition: m.partition.partition,
        from_replicas: m.from.iter().map(|r| r.broker).collect(),
        to_replicas: m.to.iter().map(|r| r.broker).collect(),
        to_dirs: m
            .to
            .iter()
            .map(|r| {
                if r.dir.is_named() {
                    plan.names.dir(r.dir).to_string()
                } else {
                    String::new()
                }
            })
            .collect(),
        bytes: m.bytes,
        state: move_state_name(m.state).into(),
        reason,
        bytes_left: left,
    }
}

/// A dry run's answer: the plan's moves, state `dry-run`, the expected time at its throttle,
/// and a note of the partitions the planner left out.
pub fn dry_run(plan: &Plan, summary: &Summary) -> PlanInfo {
    let mut out = info(plan, &Progress::new(), true);
    out.state = "dry-run".into();
    out.eta_ms = summary
        .expected_secs(plan.throttle_rate)
        .map_or(-1, |s| i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX));
    out
}

/// The note of partitions a planner left out because a reassignment already moves them.
pub fn left_out_note(summary: &Summary) -> Option<String> {
    (summary.left_out > 0).then(|| {
        format!(
            "{} partition(s) left out because a reassignment (by hand or another plan) already moves them",
            summary.left_out
        )
    })
}

/// Names why running moves of `info` cannot finish: a target broker that is not registered
/// (`live` holds the registered ones). A running move keeps no reason in the plan, so `show`
/// would print it running with nothing said while it waits for a dead broker. Each broker's
/// load says whether the broker is down.
pub fn mark_stuck(info: &mut PlanInfo, live: &BTreeSet<i32>) {
    for b in info.brokers.iter_mut() {
        b.down = !live.contains(&b.broker);
    }
    let running = move_state_name(MoveState::Running { since: 0 });
    for m in info
        .moves
        .iter_mut()
        .filter(|m| m.state == running && m.reason.is_empty())
    {
        if let Some(b) = m.to_replicas.iter().find(|b| !live.contains(b)) {
            m.reason = Reason::BrokerDown(*b).to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(state: &str, to: &[i32]) -> PlanMove {
        PlanMove {
            to_replicas: to.to_vec(),
            state: state.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_running_move_into_a_dead_broker_says_so_and_the_others_say_nothing() {
        let mut info = PlanInfo {
            moves: vec![
                moved("running", &[5, 1]),
                moved("running", &[2, 1]),
                moved("done", &[5, 2]),
                moved("queued", &[5, 3]),
            ],
            ..Default::default()
        };
        info.moves[3].reason = "broker 5 is down".into();
        info.brokers = [5, 1]
            .map(|broker| PlanBrokerLoad {
                broker,
                ..Default::default()
            })
            .into();
        mark_stuck(&mut info, &BTreeSet::from([1, 2, 3]));
        let reasons: Vec<&str> = info.moves.iter().map(|m| m.reason.as_str()).collect();
        assert_eq!(reasons, ["broker 5 is down", "", "", "broker 5 is down"]);
        // Its load says it too.
        let down: Vec<(i32, bool)> = info.brokers.iter().map(|b| (b.broker, b.down)).collect();
        assert_eq!(down, [(5, true), (1, false)]);
    }
}
