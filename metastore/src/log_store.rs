//! The Raft log on sled, durable before it is acknowledged.
//!
//! Appends are written to sled and handed to one flusher thread, which flushes and then reports
//! them done, so the async runtime's thread is not blocked by the fsync. openraft 0.9 waits for
//! each append's flush before its next command, so grouping many writes into one fsync happens
//! earlier, in the proposer's batches. The vote, truncation and purge flush before they return.
//!
//! Each entry is stored in small pieces (see [`PIECE_BYTES`]), so that sled never writes part of
//! the log to a file its `flush` does not sync.
//!
//! The flusher is a plain thread calling sled's blocking `flush`, not `flush_async`: the latter
//! hands each flush to sled's thread pool, whose `notify_all` wakes every idle pool thread per job,
//! and those futex storms were most of a leader's CPU time.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{EntryPayload, OptionalSend, RaftLogReader, StorageIOError, Vote};

use crate::codec;
use crate::types::{encode_segment, Entry, LogId, NodeId, Proposal, StorageError, TypeConfig};

const KEY_VOTE: &[u8] = b"vote";
const KEY_COMMITTED: &[u8] = b"committed";
const KEY_LAST_PURGED: &[u8] = b"last_purged";

/// The sled-backed Raft log; clones share the same trees.
#[derive(Clone)]
pub struct LogStore {
    db: sled::Db,
    logs: sled::Tree,
    meta: sled::Tree,
    flush_tx: std::sync::mpsc::Sender<LogFlushed<TypeConfig>>,
}

/// An entry is stored in pieces of at most this many bytes, each under its own key. sled 0.34
/// writes any value or tree node over a quarter of its segment (128 KiB) to a file of its own,
/// which its `flush` never fsyncs: a large entry, or a leaf of a few, would be acknowledged
/// before it is on disk. A leaf splits past 16 items (and takes in small siblings), so pieces
/// this small keep it well under that.
pub const PIECE_BYTES: usize = 4 * 1024;

/// An append or flush that takes longer is logged: openraft's core waits for appends, and
/// acknowledgements wait for flushes.
const SLOW_LOG_IO: std::time::Duration = std::time::Duration::from_millis(200);

/// Encoded bytes of entries replication reads for one AppendEntries message (one entry may be
/// larger).
pub const REPLICATION_BATCH_BYTES: usize = 2 << 20;

/// Key of one piece of an entry: index, then the piece's place (big-endian, so both sort).
fn piece_key(index: u64, piece: u32) -> [u8; 12] {
    let mut k = [0; 12];
    k[..8].copy_from_slice(&index.to_be_bytes());
    k[8..].copy_from_slice(&piece.to_be_bytes());
    k
}

fn key_index(key: &[u8]) -> Option<u64> {
    key.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes)
}

/// The pieces of an encoded entry: the first starts with how many there are.
fn split_pieces(encoded: &[u8]) -> Vec<Vec<u8>> {
    let count = encoded.len().div_ceil(PIECE_BYTES).max(1) as u32;
    let (head, tail) = encoded.split_at(encoded.len().min(PIECE_BYTES));
    let mut first = count.to_be_bytes().to_vec();
    first.extend_from_slice(head);
    std::iter::once(first)
        .chain(tail.chunks(PIECE_BYTES).map(<[u8]>::to_vec))
        .collect()
}

#[derive(Debug, thiserror::Error)]
#[error("log entry {index} is stored incompletely: {reason}")]
struct BrokenEntry {
    index: u64,
    reason: &'static str,
}

/// Joins an entry's pieces back together while reading keys in order.
#[derive(Default)]
struct Assembler {
    index: u64,
    expected: u32,
    got: u32,
    buf: Vec<u8>,
}

