//! The broker's log cleaner: `log.cleaner.threads` tasks, each cleaning the filthiest due
//! compacted log it finds on a blocking thread (off the produce and fetch paths), and waiting
//! `log.cleaner.backoff.ms` when none is due. Their reads and writes together are held to
//! `log.cleaner.io.max.bytes.per.second`. Every replica, leader or follower, cleans its own log.
//! A log whose batches do not decode is left alone until the broker restarts (Kafka's
//! uncleanable partitions); one that changed under its clean is tried again on the next pass.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::task::JoinHandle;

use crate::log_dirs::TopicPartition;
use crate::replica::Replica;
use crate::replica_manager::BrokerCore;
use crate::throttle::Bucket;

use super::checkpoint;
use super::choose::{self, LogStat, LogToClean};
use super::clean::{self, CleanRange, CleanStats, LogSnapshot};
use super::offset_map::OffsetMap;
use super::policy::CompactionPolicy;
use super::{CleanError, CleanerConfig};

/// Seconds of unused I/O credit kept, as the replication throttle keeps.
const BURST_SECONDS: f64 = 0.2;

/// Starts the cleaner tasks of `core` (none when the cleaner is off).
pub fn start(core: Arc<BrokerCore>) -> Vec<JoinHandle<()>> {
    let cfg = core.config.cleaner.clone();
    if !cfg.enable || cfg.threads == 0 {
        return Vec::new();
    }
    let memory = cfg.dedupe_buffer_size / cfg.threads as u64;
    let cleaner = Arc::new(LogCleaner::new(core));
    (0..cfg.threads)
        .map(|_| tokio::spawn(run(cleaner.clone(), memory)))
        .collect()
}

/// One cleaner task: clean while logs are due, else wait the backoff.
async fn run(cleaner: Arc<LogCleaner>, memory: u64) {
    let backoff = Duration::from_millis(cleaner.cfg.backoff_ms.max(1));
    let mut map = None;
    loop {
        let c = cleaner.clone();
        let mut m = map.take().unwrap_or_else(|| OffsetMap::new(memory));
        let pass = tokio::task::spawn_blocking(move || {
            let cleaned = c.clean_filthiest(&mut m).is_some();
            (cleaned, m)
        })
        .await;
        let cleaned = match pass {
            Ok((cleaned, m)) => {
                map = Some(m);
                cleaned
            }
            Err(e) => {
                tracing::error!(error = %e, "a log cleaner pass failed");
                false
            }
        };
        if !cleaned {
            tokio::time::sleep(backoff).await;
        }
    }
}

/// What the cleaner tasks share.
struct State {
    /// Each log's cleaned point, and the log dir whose checkpoint file holds it.
    checkpoints: HashMap<TopicPartition, (PathBuf, i64)>,
    /// Logs a task is cleaning now.
    in_progress: HashSet<TopicPartition>,
    /// Logs whose batches did not decode.
    uncleanable: HashSet<TopicPartition>,
}

/// The cleaner threads' I/O bound, `log.cleaner.io.max.bytes.per.second` (Kafka's `Throttler`):
/// the replication throttle's byte bucket, waited on by sleeping (the cleaner runs on blocking
/// threads).
struct IoThrottle {
    rate: Option<u64>,
    bucket: Mutex<Bucket>,
    started: Instant,
}

impl IoThrottle {
    fn new(rate: Option<u64>) -> Self {
        Self {
            rate,
            bucket: Mutex::new(Bucket { credit: 0.0, at: 0.0 }),
            started: Instant::now(),
        }
    }

    /// Waits until `bytes` more of I/O fit the rate.
    fn pace(&self, bytes: usize) {
        let Some(rate) = self.rate else {
            return;
        };
        loop {
            let now = self.started.elapsed().as_secs_f64();
            let wait = {
                let mut b = self.bucket.lock();
                let wait = b.wait(now, rate.max(1) as f64, BURST_SECONDS);
                if wait <= 0.0 {
                    b.charge(bytes);
                }
                wait
            };
            if wait <= 0.0 {
                return;
            }
            std::thread::sleep(Duration::from_secs_f64(wait.min(1.0)));
        }
    }
}

