//! The text of `ferry plan`: a dry run's moves and totals, and `show`'s plans, brokers, notes
//! and moves. Pure functions of the `Admin` service's answers.

use proto::ferry::{PlanBrokerLoad, PlanCaps, PlanInfo, PlanMove};

use crate::reassign_progress::{human_bytes, human_eta};

/// Plan states after which nothing more happens.
const TERMINAL: [&str; 4] = ["done", "cancelled", "failed", "dry-run"];

/// Whether a plan in `state` has ended (nothing to watch).
pub fn is_terminal(state: &str) -> bool {
    TERMINAL.contains(&state)
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `[1,2,3]`, as Kafka's tools print a replica list.
fn replicas(r: &[i32]) -> String {
    let ids: Vec<String> = r.iter().map(i32::to_string).collect();
    format!("[{}]", ids.join(","))
}

/// `t-0: [1,2,3] -> [2,3,4] (dirs 4:/d1)`: the partition, its replicas before and after, and
/// the dirs named for the target replicas (none when every broker chooses).
fn move_head(m: &PlanMove) -> String {
    let dirs: Vec<String> = m
        .to_replicas
        .iter()
        .zip(&m.to_dirs)
        .filter(|(_, d)| !d.is_empty())
        .map(|(b, d)| format!("{b}:{d}"))
        .collect();
    let dirs = if dirs.is_empty() {
        String::new()
    } else {
        format!(" (dirs {})", dirs.join(", "))
    };
    format!(
        "{}-{}: {} -> {}{dirs}",
        m.topic,
        m.partition,
        replicas(&m.from_replicas),
        replicas(&m.to_replicas)
    )
}

/// A dry run's line for one move: where it goes and the bytes it copies.
pub fn dry_run_move_line(m: &PlanMove) -> String {
    format!("{}, {}", move_head(m), human_bytes(m.bytes))
}

/// `show --moves`' line for one move: where it goes, its bytes, its state and why.
pub fn move_line(m: &PlanMove) -> String {
    let mut s = format!("{}, {}, {}", move_head(m), human_bytes(m.bytes), m.state);
    if m.state == "running" {
        s.push_str(&format!(", {} left", human_bytes(m.bytes_left)));
    }
    if !m.reason.is_empty() {
        s.push_str(&format!(": {}", m.reason));
    }
    s
}

/// The throttle as the plan carries it: `1.0 MB/s`, or `none`.
fn throttle_text(rate: u64) -> String {
    if rate == 0 {
        "none".into()
    } else {
        format!("{}/s", human_bytes(rate))
    }
}

/// The caps under the names of their flags; a cap the answer leaves out shows as `default`.
pub fn caps_text(c: Option<&PlanCaps>) -> String {
    let c = c.copied().unwrap_or_default();
    let v = |x: Option<i64>| x.map_or("default".to_string(), |n| n.to_string());
    format!(
        "max-moves-into-broker {}, max-moves-out-of-broker {}, max-dir-moves-per-broker {}, max-moves-in-cluster {}",
        v(c.max_moves_into_broker),
        v(c.max_moves_out_of_broker),
        v(c.max_dir_moves_per_broker),
        v(c.max_moves_in_cluster)
    )
}

/// A dry run's answer: each move, then the totals and the expected time at the throttle.
pub fn dry_run_lines(p: &PlanInfo) -> Vec<String> {
    let mut out = vec![format!(
        "Dry run of a {} plan for {}; nothing was stored.",
        p.kind, p.target
    )];
    out.extend(p.moves.iter().map(dry_run_move_line));
    let n = u64::from(p.moves_total);
    let time = if p.throttle_rate == 0 {
        "no throttle given, so no expected time".to_string()
    } else {
        format!(
            "expected time {} at {}",
            human_eta(p.eta_ms),
            throttle_text(p.throttle_rate)
        )
    };
    out.push(format!(
        "Total: {n} move{}, {}, {time}.",
        plural(n),
        human_bytes(p.bytes_total)
    ));
    out.push(format!("Caps: {}.", caps_text(p.caps.as_ref())));
    out.extend(p.notes.iter().map(|n| format!("Note: {n}")));
    out
}

/// One broker's load under a plan.
pub fn broker_line(b: &PlanBrokerLoad) -> String {
    format!(
        "broker {}{}: {} moving in, {} moving out, {} dir move{}, {} queued, {} left, {}/s, ETA {}",
        b.broker,
        if b.down { " (down)" } else { "" },
        b.moving_in,
        b.moving_out,
        b.dir_moves,
        plural(u64::from(b.dir_moves)),
        b.queued,
        human_bytes(b.bytes_left),
        human_bytes(b.rate),
        human_eta(b.eta_ms)
    )
}

/// `show`'s lines for one plan: its state, counts, bytes, caps, brokers, notes and, when the
/// answer holds them, its moves.
pub fn plan_lines(p: &PlanInfo) -> Vec<String> {
    let mut out = vec![
        format!("Plan {}: {} of {}, {}", p.id, p.kind, p.target, p.state),
        format!(
            "  moves: {} total, {} queued, {} running, {} done, {} skipped, {} failed",
            p.moves_total, p.queued, p.running, p.done, p.skipped, p.failed
        ),
        format!(
            "  bytes: {} left of {}, ETA {}",
            human_bytes(p.bytes_left),
            human_bytes(p.bytes_total),
            human_eta(p.eta_ms)
        ),
        format!(
            "  caps: {}; throttle {}",
            caps_text(p.caps.as_ref()),
            throttle_text(p.throttle_rate)
        ),
    ];
    out.extend(p.brokers.iter().map(|b| format!("  {}", broker_line(b))));
    out.extend(p.notes.iter().map(|n| format!("  note: {n}")));
    out.extend(p.moves.iter().map(|m| format!("  {}", move_line(m))));
    out
}

/// `show`'s lines for every plan, or a line saying there are none.
pub fn show_lines(plans: &[PlanInfo]) -> Vec<String> {
    if plans.is_empty() {
        return vec!["No plans found.".into()];
    }
    plans.iter().flat_map(plan_lines).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A move of `t-<partition>` from `[1,2,3]` to `[2,3,4]`.
    pub fn mv(partition: u32, bytes: u64, state: &str) -> PlanMove {
        PlanMove {
            topic: "t".into(),
            partition,
            from_replicas: vec![1, 2, 3],
            to_replicas: vec![2, 3, 4],
            to_dirs: vec![],
            bytes,
            state: state.into(),
            reason: String::new(),
            bytes_left: 0,
        }
    }

    /// A drain of broker 1 with the defaults' caps.
    pub fn plan(id: u64, state: &str) -> PlanInfo {
        PlanInfo {
            id,
            kind: "drain-broker".into(),
            target: "broker 1".into(),
            state: state.into(),
            caps: Some(PlanCaps {
                max_moves_into_broker: Some(5),
                max_moves_out_of_broker: Some(5),
                max_dir_moves_per_broker: Some(2),
                max_moves_in_cluster: Some(50),
            }),
            eta_ms: -1,
            ..Default::default()
        }
    }

    #[test]
    fn a_dry_run_prints_each_move_then_the_totals_at_the_throttle() {
        let mut p = plan(0, "dry-run");
        let mut m0 = mv(0, 2_000_000, "queued");
        m0.to_dirs = vec![String::new(), String::new(), "/d2".into()];
        p.moves = vec![m0, mv(1, 3_000_000, "queued")];
        p.moves_total = 2;
        p.bytes_total = 5_000_000;
        p.throttle_rate = 1_000_000;
        p.eta_ms = 5_000;
        p.notes = vec!["t-2 left out: a reassignment already moves it".into()];
        assert_eq!(
            dry_run_lines(&p),
            vec![
                "Dry run of a drain-broker plan for broker 1; nothing was stored.",
                "t-0: [1,2,3] -> [2,3,4] (dirs 4:/d2), 2.0 MB",
                "t-1: [1,2,3] -> [2,3,4], 3.0 MB",
                "Total: 2 moves, 5.0 MB, expected time 5s at 1.0 MB/s.",
                "Caps: max-moves-into-broker 5, max-moves-out-of-broker 5, max-dir-moves-per-broker 2, max-moves-in-cluster 50.",
                "Note: t-2 left out: a reassignment already moves it",
            ]
        );
    }

    #[test]
    fn a_dry_run_without_a_throttle_says_it_has_no_expected_time() {
        let mut p = plan(0, "dry-run");
        p.moves = vec![mv(0, 999, "queued")];
        p.moves_total = 1;
        p.bytes_total = 999;
        let lines = dry_run_lines(&p);
        assert_eq!(
            lines[2],
            "Total: 1 move, 999 B, no throttle given, so no expected time."
        );
    }

    #[test]
    fn show_prints_counts_bytes_caps_brokers_notes_and_moves() {
        let mut p = plan(7, "running");
        p.throttle_rate = 2_000_000;
        p.moves_total = 5;
        p.queued = 1;
        p.running = 1;
        p.done = 1;
        p.skipped = 1;
        p.failed = 1;
        p.bytes_total = 50_000_000;
        p.bytes_left = 12_000_000;
        p.eta_ms = 65_000;
        p.brokers = vec![PlanBrokerLoad {
            broker: 4,
            moving_in: 1,
            moving_out: 0,
            dir_moves: 0,
            queued: 1,
            bytes_left: 12_000_000,
            rate: 2_000_000,
            eta_ms: 6_000,
            down: true,
        }];
        p.notes = vec!["t-9 left out: moved by hand".into()];
        let mut running = mv(0, 10_000_000, "running");
        running.bytes_left = 2_000_000;
        let mut queued = mv(1, 10_000_000, "queued");
        queued.reason = "broker 4 is down".into();
        p.moves = vec![running, queued];
        assert_eq!(
            show_lines(&[p]),
            vec![
                "Plan 7: drain-broker of broker 1, running",
                "  moves: 5 total, 1 queued, 1 running, 1 done, 1 skipped, 1 failed",
                "  bytes: 12.0 MB left of 50.0 MB, ETA 1m 05s",
                "  caps: max-moves-into-broker 5, max-moves-out-of-broker 5, max-dir-moves-per-broker 2, max-moves-in-cluster 50; throttle 2.0 MB/s",
                "  broker 4 (down): 1 moving in, 0 moving out, 0 dir moves, 1 queued, 12.0 MB left, 2.0 MB/s, ETA 6s",
                "  note: t-9 left out: moved by hand",
                "  t-0: [1,2,3] -> [2,3,4], 10.0 MB, running, 2.0 MB left",
                "  t-1: [1,2,3] -> [2,3,4], 10.0 MB, queued: broker 4 is down",
            ]
        );
    }

    #[test]
    fn show_without_plans_says_so_and_absent_caps_read_default() {
        assert_eq!(show_lines(&[]), vec!["No plans found."]);
        let mut p = plan(1, "done");
        p.caps = None;
        assert!(plan_lines(&p)[3].starts_with("  caps: max-moves-into-broker default,"));
        assert!(plan_lines(&p)[3].ends_with("; throttle none"));
    }

    #[test]
    fn only_ended_plans_are_terminal() {
        for s in ["done", "cancelled", "failed", "dry-run"] {
            assert!(is_terminal(s), "{s}");
        }
        for s in ["running", "paused", "cancelling"] {
            assert!(!is_terminal(s), "{s}");
        }
    }
}
