//! `ferry plan show --watch`: live bars, one per plan (its moves as a whole, with the wave that
//! runs now) and one per broker a plan loads (bytes left, rate, ETA), refreshed every second
//! until every shown plan has ended.

use std::collections::BTreeMap;
use std::time::Duration;

use broker::ClusterClient;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use proto::ferry::{PlanBrokerLoad, PlanInfo};

use crate::plan_text::{is_terminal, plan_lines};
use crate::reassign_progress::{human_bytes, human_eta};

/// What one bar shows: its length and position in bytes, and the text after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bar {
    /// Bytes the bar stands for.
    pub length: u64,
    /// Bytes done.
    pub position: u64,
    /// Rate, ETA and counts.
    pub message: String,
}

/// The bar of a whole plan: bytes copied of its total; the message names the wave running now
/// (moves running and queued), the rate of its brokers together and the ETA.
pub fn plan_bar(p: &PlanInfo) -> Bar {
    let rate: u64 = p.brokers.iter().map(|b| b.rate).fold(0, u64::saturating_add);
    let message = if is_terminal(&p.state) {
        format!("{}: {} of {} moves done", p.state, p.done, p.moves_total)
    } else {
        format!(
            "{}, wave: {} running, {} queued, {} of {} done, {}/s, ETA {}",
            p.state,
            p.running,
            p.queued,
            p.done,
            p.moves_total,
            human_bytes(rate),
            human_eta(p.eta_ms)
        )
    };
    Bar {
        length: p.bytes_total,
        position: p.bytes_total.saturating_sub(p.bytes_left),
        message,
    }
}

/// The bar of one broker. The answer gives only its bytes left, so the bar's length is the most
/// it has had left while watched (`seen`), and the position what has gone since.
pub fn broker_bar(seen: u64, b: &PlanBrokerLoad) -> Bar {
    let length = seen.max(b.bytes_left);
    Bar {
        length,
        position: length - b.bytes_left,
        message: format!(
            "{} in, {} out, {} queued, {} left, {}/s, ETA {}",
            b.moving_in,
            b.moving_out,
            b.queued,
            human_bytes(b.bytes_left),
            human_bytes(b.rate),
            human_eta(b.eta_ms)
        ),
    }
}

/// Whether watching can stop: every plan shown has ended.
pub fn all_ended(plans: &[PlanInfo]) -> bool {
    plans.iter().all(|p| is_terminal(&p.state))
}

fn draw(bar: &ProgressBar, b: &Bar) {
    bar.set_length(b.length);
    bar.set_position(b.position);
    bar.set_message(b.message.clone());
}

/// Bars kept from one refresh to the next: the plans' and the brokers', by plan id (and broker).
struct Bars {
    multi: MultiProgress,
    style: ProgressStyle,
    plans: BTreeMap<u64, ProgressBar>,
    brokers: BTreeMap<(u64, i32), ProgressBar>,
}

impl Bars {
    fn bar(multi: &MultiProgress, style: &ProgressStyle, prefix: String) -> ProgressBar {
        multi.add(ProgressBar::new(0).with_style(style.clone()).with_prefix(prefix))
    }

    fn update(&mut self, plans: &[PlanInfo]) {
        for p in plans {
            let bar = self
                .plans
                .entry(p.id)
                .or_insert_with(|| Self::bar(&self.multi, &self.style, format!("plan {} {}", p.id, p.kind)));
            draw(bar, &plan_bar(p));
            if is_terminal(&p.state) && !bar.is_finished() {
                bar.finish();
            }
            for b in &p.brokers {
                let bar = self.brokers.entry((p.id, b.broker)).or_insert_with(|| {
                    Self::bar(&self.multi, &self.style, format!("  plan {} broker {}", p.id, b.broker))
                });
                let seen = bar.length().unwrap_or(0);
                draw(bar, &broker_bar(seen, b));
            }
            // A broker the plan no longer loads has nothing left.
            for ((id, broker), bar) in self.brokers.range((p.id, i32::MIN)..=(p.id, i32::MAX)) {
                let gone = !p.brokers.iter().any(|b| b.broker == *broker);
                if *id == p.id && (gone || is_terminal(&p.state)) && !bar.is_finished() {
                    bar.set_position(bar.length().unwrap_or(0));
                    bar.finish_with_message(if gone { "nothing left".into() } else { p.state.clone() });
                }
            }
        }
    }
}

