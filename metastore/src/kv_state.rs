//! The replicated key-value state and the pure function that applies a command to it.
//!
//! Nothing here does I/O. The state machine driver (`state_machine.rs`) calls [`KvState::apply`]
//! for each committed entry, in log order, on every replica, so every replica reaches the same
//! state and emits the same events.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::types::{Check, Command, CommandKind, CommandResult, Guard, Op};

/// How many request ids are remembered for retry deduplication.
pub const DEDUP_CAPACITY: usize = 100_000;

/// A stored value and its revisions.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct KvEntry {
    /// The value.
    pub value: Bytes,
    /// Revision that created the key.
    pub create_revision: u64,
    /// Revision that last changed the key.
    pub mod_revision: u64,
    /// Writes since creation.
    pub version: u64,
    /// Bound lease, 0 for none.
    pub lease: u64,
}

/// A lease and the keys bound to it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct LeaseInfo {
    /// Time to live without a keep-alive.
    pub ttl_ms: u64,
    /// Keys bound to it.
    pub keys: im::OrdSet<String>,
}

/// One change to one key, as watchers see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The key.
    pub key: String,
    /// The new entry, or `None` for a delete.
    pub entry: Option<KvEntry>,
    /// The revision that made the change.
    pub revision: u64,
}

/// The whole replicated state. `im` maps make a clone O(1), so a snapshot reads a consistent
/// view while writes go on.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct KvState {
    /// The store's revision: bumped by each command that changes something, so that every
    /// committed change has its own revision even when many commands share one log entry.
    pub revision: u64,
    /// The key-value map.
    pub kv: im::OrdMap<String, KvEntry>,
    /// Live leases by id.
    pub leases: im::OrdMap<u64, LeaseInfo>,
    /// Results of recent requests by request id.
    pub dedup: im::HashMap<String, CommandResult>,
    /// Request ids in the order they were applied, for eviction.
    pub dedup_order: im::Vector<String>,
    /// Transactions being staged over several log entries, by id.
    pub staged: im::HashMap<String, StagedTxn>,
    /// Term of the leader that made the entry being applied; set by the state machine.
    #[serde(skip)]
    pub entry_term: u64,
}

/// One staged chunk: its guards and operations.
pub type StagedChunk = (Vec<Guard>, Vec<Op>);

/// Operations of a large transaction received so far.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct StagedTxn {
    /// The chunks received so far, by their place in the transaction: (guards, operations).
    /// Behind an `Arc`: every apply works on a clone of the state, and an `im` map copies the
    /// values of a shared node it changes, so plain vectors were copied again with each chunk
    /// (gigabytes over a 1,000,000-partition request).
    pub chunks: im::OrdMap<u32, std::sync::Arc<StagedChunk>>,
    /// When its first chunk was proposed (leader wall clock, ms since the epoch).
    pub started_ms: u64,
}

impl KvState {
    /// Applies a staged transaction's chunks and then `txn`, if every chunk is there (when
    /// `chunks` is known) and every guard holds.
    fn commit_staged(
        &mut self,
        revision: u64,
        txn_id: &str,
        chunks: Option<u32>,
        txn: crate::types::Txn,
        events: &mut Vec<Event>,
    ) -> CommandResult {
        let Some(staged) = self.staged.remove(txn_id) else {
            return CommandResult::Rejected {
                reason: format!("staged transaction {txn_id} not found (aborted or expired)"),
            };
        };
        if let Some(n) = chunks.filter(|n| staged.chunks.len() != *n as usize) {
            return CommandResult::Rejected {
                reason: format!(
                    "staged transaction {txn_id} has {} of its {n} chunks (some were aborted or expired)",
                    staged.chunks.len()
                ),
            };
        }
        let timer = std::time::Instant::now();
        // Applied from the chunks where they lie: joining them would copy every key.
        let guards = staged.chunks.values().flat_map(|c| c.0.iter()).chain(txn.guards.iter());
        let ops: Vec<&Op> = staged
            .chunks
            .values()
            .flat_map(|c| c.1.iter())
            .chain(txn.ops.iter())
            .collect();
        let r = self.apply_txn(revision, guards, ops.iter().copied(), events);
        tracing::debug!(
            elapsed_ms = timer.elapsed().as_millis() as u64,
            "staged transaction applied"
        );
        r
    }

