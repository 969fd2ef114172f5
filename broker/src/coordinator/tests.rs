//! The shard driven as a coordinator drives it, with no network: a group forms, rebalances,
//! commits, loses members and is loaded again from its own records.

use proto::errors::ErrorCode;

use super::group::{GroupConfig, GroupState, Out, Reply};
use super::membership::{JoinRequest, SyncRequest};
use super::shard::{CommitItem, Committer, Shard};

fn cfg() -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: 3000,
        ..Default::default()
    }
}

fn join_req(member: &str) -> JoinRequest {
    JoinRequest {
        member_id: member.into(),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), vec![1]), ("roundrobin".into(), vec![2])],
        require_known_member_id: true,
        ..Default::default()
    }
}

fn join_of(out: &Out, to: u64) -> Option<super::group::JoinAnswer> {
    out.replies.iter().find_map(|(t, r)| match r {
        Reply::Join(a) if *t == to => Some(a.clone()),
        _ => None,
    })
}

fn sync_of(out: &Out, to: u64) -> Option<super::group::SyncAnswer> {
    out.replies.iter().find_map(|(t, r)| match r {
        Reply::Sync(a) if *t == to => Some(a.clone()),
        _ => None,
    })
}

/// Keys and values written.
type Records = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// Forms a group of `n` members at time 0; returns the shard, member ids (leader first), the
/// generation and every record written.
fn formed(n: usize) -> (Shard, Vec<String>, i32, Records) {
    let mut s = Shard::new(cfg(), 1 << 20);
    let mut records = Vec::new();
    let mut ids = Vec::new();
    for i in 0..n {
        let out = s.join("g", 0, join_req(""), i as u64, format!("m{i}"));
        let a = join_of(&out, i as u64).unwrap();
        assert_eq!(a.error, ErrorCode::MEMBER_ID_REQUIRED);
        ids.push(a.member_id);
    }
    for (i, id) in ids.iter().enumerate() {
        let out = s.join("g", 10, join_req(id), 100 + i as u64, String::new());
        assert!(out.replies.is_empty(), "joins wait for the initial delay");
    }
    // The delay runs from the last join.
    assert!(s.tick(1000).replies.is_empty());
    let out = s.tick(3010);
    records.extend(out.records.clone());
    let answers: Vec<_> = (0..n).map(|i| join_of(&out, 100 + i as u64).unwrap()).collect();
    let leader = answers[0].leader.clone();
    for a in &answers {
        assert_eq!(
            (a.error, a.generation, a.protocol.as_deref()),
            (ErrorCode::NONE, 1, Some("range"))
        );
        assert_eq!(a.members.len(), if a.member_id == leader { n } else { 0 });
    }
    assert_eq!(s.group("g").unwrap().state, GroupState::CompletingRebalance);
    // Followers wait for the leader's assignment.
    for (i, id) in ids.iter().enumerate().filter(|(_, id)| **id != leader) {
        let out = s.sync("g", 3020, sync_req(id, 1, vec![]), 200 + i as u64);
        assert!(out.replies.is_empty());
    }
    let assignments = ids.iter().map(|id| (id.clone(), id.as_bytes().to_vec())).collect();
    let out = s.sync("g", 3030, sync_req(&leader, 1, assignments), 300);
    assert_eq!(out.records.len(), 1, "the group's record holds the assignment");
    records.extend(out.records.clone());
    for (i, id) in ids.iter().enumerate() {
        let to = if *id == leader { 300 } else { 200 + i as u64 };
        assert_eq!(sync_of(&out, to).unwrap().assignment, id.as_bytes());
    }
    let mut ordered = vec![leader.clone()];
    ordered.extend(ids.into_iter().filter(|id| *id != leader));
    (s, ordered, 1, records)
}

fn sync_req(member: &str, generation: i32, assignments: Vec<(String, Vec<u8>)>) -> SyncRequest {
    SyncRequest {
        member_id: member.into(),
        generation,
        assignments,
        ..Default::default()
    }
}

#[test]
fn a_group_forms_after_its_initial_delay_and_every_member_gets_its_assignment() {
    let (s, ids, generation, _) = formed(3);
    let g = s.group("g").unwrap();
    assert_eq!((g.state, g.generation, ids.len()), (GroupState::Stable, generation, 3));
}

