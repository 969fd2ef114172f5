//! The state machine driver: applies committed entries to [`KvState`], keeps the recent change
//! history for watches, and builds, stores and installs snapshots.

use std::collections::VecDeque;
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, RaftSnapshotBuilder, SnapshotMeta, StorageIOError, StoredMembership};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, watch};

use crate::codec;
use crate::kv_state::{Event, KvState};
use crate::types::{
    decode_segment, CommandResult, Entry, LogId, Node, NodeId, ProposalResult, StorageError, TypeConfig,
};

/// Default number of events kept for watchers that resume from an older revision.
pub const DEFAULT_HISTORY_EVENTS: usize = 200_000;

/// The changes one revision made (under any prefix).
#[derive(Debug)]
pub struct RevisionEvents {
    /// The revision.
    pub revision: u64,
    /// Changes in the order they were applied.
    pub events: Vec<Event>,
    /// A snapshot was installed here: history before `revision` is gone.
    pub reset: bool,
}

/// Recent revisions and their events, oldest first.
#[derive(Debug)]
pub struct History {
    /// Every revision at or after this one is fully retained.
    pub start: u64,
    entries: VecDeque<Arc<RevisionEvents>>,
    events: usize,
    max_events: usize,
}

impl History {
    fn new(start: u64, max_events: usize) -> Self {
        Self {
            start,
            entries: VecDeque::new(),
            events: 0,
            max_events,
        }
    }

    fn push(&mut self, rev: Arc<RevisionEvents>) {
        self.events += rev.events.len();
        self.entries.push_back(rev);
        // Keep at least the newest revision whatever its size.
        while self.events > self.max_events && self.entries.len() > 1 {
            if let Some(old) = self.entries.pop_front() {
                self.events -= old.events.len();
                self.start = old.revision + 1;
            }
        }
    }

    /// Revisions at or after `from`, or `None` if part of that range was compacted away.
    pub fn since(&self, from: u64) -> Option<Vec<Arc<RevisionEvents>>> {
        if from < self.start {
            return None;
        }
        let idx = self.entries.partition_point(|r| r.revision < from);
        Some(self.entries.range(idx..).cloned().collect())
    }
}

/// Everything the state machine holds, behind one lock.
pub struct SmInner {
    /// Last applied log id; its index is the store's revision.
    pub last_applied: Option<LogId>,
    /// Last applied membership.
    pub membership: StoredMembership<NodeId, Node>,
    /// The key-value state.
    pub state: KvState,
    /// Recent changes for watches.
    pub history: History,
}

impl SmInner {
    /// The store's current revision.
    pub fn revision(&self) -> u64 {
        self.state.revision
    }

    /// The last applied log index (what a read index is compared with).
    pub fn applied_index(&self) -> u64 {
        self.last_applied.map_or(0, |l| l.index)
    }
}

/// The state shared between the Raft state machine and the readers (gRPC service, watches).
pub struct SmShared {
    /// The state.
    pub inner: RwLock<SmInner>,
    /// Every applied revision with changes, for live watchers.
    pub events: broadcast::Sender<Arc<RevisionEvents>>,
    /// The last applied log index, for readers that wait for a read index.
    pub applied: watch::Sender<u64>,
}

/// What a snapshot holds.
#[derive(Serialize, Deserialize)]
struct SnapshotBody {
    last_applied: Option<LogId>,
    membership: StoredMembership<NodeId, Node>,
    state: KvState,
}

/// The Raft state machine over [`SmShared`], with snapshots kept in one file.
#[derive(Clone)]
pub struct StateMachine {
    /// Shared with readers.
    pub shared: Arc<SmShared>,
    snapshot_path: PathBuf,
}

fn sm_read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_state_machine(&e).into()
}

fn snap_write_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_snapshot(None, &e).into()
}

fn snap_read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_snapshot(None, &e).into()
}

impl StateMachine {
    /// Opens the state machine, loading the last snapshot stored in `dir` if any.
    pub fn open(dir: &Path, history_events: usize) -> Result<Self, StorageError> {
        std::fs::create_dir_all(dir).map_err(snap_read_err)?;
        let snapshot_path = dir.join("snapshot.bin");
        let (last_applied, membership, state) = match read_snapshot_file(&snapshot_path)? {
            Some((_, data)) => {
                let body: SnapshotBody = codec::decode_stored(&data).map_err(snap_read_err)?;
                (body.last_applied, body.membership, body.state)
            }
            None => (None, StoredMembership::default(), KvState::default()),
        };
        let (events, _) = broadcast::channel(4096);
        let (applied, _) = watch::channel(last_applied.map_or(0, |l| l.index));
        let inner = SmInner {
            last_applied,
            membership,
            history: History::new(state.revision + 1, history_events),
            state,
        };
        Ok(Self {
            shared: Arc::new(SmShared {
                inner: RwLock::new(inner),
                events,
                applied,
            }),
            snapshot_path,
        })
    }
}

/// Snapshot file layout: meta length (u64 LE), meta, data; written to a temp file, fsynced, renamed.
fn write_snapshot_file(path: &Path, meta: &SnapshotMeta<NodeId, Node>, data: &[u8]) -> std::io::Result<()> {
    let meta_bytes = codec::encode(meta);
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&(meta_bytes.len() as u64).to_le_bytes())?;
        f.write_all(&meta_bytes)?;
        f.write_all(data)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

