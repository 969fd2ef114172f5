//! The Raft quorum as its leader sees it, which Kafka's DescribeQuorum reports: the leader, its
//! term, the high watermark and each member's log end with its last answer times. [`view`] is
//! the pure rule over [`QuorumInputs`]; [`QuorumInputs::of`] reads them from a leading node.
//!
//! Offsets are Kafka's, the next entry's: Raft indexes count from 0, so a log whose last index is
//! N ends at offset N + 1, and the high watermark is the committed index + 1.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proto::metastore as pb;

use crate::follower_acks::{Acks, FollowerAcks};
use crate::types::{NodeId, Raft};

/// What [`view`] needs, read from a leader.
#[derive(Debug, Clone, Default)]
pub struct QuorumInputs {
    /// The leader (this node).
    pub leader_id: NodeId,
    /// Its term.
    pub term: u64,
    /// Its last log index.
    pub last_log_index: Option<u64>,
    /// Its last applied index: at most the committed one.
    pub last_applied: Option<u64>,
    /// The voters' ids.
    pub voters: BTreeSet<NodeId>,
    /// Every member (voters and learners) with its address.
    pub nodes: BTreeMap<NodeId, String>,
    /// The (term, index) of the last entry each member holds, as the leader knows it.
    pub matched: BTreeMap<NodeId, Option<(u64, u64)>>,
    /// The followers' answers ([`FollowerAcks`]).
    pub acks: HashMap<NodeId, Acks>,
    /// Now, in wall ms.
    pub now_ms: u64,
}

impl QuorumInputs {
    /// The inputs from `raft`'s metrics, or `None` when it does not lead.
    pub fn of(raft: &Raft, acks: &FollowerAcks) -> Option<Self> {
        let m = raft.metrics().borrow().clone();
        if m.state != openraft::ServerState::Leader {
            return None;
        }
        let mem = m.membership_config.membership();
        Some(Self {
            leader_id: m.id,
            term: m.current_term,
            last_log_index: m.last_log_index,
            last_applied: m.last_applied.map(|l| l.index),
            voters: mem.voter_ids().collect(),
            nodes: mem.nodes().map(|(id, n)| (*id, n.addr.clone())).collect(),
            matched: m
                .replication
                .iter()
                .flatten()
                .map(|(id, l)| (*id, l.map(|l| (l.leader_id.term, l.index))))
                .collect(),
            acks: acks.all(),
            now_ms: acks.clock().wall_ms(),
        })
    }
}

/// Kafka's offset after the entry at Raft index `index` (0 for an empty log).
fn offset_after(index: Option<u64>) -> u64 {
    index.map_or(0, |i| i + 1)
}

/// The highest index a majority of the voters hold in the leader's term: Raft's commit rule.
fn quorum_committed(i: &QuorumInputs) -> Option<u64> {
    let mut held: Vec<(u64, u64)> = i
        .voters
        .iter()
        .map(|v| i.matched.get(v).copied().flatten().unwrap_or((0, 0)))
        .collect();
    if held.is_empty() {
        return None;
    }
    // Every voter's log is a prefix of the leader's, so (term, index) orders them.
    held.sort_unstable_by(|a, b| b.cmp(a));
    let (term, index) = held[held.len() / 2];
    (term == i.term).then_some(index)
}

/// The quorum as the leader sees it. The leader's own answer times are now, as Kafka's leader
/// reports itself; a follower not heard from answers -1.
pub fn view(i: &QuorumInputs) -> pb::QuorumResponse {
    let committed = quorum_committed(i).max(i.last_applied);
    let replica = |id: NodeId| {
        let held = match i.matched.get(&id) {
            Some(m) => m.map(|(_, index)| index),
            None if id == i.leader_id => i.last_log_index,
            None => None,
        };
        let (fetch, caught_up) = if id == i.leader_id {
            (Some(i.now_ms), Some(i.now_ms))
        } else {
            let a = i.acks.get(&id).copied().unwrap_or_default();
            (a.last_fetch_ms, a.last_caught_up_ms)
        };
        let ms = |t: Option<u64>| t.map_or(-1, |t| i64::try_from(t).unwrap_or(i64::MAX));
        pb::QuorumReplica {
            id,
            addr: i.nodes.get(&id).cloned().unwrap_or_default(),
            log_end_offset: offset_after(held),
            last_fetch_ms: ms(fetch),
            last_caught_up_ms: ms(caught_up),
        }
    };
    pb::QuorumResponse {
        header: None,
        leader_id: i.leader_id,
        term: i.term,
        high_watermark: offset_after(committed),
        voters: i.voters.iter().map(|v| replica(*v)).collect(),
        observers: i
            .nodes
            .keys()
            .filter(|id| !i.voters.contains(id))
            .map(|id| replica(*id))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> QuorumInputs {
        QuorumInputs {
            leader_id: 2,
            term: 5,
            last_log_index: Some(41),
            last_applied: Some(38),
            voters: [1, 2, 3].into(),
            nodes: [(1, "a:1"), (2, "b:2"), (3, "c:3"), (4, "d:4")]
                .map(|(id, a)| (id, a.to_string()))
                .into(),
            matched: [(1, Some((5, 40))), (2, Some((5, 41))), (3, Some((4, 30))), (4, None)].into(),
            acks: [(
                1,
                Acks {
                    last_fetch_ms: Some(900),
                    last_caught_up_ms: Some(800),
                },
            )]
            .into(),
            now_ms: 1_000,
        }
    }

    #[test]
    fn the_leader_reports_its_term_the_committed_offset_and_each_members_log_end() {
        let v = view(&three());
        assert_eq!((v.leader_id, v.term), (2, 5));
        // Two of three voters hold index 40 in term 5: committed, so offset 41.
        assert_eq!(v.high_watermark, 41);
        let ends: Vec<(u64, u64)> = v.voters.iter().map(|r| (r.id, r.log_end_offset)).collect();
        assert_eq!(ends, vec![(1, 41), (2, 42), (3, 31)]);
        assert_eq!(v.voters[1].addr, "b:2");
        // The learner is an observer with an empty log as far as the leader knows.
        assert_eq!(v.observers.len(), 1);
        assert_eq!((v.observers[0].id, v.observers[0].log_end_offset), (4, 0));
    }

    #[test]
    fn answer_times_are_the_followers_own_the_leaders_now_and_unknown_is_minus_one() {
        let v = view(&three());
        let times: Vec<(u64, i64, i64)> = v
            .voters
            .iter()
            .map(|r| (r.id, r.last_fetch_ms, r.last_caught_up_ms))
            .collect();
        assert_eq!(times, vec![(1, 900, 800), (2, 1_000, 1_000), (3, -1, -1)]);
    }

    #[test]
    fn a_majority_in_an_older_term_is_not_committed_so_applied_stands() {
        let mut i = three();
        // A new leader has not yet had its own term's entry taken by a majority.
        i.matched = [(1, Some((4, 40))), (2, Some((5, 41))), (3, Some((4, 30)))].into();
        assert_eq!(view(&i).high_watermark, 39);
    }

    #[test]
    fn a_single_node_quorum_commits_what_it_holds() {
        let i = QuorumInputs {
            leader_id: 1,
            term: 1,
            last_log_index: Some(3),
            last_applied: Some(3),
            voters: [1].into(),
            nodes: [(1, "a:1".to_string())].into(),
            matched: [(1, Some((1, 3)))].into(),
            ..Default::default()
        };
        let v = view(&i);
        assert_eq!(v.high_watermark, 4);
        assert_eq!(v.voters[0].log_end_offset, 4);
        assert!(v.observers.is_empty());
    }
}