/// Watches the plans that `fetch` answers until each has ended, then prints their final state.
pub async fn run<F, Fut>(c: &ClusterClient, mut fetch: F) -> anyhow::Result<()>
where
    F: FnMut(ClusterClient) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Vec<PlanInfo>>>,
{
    let style = ProgressStyle::with_template("{prefix:>22} [{bar:30}] {decimal_bytes}/{decimal_total_bytes} {msg}")
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    let mut bars = Bars {
        multi: MultiProgress::new(),
        style,
        plans: BTreeMap::new(),
        brokers: BTreeMap::new(),
    };
    loop {
        let plans = fetch(c.clone()).await?;
        bars.update(&plans);
        if all_ended(&plans) {
            // The bars stay drawn, ended; the final numbers follow as text below them.
            let Bars {
                multi,
                plans: p,
                brokers: b,
                ..
            } = bars;
            for bar in p.values().chain(b.values()).filter(|bar| !bar.is_finished()) {
                bar.finish();
            }
            drop((p, b));
            drop(multi);
            for line in plans.iter().flat_map(plan_lines) {
                println!("{line}");
            }
            if plans.is_empty() {
                println!("No plans found.");
            }
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan_text::tests::plan;

    fn load(broker: i32, bytes_left: u64, rate: u64, eta_ms: i64) -> PlanBrokerLoad {
        PlanBrokerLoad {
            broker,
            moving_in: 2,
            moving_out: 1,
            dir_moves: 0,
            queued: 3,
            bytes_left,
            rate,
            eta_ms,
            down: false,
        }
    }

    #[test]
    fn a_plan_bar_shows_bytes_copied_the_wave_the_rate_and_the_eta() {
        let mut p = plan(3, "running");
        p.moves_total = 10;
        p.running = 4;
        p.queued = 2;
        p.done = 4;
        p.bytes_total = 100_000_000;
        p.bytes_left = 40_000_000;
        p.eta_ms = 20_000;
        p.brokers = vec![
            load(4, 30_000_000, 1_500_000, 20_000),
            load(5, 10_000_000, 500_000, 20_000),
        ];
        assert_eq!(
            plan_bar(&p),
            Bar {
                length: 100_000_000,
                position: 60_000_000,
                message: "running, wave: 4 running, 2 queued, 4 of 10 done, 2.0 MB/s, ETA 20s".into(),
            }
        );
    }

    #[test]
    fn an_ended_plan_bar_says_how_it_ended() {
        let mut p = plan(3, "cancelled");
        p.moves_total = 10;
        p.done = 4;
        assert_eq!(plan_bar(&p).message, "cancelled: 4 of 10 moves done");
    }

    #[test]
    fn a_broker_bar_grows_to_the_most_left_and_fills_as_bytes_go() {
        let first = broker_bar(0, &load(4, 30_000_000, 0, -1));
        assert_eq!((first.length, first.position), (30_000_000, 0));
        assert_eq!(first.message, "2 in, 1 out, 3 queued, 30.0 MB left, 0 B/s, ETA unknown");
        let later = broker_bar(first.length, &load(4, 10_000_000, 2_000_000, 5_000));
        assert_eq!((later.length, later.position), (30_000_000, 20_000_000));
        assert!(
            later.message.ends_with("10.0 MB left, 2.0 MB/s, ETA 5s"),
            "{}",
            later.message
        );
        // A new wave adds bytes: the bar lengthens rather than going below zero.
        let grown = broker_bar(later.length, &load(4, 45_000_000, 2_000_000, 22_500));
        assert_eq!((grown.length, grown.position), (45_000_000, 0));
    }

    #[test]
    fn watching_ends_when_every_plan_has_ended() {
        assert!(all_ended(&[plan(1, "done"), plan(2, "cancelled")]));
        assert!(!all_ended(&[plan(1, "done"), plan(2, "paused")]));
        assert!(all_ended(&[]));
    }
}
