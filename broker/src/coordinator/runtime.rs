//! The coordinator runtime, after Kafka's `CoordinatorRuntime`: one shard per
//! `__consumer_offsets` partition this broker leads. A request runs against its shard under
//! the shard's lock; the records it produced are appended to the partition there (so the log
//! holds them in the order the shard applied them), and its answers go out once the in-sync
//! replicas hold them. A broker loads a partition's shard by replaying its log when it becomes
//! leader, answers COORDINATOR_LOAD_IN_PROGRESS until then, and drops it when it stops leading.
//! The runtime sees the partitions only through [`OffsetsLog`], a narrow handle.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use parking_lot::Mutex;
use proto::errors::ErrorCode;
use tokio::sync::oneshot;

use super::group::{GroupConfig, Out, Reply, ReplyTo};
use super::shard::Shard;

/// The wait for a batch's replication.
pub type Replicated = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// What the runtime needs of the broker: leadership, reads and appends of one topic.
pub trait OffsetsLog: Send + Sync + 'static {
    /// The partition count of the topic, once it exists.
    fn partitions(&self) -> Option<u32>;
    /// The leader epoch, if this broker leads `partition`.
    fn leads(&self, partition: u32) -> Option<u32>;
    /// Stored batches from `offset`, at most about `max` bytes, and the log end offset.
    fn read(&self, partition: u32, offset: i64, max: usize) -> Result<(Vec<u8>, i64, i64), String>;
    /// Appends one batch as leader at `epoch`; the future ends when it is replicated.
    fn append(&self, partition: u32, epoch: u32, batch: Vec<u8>) -> Result<Replicated, String>;
    /// The largest batch the topic takes.
    fn max_batch(&self) -> usize;
    /// The wall clock, in ms.
    fn now_ms(&self) -> i64;
    /// Publishes how many partitions and groups are coordinated here.
    fn publish(&self, partitions: usize, groups: usize);
}

/// A shard with the senders of the requests it holds.
pub struct Loaded {
    /// The shard.
    pub shard: Shard,
    epoch: u32,
    partition: u32,
    waiters: HashMap<ReplyTo, oneshot::Sender<Reply>>,
    next_reply: ReplyTo,
    /// Set when an append failed: the shard is ahead of its log and must be loaded again.
    broken: bool,
}

impl Loaded {
    /// A handle for an answer to come.
    pub fn waiter(&mut self) -> (ReplyTo, oneshot::Receiver<Reply>) {
        let (tx, rx) = oneshot::channel();
        self.next_reply += 1;
        self.waiters.insert(self.next_reply, tx);
        (self.next_reply, rx)
    }
}

/// One partition's slot.
enum Slot {
    Loading(u32),
    Ready(u32, Arc<tokio::sync::Mutex<Loaded>>),
}

/// Why a request found no shard to run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoShard {
    /// This broker leads the partition and is still loading it.
    Loading,
    /// This broker does not lead it.
    NotCoordinator,
    /// The topic does not exist yet.
    NoTopic,
}

impl NoShard {
    /// Kafka's code for it.
    pub fn code(self) -> ErrorCode {
        match self {
            NoShard::Loading => ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
            NoShard::NotCoordinator => ErrorCode::NOT_COORDINATOR,
            NoShard::NoTopic => ErrorCode::COORDINATOR_NOT_AVAILABLE,
        }
    }
}

/// The runtime: the shards of the partitions led here.
pub struct Runtime {
    log: Arc<dyn OffsetsLog>,
    cfg: GroupConfig,
    slots: Mutex<HashMap<u32, Slot>>,
}

/// How often leadership is checked and timers run.
const TICK: Duration = Duration::from_millis(100);
/// Bytes read per step while loading.
const LOAD_STEP: usize = 1 << 20;

impl Runtime {
    /// The group settings it runs with.
    pub fn config(&self) -> &GroupConfig {
        &self.cfg
    }