#[test]
fn heartbeats_keep_a_member_and_a_silent_one_is_dropped_with_a_rebalance() {
    let (mut s, ids, generation, _) = formed(2);
    assert_eq!(s.heartbeat("g", 9000, &ids[0], None, generation), ErrorCode::NONE);
    assert_eq!(
        s.heartbeat("g", 9000, &ids[0], None, generation + 1),
        ErrorCode::ILLEGAL_GENERATION
    );
    assert_eq!(
        s.heartbeat("g", 9000, "nobody", None, generation),
        ErrorCode::UNKNOWN_MEMBER_ID
    );
    // ids[1] last heard at 3020 with a 10 s session.
    s.tick(12_000);
    assert_eq!(s.group("g").unwrap().state, GroupState::Stable);
    s.tick(13_100);
    let g = s.group("g").unwrap();
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert!(!g.members.contains_key(&ids[1]));
    assert_eq!(
        s.heartbeat("g", 13_200, &ids[0], None, generation),
        ErrorCode::REBALANCE_IN_PROGRESS
    );
    // The one left rejoins, and the rebalance completes without waiting for anyone else.
    let out = s.join("g", 13_300, join_req(&ids[0]), 7, String::new());
    let a = join_of(&out, 7).unwrap();
    assert_eq!(
        (a.error, a.generation, a.members.len()),
        (ErrorCode::NONE, generation + 1, 1)
    );
}

#[test]
fn commits_need_the_current_generation_and_are_written_as_records() {
    let (mut s, ids, generation, _) = formed(2);
    let item = CommitItem {
        topic: "t".into(),
        partition: 0,
        offset: 42,
        leader_epoch: -1,
        metadata: Some("m".into()),
    };
    let who = Committer {
        member_id: ids[1].clone(),
        instance_id: None,
        generation,
    };
    let (codes, out) = s.commit("g", 5000, &who, std::slice::from_ref(&item));
    assert_eq!((codes, out.records.len()), (vec![ErrorCode::NONE], 1));
    let stale = Committer {
        generation: generation - 1,
        ..who.clone()
    };
    let (codes, out) = s.commit("g", 5000, &stale, std::slice::from_ref(&item));
    assert_eq!((codes, out.records.len()), (vec![ErrorCode::ILLEGAL_GENERATION], 0));
    // An admin tool's commit (no member) is refused while the group has members.
    let (codes, _) = s.commit(
        "g",
        5000,
        &Committer {
            generation: -1,
            ..Default::default()
        },
        std::slice::from_ref(&item),
    );
    assert_eq!(codes, vec![ErrorCode::UNKNOWN_MEMBER_ID]);
    let big = CommitItem {
        metadata: Some("x".repeat(5000)),
        ..item
    };
    let (codes, _) = s.commit("g", 5000, &who, &[big]);
    assert_eq!(codes, vec![ErrorCode::OFFSET_METADATA_TOO_LARGE]);
    let got = s.fetch("g", Some(&[("t".into(), 0), ("t".into(), 1)]));
    assert_eq!(got[0].1.as_ref().map(|v| v.offset), Some(42));
    assert!(got[1].1.is_none());
}

#[test]
fn the_last_member_leaving_empties_the_group_and_a_reload_sees_the_same_state() {
    let (mut s, ids, generation, mut records) = formed(2);
    let who = Committer {
        member_id: ids[0].clone(),
        instance_id: None,
        generation,
    };
    let item = CommitItem {
        topic: "t".into(),
        partition: 3,
        offset: 7,
        leader_epoch: 2,
        metadata: None,
    };
    records.extend(s.commit("g", 4000, &who, &[item]).1.records);
    let (codes, out) = s.leave("g", 5000, &[(ids[1].clone(), None)]);
    assert_eq!(codes, vec![ErrorCode::NONE]);
    records.extend(out.records);
    assert_eq!(s.group("g").unwrap().state, GroupState::PreparingRebalance);
    let (codes, out) = s.leave("g", 5100, &[(ids[0].clone(), None), ("ghost".into(), None)]);
    assert_eq!(codes, vec![ErrorCode::NONE, ErrorCode::UNKNOWN_MEMBER_ID]);
    records.extend(out.records);
    let g = s.group("g").unwrap();
    assert_eq!((g.state, g.generation), (GroupState::Empty, generation + 1));
    // A new coordinator replays the records and finds the same group and offsets.
    let mut loaded = Shard::new(cfg(), 1 << 20);
    for (k, v) in &records {
        loaded.replay(k, v.as_deref(), 6000).unwrap();
    }
    let g = loaded.group("g").unwrap();
    assert_eq!((g.state, g.generation), (GroupState::Empty, generation + 1));
    assert_eq!(
        loaded.fetch("g", None)[0]
            .1
            .as_ref()
            .map(|v| (v.offset, v.leader_epoch)),
        Some((7, 2))
    );
    // Once empty, the group can be deleted: its offsets and record go as tombstones.
    let (codes, out) = loaded.delete_groups(&["g".into(), "nope".into()]);
    assert_eq!(codes, vec![ErrorCode::NONE, ErrorCode::GROUP_ID_NOT_FOUND]);
    assert!(out.records.iter().all(|(_, v)| v.is_none()) && out.records.len() == 2);
    assert!(loaded.group("g").is_none() && loaded.fetch("g", None).is_empty());
}

