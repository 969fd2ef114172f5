//! The order in which a replica's locks are taken: `state`, then `log`, then `future`. Every lock
//! of a replica is taken through [`lock`], which in debug builds asserts that the thread holds no
//! lock of the same or a later rank, so a path that could deadlock fails in the tests that run
//! it, not once in production.

use std::ops::{Deref, DerefMut};

use parking_lot::{Mutex, MutexGuard};

/// A lock's place in the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rank {
    /// `Replica::state`: role, metadata, watermark.
    State = 0,
    /// `Replica::log`: the current log.
    Log = 1,
    /// `Replica::future`: the log a dir move fills.
    Future = 2,
}

#[cfg(debug_assertions)]
thread_local! {
    /// The ranks this thread holds, one bit each.
    static HELD: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}

/// A held lock that gives its rank back when dropped.
pub struct Ordered<'a, T> {
    guard: MutexGuard<'a, T>,
    #[cfg(debug_assertions)]
    rank: Rank,
}

/// Takes `m` at `rank`, asserting (in debug builds) the lock order first.
pub fn lock<T>(m: &Mutex<T>, rank: Rank) -> Ordered<'_, T> {
    #[cfg(not(debug_assertions))]
    let _ = rank;
    #[cfg(debug_assertions)]
    HELD.with(|held| {
        let h = held.get();
        assert!(
            h >> rank as u8 == 0,
            "replica lock order broken: taking {rank:?} while holding ranks {h:#05b} (order: state, log, future)"
        );
        held.set(h | 1 << rank as u8);
    });
    Ordered {
        guard: m.lock(),
        #[cfg(debug_assertions)]
        rank,
    }
}

impl<T> Drop for Ordered<'_, T> {
    fn drop(&mut self) {
        #[cfg(debug_assertions)]
        HELD.with(|held| held.set(held.get() & !(1 << self.rank as u8)));
    }
}

impl<T> Deref for Ordered<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for Ordered<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_in_order_are_fine_and_dropping_gives_the_rank_back() {
        let (a, b, c) = (Mutex::new(1), Mutex::new(2), Mutex::new(3));
        {
            let _s = lock(&a, Rank::State);
            let _l = lock(&b, Rank::Log);
            let _f = lock(&c, Rank::Future);
        }
        let _l = lock(&b, Rank::Log);
        drop(_l);
        let _s = lock(&a, Rank::State);
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "replica lock order broken")]
    fn taking_the_state_under_the_log_is_caught() {
        let (a, b) = (Mutex::new(1), Mutex::new(2));
        let _l = lock(&b, Rank::Log);
        let _s = lock(&a, Rank::State);
    }
}
