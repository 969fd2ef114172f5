//! The task by which a leader creates the cluster credential (see [`crate::credential`]) when
//! the cluster has none. It proposes a write, so it sits above the proposer; the credential
//! itself, which the Raft calls below the proposer give, knows nothing of it.

use std::sync::Arc;

use crate::credential::{new_token, stored, CREDENTIAL_KEY, LOOK_AGAIN};
use crate::proposer::Proposer;
use crate::state_machine::SmShared;
use crate::types::{Check, Command, CommandKind, Guard, NodeId, Op, Raft, Txn};

/// Starts the task by which a leader creates the credential when the cluster has none (a new
/// cluster, or one formed by a build from before credentials).
pub fn start(id: NodeId, raft: Raft, proposer: Proposer, sm: Arc<SmShared>) {
    tokio::spawn(async move {
        let mut metrics = raft.metrics();
        loop {
            if stored(&sm).is_some() {
                return;
            }
            let leads = metrics.borrow_and_update().current_leader == Some(id);
            if leads {
                if let Err(e) = proposer.propose(create(new_token())).await {
                    tracing::debug!(error = %e, "creating the cluster credential; will retry");
                }
            }
            let _ = tokio::time::timeout(LOOK_AGAIN, metrics.changed()).await;
        }
    });
}

/// The write that stores `token` as the credential, guarded by its absence: two leaders in turn
/// cannot both create one.
pub fn create(token: String) -> Command {
    Command {
        request_id: None,
        kind: CommandKind::Txn(Txn {
            guards: vec![Guard {
                key: CREDENTIAL_KEY.into(),
                check: Check::Absent,
            }],
            ops: vec![Op::Put {
                key: CREDENTIAL_KEY.into(),
                value: token.into(),
                lease: 0,
            }],
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_credential_is_created_only_where_none_is_stored() {
        let CommandKind::Txn(txn) = create("abc".into()).kind else {
            panic!("the credential is written by a transaction");
        };
        assert_eq!(txn.guards.len(), 1);
        assert_eq!(txn.guards[0].key, CREDENTIAL_KEY);
        assert!(matches!(txn.guards[0].check, Check::Absent));
        assert!(matches!(
            &txn.ops[..],
            [Op::Put { key, value, lease: 0 }] if key == CREDENTIAL_KEY && &value[..] == b"abc"
        ));
    }
}
