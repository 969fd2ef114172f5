//! The state machine driver: applies committed entries to [`KvState`], keeps the recent change
//! history for watches, and builds, stores and installs snapshots.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, RaftSnapshotBuilder, SnapshotMeta, StorageIOError, StoredMembership};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, watch};

use crate::kv_state::{Event, KvState};
use crate::snapshot_store::{SnapshotFile, SnapshotStore};
use crate::types::{
    decode_segment, Command, CommandKind, CommandResult, Entry, LogId, Node, NodeId, Op, ProposalResult, StorageError,
    TypeConfig,
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
    /// Last applied log id. Its index is not the store's revision (`state.revision` counts changes).
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

/// Operations at or past which one apply call runs outside the state's lock.
const HEAVY_APPLY_OPS: usize = 20_000;
/// Payload bytes at or past which entries are decoded and applied off the Raft thread.
const HEAVY_APPLY_BYTES: usize = 256 << 10;

/// The bytes of an entry's command segments.
fn payload_bytes(entry: &Entry) -> usize {
    match &entry.payload {
        EntryPayload::Normal(p) => p.segments.iter().map(|s| s.len()).sum(),
        _ => 0,
    }
}

/// Runs an apply on a blocking thread and waits for it.
async fn off_raft_thread(
    f: impl FnOnce() -> Vec<ProposalResult> + Send + 'static,
) -> Result<Vec<ProposalResult>, StorageError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StorageIOError::apply(openraft::LogId::default(), &std::io::Error::other(e.to_string())).into())
}

/// A committed entry with its command segments decoded (or why a segment does not decode).
struct DecodedEntry {
    log_id: LogId,
    payload: Decoded,
}

enum Decoded {
    Blank,
    Normal(Vec<Result<Vec<Command>, String>>),
    Membership(openraft::Membership<NodeId, Node>),
}

impl DecodedEntry {
    fn new(entry: Entry) -> Self {
        let payload = match entry.payload {
            EntryPayload::Blank => Decoded::Blank,
            EntryPayload::Normal(p) => Decoded::Normal(
                p.segments
                    .iter()
                    .map(|s| decode_segment(s).map_err(|e| e.to_string()))
                    .collect(),
            ),
            EntryPayload::Membership(m) => Decoded::Membership(m),
        };
        Self {
            log_id: entry.log_id,
            payload,
        }
    }

    /// About how many operations applying it takes.
    fn weight(&self) -> usize {
        let Decoded::Normal(segments) = &self.payload else {
            return 1;
        };
        let command = |c: &Command| match &c.kind {
            // A delete of a prefix removes however many keys lie under it: a DeleteTopics of a
            // 1,000,000-partition topic is one op that removes 2,000,000 keys, which applied in
            // place held the Raft thread for over a second and cost an election.
            CommandKind::Txn(t) if t.ops.iter().any(|o| matches!(o, Op::DeletePrefix { .. })) => HEAVY_APPLY_OPS,
            CommandKind::Txn(t) => t.ops.len(),
            // Applies every chunk staged before it: a transaction too large for one entry.
            CommandKind::TxnCommit { .. } | CommandKind::TxnCommitCounted { .. } => HEAVY_APPLY_OPS,
            // Deletes every key bound to the lease.
            CommandKind::LeaseRevoke { .. } => HEAVY_APPLY_OPS,
            _ => 1,
        };
        segments.iter().flatten().flatten().map(command).sum()
    }
}

/// Whether entries apply in place: under [`HEAVY_APPLY_OPS`] operations.
fn is_light(entries: &[DecodedEntry]) -> bool {
    entries.iter().map(DecodedEntry::weight).sum::<usize>() < HEAVY_APPLY_OPS
}

/// Applies decoded entries in place when they are light, else outside the lock.
fn apply_decoded(shared: &SmShared, entries: Vec<DecodedEntry>) -> Vec<ProposalResult> {
    if is_light(&entries) {
        apply_in_place(shared, entries)
    } else {
        apply_off_lock(shared, entries)
    }
}