    /// Drops what every attempt of request `request_id` staged (their ids start with
    /// `<request_id>/`): after its commit, earlier or later attempts' chunks are only garbage.
    fn drop_attempts(&mut self, request_id: &str) {
        let prefix = format!("{request_id}/");
        self.staged.retain(|id, _| !id.starts_with(&prefix));
    }

    /// Applies one committed command, pushing the changes it makes to `events`. A command that
    /// changes the store gets the next revision; one that changes nothing leaves it.
    /// The command is taken by value so that staged chunks are kept without a copy.
    pub fn apply(&mut self, cmd: Command, events: &mut Vec<Event>) -> CommandResult {
        if let Some(id) = &cmd.request_id {
            if let Some(done) = self.dedup.get(id) {
                let done = done.clone();
                if matches!(cmd.kind, CommandKind::TxnCommitCounted { .. }) {
                    // A retry of a request that already committed: its own stages go.
                    self.drop_attempts(id);
                }
                return done;
            }
        }
        let revision = self.revision + 1;
        let before = events.len();
        let result = match cmd.kind {
            CommandKind::Txn(txn) => self.apply_txn(revision, txn.guards.iter(), txn.ops.iter(), events),
            CommandKind::LeaseGrant { ttl_ms } => {
                self.leases.insert(
                    revision,
                    LeaseInfo {
                        ttl_ms,
                        keys: im::OrdSet::new(),
                    },
                );
                CommandResult::LeaseGranted { id: revision, ttl_ms }
            }
            CommandKind::LeaseRevoke { id } => {
                let found = self.revoke_lease(id, revision, events);
                CommandResult::LeaseRevoked { found, revision }
            }
            CommandKind::TxnStage {
                txn_id,
                seq,
                guards,
                ops,
                started_ms,
            } => {
                let staged = self.staged.entry(txn_id).or_insert_with(|| StagedTxn {
                    chunks: im::OrdMap::new(),
                    started_ms,
                });
                staged.chunks.insert(seq, std::sync::Arc::new((guards, ops)));
                CommandResult::Staged {
                    ops: staged.chunks.values().map(|c| c.1.len() as u64).sum(),
                }
            }
            CommandKind::TxnCommit { txn_id, txn } => self.commit_staged(revision, &txn_id, None, txn, events),
            CommandKind::TxnCommitCounted { txn_id, chunks, txn } => {
                let r = self.commit_staged(revision, &txn_id, Some(chunks), txn, events);
                if let Some(id) = &cmd.request_id {
                    self.drop_attempts(id);
                }
                r
            }
            CommandKind::TxnAbort { txn_id } => {
                self.staged.remove(&txn_id);
                CommandResult::Staged { ops: 0 }
            }
        };
        let changed = events.len() > before
            || matches!(
                result,
                CommandResult::LeaseGranted { .. } | CommandResult::LeaseRevoked { found: true, .. }
            );
        if changed {
            self.revision = revision;
        }
        let result = match result {
            CommandResult::Txn {
                succeeded,
                failed_guard,
                deleted,
                ..
            } => CommandResult::Txn {
                revision: self.revision,
                succeeded,
                failed_guard,
                deleted,
            },
            CommandResult::LeaseRevoked { found, .. } => CommandResult::LeaseRevoked {
                found,
                revision: self.revision,
            },
            other => other,
        };
        if let Some(id) = &cmd.request_id {
            self.remember(id.clone(), result.clone());
        }
        result
    }

