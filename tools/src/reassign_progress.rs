//! `ferry reassign --progress [--watch]`: per partition and in total, the bytes each adding
//! replica has copied and still lacks, the rate and the ETA; with `--watch`, live progress bars
//! until every reassignment is done. Without `--watch`, a line per broker then says how many
//! `__consumer_offsets` partitions it leads and groups it coordinates.

use std::time::Duration;

use broker::ClusterClient;
use controller::reassign_progress::{copies_eta_ms, totals};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use proto::ferry::{ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, OngoingReassignment};

/// Partitions that get their own bar with `--watch`; the rest count in the total.
const BARS: usize = 20;

/// `12.3 MB`, in powers of 1000 as Kafka's throttles are given.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < UNITS.len() {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `1m 05s`, or `unknown` for a negative ETA.
pub fn human_eta(ms: i64) -> String {
    if ms < 0 {
        return "unknown".into();
    }
    let s = (ms + 999) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

async fn report(c: &ClusterClient) -> anyhow::Result<ListPartitionReassignmentsResponse> {
    let req = ListPartitionReassignmentsRequest {
        partitions: vec![],
        with_progress: true,
    };
    Ok(c.admin_call(|mut a| {
        let req = req.clone();
        async move { a.list_partition_reassignments(req).await }
    })
    .await?)
}

/// What a progress bar shows: bytes copied, bytes left and the ETA in ms (`copies_eta_ms`, the
/// same rule for one partition and for the total).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarState {
    /// Bytes copied.
    pub copied: u64,
    /// Bytes left.
    pub left: u64,
    /// Milliseconds to go, -1 when unknown.
    pub eta_ms: i64,
}

/// The bar of every copy in `entries`: one partition's, or the total.
pub fn bar_state(entries: &[OngoingReassignment]) -> BarState {
    let (copied, left, _) = totals(entries);
    BarState {
        copied,
        left,
        eta_ms: copies_eta_ms(entries.iter().flat_map(|e| &e.progress)),
    }
}

/// The lines of one report.
pub fn lines(l: &ListPartitionReassignmentsResponse) -> Vec<String> {
    let mut out = Vec::new();
    for e in &l.reassignments {
        for p in &e.progress {
            let to_dir = match p.log_dir.as_str() {
                "" => String::new(),
                d => format!(" to log dir {d}"),
            };
            out.push(format!(
                "{}-{}: replica {}{to_dir}: {} copied, {} left, {}/s, ETA {}",
                e.topic,
                e.partition,
                p.broker,
                human_bytes(p.bytes_copied),
                human_bytes(p.bytes_left),
                human_bytes(p.rate_bytes_per_sec),
                human_eta(p.eta_ms)
            ));
        }
    }
    let (copied, left, rate) = totals(&l.reassignments);
    let eta = bar_state(&l.reassignments).eta_ms;
    out.push(format!(
        "Total: {} partition{} moving, {} copied, {} left, {}/s, ETA {}",
        l.reassignments.len(),
        if l.reassignments.len() == 1 { "" } else { "s" },
        human_bytes(copied),
        human_bytes(left),
        human_bytes(rate),
        human_eta(eta)
    ));
    out
}

/// Which broker coordinates how many groups: reassignments move `__consumer_offsets` leaders too.
async fn print_coordinators(c: &ClusterClient) -> anyhow::Result<()> {
    for line in crate::coordinators::lines(&crate::coordinators::gather(c).await?) {
        println!("{line}");
    }
    Ok(())
}

fn show(bar: &ProgressBar, s: BarState) {
    bar.set_length(s.copied + s.left);
    bar.set_position(s.copied);
    bar.set_message(human_eta(s.eta_ms));
}

