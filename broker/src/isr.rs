//! A partition leader's view of its followers: the high watermark and when the ISR should grow
//! or shrink. Pure functions over follower progress; the broker's driver feeds them fetches and
//! clock ticks and sends the ISR changes they decide to the controller.

use std::collections::{HashMap, HashSet};

use crate::log_dirs::TopicPartition;

/// How often every partition a broker leads is checked for a lagging follower, given the lag
/// limit: a quarter of it (Kafka checks every half), at least 100 ms and at most 2.5 s. Followers
/// that may join are checked sooner, as their fetches name them ([`Candidates`]).
pub fn full_scan_every_ms(lag_max_ms: u64) -> u64 {
    (lag_max_ms / 4).clamp(100, 2_500)
}

/// The partitions whose ISR may be able to grow: a follower outside the ISR fetched, or an ISR
/// change ended. The ISR driver checks them within its next tick instead of walking every
/// partition it leads each tick (20,000 idle partitions took a fifth of a core that way). Its
/// lock is a leaf: nothing else is taken while it is held.
#[derive(Debug, Default)]
pub struct Candidates(parking_lot::Mutex<HashSet<TopicPartition>>);

impl Candidates {
    /// Names a partition to check.
    pub fn add(&self, tp: TopicPartition) {
        self.0.lock().insert(tp);
    }

    /// The partitions named since the last call.
    pub fn take(&self) -> HashSet<TopicPartition> {
        std::mem::take(&mut *self.0.lock())
    }
}

/// What the leader knows of one follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerProgress {
    /// The follower's log end offset, from its last fetch.
    pub leo: i64,
    /// When the follower was last known to have every record the leader had (ms, monotonic).
    pub caught_up_ms: u64,
    /// When it last fetched.
    pub last_fetch_ms: u64,
    /// The leader's log end offset at that fetch.
    pub leader_leo_at_last_fetch: i64,
    /// The follower's process, from its last fetch (0: not known). Only the process the
    /// follower's registration names may join the ISR.
    pub incarnation: u64,
}

impl FollowerProgress {
    /// A follower first seen at `now_ms`, counted as caught up from then, so a new leader gives
    /// its ISR a full lag window before dropping anyone.
    pub fn new(now_ms: u64) -> Self {
        Self {
            leo: -1,
            caught_up_ms: now_ms,
            last_fetch_ms: now_ms,
            leader_leo_at_last_fetch: i64::MAX,
            incarnation: 0,
        }
    }

    /// Records a fetch at `fetch_offset` while the leader's log ends at `leader_leo`. A follower
    /// that reached what the leader had at its previous fetch was caught up at that time; one
    /// that reaches the leader's end now is caught up now.
    pub fn on_fetch(&mut self, fetch_offset: i64, leader_leo: i64, now_ms: u64) {
        if fetch_offset >= leader_leo {
            self.caught_up_ms = now_ms;
        } else if fetch_offset >= self.leader_leo_at_last_fetch {
            self.caught_up_ms = self.caught_up_ms.max(self.last_fetch_ms);
        }
        self.leo = fetch_offset;
        self.last_fetch_ms = now_ms;
        self.leader_leo_at_last_fetch = leader_leo;
    }
}

impl FollowerProgress {
    /// A follower that already has everything the leader has is caught up now, however long
    /// its fetch has been parked at the leader waiting for records: idle partitions never lag.
    pub fn observe_leader_end(&mut self, leader_leo: i64, now_ms: u64) {
        if self.leo >= leader_leo {
            self.caught_up_ms = now_ms;
        }
    }
}

/// The ISR the high watermark counts: the current one and, while a change is in flight, every
/// member it asks for (KIP-497's maximal ISR). A joiner counts from the moment it is proposed; a
/// leaver counts until the change is stored.
/// Walked, not collected: the leader recomputes its watermark on every follower fetch.
pub fn maximal<'a>(isr: &'a [i32], pending: Option<&'a [i32]>) -> impl Iterator<Item = &'a i32> + 'a {
    isr.iter()
        .chain(pending.unwrap_or_default().iter().filter(move |b| !isr.contains(b)))
}