    fn remember(&mut self, id: String, result: CommandResult) {
        self.dedup.insert(id.clone(), result);
        self.dedup_order.push_back(id);
        while self.dedup_order.len() > DEDUP_CAPACITY {
            if let Some(old) = self.dedup_order.pop_front() {
                self.dedup.remove(&old);
            }
        }
    }

    /// Checks guards in order; the first that fails is returned with a reason.
    pub fn check_guards<'a>(&self, guards: impl IntoIterator<Item = &'a Guard>) -> Option<(u32, String)> {
        for (i, g) in guards.into_iter().enumerate() {
            let cur = self.kv.get(&g.key);
            let failed = match (&g.check, cur) {
                (Check::Exists, None) => Some("expected the key to exist, it is absent".to_string()),
                (Check::Exists, Some(_)) => None,
                (Check::Absent, Some(e)) => Some(format!(
                    "expected the key to be absent, it exists at version {}",
                    e.version
                )),
                (Check::Absent, None) => None,
                (Check::Version(v), e) => {
                    let found = e.map_or(0, |e| e.version);
                    (found != *v).then(|| format!("expected version {v}, found {found}"))
                }
                (Check::ModRevision(r), e) => {
                    let found = e.map_or(0, |e| e.mod_revision);
                    (found != *r).then(|| format!("expected mod revision {r}, found {found}"))
                }
                (Check::Value(v), Some(e)) => (e.value != *v).then(|| "the value differs".to_string()),
                (Check::Value(_), None) => Some("expected a value, the key is absent".to_string()),
                (Check::RaftTerm(t), _) => (self.entry_term != *t).then(|| {
                    format!(
                        "expected Raft term {t}, the entry was made in term {}; the writer is no longer leader",
                        self.entry_term
                    )
                }),
            };
            if let Some(reason) = failed {
                return Some((i as u32, format!("guard {i} on {}: {reason}", g.key)));
            }
        }
        None
    }

    fn apply_txn<'a>(
        &mut self,
        revision: u64,
        guards: impl IntoIterator<Item = &'a Guard>,
        ops: impl Iterator<Item = &'a Op> + Clone,
        events: &mut Vec<Event>,
    ) -> CommandResult {
        if let Some(failed) = self.check_guards(guards) {
            return CommandResult::Txn {
                revision,
                succeeded: false,
                failed_guard: Some(failed),
                deleted: 0,
            };
        }
        // All or nothing: a put naming a missing lease rejects the whole command before any op.
        for op in ops.clone() {
            if let Op::Put { key, lease, .. } = op {
                if *lease != 0 && !self.leases.contains_key(lease) {
                    return CommandResult::Rejected {
                        reason: format!("lease {lease} for key {key} not found (expired or revoked)"),
                    };
                }
            }
        }
        let mut deleted = 0;
        for op in ops {
            match op {
                Op::Put { key, value, lease } => self.put(revision, key, value.clone(), *lease, events),
                Op::Delete { key } => deleted += u64::from(self.delete(revision, key, events)),
                Op::DeletePrefix { prefix } => {
                    let keys: Vec<String> = self
                        .kv
                        .range(prefix.clone()..)
                        .take_while(|(k, _)| k.starts_with(prefix.as_str()))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for k in keys {
                        deleted += u64::from(self.delete(revision, &k, events));
                    }
                }
            }
        }
        CommandResult::Txn {
            revision,
            succeeded: true,
            failed_guard: None,
            deleted,
        }
    }

    fn put(&mut self, revision: u64, key: &str, value: Bytes, lease: u64, events: &mut Vec<Event>) {
        // Revisions only go forward: a write at or below the current one would break every
        // guard and watch that compares them.
        debug_assert!(
            revision > self.revision,
            "put at revision {revision} after {}",
            self.revision
        );
        // An existing key is changed in place: one walk down the tree and no new key string.
        let mut old_lease = 0;
        let entry = match self.kv.get_mut(key) {
            Some(e) => {
                if e.lease != lease {
                    old_lease = e.lease;
                }
                debug_assert!(e.create_revision <= e.mod_revision && e.mod_revision < revision);
                e.value = value;
                e.mod_revision = revision;
                e.version += 1;
                e.lease = lease;
                e.clone()
            }
            None => {
                let e = KvEntry {
                    value,
                    create_revision: revision,
                    mod_revision: revision,
                    version: 1,
                    lease,
                };
                self.kv.insert(key.to_string(), e.clone());
                e
            }
        };
        if old_lease != 0 {
            self.unbind(old_lease, key);
        }
        if lease != 0 {
            if let Some(l) = self.leases.get_mut(&lease) {
                l.keys.insert(key.to_string());
            }
        }
        events.push(Event {
            key: key.to_string(),
            entry: Some(entry),
            revision,
        });
    }

    fn delete(&mut self, revision: u64, key: &str, events: &mut Vec<Event>) -> bool {
        match self.kv.remove(key) {
            Some(old) => {
                if old.lease != 0 {
                    self.unbind(old.lease, key);
                }
                events.push(Event {
                    key: key.to_string(),
                    entry: None,
                    revision,
                });
                true
            }
            None => false,
        }
    }

    fn unbind(&mut self, lease: u64, key: &str) {
        if let Some(l) = self.leases.get_mut(&lease) {
            l.keys.remove(key);
        }
    }

    fn revoke_lease(&mut self, id: u64, revision: u64, events: &mut Vec<Event>) -> bool {
        let Some(lease) = self.leases.remove(&id) else {
            return false;
        };
        for key in lease.keys.iter() {
            if let Some(e) = self.kv.get(key) {
                if e.lease == id {
                    self.delete(revision, key, events);
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Txn;

    fn put(key: &str, v: &str) -> Op {
        Op::Put {
            key: key.into(),
            value: Bytes::from(v.to_string()),
            lease: 0,
        }
    }

    fn txn(guards: Vec<Guard>, ops: Vec<Op>) -> Command {
        Command {
            request_id: None,
            kind: CommandKind::Txn(Txn { guards, ops }),
        }
    }

    #[test]
    fn revisions_and_versions_advance() {
        let mut s = KvState::default();
        let mut ev = vec![];
        s.apply(txn(vec![], vec![put("/a", "1")]), &mut ev);
        s.apply(txn(vec![], vec![put("/b", "1")]), &mut ev);
        // A change-free command keeps the revision.
        s.apply(txn(vec![], vec![Op::Delete { key: "/none".into() }]), &mut ev);
        s.apply(txn(vec![], vec![put("/a", "2")]), &mut ev);
        let e = &s.kv["/a"];
        assert_eq!((e.create_revision, e.mod_revision, e.version), (1, 3, 2));
        assert_eq!(s.revision, 3);
        assert_eq!(ev.len(), 3);
    }

    #[test]
    fn failed_guard_applies_nothing_and_names_the_guard() {
        let mut s = KvState::default();
        let mut ev = vec![];
        s.apply(txn(vec![], vec![put("/a", "1")]), &mut ev);
        let r = s.apply(
            txn(
                vec![
                    Guard {
                        key: "/a".into(),
                        check: Check::Exists,
                    },
                    Guard {
                        key: "/a".into(),
                        check: Check::Version(9),
                    },
                ],
                vec![put("/b", "x"), Op::Delete { key: "/a".into() }],
            ),
            &mut ev,
        );
        match r {
            CommandResult::Txn {
                succeeded: false,
                failed_guard: Some((1, reason)),
                ..
            } => {
                assert!(reason.contains("expected version 9, found 1"), "{reason}")
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(s.kv.get("/b").is_none());
        assert!(s.kv.get("/a").is_some());
        assert_eq!(ev.len(), 1);
    }

    #[test]
    fn retry_with_same_request_id_applies_once() {
        let mut s = KvState::default();
        let mut ev = vec![];
        let mut c = txn(vec![], vec![put("/a", "1")]);
        c.request_id = Some("r1".into());
        let first = s.apply(c.clone(), &mut ev);
        let again = s.apply(c, &mut ev);
        assert_eq!(first, again);
        assert_eq!(s.kv["/a"].version, 1);
    }

    #[test]
    fn a_staged_commit_missing_a_chunk_applies_nothing_and_stale_attempts_go() {
        let mut s = KvState::default();
        let mut ev = vec![];
        let stage = |id: &str, seq: u32, key: &str| Command {
            request_id: Some(format!("{id}#stage{seq}")),
            kind: CommandKind::TxnStage {
                txn_id: id.into(),
                seq,
                guards: vec![],
                ops: vec![put(key, "1")],
                started_ms: 0,
            },
        };
        let commit = |req: &str, id: &str| Command {
            request_id: Some(req.into()),
            kind: CommandKind::TxnCommitCounted {
                txn_id: id.into(),
                chunks: 2,
                txn: Txn::default(),
            },
        };
        // An attempt that staged one of its two chunks, and a commit of it anyway.
        s.apply(stage("a/1", 0, "/x"), &mut ev);
        let r = s.apply(commit("a", "a/1"), &mut ev);
        assert!(
            matches!(&r, CommandResult::Rejected { reason } if reason.contains("1 of its 2 chunks")),
            "{r:?}"
        );
        assert!(s.kv.is_empty());
        // An abandoned first attempt, then a whole second one: both chunks apply at once and the
        // first attempt's chunk is dropped with the commit.
        s.apply(stage("b/1", 0, "/old"), &mut ev);
        s.apply(stage("b/2", 0, "/x"), &mut ev);
        s.apply(stage("b/2", 1, "/y"), &mut ev);
        s.apply(commit("b", "b/2"), &mut ev);
        assert_eq!((s.kv.contains_key("/x"), s.kv.contains_key("/y")), (true, true));
        assert!(!s.kv.contains_key("/old"));
        assert!(s.staged.is_empty());
        // A retry after the commit applied: answered from the first commit, its stages dropped.
        s.apply(stage("b/3", 0, "/z"), &mut ev);
        s.apply(stage("b/3", 1, "/z2"), &mut ev);
        s.apply(commit("b", "b/3"), &mut ev);
        assert!(!s.kv.contains_key("/z"));
        assert!(s.staged.is_empty());
    }

    #[test]
    fn lease_revoke_deletes_bound_keys_only() {
        let mut s = KvState::default();
        let mut ev = vec![];
        s.apply(
            Command {
                request_id: None,
                kind: CommandKind::LeaseGrant { ttl_ms: 1000 },
            },
            &mut ev,
        );
        s.apply(
            txn(
                vec![],
                vec![
                    Op::Put {
                        key: "/l".into(),
                        value: Bytes::new(),
                        lease: 1,
                    },
                    put("/k", "v"),
                ],
            ),
            &mut ev,
        );
        let r = s.apply(
            txn(
                vec![],
                vec![Op::Put {
                    key: "/x".into(),
                    value: Bytes::new(),
                    lease: 42,
                }],
            ),
            &mut ev,
        );
        assert!(matches!(r, CommandResult::Rejected { .. }));
        s.apply(
            Command {
                request_id: None,
                kind: CommandKind::LeaseRevoke { id: 1 },
            },
            &mut ev,
        );
        assert!(s.kv.get("/l").is_none());
        assert!(s.kv.get("/k").is_some());
        assert!(s.leases.is_empty());
    }

    #[test]
    fn delete_prefix_removes_only_the_prefix() {
        let mut s = KvState::default();
        let mut ev = vec![];
        s.apply(
            txn(
                vec![],
                vec![put("/a/1", ""), put("/a/2", ""), put("/ab", ""), put("/b", "")],
            ),
            &mut ev,
        );
        let r = s.apply(txn(vec![], vec![Op::DeletePrefix { prefix: "/a/".into() }]), &mut ev);
        assert!(matches!(r, CommandResult::Txn { deleted: 2, .. }));
        assert_eq!(s.kv.len(), 2);
    }
}