#[test]
fn a_stable_group_reloaded_keeps_its_members_and_assignments() {
    let (_, ids, generation, records) = formed(3);
    let mut loaded = Shard::new(cfg(), 1 << 20);
    for (k, v) in &records {
        loaded.replay(k, v.as_deref(), 10_000).unwrap();
    }
    let g = loaded.group("g").unwrap();
    assert_eq!(
        (g.state, g.generation, g.members.len()),
        (GroupState::Stable, generation, 3)
    );
    assert_eq!(g.members[&ids[1]].assignment, ids[1].as_bytes());
    assert_eq!(
        loaded.heartbeat("g", 10_500, &ids[2], None, generation),
        ErrorCode::NONE
    );
}

#[test]
fn a_static_member_that_rejoins_unchanged_keeps_its_assignment_and_fences_its_old_id() {
    let mut s = Shard::new(
        GroupConfig {
            initial_rebalance_delay_ms: 0,
            ..cfg()
        },
        1 << 20,
    );
    let mut req = join_req("");
    req.instance_id = Some("i1".into());
    let out = s.join("g", 0, req.clone(), 1, "first".into());
    let a = join_of(&out, 1).unwrap();
    assert_eq!((a.error, a.member_id.as_str()), (ErrorCode::NONE, "first"));
    let out = s.sync("g", 1, sync_req("first", 1, vec![("first".into(), vec![9])]), 2);
    assert_eq!(sync_of(&out, 2).unwrap().assignment, vec![9]);
    // Restarted: it joins again with no member id and the same instance id.
    let out = s.join("g", 2, req, 3, "second".into());
    let a = join_of(&out, 3).unwrap();
    assert_eq!(
        (a.error, a.generation, a.member_id.as_str()),
        (ErrorCode::NONE, 1, "second")
    );
    assert_eq!(out.records.len(), 1, "the new id is stored");
    assert_eq!(s.group("g").unwrap().state, GroupState::Stable);
    assert_eq!(
        s.heartbeat("g", 3, "first", Some("i1"), 1),
        ErrorCode::FENCED_INSTANCE_ID
    );
    assert_eq!(s.heartbeat("g", 3, "second", Some("i1"), 1), ErrorCode::NONE);
}

#[test]
fn bad_joins_are_refused_without_disturbing_the_group() {
    let (mut s, ids, generation, _) = formed(2);
    let mut short = join_req("");
    short.session_timeout_ms = 10;
    let out = s.join("g", 4000, short, 1, "x".into());
    assert_eq!(join_of(&out, 1).unwrap().error, ErrorCode::INVALID_SESSION_TIMEOUT);
    let mut other = join_req("");
    other.protocols = vec![("mine".into(), vec![])];
    let out = s.join("g", 4000, other, 2, "y".into());
    assert_eq!(join_of(&out, 2).unwrap().error, ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
    let mut none = join_req("");
    none.protocols.clear();
    let out = s.join("g", 4000, none, 3, "z".into());
    assert_eq!(join_of(&out, 3).unwrap().error, ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
    let out = s.join("g", 4000, join_req("unknown"), 4, String::new());
    assert_eq!(join_of(&out, 4).unwrap().error, ErrorCode::UNKNOWN_MEMBER_ID);
    let g = s.group("g").unwrap();
    assert_eq!(
        (g.state, g.generation, g.members.len()),
        (GroupState::Stable, generation, 2)
    );
    assert_eq!(s.heartbeat("g", 4001, &ids[0], None, generation), ErrorCode::NONE);
}

#[test]
fn group_max_size_is_enforced() {
    let mut s = Shard::new(GroupConfig { max_size: 1, ..cfg() }, 1 << 20);
    let a = join_of(&s.join("g", 0, join_req(""), 1, "a".into()), 1).unwrap();
    assert_eq!(a.error, ErrorCode::MEMBER_ID_REQUIRED);
    let b = join_of(&s.join("g", 0, join_req(""), 2, "b".into()), 2).unwrap();
    assert_eq!(b.error, ErrorCode::GROUP_MAX_SIZE_REACHED);
}

#[test]
fn offsets_of_an_empty_group_expire_after_the_retention() {
    let mut s = Shard::new(
        GroupConfig {
            offsets_retention_ms: 1000,
            ..cfg()
        },
        1 << 20,
    );
    let item = CommitItem {
        topic: "t".into(),
        partition: 0,
        offset: 1,
        leader_epoch: -1,
        metadata: None,
    };
    let admin = Committer {
        generation: -1,
        ..Default::default()
    };
    assert_eq!(s.commit("g", 0, &admin, &[item]).0, vec![ErrorCode::NONE]);
    assert!(s.tick(500).records.is_empty());
    let out = s.tick(1000);
    assert_eq!(out.records.len(), 1, "one tombstone for the offset");
    assert!(s.fetch("g", None).is_empty());
    assert!(s.list().is_empty());
}
