//! The Raft log on sled, durable before it is acknowledged.
//!
//! Appends are written to sled and handed to one flusher thread, which flushes and then reports
//! them done, so the async runtime's thread is not blocked by the fsync. openraft 0.9 waits for
//! each append's flush before its next command, so grouping many writes into one fsync happens
//! earlier, in the proposer's batches. The vote, truncation and purge flush before they return.
//!
//! The flusher is a plain thread calling sled's blocking `flush`, not `flush_async`: the latter
//! hands each flush to sled's thread pool, whose `notify_all` wakes every idle pool thread per job,
//! and those futex storms were most of a leader's CPU time.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader, StorageIOError, Vote};

use crate::codec;
use crate::types::{Entry, LogId, NodeId, StorageError, TypeConfig};

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

fn index_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

fn read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_logs(&e).into()
}

fn write_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_logs(&e).into()
}

impl LogStore {
    /// Opens the log in `db` and starts its flusher thread.
    pub fn open(db: sled::Db) -> Result<Self, sled::Error> {
        let logs = db.open_tree("raft_log")?;
        let meta = db.open_tree("raft_meta")?;
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
            Some(v) => codec::decode(&v).map(Some).map_err(read_err),
        }
    }

    fn last_purged(&self) -> Result<Option<LogId>, StorageError> {
        self.get_meta(KEY_LAST_PURGED)
    }
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
        let res = db.flush().map(|_| ());
        for cb in batch.drain(..) {
            let r = res
                .as_ref()
                .map(|_| ())
                .map_err(|e| std::io::Error::other(e.to_string()));
            cb.log_io_completed(r);
        }
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let start = match range.start_bound() {
            Bound::Included(i) => *i,
            Bound::Excluded(i) => i.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let iter = match range.end_bound() {
            Bound::Included(i) => self.logs.range(index_key(start)..=index_key(*i)),
            Bound::Excluded(i) => self.logs.range(index_key(start)..index_key(*i)),
            Bound::Unbounded => self.logs.range(index_key(start)..),
        };
        let mut out = Vec::new();
        for item in iter {
            let (_, v) = item.map_err(read_err)?;
            out.push(codec::decode::<Entry>(&v).map_err(read_err)?);
        }
        Ok(out)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged_log_id = self.last_purged()?;
        let last_log_id = match self.logs.last().map_err(read_err)? {
            Some((_, v)) => Some(codec::decode::<Entry>(&v).map_err(read_err)?.log_id),
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
        self.get_meta(KEY_VOTE)
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
        for entry in entries {
            self.logs
                .insert(index_key(entry.log_id.index), codec::encode(&entry))
                .map_err(write_err)?;
        }
        if let Err(std::sync::mpsc::SendError(cb)) = self.flush_tx.send(callback) {
            // The flusher is gone (shutting down): flush inline.
            let r = self.flush().await.map_err(|e| std::io::Error::other(e.to_string()));
            cb.log_io_completed(r);
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let keys: Vec<_> = self
            .logs
            .range(index_key(log_id.index)..)
            .keys()
            .collect::<Result<_, _>>()
            .map_err(write_err)?;
        let mut batch = sled::Batch::default();
        for k in keys {
            batch.remove(k);
        }
        self.logs.apply_batch(batch).map_err(write_err)?;
        self.flush().await.map_err(write_err)?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // Record the purge point first, so a crash between the two steps leaves a consistent state.
        self.meta
            .insert(KEY_LAST_PURGED, codec::encode(&log_id))
            .map_err(write_err)?;
        self.flush().await.map_err(write_err)?;
        let keys: Vec<_> = self
            .logs
            .range(..=index_key(log_id.index))
            .keys()
            .collect::<Result<_, _>>()
            .map_err(write_err)?;
        let mut batch = sled::Batch::default();
        for k in keys {
            batch.remove(k);
        }
        self.logs.apply_batch(batch).map_err(write_err)?;
        self.flush().await.map_err(write_err)?;
        Ok(())
    }
}
