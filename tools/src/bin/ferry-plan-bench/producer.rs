//! The steady producer: records of a fixed size at a fixed rate, acks=all, each sent on its own
//! task at its time (so a slow answer does not delay the next send), retried as a Kafka
//! producer retries until acknowledged or 30 s have passed. Each latency, send to
//! acknowledgement, goes into the histogram of the phase it was sent in: idle (before the
//! drain) or during the drain.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use broker::ClusterClient;
use bytes::Bytes;
use hdrhistogram::Histogram;
use tokio::sync::{mpsc, Semaphore};

use crate::load::PRODUCE_TOPIC;

/// Sent before the drain.
pub const IDLE: u8 = 0;
/// Sent while the drain ran.
pub const DRAIN: u8 = 1;
/// Sent after the drain: not counted.
pub const AFTER: u8 = 2;

/// Sends in flight at most; a send past it is counted as dropped.
const MAX_IN_FLIGHT: usize = 2048;
/// A record not acknowledged by then counts as an error.
const GIVE_UP: Duration = Duration::from_secs(30);

/// Latency figures of one phase, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    /// Records acknowledged.
    pub count: u64,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

impl Summary {
    /// The figures of a histogram of microseconds.
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Self {
            count: h.len(),
            p50_ms: ms(h.value_at_quantile(0.5)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
        }
    }
}

/// What the producer measured.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// Before the drain.
    pub idle: Summary,
    /// During the drain.
    pub drain: Summary,
    /// Records never acknowledged.
    pub errors: u64,
    /// Sends answered with an error and tried again.
    pub retries: u64,
    /// Sends skipped because too many were in flight.
    pub dropped: u64,
}

/// A running producer.
pub struct Steady {
    phase: Arc<AtomicU8>,
    stop: Arc<AtomicBool>,
    handle: tokio::task::JoinHandle<Measured>,
}

/// One send's end: its phase, latency in µs (none when it gave up) and retries.
type Sent = (u8, Option<u64>, u64);

impl Steady {
    /// Starts sending `rate` records/s of `record_bytes` bytes, for at most `limit`.
    pub fn start(c: ClusterClient, partitions: u32, rate: u32, record_bytes: usize, limit: Duration) -> Self {
        let phase = Arc::new(AtomicU8::new(IDLE));
        let stop = Arc::new(AtomicBool::new(false));
        let handle = tokio::spawn(run(
            c,
            partitions,
            rate,
            record_bytes,
            limit,
            phase.clone(),
            stop.clone(),
        ));
        Self { phase, stop, handle }
    }

    /// Sends from now on count in `phase`.
    pub fn enter(&self, phase: u8) {
        self.phase.store(phase, Ordering::Relaxed);
    }

    /// Stops sending and waits for the sends in flight.
    pub async fn finish(self) -> anyhow::Result<Measured> {
        self.stop.store(true, Ordering::Relaxed);
        Ok(self.handle.await?)
    }
}

async fn run(
    c: ClusterClient,
    partitions: u32,
    rate: u32,
    record_bytes: usize,
    limit: Duration,
    phase: Arc<AtomicU8>,
    stop: Arc<AtomicBool>,
) -> Measured {
    let record = Bytes::from(vec![0x61; record_bytes]);
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let (tx, mut rx) = mpsc::unbounded_channel::<Sent>();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate.max(1))));
    let started = Instant::now();
    let mut m = Measured::default();
    let mut i: u64 = 0;
    while !stop.load(Ordering::Relaxed) && started.elapsed() < limit {
        tick.tick().await;
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            m.dropped += 1;
            continue;
        };
        let (c, tx, record, at) = (c.clone(), tx.clone(), record.clone(), phase.load(Ordering::Relaxed));
        let p = (i % u64::from(partitions.max(1))) as u32;
        i += 1;
        tokio::spawn(async move {
            let t = Instant::now();
            let mut retries = 0;
            let acked = loop {
                match c.produce_once(PRODUCE_TOPIC, p, vec![record.clone()], -1).await {
                    Ok(_) => break true,
                    Err(_) if t.elapsed() < GIVE_UP => {
                        retries += 1;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Err(_) => break false,
                }
            };
            let us = acked.then(|| t.elapsed().as_micros() as u64);
            // The receiver outlives every sender: `run` holds it until the last send ends.
            let _ = tx.send((at, us, retries));
            drop(slot);
        });
    }
    drop(tx);
    let mut idle = histogram();
    let mut drain = histogram();
    while let Some((at, us, retries)) = rx.recv().await {
        m.retries += retries;
        match (at, us) {
            (_, None) => m.errors += 1,
            (IDLE, Some(us)) => idle.saturating_record(us),
            (DRAIN, Some(us)) => drain.saturating_record(us),
            _ => {}
        }
    }
    m.idle = Summary::of(&idle);
    m.drain = Summary::of(&drain);
    m
}

/// Microseconds from 1 µs to 10 minutes, 3 significant digits.
fn histogram() -> Histogram<u64> {
    // The bounds are constants that new_with_bounds accepts (low >= 1, high >= 2 * low).
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_reads_milliseconds_from_microseconds() {
        let mut h = histogram();
        for us in 1..=100u64 {
            h.record(us * 1000).unwrap();
        }
        let s = Summary::of(&h);
        assert_eq!(s.count, 100);
        assert!((s.p50_ms - 50.0).abs() < 0.1, "{s:?}");
        assert!((s.p99_ms - 99.0).abs() < 0.1, "{s:?}");
        assert!((s.max_ms - 100.0).abs() < 0.1, "{s:?}");
        assert_eq!(Summary::of(&histogram()), Summary::default());
    }
}