type SnapshotFile = (SnapshotMeta<NodeId, Node>, Vec<u8>);

fn read_snapshot_file(path: &Path) -> Result<Option<SnapshotFile>, StorageError> {
    let mut bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(snap_read_err(e)),
    };
    let bad = || snap_read_err(std::io::Error::other("snapshot file is truncated"));
    let len_bytes: [u8; 8] = bytes.get(..8).and_then(|b| b.try_into().ok()).ok_or_else(bad)?;
    let meta_len = usize::try_from(u64::from_le_bytes(len_bytes)).map_err(|_| bad())?;
    let meta_end = 8usize
        .checked_add(meta_len)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(bad)?;
    let meta = codec::decode_stored(&bytes[8..meta_end]).map_err(snap_read_err)?;
    let data = bytes.split_off(meta_end);
    Ok(Some((meta, data)))
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        // The im maps clone in O(1): a consistent view taken under the lock, encoded outside it.
        let body = {
            let g = self.shared.inner.read();
            SnapshotBody {
                last_applied: g.last_applied,
                membership: g.membership.clone(),
                state: g.state.clone(),
            }
        };
        let snapshot_id = match body.last_applied {
            Some(l) => format!("{}-{}-{}", l.leader_id, l.index, uuid::Uuid::new_v4().simple()),
            None => format!("none-{}", uuid::Uuid::new_v4().simple()),
        };
        let meta = SnapshotMeta {
            last_log_id: body.last_applied,
            last_membership: body.membership.clone(),
            snapshot_id,
        };
        let path = self.snapshot_path.clone();
        let meta2 = meta.clone();
        let data = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
            let data = codec::encode(&body);
            write_snapshot_file(&path, &meta2, &data)?;
            Ok(data)
        })
        .await
        .map_err(|e| snap_write_err(std::io::Error::other(e.to_string())))?
        .map_err(snap_write_err)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership<NodeId, Node>), StorageError> {
        let g = self.shared.inner.read();
        Ok((g.last_applied, g.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<ProposalResult>, StorageError>
    where
        I: IntoIterator<Item = Entry> + openraft::OptionalSend,
        I::IntoIter: openraft::OptionalSend,
    {
        let mut results = Vec::new();
        let applied_index = {
            let mut g = self.shared.inner.write();
            for entry in entries {
                g.last_applied = Some(entry.log_id);
                g.state.entry_term = entry.log_id.leader_id.term;
                match entry.payload {
                    EntryPayload::Blank => results.push(ProposalResult::default()),
                    EntryPayload::Normal(proposal) => {
                        let mut out = Vec::with_capacity(proposal.segments.len());
                        for segment in &proposal.segments {
                            let commands = match decode_segment(segment) {
                                Ok(c) => c,
                                Err(e) => {
                                    out.push(vec![CommandResult::Rejected {
                                        reason: format!("commands do not decode: {e}"),
                                    }]);
                                    continue;
                                }
                            };
                            let mut seg_out = Vec::with_capacity(commands.len());
                            for cmd in commands {
                                let mut events = Vec::new();
                                seg_out.push(g.state.apply(cmd, &mut events));
                                if !events.is_empty() {
                                    let re = Arc::new(RevisionEvents {
                                        revision: g.state.revision,
                                        events,
                                        reset: false,
                                    });
                                    g.history.push(re.clone());
                                    // No receiver is not an error: nobody watches.
                                    let _ = self.shared.events.send(re);
                                }
                            }
                            out.push(seg_out);
                        }
                        results.push(ProposalResult { results: out });
                    }
                    EntryPayload::Membership(m) => {
                        g.membership = StoredMembership::new(Some(entry.log_id), m);
                        results.push(ProposalResult::default());
                    }
                }
            }
            g.applied_index()
        };
        self.shared.applied.send_replace(applied_index);
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, Node>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let body: SnapshotBody = codec::decode_stored(&data).map_err(snap_read_err)?;
        let path = self.snapshot_path.clone();
        let meta2 = meta.clone();
        tokio::task::spawn_blocking(move || write_snapshot_file(&path, &meta2, &data))
            .await
            .map_err(|e| snap_write_err(std::io::Error::other(e.to_string())))?
            .map_err(snap_write_err)?;
        let applied_index = {
            let mut g = self.shared.inner.write();
            g.last_applied = meta.last_log_id;
            g.membership = meta.last_membership.clone();
            g.state = body.state;
            let rev = g.revision();
            let max = g.history.max_events;
            g.history = History::new(rev + 1, max);
            let _ = self.shared.events.send(Arc::new(RevisionEvents {
                revision: rev,
                events: Vec::new(),
                reset: true,
            }));
            g.applied_index()
        };
        self.shared.applied.send_replace(applied_index);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let path = self.snapshot_path.clone();
        let file = tokio::task::spawn_blocking(move || read_snapshot_file(&path))
            .await
            .map_err(|e| sm_read_err(std::io::Error::other(e.to_string())))??;
        Ok(file.map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}