impl Assembler {
    /// Takes the next piece; returns the whole encoded entry when this was its last piece.
    fn push(&mut self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>, BrokenEntry> {
        let index = key_index(key).ok_or(BrokenEntry {
            index: 0,
            reason: "short key",
        })?;
        let piece = key.get(8..12).and_then(|b| b.try_into().ok()).map(u32::from_be_bytes);
        let broken = |reason| BrokenEntry { index, reason };
        match piece {
            Some(0) => {
                if self.got != self.expected {
                    return Err(BrokenEntry {
                        index: self.index,
                        reason: "pieces missing",
                    });
                }
                let (count, rest) = value.split_at_checked(4).ok_or_else(|| broken("short first piece"))?;
                let count = u32::from_be_bytes([count[0], count[1], count[2], count[3]]);
                *self = Self {
                    index,
                    expected: count,
                    got: 1,
                    buf: rest.to_vec(),
                };
            }
            Some(n) if index == self.index && n == self.got && n < self.expected => {
                self.got += 1;
                self.buf.extend_from_slice(value);
            }
            _ => return Err(broken("piece out of place")),
        }
        if self.got == self.expected {
            Ok(Some(std::mem::take(&mut self.buf)))
        } else {
            Ok(None)
        }
    }

    /// Whether the last entry begun is complete.
    fn is_complete(&self) -> bool {
        self.got == self.expected
    }
}

fn read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_logs(&e).into()
}

fn write_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_logs(&e).into()
}

impl LogStore {
    /// Opens the log in `db` and starts its flusher thread. The pieces of an entry whose append
    /// a crash cut short (never acknowledged) are removed.
    pub fn open(db: sled::Db) -> Result<Self, sled::Error> {
        let logs = db.open_tree("raft_log")?;
        let meta = db.open_tree("raft_meta")?;
        upgrade_format_1(&db, &logs)?;
        remove_broken_tail(&db, &logs)?;
        // Entries a purge recorded but had not removed yet when the node stopped.
        if let Some(v) = meta.get(KEY_LAST_PURGED)? {
            if let Ok(purged) = codec::decode_stored::<LogId>(&v) {
                remove_up_to(&logs, piece_key(purged.index, u32::MAX))?;
            }
        }
        let (flush_tx, flush_rx) = std::sync::mpsc::channel();
        let flusher_db = db.clone();
        std::thread::Builder::new()
            .name("ferry-log-flush".into())
            .spawn(move || run_flusher(flusher_db, flush_rx))
            .map_err(sled::Error::Io)?;
        Ok(Self {
            db,
            logs,
            meta,
            flush_tx,
        })
    }

    async fn flush(&self) -> Result<(), sled::Error> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || db.flush().map(|_| ()))
            .await
            .map_err(|e| sled::Error::Io(std::io::Error::other(e.to_string())))?
    }

    fn get_meta<T: serde::de::DeserializeOwned>(&self, key: &[u8]) -> Result<Option<T>, StorageError> {
        match self.meta.get(key).map_err(read_err)? {
            None => Ok(None),
            Some(v) => codec::decode_stored(&v).map(Some).map_err(read_err),
        }
    }

    fn last_purged(&self) -> Result<Option<LogId>, StorageError> {
        self.get_meta(KEY_LAST_PURGED)
    }

    /// Writes an entry's pieces, in order (not yet durable).
    fn insert_entry(&self, entry: &Entry) -> Result<(), StorageError> {
        insert_pieces(&self.logs, entry).map_err(write_err)
    }

    /// Removes every piece with a key in `range`.
    fn remove_range(&self, range: impl RangeBounds<[u8; 12]>) -> Result<(), StorageError> {
        let keys: Vec<_> = self
            .logs
            .range(range)
            .keys()
            .collect::<Result<_, _>>()
            .map_err(write_err)?;
        remove_keys(&self.logs, keys).map_err(write_err)
    }
}

/// Keys removed per batch when purging: small, so that appends never wait long on one.
const PURGE_BATCH: usize = 512;

/// Removes every piece up to `upto`, a small batch at a time.
fn remove_up_to(logs: &sled::Tree, upto: [u8; 12]) -> Result<(), sled::Error> {
    loop {
        let keys: Vec<sled::IVec> = logs.range(..=upto).keys().take(PURGE_BATCH).collect::<Result<_, _>>()?;
        if keys.is_empty() {
            return Ok(());
        }
        remove_keys(logs, keys)?;
    }
}

