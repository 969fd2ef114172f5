//! How far each adding replica of a running reassignment has come: the brokers' log dir reports
//! give each replica's log size; the leader's size minus the adding replica's is what is left,
//! and the change since this node's previous report gives the rate and the ETA. A replica moving
//! to the log dir its reassignment names reports its future log's size and what is left.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use parking_lot::Mutex;
use proto::cluster_view::ClusterView;
use proto::ferry::{OngoingReassignment, ReplicaProgress};

/// A replica: (topic, partition, broker).
pub type ReplicaKey = (String, u32, i32);

/// What the brokers report of the moving replicas.
#[derive(Debug, Default, Clone)]
pub struct ReplicaSizes {
    /// Each replica's current log size in bytes.
    pub current: HashMap<ReplicaKey, u64>,
    /// Each future log (a move between log dirs): bytes in it and bytes left to copy.
    pub future: HashMap<ReplicaKey, (u64, u64)>,
}

/// One earlier observation of a replica's copied bytes.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// When it was taken.
    pub at: Instant,
    /// Bytes copied then.
    pub copied: u64,
}

/// Progress of one adding replica from the leader's and its own log size, and the previous sample.
pub fn replica_progress(
    broker: i32,
    leader_size: u64,
    copied: u64,
    prev: Option<Sample>,
    now: Instant,
) -> ReplicaProgress {
    let left = leader_size.saturating_sub(copied);
    let rate = prev
        .map(|p| {
            (
                now.saturating_duration_since(p.at).as_secs_f64(),
                copied.saturating_sub(p.copied),
            )
        })
        .filter(|(secs, _)| *secs >= 0.2)
        .map_or(0, |(secs, bytes)| (bytes as f64 / secs) as u64);
    ReplicaProgress {
        broker,
        bytes_left: left,
        bytes_copied: copied,
        rate_bytes_per_sec: rate,
        eta_ms: eta_ms(left, rate),
        log_dir: String::new(),
    }
}

/// Milliseconds until `left` bytes are done at `rate` bytes/s: 0 when nothing is left, -1 when
/// the rate is unknown.
pub fn eta_ms(left: u64, rate: u64) -> i64 {
    if left == 0 {
        0
    } else if rate > 0 {
        (left as f64 / rate as f64 * 1000.0) as i64
    } else {
        -1
    }
}

/// Milliseconds until a set of copies that run side by side is done, each going on at its own
/// current rate: the time until the slowest of them finishes, since the set (a partition's
/// move, or every move) is done only when all are. Pooling the bytes left over the summed rate
/// would promise the slow copy the fast one's bandwidth, which a per-replica throttle never
/// gives it. 0 when nothing is left; -1 when a copy with bytes left has no known rate yet.
pub fn copies_eta_ms<'a>(copies: impl IntoIterator<Item = &'a ReplicaProgress>) -> i64 {
    let mut eta = 0;
    for p in copies {
        match eta_ms(p.bytes_left, p.rate_bytes_per_sec) {
            -1 => return -1,
            e => eta = eta.max(e),
        }
    }
    eta
}

/// The samples one node keeps between List calls, for rates.
#[derive(Default)]
pub struct ProgressSamples {
    last: Mutex<HashMap<(String, u32, i32), Sample>>,
}

impl ProgressSamples {
    /// Fills in `progress` for each entry from the replica sizes, and keeps the new samples
    /// (dropping those of replicas no longer adding).
    pub fn fill(
        &self,
        entries: &mut [OngoingReassignment],
        leaders: &HashMap<(String, u32), i32>,
        sizes: &ReplicaSizes,
    ) {
        let now = Instant::now();
        let mut last = self.last.lock();
        let mut next = HashMap::new();
        for e in entries.iter_mut() {
            let Some(leader) = leaders.get(&(e.topic.clone(), e.partition)) else {
                continue;
            };
            let leader_size = sizes.current.get(&(e.topic.clone(), e.partition, *leader)).copied();
            for b in &e.adding {
                let key = (e.topic.clone(), e.partition, *b);
                let copied = sizes.current.get(&key).copied().unwrap_or(0);
                let p = replica_progress(*b, leader_size.unwrap_or(copied), copied, last.get(&key).copied(), now);
                e.progress.push(p);
                next.insert(key, Sample { at: now, copied });
            }
            for b in e.dir_pending.iter().filter(|b| !e.adding.contains(b)) {
                let key = (e.topic.clone(), e.partition, *b);
                let Some((copied, left)) = sizes.future.get(&key).copied() else {
                    continue; // not started yet, or already swapped in
                };
                let dir = e
                    .target
                    .iter()
                    .position(|t| t == b)
                    .and_then(|i| e.target_log_dirs.get(i).cloned())
                    .unwrap_or_default();
                let p = replica_progress(*b, copied.saturating_add(left), copied, last.get(&key).copied(), now);
                e.progress.push(ReplicaProgress { log_dir: dir, ..p });
                next.insert(key, Sample { at: now, copied });
            }
        }
        *last = next;
    }
}