    /// A runtime over `log`; `run` drives it.
    pub fn new(log: Arc<dyn OffsetsLog>, cfg: GroupConfig) -> Arc<Self> {
        Arc::new(Self {
            log,
            cfg,
            slots: Mutex::new(HashMap::new()),
        })
    }

    /// The topic's partition count, once it exists.
    pub fn partitions(&self) -> Option<u32> {
        self.log.partitions()
    }

    /// The wall clock.
    pub fn now_ms(&self) -> i64 {
        self.log.now_ms()
    }

    /// The shard of `partition`.
    pub fn shard(&self, partition: u32) -> Result<Arc<tokio::sync::Mutex<Loaded>>, NoShard> {
        match self.slots.lock().get(&partition) {
            Some(Slot::Ready(_, s)) => Ok(s.clone()),
            Some(Slot::Loading(_)) => Err(NoShard::Loading),
            None if self.log.partitions().is_none() => Err(NoShard::NoTopic),
            None if self.log.leads(partition).is_some() => Err(NoShard::Loading),
            None => Err(NoShard::NotCoordinator),
        }
    }

    /// The partition that coordinates `group`.
    pub fn partition_of(&self, group: &str) -> Result<u32, NoShard> {
        let n = self.log.partitions().ok_or(NoShard::NoTopic)?;
        Ok(super::hash::partition_for(group, n))
    }

    /// Every loaded shard.
    pub fn loaded(&self) -> Vec<Arc<tokio::sync::Mutex<Loaded>>> {
        self.slots
            .lock()
            .values()
            .filter_map(|s| match s {
                Slot::Ready(_, s) => Some(s.clone()),
                Slot::Loading(_) => None,
            })
            .collect()
    }

    /// Appends what a change produced and sends its answers once it is replicated; the
    /// returned wait ends then too (with NOT_COORDINATOR if the append failed, and the shard
    /// is dropped, to be loaded again from its log).
    pub fn apply(&self, st: &mut Loaded, out: Out) -> Pin<Box<dyn Future<Output = Result<(), ErrorCode>> + Send>> {
        let replies: Vec<(oneshot::Sender<Reply>, Reply)> = out
            .replies
            .into_iter()
            .filter_map(|(to, r)| Some((st.waiters.remove(&to)?, r)))
            .collect();
        if out.records.is_empty() {
            for (tx, r) in replies {
                let _ = tx.send(r);
            }
            return Box::pin(async { Ok(()) });
        }
        let mut waits = Vec::new();
        let mut failed = st.broken;
        if !failed {
            for batch in batches(&out.records, self.log.max_batch(), st.epoch, self.log.now_ms()) {
                match self.log.append(st.partition, st.epoch, batch) {
                    Ok(w) => waits.push(w),
                    Err(e) => {
                        tracing::warn!(partition = st.partition, error = %e, "coordinator append failed; unloading");
                        failed = true;
                        break;
                    }
                }
            }
        }
        if failed {
            st.broken = true;
            st.waiters.clear();
            self.unload(st.partition);
            return Box::pin(async { Err(ErrorCode::NOT_COORDINATOR) });
        }
        Box::pin(async move {
            // Appends are replicated in order: the last one's wait covers the others.
            let mut ok = true;
            for w in waits {
                ok &= w.await.is_ok();
            }
            if !ok {
                return Err(ErrorCode::NOT_COORDINATOR);
            }
            for (tx, r) in replies {
                let _ = tx.send(r);
            }
            Ok(())
        })
    }

    fn unload(&self, partition: u32) {
        let mut slots = self.slots.lock();
        if matches!(slots.get(&partition), Some(Slot::Ready(..))) {
            slots.remove(&partition);
        }
    }