/// Removes `keys` in one batch (all or none).
fn remove_keys(logs: &sled::Tree, keys: Vec<sled::IVec>) -> Result<(), sled::Error> {
    let mut batch = sled::Batch::default();
    for k in keys {
        batch.remove(k);
    }
    logs.apply_batch(batch)
}

/// Writes an entry's pieces, in order.
fn insert_pieces(logs: &sled::Tree, entry: &Entry) -> Result<(), sled::Error> {
    let index = entry.log_id.index;
    for (i, piece) in split_pieces(&codec::encode(entry)).into_iter().enumerate() {
        logs.insert(piece_key(index, i as u32), piece)?;
    }
    Ok(())
}

/// Log entries as format 1 stored them: whole, under the 8-byte index, the proposal's commands
/// encoded in place.
mod format1 {
    use std::io::Cursor;

    use serde::{Deserialize, Serialize};

    use crate::types::{Command, ProposalResult};

    /// A format 1 proposal.
    #[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
    pub struct Proposal {
        /// The commands, applied in order.
        pub commands: Vec<Command>,
    }

    openraft::declare_raft_types!(
        /// The Raft types of format 1.
        pub TypeConfig:
            D = Proposal,
            R = ProposalResult,
    );
}

/// Rewrites format 1 entries as pieces of this format, one entry at a time: after a crash
/// half-way, the next open finishes the job (an entry both ways is written again).
fn upgrade_format_1(db: &sled::Db, logs: &sled::Tree) -> Result<(), sled::Error> {
    let old: Vec<(sled::IVec, sled::IVec)> = logs
        .iter()
        .filter(|item| item.as_ref().map_or(true, |(k, _)| k.len() == 8))
        .collect::<Result<_, _>>()?;
    if old.is_empty() {
        return Ok(());
    }
    tracing::info!(entries = old.len(), "rewriting the Raft log in the current format");
    for (k, v) in old {
        let entry: openraft::Entry<format1::TypeConfig> = codec::decode_versions(&v, &[codec::FORMAT_1])
            .map_err(|e| sled::Error::Unsupported(format!("format 1 log entry: {e}")))?;
        let payload = match entry.payload {
            EntryPayload::Blank => EntryPayload::Blank,
            EntryPayload::Normal(p) => EntryPayload::Normal(Proposal {
                segments: vec![encode_segment(&p.commands)],
            }),
            EntryPayload::Membership(m) => EntryPayload::Membership(m),
        };
        insert_pieces(
            logs,
            &Entry {
                log_id: entry.log_id,
                payload,
            },
        )?;
        logs.remove(k)?;
    }
    db.flush()?;
    Ok(())
}

/// sled recovers its writes in order, so only the last entry can be partly there, and only when
/// its append was never acknowledged.
fn remove_broken_tail(db: &sled::Db, logs: &sled::Tree) -> Result<(), sled::Error> {
    let Some(index) = logs.last()?.and_then(|(k, _)| key_index(&k)) else {
        return Ok(());
    };
    let mut asm = Assembler::default();
    let mut whole = false;
    // Keys to remove: the whole entry when it is broken, else any piece past its count.
    let mut remove = Vec::new();
    for item in logs.range(piece_key(index, 0)..=piece_key(index, u32::MAX)) {
        let (k, v) = item?;
        if whole {
            remove.push(k);
            continue;
        }
        match asm.push(&k, &v) {
            Ok(Some(_)) => whole = true,
            Ok(None) => {}
            Err(_) => break,
        }
    }
    if !whole {
        tracing::warn!(index, "removing a log entry whose append did not finish");
        remove = logs
            .range(piece_key(index, 0)..=piece_key(index, u32::MAX))
            .keys()
            .collect::<Result<_, _>>()?;
    }
    if remove.is_empty() {
        return Ok(());
    }
    remove_keys(logs, remove)?;
    db.flush()?;
    Ok(())
}

