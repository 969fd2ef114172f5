//! The pure half of reconciling hosted replicas with the metadata: which partitions this broker
//! must host, which hosted ones go, and what happens to each follower's copy loop. The driver,
//! `BrokerCore::reconcile`, carries the plan out.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proto::cluster_view::ClusterView;
use proto::ferry::PartitionState;

use crate::log_dirs::TopicPartition;

/// The partitions among `changed` (all when `None`) that assign a replica to broker `me`, with
/// the state to apply to each.
pub fn assigned_here(
    me: i32,
    view: &ClusterView,
    changed: Option<&BTreeSet<TopicPartition>>,
) -> BTreeMap<TopicPartition, PartitionState> {
    let mine = |s: &PartitionState| s.replicas.contains(&me);
    match changed {
        None => view
            .topics
            .iter()
            .flat_map(|(topic, t)| {
                t.partitions
                    .iter()
                    .filter(|(_, e)| mine(&e.state))
                    .map(|(p, e)| ((topic.clone(), *p), e.state.clone()))
            })
            .collect(),
        // Only the changed partitions when given: scanning every hosted replica on each change
        // made a stream of ISR changes over 100,000 partitions quadratic.
        Some(tps) => tps
            .iter()
            .filter_map(|tp| {
                let e = view.partition(&tp.0, tp.1)?;
                mine(&e.state).then(|| (tp.clone(), e.state.clone()))
            })
            .collect(),
    }
}

/// The hosted replicas among `changed` (all when `None`) that are no longer assigned here.
pub fn unassigned<V>(
    hosted: &HashMap<TopicPartition, V>,
    assigned: &BTreeMap<TopicPartition, PartitionState>,
    changed: Option<&BTreeSet<TopicPartition>>,
) -> Vec<TopicPartition> {
    let gone = |tp: &&TopicPartition| hosted.contains_key(*tp) && !assigned.contains_key(*tp);
    match changed {
        Some(tps) => tps.iter().filter(gone).cloned().collect(),
        None => hosted.keys().filter(gone).cloned().collect(),
    }
}

/// What happens to a replica's copy loop after its metadata was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetcherStep {
    /// Leave it as it is (running or not).
    Keep,
    /// Start one from this leader at this epoch, replacing any that runs.
    Start {
        /// The broker to fetch from.
        leader: i32,
        /// The leader epoch the fetches carry.
        epoch: u32,
    },
    /// Stop the one that runs. `removed`: because the replica is being removed and is out of
    /// sync, not because its role changed.
    Stop {
        /// Why, for the log.
        removed: bool,
    },
}

/// Decides a copy loop's step: a new role or epoch makes the running loop fetch from the wrong
/// place, so it is replaced; otherwise a loop starts when there is a source and none runs, and
/// stops when there is none.
pub fn fetcher_step(role_changed: bool, source: Option<(i32, u32)>, running: bool) -> FetcherStep {
    let running = running && !role_changed;
    match source {
        Some((leader, epoch)) if !running => FetcherStep::Start { leader, epoch },
        None if running => FetcherStep::Stop { removed: true },
        None if role_changed => FetcherStep::Stop { removed: false },
        _ => FetcherStep::Keep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use proto::ferry::TopicRecord;

    fn view(parts: &[(&str, u32, &[i32])]) -> ClusterView {
        let mut v = ClusterView::default();
        for (t, p, replicas) in parts {
            let rec = TopicRecord {
                partitions: 8,
                ..Default::default()
            };
            v.apply(&proto::keys::topic(t), Some(&rec.encode_to_vec()), 1);
            let st = PartitionState {
                replicas: replicas.to_vec(),
                ..Default::default()
            };
            v.apply(&proto::keys::partition(t, *p), Some(&st.encode_to_vec()), 1);
        }
        v
    }

    fn tp(t: &str, p: u32) -> TopicPartition {
        (t.to_string(), p)
    }

    #[test]
    fn only_partitions_with_a_replica_here_are_assigned_and_the_rest_of_the_hosted_go() {
        let v = view(&[("a", 0, &[1, 2]), ("a", 1, &[2, 3]), ("b", 0, &[1])]);
        let all = assigned_here(1, &v, None);
        assert_eq!(all.keys().cloned().collect::<Vec<_>>(), vec![tp("a", 0), tp("b", 0)]);
        let hosted: HashMap<TopicPartition, ()> = [(tp("a", 0), ()), (tp("a", 1), ()), (tp("c", 0), ())].into();
        let mut gone = unassigned(&hosted, &all, None);
        gone.sort();
        assert_eq!(gone, vec![tp("a", 1), tp("c", 0)]);

        // Given the changed partitions, only those are looked at.
        let changed: BTreeSet<TopicPartition> = [tp("a", 1), tp("b", 0)].into();
        let some = assigned_here(1, &v, Some(&changed));
        assert_eq!(some.keys().cloned().collect::<Vec<_>>(), vec![tp("b", 0)]);
        assert_eq!(unassigned(&hosted, &some, Some(&changed)), vec![tp("a", 1)]);
    }

    #[test]
    fn a_copy_loop_is_replaced_on_a_new_role_and_runs_only_with_a_source() {
        use FetcherStep::*;
        let src = Some((2, 5));
        assert_eq!(fetcher_step(false, src, false), Start { leader: 2, epoch: 5 });
        assert_eq!(fetcher_step(false, src, true), Keep);
        assert_eq!(fetcher_step(true, src, true), Start { leader: 2, epoch: 5 });
        assert_eq!(fetcher_step(false, None, true), Stop { removed: true });
        assert_eq!(fetcher_step(true, None, true), Stop { removed: false });
        assert_eq!(fetcher_step(false, None, false), Keep);
    }
}
