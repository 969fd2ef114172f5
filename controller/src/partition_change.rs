//! Every rule for a partition's next state, in one place: leader election, fencing a broker that
//! went away, preferred-leader moves and ISR changes asked for by a partition leader. Pure
//! functions over the stored state; the caller writes the result guarded by the state's revision.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proto::errors::{ErrorCode, Refusal};
use proto::ferry::{BrokerRegistration, PartitionState};

/// No leader.
pub const NO_LEADER: i32 = -1;

/// How a leader may be chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Election {
    /// Only from the ISR.
    Clean,
    /// From the ISR, else from any live replica (may lose acknowledged records).
    Unclean,
}

/// The first replica, in replica order, that is live and in the ISR.
fn first_clean_leader(state: &PartitionState, live: &BTreeSet<i32>) -> Option<i32> {
    state
        .replicas
        .iter()
        .copied()
        .find(|r| live.contains(r) && state.isr.contains(r))
}

/// Stamps a changed state with its epochs: the leader epoch moves when the leader changed, the
/// partition epoch always. Every partition change goes through here.
pub fn bump_epochs(old: &PartitionState, mut new: PartitionState) -> PartitionState {
    if new.leader != old.leader {
        new.leader_epoch = old.leader_epoch + 1;
    }
    new.partition_epoch = old.partition_epoch + 1;
    assert_step(old, &new);
    new
}

/// Asserts the partition rules on a state built from `old`. A broken rule is a bug in the rule
/// that built it, and fails every test build; a release node logs it rather than stop the
/// controller over one partition (a damaged imported record could otherwise crash it on
/// every start).
fn assert_step(old: &PartitionState, new: &PartitionState) {
    if let Err(e) = old.check_step(new) {
        tracing::error!(error = %e, ?old, ?new, "a partition change breaks the partition rules");
        debug_assert!(
            false,
            "a partition change breaks the partition rules: {e}: {old:?} -> {new:?}"
        );
    }
}

/// Finishes a change: bumps the epochs that must move, or returns `None` when nothing changed.
fn finish(old: &PartitionState, new: PartitionState) -> Option<PartitionState> {
    (new != *old).then(|| bump_epochs(old, new))
}

/// The state after the live broker set changed: members that went away leave the ISR (the last
/// one stays, so that it can lead again when it returns), and a partition whose leader went away
/// gets a new one. `None` when nothing changes.
pub fn on_brokers_changed(state: &PartitionState, live: &BTreeSet<i32>, election: Election) -> Option<PartitionState> {
    let mut new = state.clone();
    let live_isr: Vec<i32> = state.isr.iter().copied().filter(|r| live.contains(r)).collect();
    if !live_isr.is_empty() {
        new.isr = live_isr;
    } else if state.isr.len() > 1 {
        // Keep one member: the last leader if it was in the ISR, else the first.
        let keep = if state.isr.contains(&state.leader) {
            state.leader
        } else {
            state.isr[0]
        };
        new.isr = vec![keep];
    }
    if new.leader == NO_LEADER || !live.contains(&new.leader) {
        match first_clean_leader(&new, live) {
            Some(l) => new.leader = l,
            None => match election {
                Election::Unclean => match state.replicas.iter().copied().find(|r| live.contains(r)) {
                    Some(l) => {
                        new.leader = l;
                        new.isr = vec![l];
                    }
                    None => new.leader = NO_LEADER,
                },
                Election::Clean => new.leader = NO_LEADER,
            },
        }
    }
    finish(state, new)
}

/// Moves leadership to the preferred replica (the first in the replica set) when it is live and
/// in sync.
pub fn elect_preferred(state: &PartitionState, live: &BTreeSet<i32>) -> Result<PartitionState, Refusal> {
    let Some(&preferred) = state.replicas.first() else {
        return Err(Refusal {
            code: ErrorCode::PREFERRED_LEADER_NOT_AVAILABLE,
            message: "the partition has no replicas".into(),
        });
    };
    if state.leader == preferred {
        return Err(Refusal {
            code: ErrorCode::ELECTION_NOT_NEEDED,
            message: format!("broker {preferred} already leads"),
        });
    }
    if !live.contains(&preferred) || !state.isr.contains(&preferred) {
        return Err(Refusal {
            code: ErrorCode::PREFERRED_LEADER_NOT_AVAILABLE,
            message: format!("preferred replica {preferred} is not live and in sync"),
        });
    }
    let new = PartitionState {
        leader: preferred,
        ..state.clone()
    };
    Ok(finish(state, new).unwrap_or_else(|| state.clone()))
}

/// Elects a leader for a partition that has none (or whose leader is gone), unclean if asked.
pub fn elect_any(state: &PartitionState, live: &BTreeSet<i32>, election: Election) -> Result<PartitionState, Refusal> {
    if state.leader != NO_LEADER && live.contains(&state.leader) {
        return Err(Refusal {
            code: ErrorCode::ELECTION_NOT_NEEDED,
            message: format!("broker {} leads", state.leader),
        });
    }
    match on_brokers_changed(state, live, election) {
        Some(new) if new.leader != NO_LEADER => Ok(new),
        _ => Err(Refusal {
            code: ErrorCode::ELIGIBLE_LEADERS_NOT_AVAILABLE,
            message: "no live replica is eligible to lead".into(),
        }),
    }
}