/// The cleaner of one broker.
pub struct LogCleaner {
    core: Arc<BrokerCore>,
    cfg: CleanerConfig,
    state: Mutex<State>,
    io: IoThrottle,
}

impl LogCleaner {
    /// A cleaner of `core`'s logs, with the cleaned points its log dirs' checkpoint files hold.
    pub fn new(core: Arc<BrokerCore>) -> Self {
        let mut checkpoints = HashMap::new();
        for dir in core.dirs.dirs() {
            for (tp, offset) in checkpoint::load(dir) {
                checkpoints.insert(tp, (dir.clone(), offset));
            }
        }
        let core_rate = core.config.cleaner.io_max_bytes_per_second;
        Self {
            cfg: core.config.cleaner.clone(),
            core,
            state: Mutex::new(State {
                checkpoints,
                in_progress: HashSet::new(),
                uncleanable: HashSet::new(),
            }),
            io: IoThrottle::new(core_rate),
        }
    }

    /// Cleans the filthiest due log, if any; which one, and what the clean did.
    pub fn clean_filthiest(&self, map: &mut OffsetMap) -> Option<(TopicPartition, CleanStats)> {
        let now = self.core.config.clock.wall_ms() as i64;
        let (tp, r, ltc, policy) = {
            let candidates = self.candidates(now);
            let picked = choose::filthiest(
                candidates
                    .into_iter()
                    .map(|(tp, r, ltc, policy)| ((tp, r, policy), ltc, policy)),
            );
            let ((tp, r, policy), ltc) = picked?;
            let mut st = self.state.lock();
            if !st.in_progress.insert(tp.clone()) {
                return None;
            }
            (tp, r, ltc, policy)
        };
        let result = self.clean_one(&tp, &r, &ltc, &policy, map, now);
        self.state.lock().in_progress.remove(&tp);
        match result {
            Ok(stats) => {
                tracing::info!(
                    replica = %r.name(),
                    dirty_ratio = ltc.cleanable_ratio(),
                    end_offset = stats.end_offset,
                    keys = stats.keys,
                    segments = stats.segments_replaced,
                    bytes_before = stats.bytes_before,
                    bytes_after = stats.bytes_after,
                    records_read = stats.records_read,
                    records_kept = stats.records_kept,
                    "cleaned log"
                );
                self.save_checkpoint(&tp, &r, stats.end_offset);
                Some((tp, stats))
            }
            Err(CleanError::Aborted) => {
                tracing::info!(replica = %r.name(), "the log changed while it was cleaned; trying again later");
                None
            }
            Err(CleanError::Log(e)) => {
                tracing::warn!(replica = %r.name(), error = %e, "cleaning a log failed");
                self.core.report_log_error(&e);
                // A failed disk takes its dir offline above; anything else would fail again.
                if !matches!(e, crate::partition_log::LogError::Io { .. }) {
                    self.state.lock().uncleanable.insert(tp);
                }
                None
            }
            Err(e @ CleanError::Corrupt { .. }) => {
                tracing::error!(replica = %r.name(), error = %e, "a compacted log does not decode; it is not cleaned until the broker restarts");
                self.state.lock().uncleanable.insert(tp);
                None
            }
        }
    }