/// Asks each broker hosting a moving partition for its replicas' sizes (DescribeLogDirs, limited
/// to the moving topics); a broker that does not answer in time is left out.
pub async fn replica_sizes(
    view: &ClusterView,
    channels: &metastore::peers::Peers,
    entries: &[OngoingReassignment],
) -> ReplicaSizes {
    let mut brokers: BTreeSet<i32> = BTreeSet::new();
    let mut topics: BTreeSet<String> = BTreeSet::new();
    for e in entries {
        brokers.extend(e.replicas.iter().copied());
        topics.insert(e.topic.clone());
    }
    let topics: Vec<String> = topics.into_iter().collect();
    let brokers: Vec<i32> = brokers.into_iter().collect();
    let mut sizes = ReplicaSizes::default();
    for answer in crate::log_dirs::describe_log_dirs(view, channels, &brokers, &topics).await {
        let Some(r) = answer.log_dirs else { continue };
        for d in r.dirs {
            for rep in d.replicas {
                let key = (rep.topic, rep.partition, answer.broker);
                if rep.is_future {
                    sizes.future.insert(key, (rep.size, rep.remaining_bytes));
                } else {
                    sizes.current.insert(key, rep.size);
                }
            }
        }
    }
    sizes
}

/// Each moving partition's leader.
pub fn leaders(view: &ClusterView, entries: &[OngoingReassignment]) -> HashMap<(String, u32), i32> {
    entries
        .iter()
        .filter_map(|e| {
            let p = view.partition(&e.topic, e.partition)?;
            Some(((e.topic.clone(), e.partition), p.state.leader))
        })
        .collect()
}

/// Totals over every adding replica: (copied, left, rate).
pub fn totals(entries: &[OngoingReassignment]) -> (u64, u64, u64) {
    let mut t = (0, 0, 0);
    for p in entries.iter().flat_map(|e| &e.progress) {
        t.0 += p.bytes_copied;
        t.1 += p.bytes_left;
        t.2 += p.rate_bytes_per_sec;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn left_copied_rate_and_eta() {
        let t0 = Instant::now();
        let first = replica_progress(4, 1000, 200, None, t0);
        assert_eq!(
            (
                first.bytes_left,
                first.bytes_copied,
                first.rate_bytes_per_sec,
                first.eta_ms
            ),
            (800, 200, 0, -1)
        );
        let later = t0 + Duration::from_secs(2);
        let p = replica_progress(4, 1000, 600, Some(Sample { at: t0, copied: 200 }), later);
        assert_eq!((p.bytes_left, p.rate_bytes_per_sec, p.eta_ms), (400, 200, 2000));
        let done = replica_progress(4, 1000, 1200, None, later);
        assert_eq!((done.bytes_left, done.eta_ms), (0, 0));
    }

    fn copy(bytes_left: u64, rate_bytes_per_sec: u64) -> ReplicaProgress {
        ReplicaProgress {
            bytes_left,
            rate_bytes_per_sec,
            ..Default::default()
        }
    }

    #[test]
    fn two_copies_at_different_rates_are_done_when_the_slower_is() {
        // 60 MB at 2 MB/s takes 30 s, 20 MB at 0.2 MB/s takes 100 s: the pair takes 100 s (the
        // pooled 80 MB at 2.2 MB/s would say 36 s).
        let both = [copy(60_000_000, 2_000_000), copy(20_000_000, 200_000)];
        assert_eq!(copies_eta_ms(&both), 100_000);
        assert_eq!(copies_eta_ms(&both[..1]), eta_ms(60_000_000, 2_000_000));
        // A finished copy does not hold the others up; one without a rate makes it unknown.
        assert_eq!(copies_eta_ms(&[copy(0, 0), copy(1_000, 1_000)]), 1_000);
        assert_eq!(copies_eta_ms(&[copy(1_000, 0), copy(1_000, 1_000)]), -1);
        assert_eq!(copies_eta_ms(&[]), 0);
    }

    #[test]
    fn samples_give_rates_on_the_second_call() {
        let s = ProgressSamples::default();
        let entry = OngoingReassignment {
            topic: "t".into(),
            partition: 0,
            replicas: vec![1, 4],
            adding: vec![4],
            ..Default::default()
        };
        let leaders = HashMap::from([(("t".to_string(), 0), 1)]);
        let mut sizes = ReplicaSizes {
            current: HashMap::from([(("t".to_string(), 0, 1), 1000), (("t".to_string(), 0, 4), 100)]),
            ..Default::default()
        };
        let mut e = vec![entry.clone()];
        s.fill(&mut e, &leaders, &sizes);
        assert_eq!(e[0].progress[0].rate_bytes_per_sec, 0);
        std::thread::sleep(Duration::from_millis(250));
        sizes.current.insert(("t".to_string(), 0, 4), 600);
        let mut e = vec![entry];
        s.fill(&mut e, &leaders, &sizes);
        assert!(e[0].progress[0].rate_bytes_per_sec > 0);
        assert!(e[0].progress[0].eta_ms > 0);
        assert_eq!(totals(&e).1, 400);
    }

    #[test]
    fn a_move_to_a_named_dir_reports_its_future_log() {
        let s = ProgressSamples::default();
        let entry = OngoingReassignment {
            topic: "t".into(),
            partition: 0,
            replicas: vec![1, 4],
            target: vec![1, 4],
            target_log_dirs: vec![String::new(), "/b".into()],
            dir_pending: vec![4],
            ..Default::default()
        };
        let leaders = HashMap::from([(("t".to_string(), 0), 1)]);
        let sizes = ReplicaSizes {
            current: HashMap::from([(("t".to_string(), 0, 1), 1000), (("t".to_string(), 0, 4), 1000)]),
            future: HashMap::from([(("t".to_string(), 0, 4), (300, 700))]),
        };
        let mut e = vec![entry];
        s.fill(&mut e, &leaders, &sizes);
        let p = &e[0].progress[0];
        assert_eq!(
            (p.broker, p.bytes_copied, p.bytes_left, p.log_dir.as_str()),
            (4, 300, 700, "/b")
        );
    }
}