/// A partition leader's request to set the ISR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    /// The leader asking.
    pub leader: i32,
    /// The leader epoch it leads in.
    pub leader_epoch: u32,
    /// The partition epoch its view is at.
    pub partition_epoch: u32,
    /// The ISR it wants.
    pub new_isr: Vec<i32>,
}

/// Checks and applies an ISR change. A stale leader or a stale view is refused, so that only the
/// current leader, knowing the current state, changes the ISR.
pub fn alter_isr(state: &PartitionState, req: &IsrChange, live: &BTreeSet<i32>) -> Result<PartitionState, Refusal> {
    let refuse = |code, message: String| Err(Refusal { code, message });
    if req.leader != state.leader || req.leader_epoch != state.leader_epoch {
        return refuse(
            ErrorCode::FENCED_LEADER_EPOCH,
            format!(
                "broker {} at leader epoch {} is not the leader (leader {} at epoch {})",
                req.leader, req.leader_epoch, state.leader, state.leader_epoch
            ),
        );
    }
    if req.partition_epoch != state.partition_epoch {
        return refuse(
            ErrorCode::INVALID_UPDATE_VERSION,
            format!(
                "partition epoch {} is stale, the current one is {}",
                req.partition_epoch, state.partition_epoch
            ),
        );
    }
    if !req.new_isr.contains(&req.leader) {
        return refuse(ErrorCode::INVALID_REQUEST, "the new ISR must contain the leader".into());
    }
    let mut seen = BTreeSet::new();
    for r in &req.new_isr {
        if !seen.insert(*r) {
            return refuse(
                ErrorCode::INVALID_REQUEST,
                format!("broker {r} appears twice in the new ISR"),
            );
        }
        if !state.replicas.contains(r) {
            return refuse(ErrorCode::INVALID_REQUEST, format!("broker {r} is not a replica"));
        }
        if !state.isr.contains(r) && !live.contains(r) {
            return refuse(
                ErrorCode::INVALID_REQUEST,
                format!("broker {r} is not registered, it cannot join the ISR"),
            );
        }
    }
    let new = PartitionState {
        isr: req.new_isr.clone(),
        ..state.clone()
    };
    Ok(finish(state, new).unwrap_or_else(|| state.clone()))
}

