//! Measuring a run: its window, each client's counts and latencies, and the merged report.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::args::{Args, Workload};

/// The measured part of a run: requests that start in it are counted.
#[derive(Clone, Copy)]
pub struct Window {
    warm_until: Instant,
    end: Instant,
}

impl Window {
    /// From now: the warm-up, then the measured seconds.
    pub fn starting_now(args: &Args) -> Self {
        let warm_until = Instant::now() + Duration::from_secs_f64(args.warmup);
        Self {
            warm_until,
            end: warm_until + Duration::from_secs_f64(args.duration),
        }
    }
}

/// Counts and latencies of one client, or of a whole run once merged.
pub struct Meter {
    window: Window,
    /// Requests that succeeded in the window.
    pub ops: u64,
    /// Requests that failed in the window.
    pub errors: u64,
    /// The first failure, for the report.
    pub first_error: Option<String>,
    /// Latencies of the successes, in µs.
    pub hist: Histogram<u64>,
}

impl Meter {
    /// An empty meter for a client measuring in `window`.
    pub fn new(window: Window) -> Self {
        Self {
            window,
            ops: 0,
            errors: 0,
            first_error: None,
            // Constant bounds hdrhistogram accepts (low >= 1, high >= 2 * low, 3 significant
            // figures of at most 5), so this cannot fail.
            hist: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds"),
        }
    }

    /// The start of the next request, or None once the run is over.
    pub fn next(&self) -> Option<Instant> {
        let now = Instant::now();
        (now < self.window.end).then_some(now)
    }

    /// Counts a request that started at `started`, unless it started in the warm-up.
    pub fn record<E: std::fmt::Display>(&mut self, started: Instant, res: Result<(), E>) {
        if started < self.window.warm_until {
            return;
        }
        match res {
            Ok(()) => {
                self.ops += 1;
                let _ = self.hist.record(started.elapsed().as_micros().max(1) as u64);
            }
            Err(e) => {
                self.errors += 1;
                self.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }

    /// Waits for the clients and merges what they measured.
    pub async fn join(window: Window, tasks: Vec<tokio::task::JoinHandle<Meter>>) -> anyhow::Result<Meter> {
        let mut all = Meter::new(window);
        for t in tasks {
            let m = t.await?;
            all.ops += m.ops;
            all.errors += m.errors;
            all.first_error = all.first_error.or(m.first_error);
            all.hist.add(m.hist)?;
        }
        Ok(all)
    }
}

/// What a produce run sends.
#[derive(Clone, Copy)]
pub struct ProduceShape {
    /// Acks asked of the leaders (-1 for all).
    pub acks: i32,
    /// Records per request.
    pub batch_records: usize,
    /// Bytes per record.
    pub record_bytes: usize,
}

/// One measured run.
pub struct Report {
    /// What ran.
    pub workload: Workload,
    /// Concurrent clients.
    pub clients: usize,
    /// Set for produce runs.
    pub produce: Option<ProduceShape>,
    /// What the clients measured, merged.
    pub meter: Meter,
    /// Measured seconds.
    pub secs: f64,
}