/// The high watermark: the smallest log end offset over the ISR, never moving back. An ISR
/// member the leader has not heard from holds it where it is.
pub fn high_watermark<'a>(
    leader: i32,
    leader_leo: i64,
    isr: impl IntoIterator<Item = &'a i32>,
    followers: &HashMap<i32, FollowerProgress>,
    current: i64,
) -> i64 {
    let mut hw = leader_leo;
    for r in isr.into_iter().filter(|r| **r != leader) {
        match followers.get(r) {
            Some(p) if p.leo >= 0 => hw = hw.min(p.leo),
            _ => return current,
        }
    }
    hw.max(current)
}

/// When an ISR decision is made, and `replica.lag.time.max.ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LagClock {
    /// Now, in ms on the replica's monotonic clock.
    pub now_ms: u64,
    /// A member not caught up for longer than this leaves the ISR.
    pub lag_max_ms: u64,
}

/// The ISR the leader should ask for, or `None` to keep it: members (other than the leader) not
/// caught up within `lag_max_ms` leave; replicas that have reached the high watermark and are
/// caught up join, when the process that fetched is the one registered (`registered`: each
/// registered broker's incarnation). A restarted broker can catch up before the registration
/// of the process before it expires; counted in sync then, it would drop out again at that
/// expiry, when the controller sees the broker go.
pub fn next_isr(
    leader: i32,
    hw: i64,
    isr: &[i32],
    replicas: &[i32],
    followers: &HashMap<i32, FollowerProgress>,
    registered: &HashMap<i32, u64>,
    clock: LagClock,
) -> Option<Vec<i32>> {
    let LagClock { now_ms, lag_max_ms } = clock;
    let lagging = |r: &i32| match followers.get(r) {
        Some(p) => now_ms.saturating_sub(p.caught_up_ms) > lag_max_ms,
        None => false,
    };
    let mut next: Vec<i32> = isr.iter().copied().filter(|r| *r == leader || !lagging(r)).collect();
    for r in replicas {
        if next.contains(r) {
            continue;
        }
        if let Some(p) = followers.get(r) {
            let its_own = p.incarnation != 0 && registered.get(r) == Some(&p.incarnation);
            if its_own && p.leo >= hw && now_ms.saturating_sub(p.caught_up_ms) <= lag_max_ms {
                next.push(*r);
            }
        }
    }
    (next != isr).then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(leo: i64, caught_up_ms: u64) -> FollowerProgress {
        FollowerProgress {
            leo,
            caught_up_ms,
            last_fetch_ms: caught_up_ms,
            leader_leo_at_last_fetch: leo,
            incarnation: 7,
        }
    }

    const CLOCK: LagClock = LagClock {
        now_ms: 20_000,
        lag_max_ms: 10_000,
    };

    /// Every broker registered by the process that fetched in [`progress`].
    fn registered() -> HashMap<i32, u64> {
        (1..=3).map(|b| (b, 7)).collect()
    }

    #[test]
    fn the_full_scan_runs_four_times_per_lag_window_within_bounds() {
        assert_eq!(full_scan_every_ms(10_000), 2_500);
        assert_eq!(full_scan_every_ms(30_000), 2_500);
        assert_eq!(full_scan_every_ms(1_000), 250);
        assert_eq!(full_scan_every_ms(200), 100);
    }

    #[test]
    fn candidates_are_taken_once() {
        let c = Candidates::default();
        let tp = |p| ("t".to_string(), p);
        c.add(tp(1));
        c.add(tp(1));
        c.add(tp(2));
        assert_eq!(c.take().len(), 2);
        assert!(c.take().is_empty());
    }

    #[test]
    fn a_proposed_joiner_holds_the_watermark_before_the_change_is_stored() {
        let f = HashMap::from([(2, progress(10, 0)), (3, progress(6, 0))]);
        // Broker 3 is proposed to join at offset 6: records past it wait for it.
        assert_eq!(high_watermark(1, 10, maximal(&[1, 2], Some(&[1, 2, 3])), &f, 6), 6);
        // With nothing in flight, only the ISR counts.
        assert_eq!(high_watermark(1, 10, maximal(&[1, 2], None), &f, 6), 10);
        // A proposed leaver still counts until the change is stored.
        assert_eq!(
            maximal(&[1, 2, 3], Some(&[1, 2])).copied().collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
    }

    #[test]
    fn high_watermark_is_min_over_isr_and_never_goes_back() {
        let f = HashMap::from([(2, progress(5, 0)), (3, progress(9, 0))]);
        assert_eq!(high_watermark(1, 10, &[1, 2, 3], &f, 0), 5);
        assert_eq!(high_watermark(1, 10, &[1, 3], &f, 0), 9);
        assert_eq!(high_watermark(1, 10, &[1], &f, 0), 10);
        assert_eq!(high_watermark(1, 10, &[1, 2], &f, 7), 7);
        // An ISR member not heard from holds the watermark.
        assert_eq!(high_watermark(1, 10, &[1, 4], &f, 3), 3);
    }

    #[test]
    fn lagging_followers_leave_and_caught_up_ones_join() {
        let reg = registered();
        let f = HashMap::from([(2, progress(10, 15_000)), (3, progress(4, 0))]);
        assert_eq!(
            next_isr(1, 10, &[1, 2, 3], &[1, 2, 3], &f, &reg, CLOCK),
            Some(vec![1, 2])
        );
        let f = HashMap::from([(2, progress(10, 19_000)), (3, progress(10, 19_500))]);
        assert_eq!(
            next_isr(1, 10, &[1, 2], &[1, 2, 3], &f, &reg, CLOCK),
            Some(vec![1, 2, 3])
        );
        assert_eq!(next_isr(1, 10, &[1, 2, 3], &[1, 2, 3], &f, &reg, CLOCK), None);
        // Behind the high watermark: not yet.
        let f = HashMap::from([(3, progress(8, 19_500))]);
        assert_eq!(next_isr(1, 10, &[1], &[1, 3], &f, &reg, CLOCK), None);
    }

    #[test]
    fn a_restarted_follower_joins_only_once_its_own_process_is_registered() {
        let f = HashMap::from([(3, progress(10, 19_500))]);
        // Caught up, but the registration is still the previous process's: it would be removed
        // again when that registration expires.
        let old = HashMap::from([(1, 7), (3, 6)]);
        assert_eq!(next_isr(1, 10, &[1], &[1, 3], &f, &old, CLOCK), None);
        // Not registered at all (the previous one expired, its own not written yet).
        let none = HashMap::from([(1, 7)]);
        assert_eq!(next_isr(1, 10, &[1], &[1, 3], &f, &none, CLOCK), None);
        // An older follower that sends no incarnation never joins.
        let mut unknown = f.clone();
        unknown.get_mut(&3).unwrap().incarnation = 0;
        assert_eq!(next_isr(1, 10, &[1], &[1, 3], &unknown, &registered(), CLOCK), None);
        assert_eq!(
            next_isr(1, 10, &[1], &[1, 3], &f, &registered(), CLOCK),
            Some(vec![1, 3])
        );
    }

    #[test]
    fn a_follower_that_reached_the_previous_end_was_caught_up_then() {
        let mut p = FollowerProgress::new(0);
        p.on_fetch(0, 100, 1_000);
        assert_eq!(p.caught_up_ms, 0);
        p.on_fetch(100, 150, 2_000); // reached what the leader had at the previous fetch
        assert_eq!(p.caught_up_ms, 1_000);
        p.on_fetch(150, 150, 3_000);
        assert_eq!(p.caught_up_ms, 3_000);
        // Parked at the end while the leader is idle: still caught up.
        p.observe_leader_end(150, 60_000);
        assert_eq!(p.caught_up_ms, 60_000);
        p.observe_leader_end(151, 70_000);
        assert_eq!(p.caught_up_ms, 60_000);
    }
}