/// Runs `--progress`, and with `watch` the live bars.
pub async fn run(c: &ClusterClient, watch: bool) -> anyhow::Result<()> {
    // A first report starts this node's samples, so the second one has rates.
    let first = report(c).await?;
    if first.reassignments.is_empty() {
        println!("No partition reassignments found.");
        return print_coordinators(c).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    if !watch {
        for line in lines(&report(c).await?) {
            println!("{line}");
        }
        return print_coordinators(c).await;
    }
    let multi = MultiProgress::new();
    let style =
        ProgressStyle::with_template("{prefix:>24} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {msg}")
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
    let total = multi.add(ProgressBar::new(0).with_style(style.clone()).with_prefix("total"));
    let mut bars: Vec<(String, ProgressBar)> = Vec::new();
    loop {
        let l = report(c).await?;
        if l.reassignments.is_empty() {
            total.finish_with_message("done");
            for (_, b) in &bars {
                b.finish_with_message("done");
            }
            println!("All partition reassignments are complete.");
            return Ok(());
        }
        show(&total, bar_state(&l.reassignments));
        for e in l.reassignments.iter().take(BARS) {
            let name = format!("{}-{}", e.topic, e.partition);
            let bar = match bars.iter().find(|(n, _)| *n == name) {
                Some((_, b)) => b.clone(),
                None => {
                    let b = multi.add(ProgressBar::new(0).with_style(style.clone()).with_prefix(name.clone()));
                    bars.push((name.clone(), b.clone()));
                    b
                }
            };
            show(&bar, bar_state(std::slice::from_ref(e)));
        }
        // Partitions that finished leave the list: their bars end full.
        for (name, b) in &bars {
            if !l
                .reassignments
                .iter()
                .any(|e| format!("{}-{}", e.topic, e.partition) == *name)
                && !b.is_finished()
            {
                b.set_position(b.length().unwrap_or(0));
                b.finish_with_message("done");
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::ferry::{OngoingReassignment, ReplicaProgress};

    #[test]
    fn sizes_and_etas_read_well() {
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(12_345_678), "12.3 MB");
        assert_eq!(human_eta(-1), "unknown");
        assert_eq!(human_eta(65_000), "1m 05s");
        assert_eq!(human_eta(4_000), "4s");
    }

    #[test]
    fn the_total_and_the_partition_bar_of_a_one_partition_move_agree() {
        // Two adding replicas of one partition, at different rates.
        let e = OngoingReassignment {
            topic: "t".into(),
            partition: 0,
            adding: vec![4, 5],
            progress: vec![
                ReplicaProgress {
                    broker: 4,
                    bytes_left: 55_000_000,
                    bytes_copied: 5_000_000,
                    rate_bytes_per_sec: 1_000_000,
                    ..Default::default()
                },
                ReplicaProgress {
                    broker: 5,
                    bytes_left: 56_000_000,
                    bytes_copied: 4_000_000,
                    rate_bytes_per_sec: 500_000,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let partition = bar_state(std::slice::from_ref(&e));
        let l = ListPartitionReassignmentsResponse {
            reassignments: vec![e],
            cancel_in_progress: false,
            ..Default::default()
        };
        assert_eq!(partition, bar_state(&l.reassignments));
        // The slower replica decides: 56 MB at 0.5 MB/s.
        assert_eq!(partition.eta_ms, 112_000);
        assert!(lines(&l).last().unwrap().ends_with("ETA 1m 52s"), "{:?}", lines(&l));
    }

    #[test]
    fn a_report_has_a_line_per_adding_replica_and_a_total() {
        let l = ListPartitionReassignmentsResponse {
            reassignments: vec![OngoingReassignment {
                topic: "t".into(),
                partition: 0,
                adding: vec![4],
                progress: vec![
                    ReplicaProgress {
                        broker: 4,
                        bytes_left: 40_000_000,
                        bytes_copied: 10_000_000,
                        rate_bytes_per_sec: 5_000_000,
                        eta_ms: 8_000,
                        log_dir: String::new(),
                    },
                    ReplicaProgress {
                        broker: 2,
                        bytes_left: 0,
                        bytes_copied: 1_000,
                        rate_bytes_per_sec: 0,
                        eta_ms: 0,
                        log_dir: "/d2".into(),
                    },
                ],
                ..Default::default()
            }],
            cancel_in_progress: false,
            ..Default::default()
        };
        assert_eq!(
            lines(&l),
            vec![
                "t-0: replica 4: 10.0 MB copied, 40.0 MB left, 5.0 MB/s, ETA 8s".to_string(),
                "t-0: replica 2 to log dir /d2: 1.0 kB copied, 0 B left, 0 B/s, ETA 0s".to_string(),
                "Total: 1 partition moving, 10.0 MB copied, 40.0 MB left, 5.0 MB/s, ETA 8s".to_string(),
            ]
        );
    }
}
