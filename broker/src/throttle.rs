//! Replication throttle: a leader holds back the bytes it sends to throttled followers (adding
//! replicas of a throttled reassignment that are not yet in sync) to a rate, across all of them.
//! A bucket of byte credit refills at the rate; a send may overdraw it, and the next throttled
//! send waits until the debt is paid, so the average holds whatever the batch sizes.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// Credit kept at most by default: a fifth of a second of traffic, so an idle throttle starts
/// near its rate.
const BURST_SECONDS: f64 = 0.2;

/// Bytes to move per step (a dir-move copy, a throttled follower's fetch): about a tenth of a
/// second at the throttle, so the rate holds over the move, and large pieces when unthrottled.
pub fn chunk_bytes(rate: Option<u64>) -> usize {
    match rate {
        None => 8 << 20,
        Some(r) => ((r / 10) as usize).clamp(16 << 10, 8 << 20),
    }
}

/// The pure state of the bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    /// Bytes that may be sent now; negative while in debt.
    pub credit: f64,
    /// When the credit was last brought up to date, in seconds on the caller's clock.
    pub at: f64,
}

impl Bucket {
    /// How long a send must wait at `now` at `rate` bytes/s before it may go, keeping at most
    /// `burst` seconds of credit.
    pub fn wait(&mut self, now: f64, rate: f64, burst: f64) -> f64 {
        self.credit = (self.credit + (now - self.at) * rate).min(rate * burst);
        self.at = now;
        if self.credit >= 0.0 {
            0.0
        } else {
            -self.credit / rate
        }
    }

    /// Charges bytes sent.
    pub fn charge(&mut self, bytes: usize) {
        self.credit -= bytes as f64;
    }
}

/// A throttle shared by the partitions one broker leads.
pub struct Throttle {
    bucket: Mutex<Bucket>,
    start: Instant,
    burst: f64,
}

impl Default for Throttle {
    fn default() -> Self {
        Self::with_burst(BURST_SECONDS)
    }
}

impl Throttle {
    /// A throttle that keeps at most `burst` seconds of unused credit.
    pub fn with_burst(burst: f64) -> Self {
        Self {
            bucket: Mutex::new(Bucket { credit: 0.0, at: 0.0 }),
            start: Instant::now(),
            burst,
        }
    }

    /// Waits until a throttled send at `rate` bytes/s may go.
    pub async fn acquire(&self, rate: u64) {
        loop {
            let now = self.start.elapsed().as_secs_f64();
            let wait = self.bucket.lock().wait(now, rate.max(1) as f64, self.burst);
            if wait <= 0.0 {
                return;
            }
            tokio::time::sleep(Duration::from_secs_f64(wait.min(1.0))).await;
        }
    }

    /// Records bytes sent to a throttled follower.
    pub fn charge(&self, bytes: usize) {
        self.bucket.lock().charge(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_rate_holds_with_large_sends() {
        let mut b = Bucket { credit: 0.0, at: 0.0 };
        let rate = 1000.0;
        let mut now = 0.0;
        let mut sent = 0usize;
        while now < 100.0 {
            now += b.wait(now, rate, BURST_SECONDS);
            b.charge(3000); // sends larger than a second's worth
            sent += 3000;
        }
        let achieved = sent as f64 / now;
        assert!((achieved - rate).abs() / rate < 0.05, "achieved {achieved} bytes/s");
    }

    #[test]
    fn chunks_follow_the_throttle() {
        assert_eq!(chunk_bytes(None), 8 << 20);
        assert_eq!(chunk_bytes(Some(10_000_000)), 1_000_000);
        assert_eq!(chunk_bytes(Some(1)), 16 << 10);
    }

    #[test]
    fn credit_is_capped_at_a_fifth_of_a_second() {
        let mut b = Bucket { credit: 0.0, at: 0.0 };
        assert_eq!(b.wait(100.0, 10.0, BURST_SECONDS), 0.0);
        assert_eq!(b.credit, 2.0);
    }
}