/// Checks that every replica an ISR change adds is the broker process now registered: for each,
/// the leader names the incarnation whose fetches brought it in sync (`joining`). A restarted
/// broker can catch up while the registration of the process before it is still live; let in
/// then, it would be dropped again as soon as that registration expired (Kafka guards the same
/// with broker epochs, KIP-903).
pub fn check_joiners(
    state: &PartitionState,
    new_isr: &[i32],
    joining: &HashMap<i32, u64>,
    registered: &BTreeMap<i32, BrokerRegistration>,
) -> Result<(), Refusal> {
    for r in new_isr.iter().filter(|r| !state.isr.contains(r)) {
        let fetched = joining.get(r).copied().unwrap_or(0);
        let current = registered.get(r).map(|b| b.incarnation);
        if fetched == 0 || current != Some(fetched) {
            return Err(Refusal {
                code: ErrorCode::INELIGIBLE_REPLICA,
                message: format!(
                    "broker {r} caught up as process {fetched:x}, but the registered process is {}; it joins the ISR once it has registered",
                    current.map_or("none".to_string(), |c| format!("{c:x}"))
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(replicas: &[i32], leader: i32, isr: &[i32]) -> PartitionState {
        PartitionState {
            replicas: replicas.to_vec(),
            leader,
            isr: isr.to_vec(),
            leader_epoch: 3,
            partition_epoch: 7,
            ..Default::default()
        }
    }
    fn live(ids: &[i32]) -> BTreeSet<i32> {
        ids.iter().copied().collect()
    }

    #[test]
    fn leader_loss_elects_from_isr_in_replica_order() {
        let s = st(&[1, 2, 3], 1, &[1, 3, 2]);
        let n = on_brokers_changed(&s, &live(&[2, 3]), Election::Clean).unwrap();
        assert_eq!(n.leader, 2);
        assert_eq!(n.isr, vec![3, 2]);
        assert_eq!((n.leader_epoch, n.partition_epoch), (4, 8));
    }

    #[test]
    fn follower_loss_shrinks_isr_without_new_leader_epoch() {
        let s = st(&[1, 2, 3], 1, &[1, 2, 3]);
        let n = on_brokers_changed(&s, &live(&[1, 2]), Election::Clean).unwrap();
        assert_eq!((n.leader, n.isr.clone()), (1, vec![1, 2]));
        assert_eq!((n.leader_epoch, n.partition_epoch), (3, 8));
        assert_eq!(on_brokers_changed(&n, &live(&[1, 2]), Election::Clean), None);
    }

    #[test]
    fn last_isr_member_stays_and_no_unclean_leader_by_default() {
        let s = st(&[1, 2], 1, &[1]);
        let n = on_brokers_changed(&s, &live(&[2]), Election::Clean).unwrap();
        assert_eq!((n.leader, n.isr.clone()), (NO_LEADER, vec![1]));
        // The last in-sync replica returns and leads again.
        let back = on_brokers_changed(&n, &live(&[1, 2]), Election::Clean).unwrap();
        assert_eq!(back.leader, 1);
        assert_eq!(back.leader_epoch, n.leader_epoch + 1);
    }

    #[test]
    fn unclean_election_takes_any_live_replica() {
        let s = st(&[1, 2], 1, &[1]);
        let n = on_brokers_changed(&s, &live(&[2]), Election::Unclean).unwrap();
        assert_eq!((n.leader, n.isr.clone()), (2, vec![2]));
    }

    #[test]
    fn preferred_election_needs_a_live_in_sync_preferred_replica() {
        let s = st(&[1, 2, 3], 2, &[2, 3]);
        assert_eq!(
            elect_preferred(&s, &live(&[1, 2, 3])).unwrap_err().code,
            ErrorCode::PREFERRED_LEADER_NOT_AVAILABLE
        );
        let s = st(&[1, 2, 3], 2, &[2, 3, 1]);
        let n = elect_preferred(&s, &live(&[1, 2, 3])).unwrap();
        assert_eq!((n.leader, n.leader_epoch), (1, 4));
        assert_eq!(
            elect_preferred(&n, &live(&[1, 2, 3])).unwrap_err().code,
            ErrorCode::ELECTION_NOT_NEEDED
        );
    }

    #[test]
    fn isr_change_is_fenced_by_leader_and_partition_epoch() {
        let s = st(&[1, 2, 3], 1, &[1, 2]);
        let ok = IsrChange {
            leader: 1,
            leader_epoch: 3,
            partition_epoch: 7,
            new_isr: vec![1, 2, 3],
        };
        let n = alter_isr(&s, &ok, &live(&[1, 2, 3])).unwrap();
        assert_eq!(
            (n.isr.clone(), n.partition_epoch, n.leader_epoch),
            (vec![1, 2, 3], 8, 3)
        );
        let stale = alter_isr(&n, &ok, &live(&[1, 2, 3])).unwrap_err();
        assert_eq!(stale.code, ErrorCode::INVALID_UPDATE_VERSION);
        let old_leader = IsrChange {
            leader: 2,
            ..ok.clone()
        };
        assert_eq!(
            alter_isr(&s, &old_leader, &live(&[1, 2, 3])).unwrap_err().code,
            ErrorCode::FENCED_LEADER_EPOCH
        );
        let no_leader = IsrChange {
            new_isr: vec![2, 3],
            ..ok.clone()
        };
        assert_eq!(
            alter_isr(&s, &no_leader, &live(&[1, 2, 3])).unwrap_err().code,
            ErrorCode::INVALID_REQUEST
        );
        let dead = IsrChange {
            new_isr: vec![1, 2, 3],
            ..ok
        };
        assert_eq!(
            alter_isr(&s, &dead, &live(&[1, 2])).unwrap_err().code,
            ErrorCode::INVALID_REQUEST
        );
    }

    #[test]
    fn a_replica_joins_the_isr_only_as_the_registered_process() {
        let s = st(&[1, 2, 3], 1, &[1, 2]);
        let registered: BTreeMap<i32, BrokerRegistration> = [(1, 11), (2, 12), (3, 13)]
            .into_iter()
            .map(|(id, incarnation)| {
                let b = BrokerRegistration {
                    id,
                    incarnation,
                    ..Default::default()
                };
                (id, b)
            })
            .collect();
        let joining = |i| HashMap::from([(3, i)]);
        assert!(check_joiners(&s, &[1, 2, 3], &joining(13), &registered).is_ok());
        // Fetches of the process before the restart, or of one that names none.
        for stale in [9, 0] {
            let e = check_joiners(&s, &[1, 2, 3], &joining(stale), &registered).unwrap_err();
            assert_eq!(e.code, ErrorCode::INELIGIBLE_REPLICA, "{}", e.message);
        }
        assert!(check_joiners(&s, &[1, 2, 3], &HashMap::new(), &registered).is_err());
        // Not registered at all.
        let mut gone = registered.clone();
        gone.remove(&3);
        let e = check_joiners(&s, &[1, 2, 3], &joining(13), &gone).unwrap_err();
        assert!(e.message.contains("registered process is none"), "{}", e.message);
        // Members already in the ISR, and shrinking, need nothing.
        assert!(check_joiners(&s, &[1], &HashMap::new(), &gone).is_ok());
    }
}