/// Flushes for each queued append (appends queued meanwhile share the flush); ends when every log
/// store handle is gone.
fn run_flusher(db: sled::Db, rx: std::sync::mpsc::Receiver<LogFlushed<TypeConfig>>) {
    let mut batch = Vec::new();
    while let Ok(first) = rx.recv() {
        batch.push(first);
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        let started = std::time::Instant::now();
        let res = db.flush().map(|_| ());
        if started.elapsed() > SLOW_LOG_IO {
            tracing::warn!(appends = batch.len(), took = ?started.elapsed(), "slow Raft log flush");
        }
        for cb in batch.drain(..) {
            let r = res
                .as_ref()
                .map(|_| ())
                .map_err(|e| std::io::Error::other(e.to_string()));
            cb.log_io_completed(r);
        }
    }
}

impl LogStore {
    /// The entries in `range`, as many as fit in `budget` encoded bytes (at least one, whatever
    /// its size).
    fn read_entries<RB: RangeBounds<u64>>(&self, range: RB, budget: usize) -> Result<Vec<Entry>, StorageError> {
        let start = first_index(range.start_bound());
        // Entries up to the purge point may still be there, partly removed, until the
        // background removal reaches them: they are never read.
        let start = match self.last_purged()? {
            Some(p) => start.max(p.index.saturating_add(1)),
            None => start,
        };
        let iter = match range.end_bound() {
            Bound::Included(i) => self.logs.range(piece_key(start, 0)..=piece_key(*i, u32::MAX)),
            Bound::Excluded(i) => self.logs.range(piece_key(start, 0)..piece_key(*i, 0)),
            Bound::Unbounded => self.logs.range(piece_key(start, 0)..),
        };
        let mut out = Vec::new();
        let mut asm = Assembler::default();
        let mut bytes = 0;
        for item in iter {
            let (k, v) = item.map_err(read_err)?;
            if let Some(encoded) = asm.push(&k, &v).map_err(read_err)? {
                bytes += encoded.len();
                if bytes > budget && !out.is_empty() {
                    return Ok(out);
                }
                out.push(codec::decode::<Entry>(&encoded).map_err(read_err)?);
            }
        }
        if !asm.is_complete() {
            return Err(read_err(BrokenEntry {
                index: asm.index,
                reason: "pieces missing",
            }));
        }
        Ok(out)
    }
}

/// Entries at most that a read takes on the calling thread; a longer range is read on a
/// blocking thread. Entries are at most a staged chunk (1 MiB) each, so this bounds an inline
/// read to a few MiB.
const INLINE_READ_ENTRIES: u64 = 8;

/// The first index a range's start bound admits.
fn first_index(start: Bound<&u64>) -> u64 {
    match start {
        Bound::Included(i) => *i,
        Bound::Excluded(i) => i.saturating_add(1),
        Bound::Unbounded => 0,
    }
}

