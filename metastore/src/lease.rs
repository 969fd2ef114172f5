//! Lease expiry, decided by the leader alone and written to the log so every replica agrees.
//!
//! Like etcd, keep-alives only touch the leader's memory; a new leader gives every lease a full
//! TTL from the moment it takes over, so no lease expires early across a leader change.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::proposer::Proposer;
use crate::state_machine::SmShared;
use crate::types::{Command, CommandKind, NodeId, Raft};

/// How often the leader looks for expired leases.
const TICK: Duration = Duration::from_millis(100);
/// How long before the leader proposes the same expiry again if the first try did not apply.
const RETRY: Duration = Duration::from_secs(1);

/// Why a keep-alive failed.
#[derive(Debug, thiserror::Error)]
pub enum KeepAliveError {
    /// Only the leader keeps leases.
    #[error("not the leader")]
    NotLeader,
    /// The lease expired or was revoked.
    #[error("lease {0} not found")]
    NotFound(u64),
}

/// The leader's lease deadlines.
#[derive(Clone)]
pub struct LeaseKeeper {
    id: NodeId,
    raft: Raft,
    proposer: Proposer,
    sm: Arc<SmShared>,
    deadlines: Arc<Mutex<HashMap<u64, Instant>>>,
}

impl LeaseKeeper {
    /// Starts the expiry task.
    pub fn start(id: NodeId, raft: Raft, proposer: Proposer, sm: Arc<SmShared>) -> Self {
        let keeper = Self {
            id,
            raft,
            proposer,
            sm,
            deadlines: Arc::new(Mutex::new(HashMap::new())),
        };
        tokio::spawn(keeper.clone().run());
        keeper
    }

    fn is_leader(&self) -> bool {
        self.raft.metrics().borrow().current_leader == Some(self.id)
    }

    /// Renews a lease; returns its TTL.
    pub fn keep_alive(&self, lease: u64) -> Result<u64, KeepAliveError> {
        if !self.is_leader() {
            return Err(KeepAliveError::NotLeader);
        }
        let ttl = self
            .sm
            .inner
            .read()
            .state
            .leases
            .get(&lease)
            .map(|l| l.ttl_ms)
            .ok_or(KeepAliveError::NotFound(lease))?;
        self.deadlines
            .lock()
            .insert(lease, Instant::now() + Duration::from_millis(ttl));
        Ok(ttl)
    }

    async fn run(self) {
        let mut tick = tokio::time::interval(TICK);
        loop {
            tick.tick().await;
            if !self.is_leader() {
                self.deadlines.lock().clear();
                continue;
            }
            let now = Instant::now();
            let expired: Vec<u64> = {
                let leases: Vec<(u64, u64)> = {
                    let g = self.sm.inner.read();
                    g.state.leases.iter().map(|(id, l)| (*id, l.ttl_ms)).collect()
                };
                let mut d = self.deadlines.lock();
                d.retain(|id, _| leases.iter().any(|(l, _)| l == id));
                let mut expired = Vec::new();
                for (id, ttl) in leases {
                    let deadline = *d.entry(id).or_insert(now + Duration::from_millis(ttl));
                    if deadline <= now {
                        expired.push(id);
                        d.insert(id, now + RETRY);
                    }
                }
                expired
            };
            for id in expired {
                let proposer = self.proposer.clone();
                tokio::spawn(async move {
                    let cmd = Command {
                        request_id: None,
                        kind: CommandKind::LeaseRevoke { id },
                    };
                    if let Err(e) = proposer.propose(cmd).await {
                        tracing::debug!(lease = id, error = %e, "lease expiry not committed; will retry");
                    }
                });
            }
        }
    }
}