    /// Loads and drops shards as leadership moves, and runs their timers, until aborted.
    pub async fn run(self: Arc<Self>) {
        loop {
            self.follow_leadership();
            let loaded = self.loaded();
            let mut groups = 0;
            for s in &loaded {
                let mut st = s.lock().await;
                groups += st.shard.group_count();
                if st.broken {
                    continue;
                }
                let now = self.log.now_ms();
                let out = st.shard.tick(now);
                let wait = self.apply(&mut st, out);
                drop(st);
                tokio::spawn(wait);
            }
            self.log.publish(loaded.len(), groups);
            tokio::time::sleep(TICK).await;
        }
    }

    fn follow_leadership(self: &Arc<Self>) {
        let Some(n) = self.log.partitions() else {
            return;
        };
        let mut slots = self.slots.lock();
        for p in 0..n {
            let have = match slots.get(&p) {
                Some(Slot::Loading(e)) | Some(Slot::Ready(e, _)) => Some(*e),
                None => None,
            };
            match self.log.leads(p) {
                None => {
                    if slots.remove(&p).is_some() {
                        tracing::info!(partition = p, "no longer the group coordinator of this partition");
                    }
                }
                Some(e) if have == Some(e) => {}
                Some(e) => {
                    slots.insert(p, Slot::Loading(e));
                    let rt = self.clone();
                    tokio::spawn(async move { rt.load(p, e).await });
                }
            }
        }
        slots.retain(|p, _| *p < n);
    }

    /// Replays the partition into a new shard; installs it if the epoch still holds.
    async fn load(self: Arc<Self>, partition: u32, epoch: u32) {
        let started = std::time::Instant::now();
        let rt = self.clone();
        let loaded = tokio::task::spawn_blocking(move || rt.replay(partition)).await;
        let shard = match loaded {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::warn!(partition, error = %e, "cannot load group coordinator state; will retry");
                self.slots.lock().remove(&partition);
                return;
            }
            Err(_) => {
                self.slots.lock().remove(&partition);
                return;
            }
        };
        let mut slots = self.slots.lock();
        if !matches!(slots.get(&partition), Some(Slot::Loading(e)) if *e == epoch) {
            return;
        }
        tracing::info!(
            partition,
            epoch,
            groups = shard.group_count(),
            ms = started.elapsed().as_millis() as u64,
            "group coordinator loaded"
        );
        slots.insert(
            partition,
            Slot::Ready(
                epoch,
                Arc::new(tokio::sync::Mutex::new(Loaded {
                    shard,
                    epoch,
                    partition,
                    waiters: HashMap::new(),
                    next_reply: 0,
                    broken: false,
                })),
            ),
        );
    }

    fn replay(&self, partition: u32) -> Result<Shard, String> {
        let mut shard = Shard::new(self.cfg.clone(), self.log.max_batch());
        let now = self.log.now_ms();
        let mut offset = 0i64;
        let mut skipped = 0usize;
        loop {
            let (raw, start, end) = self.log.read(partition, offset.max(0), LOAD_STEP)?;
            if offset < start {
                offset = start;
                continue;
            }
            if raw.is_empty() || offset >= end {
                break;
            }
            let mut buf = Bytes::from(raw);
            let mut last = offset;
            while !buf.is_empty() {
                // The batch's own header says where it ends, so one that cannot be decoded (an
                // old message format, say) is skipped rather than stopping the load.
                let extent = batch_extent(&buf);
                let mut attempt = buf.clone();
                let set = match RecordBatchDecoder::decode(&mut attempt) {
                    Ok(s) => {
                        buf = attempt;
                        s
                    }
                    Err(_) => match extent.filter(|(len, _)| *len <= buf.len()) {
                        Some((len, next)) => {
                            skipped += 1;
                            last = last.max(next);
                            let _ = buf.split_to(len);
                            continue;
                        }
                        None => break,
                    },
                };
                for r in set.records {
                    last = last.max(r.offset + 1);
                    if r.control || r.offset < offset {
                        continue;
                    }
                    let Some(key) = r.key.as_deref() else { continue };
                    if shard.replay(key, r.value.as_deref(), now).is_err() {
                        skipped += 1;
                    }
                }
            }
            if last <= offset {
                return Err(format!("no progress reading offset {offset}"));
            }
            offset = last;
        }
        if skipped > 0 {
            tracing::warn!(
                partition,
                skipped,
                "unreadable coordinator records skipped while loading"
            );
        }
        Ok(shard)
    }
}