    /// Every hosted compacted log not being cleaned, with what a clean would take of it.
    fn candidates(&self, now: i64) -> Vec<(TopicPartition, Arc<Replica>, LogToClean, CompactionPolicy)> {
        let replicas: Vec<(TopicPartition, Arc<Replica>)> = self
            .core
            .replicas
            .read()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let policies: HashMap<String, CompactionPolicy> = {
            let view = self.core.view.read();
            replicas
                .iter()
                .filter_map(|((t, _), _)| {
                    let record = view.topics.get(t)?.record.as_ref()?;
                    Some((t.clone(), CompactionPolicy::of(&record.config)))
                })
                .filter(|(_, p)| p.compact)
                .collect()
        };
        let (skip, checkpoints) = {
            let mut st = self.state.lock();
            let hosted: HashSet<&TopicPartition> = replicas.iter().map(|(tp, _)| tp).collect();
            st.uncleanable.retain(|tp| hosted.contains(tp));
            let skip: HashSet<TopicPartition> = st.in_progress.union(&st.uncleanable).cloned().collect();
            let cps: HashMap<TopicPartition, i64> = st.checkpoints.iter().map(|(k, (_, o))| (k.clone(), *o)).collect();
            (skip, cps)
        };
        let mut out = Vec::new();
        for (tp, r) in replicas {
            let Some(policy) = policies.get(&tp.0).copied() else {
                continue;
            };
            if skip.contains(&tp) {
                continue;
            }
            let high_watermark = r.state().high_watermark;
            let (segments, log_start) = {
                let log = r.log();
                if r.future().is_some() {
                    continue; // a dir move copies its segments
                }
                match log.segment_files(policy.max_compaction_lag_ms < i64::MAX) {
                    Ok(s) => (s, log.log_start_offset()),
                    Err(e) => {
                        tracing::warn!(replica = %r.name(), error = %e, "reading a compacted log's segments");
                        continue;
                    }
                }
            };
            let stat = LogStat {
                segments: &segments,
                log_start,
                high_watermark,
            };
            let offsets = choose::cleanable_offsets(&stat, checkpoints.get(&tp).copied(), &policy, now);
            if offsets.force_update_checkpoint {
                self.save_checkpoint(&tp, &r, offsets.first_dirty);
            }
            let delay = choose::max_compaction_delay(&stat, offsets.first_dirty, &policy, now);
            let ltc = choose::log_to_clean(&stat, &offsets, delay > 0);
            out.push((tp, r, ltc, policy));
        }
        out
    }

    /// Cleans one log over the range `ltc` gives.
    fn clean_one(
        &self,
        tp: &TopicPartition,
        r: &Arc<Replica>,
        ltc: &LogToClean,
        policy: &CompactionPolicy,
        map: &mut OffsetMap,
        now: i64,
    ) -> Result<CleanStats, CleanError> {
        let snap = {
            let mut log = r.log();
            if r.future().is_some() {
                return Err(CleanError::Aborted);
            }
            let segments = log.segment_files(false)?;
            LogSnapshot::of(&mut log, segments)?
        };
        let range = CleanRange::of(ltc, policy, now);
        let hosted = || self.core.replicas.read().get(tp).is_some_and(|x| Arc::ptr_eq(x, r));
        let mut swap = |old: &[crate::partition_log::SegmentFiles], new: crate::partition_log::SwapSegment| {
            if !hosted() {
                new.discard();
                return Ok(false);
            }
            let mut log = r.log();
            if r.future().is_some() {
                new.discard();
                return Ok(false);
            }
            log.replace_segments(old, new)
        };
        clean::clean(&snap, &range, map, &|n| self.io.pace(n), &mut swap)
    }

    /// Records `offset` as `tp`'s cleaned point and rewrites the checkpoint file of its log dir.
    fn save_checkpoint(&self, tp: &TopicPartition, r: &Replica, offset: i64) {
        let folder = r.log().dir().to_path_buf();
        let Some(dir) = self.core.dirs.dir_of(&folder).cloned() else {
            return;
        };
        if self.core.dirs.offline_reason(&dir).is_some() {
            return;
        }
        let entries: Vec<(String, u32, i64)> = {
            let hosted = self.core.replicas.read();
            let mut st = self.state.lock();
            st.checkpoints.insert(tp.clone(), (dir.clone(), offset));
            st.checkpoints.retain(|k, _| hosted.contains_key(k));
            st.checkpoints
                .iter()
                .filter(|(_, (d, _))| *d == dir)
                .map(|((t, p), (_, o))| (t.clone(), *p, *o))
                .collect()
        };
        if let Err(e) = checkpoint::write(&dir, &entries) {
            tracing::warn!(dir = %dir.display(), error = %e, "writing the cleaner checkpoint");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_io_bound_holds_the_cleaners_bytes_to_the_rate() {
        let unbounded = IoThrottle::new(None);
        let start = Instant::now();
        for _ in 0..1000 {
            unbounded.pace(1 << 20);
        }
        assert!(start.elapsed() < Duration::from_secs(1));
        // 500 kB at 1 MB/s: about half a second, never much less (a slow machine takes longer).
        let bounded = IoThrottle::new(Some(1_000_000));
        let start = Instant::now();
        for _ in 0..10 {
            bounded.pace(50_000);
        }
        assert!(start.elapsed() >= Duration::from_millis(400), "{:?}", start.elapsed());
    }
}
