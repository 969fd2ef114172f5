//! The one clock every node reads: wall time for what is stored or compared across nodes (a
//! reassignment's start, a staged transaction's age), monotonic time for local timeouts and lag.
//! Injected, so that a test can hold time still or move it by hand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A shared handle on a clock; clones read the same time.
#[derive(Clone, Debug)]
pub struct Clock(Arc<Source>);

#[derive(Debug)]
enum Source {
    /// The system's clocks; monotonic time counts from when the clock was made.
    System { start: Instant },
    /// Time set by a test: both readings are the same counter.
    Manual(AtomicU64),
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl Clock {
    /// The system's wall and monotonic clocks.
    pub fn system() -> Self {
        Self(Arc::new(Source::System { start: Instant::now() }))
    }

    /// A clock that stands at `ms` until [`Clock::advance`] moves it.
    pub fn manual(ms: u64) -> Self {
        Self(Arc::new(Source::Manual(AtomicU64::new(ms))))
    }

    /// Moves a manual clock forward by `ms`; a system clock ignores it.
    pub fn advance(&self, ms: u64) {
        if let Source::Manual(t) = &*self.0 {
            t.fetch_add(ms, Ordering::Relaxed);
        }
    }

    /// Milliseconds since the Unix epoch (0 if the system clock is before it).
    pub fn wall_ms(&self) -> u64 {
        match &*self.0 {
            Source::System { .. } => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            Source::Manual(t) => t.load(Ordering::Relaxed),
        }
    }

    /// Milliseconds on a clock that never goes back, from an arbitrary start.
    pub fn mono_ms(&self) -> u64 {
        match &*self.0 {
            Source::System { start } => start.elapsed().as_millis() as u64,
            Source::Manual(t) => t.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced_and_clones_share_it() {
        let c = Clock::manual(1_000);
        let d = c.clone();
        assert_eq!((c.wall_ms(), c.mono_ms()), (1_000, 1_000));
        d.advance(250);
        assert_eq!((c.wall_ms(), c.mono_ms()), (1_250, 1_250));
    }

    #[test]
    fn the_system_clock_reads_the_epoch_and_never_goes_back() {
        let c = Clock::system();
        assert!(c.wall_ms() > 1_600_000_000_000);
        let a = c.mono_ms();
        c.advance(10_000);
        assert!(c.mono_ms() >= a && c.mono_ms() < a + 10_000);
    }
}