/// What applying entries changes, apart from the watch history.
struct Applying<'a> {
    last_applied: &'a mut Option<LogId>,
    membership: &'a mut StoredMembership<NodeId, Node>,
    state: &'a mut KvState,
}

/// Applies decoded entries in order under the state's lock, then publishes the applied index.
/// Small batches only: readers wait on the lock meanwhile.
fn apply_in_place(shared: &SmShared, entries: Vec<DecodedEntry>) -> Vec<ProposalResult> {
    let (results, applied_index) = {
        let mut g = shared.inner.write();
        let g = &mut *g;
        let mut revisions = Vec::new();
        let target = Applying {
            last_applied: &mut g.last_applied,
            membership: &mut g.membership,
            state: &mut g.state,
        };
        let results = apply_entries(target, entries, &mut revisions);
        publish(shared, &mut g.history, revisions);
        (results, g.applied_index())
    };
    shared.applied.send_replace(applied_index);
    results
}

/// Applies decoded entries to a copy of the state (im maps clone in O(1)) outside the lock, then
/// swaps it in. A heavy apply takes seconds; under the lock it held every reader, and readers run
/// on the runtime's threads (each request's credential check and write header), so the node
/// stopped serving Raft and its followers called elections.
fn apply_off_lock(shared: &SmShared, entries: Vec<DecodedEntry>) -> Vec<ProposalResult> {
    let (mut last_applied, mut membership, mut state) = {
        let g = shared.inner.read();
        (g.last_applied, g.membership.clone(), g.state.clone())
    };
    let before = last_applied;
    let mut revisions = Vec::new();
    let target = Applying {
        last_applied: &mut last_applied,
        membership: &mut membership,
        state: &mut state,
    };
    let results = apply_entries(target, entries, &mut revisions);
    let applied_index = {
        let mut g = shared.inner.write();
        // The state machine's task is the only writer and awaits each apply, so nothing can have
        // moved the state between the copy and the swap.
        assert_eq!(g.last_applied, before, "state machine changed during an apply");
        g.last_applied = last_applied;
        g.membership = membership;
        let old = std::mem::replace(&mut g.state, state);
        publish(shared, &mut g.history, revisions);
        (g.applied_index(), old)
    };
    // Freeing what only the old state held takes a while: not under the lock.
    let (applied_index, old) = applied_index;
    drop(old);
    shared.applied.send_replace(applied_index);
    results
}

/// Adds applied revisions to the history and sends them to live watchers, in order.
fn publish(shared: &SmShared, history: &mut History, revisions: Vec<Arc<RevisionEvents>>) {
    for re in revisions {
        history.push(re.clone());
        // No receiver is not an error: nobody watches.
        let _ = shared.events.send(re);
    }
}

/// Applies decoded entries in order to `target`, collecting the revisions that changed something.
fn apply_entries(
    target: Applying<'_>,
    entries: Vec<DecodedEntry>,
    revisions: &mut Vec<Arc<RevisionEvents>>,
) -> Vec<ProposalResult> {
    let Applying {
        last_applied,
        membership,
        state,
    } = target;
    let mut results = Vec::with_capacity(entries.len());
    for entry in entries {
        // Raft applies each index once, in order: anything else would apply a command twice or
        // skip one.
        debug_assert!(
            last_applied.map_or(0, |l| l.index) < entry.log_id.index || entry.log_id.index == 0,
            "applying entry {} after {:?}",
            entry.log_id.index,
            last_applied
        );
        *last_applied = Some(entry.log_id);
        state.entry_term = entry.log_id.leader_id.term;
        match entry.payload {
            Decoded::Blank => results.push(ProposalResult::default()),
            Decoded::Normal(segments) => {
                let mut out = Vec::with_capacity(segments.len());
                for segment in segments {
                    let commands = match segment {
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
                        seg_out.push(state.apply(cmd, &mut events));
                        if !events.is_empty() {
                            revisions.push(Arc::new(RevisionEvents {
                                revision: state.revision,
                                events,
                                reset: false,
                            }));
                        }
                    }
                    out.push(seg_out);
                }
                results.push(ProposalResult { results: out });
            }
            Decoded::Membership(m) => {
                *membership = StoredMembership::new(Some(entry.log_id), m);
                results.push(ProposalResult::default());
            }
        }
    }
    results
}