/// A stored batch's length and the offset after it, from the first 12 bytes every message
/// format shares (offset, then length): a v2 batch's offset is its first and its header
/// counts the rest; an old message set's offset is its last.
fn batch_extent(buf: &[u8]) -> Option<(usize, i64)> {
    if let Ok(Some(h)) = crate::record_batch::peek_header(buf) {
        return Some((h.total_len, h.next_offset()));
    }
    let offset = i64::from_be_bytes(buf.get(0..8)?.try_into().ok()?);
    let len = i32::from_be_bytes(buf.get(8..12)?.try_into().ok()?);
    let len = usize::try_from(len).ok()?.checked_add(12)?;
    Some((len, offset.checked_add(1)?))
}

/// The records as batches of at most `max` bytes each (one record at least).
fn batches(records: &[(Vec<u8>, Option<Vec<u8>>)], max: usize, epoch: u32, now: i64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut current: Vec<Record> = Vec::new();
    let mut size = 0usize;
    let flush = |current: &mut Vec<Record>, out: &mut Vec<Vec<u8>>| {
        if current.is_empty() {
            return;
        }
        let mut buf = bytes::BytesMut::new();
        let opts = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        // Encoding plain records into a growable buffer cannot fail.
        if RecordBatchEncoder::encode(&mut buf, current.iter(), &opts).is_ok() {
            out.push(buf.to_vec());
        }
        current.clear();
    };
    for (k, v) in records {
        let len = k.len() + v.as_ref().map_or(0, |v| v.len()) + 32;
        if !current.is_empty() && size + len > max.saturating_sub(128) {
            flush(&mut current, &mut out);
            size = 0;
        }
        size += len;
        current.push(Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: epoch as i32,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: current.len() as i64,
            // The encoder keeps records in one batch while offset minus sequence stays the
            // same; the batch's base sequence is the first record's, -1 (no producer).
            sequence: current.len() as i32 - 1,
            timestamp: now,
            key: Some(Bytes::from(k.clone())),
            value: v.clone().map(Bytes::from),
            headers: Default::default(),
        });
    }
    flush(&mut current, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_of_any_format_is_measured_so_that_an_unreadable_one_can_be_skipped() {
        let v2 = batches(&[(b"k".to_vec(), None)], 1 << 20, 0, 0).remove(0);
        assert_eq!(batch_extent(&v2), Some((v2.len(), 1)));
        // An old message set: offset 5, then 3 bytes.
        let mut old = 5i64.to_be_bytes().to_vec();
        old.extend_from_slice(&3i32.to_be_bytes());
        old.extend_from_slice(&[1, 2, 3]);
        assert_eq!(batch_extent(&old), Some((15, 6)));
        old[8..12].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(batch_extent(&old), None);
        assert_eq!(batch_extent(&[0; 5]), None);
    }

    #[test]
    fn records_split_into_batches_that_decode_back() {
        let recs: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0..100)
            .map(|i| (format!("k{i}").into_bytes(), (i % 3 != 0).then(|| vec![7u8; 100])))
            .collect();
        let out = batches(&recs, 2000, 3, 1234);
        assert!(out.len() > 1, "a small bound splits the records");
        let mut seen = 0;
        for b in out {
            assert!(b.len() <= 2000, "{}", b.len());
            let mut buf = Bytes::from(b);
            let set = RecordBatchDecoder::decode(&mut buf).unwrap();
            for r in set.records {
                let (k, v) = &recs[seen];
                assert_eq!(r.key.as_deref(), Some(&k[..]));
                assert_eq!(r.value.as_deref(), v.as_deref());
                seen += 1;
            }
        }
        assert_eq!(seen, 100);
    }
}