/// How many indexes `range` spans.
fn span(range: &(Bound<u64>, Bound<u64>)) -> u64 {
    let end = match range.1 {
        Bound::Included(i) => i.saturating_add(1),
        Bound::Excluded(i) => i,
        Bound::Unbounded => u64::MAX,
    };
    end.saturating_sub(first_index(range.start_bound()))
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let range = (range.start_bound().cloned(), range.end_bound().cloned());
        if span(&range) <= INLINE_READ_ENTRIES {
            return self.read_entries(range, usize::MAX);
        }
        // openraft's core reads the entries it applies through here, on the Raft thread and
        // without a limit: a commit index that jumps over many of a big staged transaction's
        // 1 MiB chunks would have them read and decoded there, with no heartbeat answered.
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.read_entries(range, usize::MAX))
            .await
            .map_err(|e| read_err(std::io::Error::other(e.to_string())))?
    }

    /// Replication reads through this: openraft asks for up to `max_payload_entries` entries,
    /// which for entries of a big staged transaction was hundreds of MB read and decoded on
    /// the Raft thread (stalling it for seconds) before the network refused the message.
    async fn limited_get_log_entries(&mut self, start: u64, end: u64) -> Result<Vec<Entry>, StorageError> {
        // Room for the message's own fields, so that what is read is sent as it is.
        self.read_entries(start..end, REPLICATION_BATCH_BYTES - 4096)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged_log_id = self.last_purged()?;
        let last_index = self.logs.last().map_err(read_err)?.and_then(|(k, _)| key_index(&k));
        let purged_index = last_purged_log_id.map(|l| l.index);
        let last_log_id = match last_index.filter(|i| Some(*i) > purged_index) {
            Some(i) => self.try_get_log_entries(i..=i).await?.pop().map(|e| e.log_id),
            None => last_purged_log_id,
        };
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError> {
        self.meta
            .insert(KEY_VOTE, codec::encode(vote))
            .map_err(|e| StorageIOError::write_vote(&e))?;
        self.flush().await.map_err(|e| StorageIOError::write_vote(&e))?;
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError> {
        // Read only at startup. openraft 0.9 brings a node whose vote says it led back as leader
        // at once, in the same term, with the commit index it last stored (not flushed, so it
        // can be older than writes it acknowledged); its read index could then miss those
        // writes, and its log can lack entries its followers committed. Handing the vote back
        // as not committed makes it a follower that must win a new election, whose first
        // entry commits everything before it. Only knowledge is dropped, so no vote is unsafe.
        let vote: Option<Vote<NodeId>> = self.get_meta(KEY_VOTE)?;
        Ok(vote.map(|v| Vote {
            leader_id: v.leader_id,
            committed: false,
        }))
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        // Not flushed on purpose: a lost committed id only means re-learning it from the leader.
        self.meta
            .insert(KEY_COMMITTED, codec::encode(&committed))
            .map_err(write_err)?;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.get_meta::<Option<LogId>>(KEY_COMMITTED)?.flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        // Plain inserts, not a sled batch: a batch writes and syncs the open IO buffer twice
        // before its own records, tripling an append's disk round trips. Atomicity is not needed:
        // sled recovers its log in order, so a crash before the flush leaves a prefix of these
        // entries, which Raft treats as a shorter append that was never acknowledged.
        let entries: Vec<Entry> = entries.into_iter().collect();
        // openraft appends contiguous runs; a gap here would be a hole in the log.
        assert!(
            entries.windows(2).all(|w| w[1].log_id.index == w[0].log_id.index + 1),
            "log append not contiguous"
        );
        // sled's inserts cost about 20 ms per MiB and wait while its buffers are written out:
        // off the Raft thread, whose other tasks (replication, the peers' requests) go on.
        // openraft awaits each append before the next, so the order stays.
        let store = self.clone();
        let started = std::time::Instant::now();
        let n = entries.len();
        tokio::task::spawn_blocking(move || entries.iter().try_for_each(|e| store.insert_entry(e)))
            .await
            .map_err(|e| write_err(std::io::Error::other(e.to_string())))??;
        if started.elapsed() > SLOW_LOG_IO {
            tracing::warn!(entries = n, took = ?started.elapsed(), "slow Raft log append");
        }
        if let Err(std::sync::mpsc::SendError(cb)) = self.flush_tx.send(callback) {
            // The flusher is gone (shutting down): flush inline.
            let r = self.flush().await.map_err(|e| std::io::Error::other(e.to_string()));
            cb.log_io_completed(r);
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.remove_range(piece_key(log_id.index, 0)..)?;
        self.flush().await.map_err(write_err)?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // openraft calls this on its core task after each snapshot, with tens of thousands of
        // entries to drop: removing them there, with two flushes, stalled heartbeats and
        // appends for up to seconds. Only the purge point is recorded here; the entries go in
        // the background in small batches, and both become durable with later flushes. Any
        // order of crash is consistent: entries below a purge point are never read, and open
        // removes those left behind.
        self.meta
            .insert(KEY_LAST_PURGED, codec::encode(&log_id))
            .map_err(write_err)?;
        let logs = self.logs.clone();
        let upto = piece_key(log_id.index, u32::MAX);
        tokio::task::spawn_blocking(move || {
            if let Err(e) = remove_up_to(&logs, upto) {
                tracing::warn!(error = %e, "removing purged log entries; open retries");
            }
        });
        Ok(())
    }
}

#[cfg(test)]
#[path = "log_store_tests.rs"]
mod tests;