/// What a snapshot holds.
#[derive(Serialize, Deserialize)]
struct SnapshotBody {
    last_applied: Option<LogId>,
    membership: StoredMembership<NodeId, Node>,
    state: KvState,
}

/// The Raft state machine over [`SmShared`], with snapshots in a [`SnapshotStore`].
#[derive(Clone)]
pub struct StateMachine {
    /// Shared with readers.
    pub shared: Arc<SmShared>,
    snapshots: Arc<SnapshotStore>,
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
        let snapshots = SnapshotStore::open(dir).map_err(snap_read_err)?;
        let (last_applied, membership, state) = match snapshots.load::<SnapshotBody>().map_err(snap_read_err)? {
            Some(body) => (body.last_applied, body.membership, body.state),
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
            snapshots: Arc::new(snapshots),
        })
    }
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
        let store = self.snapshots.clone();
        let meta2 = meta.clone();
        let data = tokio::task::spawn_blocking(move || store.write_built(&meta2, &body))
            .await
            .map_err(|e| snap_write_err(std::io::Error::other(e.to_string())))?
            .map_err(snap_write_err)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(data),
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
        let entries: Vec<Entry> = entries.into_iter().collect();
        let bytes: usize = entries.iter().map(payload_bytes).sum();
        if bytes < HEAVY_APPLY_BYTES {
            let decoded: Vec<DecodedEntry> = entries.into_iter().map(DecodedEntry::new).collect();
            if is_light(&decoded) {
                return Ok(apply_in_place(&self.shared, decoded));
            }
            let shared = self.shared.clone();
            return off_raft_thread(move || apply_off_lock(&shared, decoded)).await;
        }
        // Decoding and applying this takes up to seconds: not on the Raft thread, which would
        // stop answering heartbeats meanwhile (and its followers would call elections).
        let shared = self.shared.clone();
        off_raft_thread(move || apply_decoded(&shared, entries.into_iter().map(DecodedEntry::new).collect())).await
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<SnapshotFile>, StorageError> {
        Ok(Box::new(self.snapshots.receiving().await.map_err(snap_write_err)?))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, Node>,
        snapshot: Box<SnapshotFile>,
    ) -> Result<(), StorageError> {
        let installed = self.snapshots.install_received::<SnapshotBody>(meta, *snapshot).await;
        let Some(body) = installed.map_err(snap_read_err)? else {
            // openraft never installs a snapshot older than its own; kept as it is if it did.
            tracing::warn!(snapshot = %meta.snapshot_id, "a newer snapshot is stored: not installed");
            return Ok(());
        };
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
        let current = self.snapshots.current().await.map_err(snap_read_err)?;
        Ok(current.map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(data),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Txn;

    fn entry_of(ops: Vec<Op>) -> DecodedEntry {
        let cmd = Command {
            request_id: None,
            kind: CommandKind::Txn(Txn { guards: vec![], ops }),
        };
        DecodedEntry {
            log_id: LogId::default(),
            payload: Decoded::Normal(vec![Ok(vec![cmd])]),
        }
    }

    #[test]
    fn a_prefix_delete_is_applied_off_the_raft_thread_whatever_its_op_count() {
        let put = Op::Put {
            key: "a".into(),
            value: Default::default(),
            lease: 0,
        };
        assert!(is_light(&[entry_of(vec![put.clone(); 10])]));
        assert!(!is_light(&[entry_of(vec![put; HEAVY_APPLY_OPS])]));
        let prefix = Op::DeletePrefix { prefix: "/t/".into() };
        assert!(!is_light(&[entry_of(vec![prefix])]));
    }
}
