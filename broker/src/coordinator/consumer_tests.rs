//! KIP-848 consumer groups driven as the coordinator drives them: members join, give up and
//! take partitions without any partition held twice, leave, time out, and a reload from the
//! records finds the same group.

use std::collections::HashMap;

use proto::errors::ErrorCode;
use uuid::Uuid;

use super::assignor::TopicMeta;
use super::consumer::{Heartbeat, HeartbeatAnswer, SESSION_TIMEOUT_MS};
use super::consumer_records::{MemberValue, TopicPartitions};
use super::group::{GroupConfig, Out};
use super::shard::Shard;

const T: Uuid = Uuid::from_u128(7);

fn topics() -> HashMap<String, TopicMeta> {
    [("t".to_string(), TopicMeta { id: T, partitions: 6 })]
        .into_iter()
        .collect()
}

fn join(member: &str) -> Heartbeat {
    Heartbeat {
        member_id: member.into(),
        member_epoch: 0,
        value: MemberValue {
            topics: vec!["t".into()],
            rebalance_timeout_ms: 30_000,
            ..Default::default()
        },
        topics_sent: true,
        owned: None,
    }
}

fn beat(member: &str, epoch: i32, owned: Option<TopicPartitions>) -> Heartbeat {
    Heartbeat {
        member_id: member.into(),
        member_epoch: epoch,
        owned,
        ..Default::default()
    }
}

fn count(a: &HeartbeatAnswer) -> usize {
    a.assignment.as_ref().map_or(0, |a| a.values().map(Vec::len).sum())
}

struct Driver {
    shard: Shard,
    records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Driver {
    fn beat(&mut self, now: i64, hb: Heartbeat) -> HeartbeatAnswer {
        let (a, out): (HeartbeatAnswer, Out) =
            self.shard
                .consumer_heartbeat("g", now, hb, &|n| topics().get(n).copied(), "new".into());
        self.records.extend(out.records);
        a
    }
}

#[test]
fn a_second_member_gets_partitions_only_after_the_first_gives_them_up() {
    let mut d = Driver {
        shard: Shard::new(GroupConfig::default(), 1 << 20),
        records: Vec::new(),
    };
    let a = d.beat(0, join("a"));
    assert_eq!((a.error, a.member_epoch, count(&a)), (ErrorCode::NONE, 1, 6));
    let a_owned = a.assignment.clone();
    let b = d.beat(10, join("b"));
    assert_eq!((b.error, count(&b)), (ErrorCode::NONE, 0), "all six are still a's");
    assert_eq!(d.shard.consumer_group("g").unwrap().state(), "Reconciling");
    // a is told to give three up; its epoch stays until it has.
    let a2 = d.beat(20, beat("a", 1, None));
    assert_eq!((a2.member_epoch, count(&a2)), (1, 3));
    // Without a's word, b still gets nothing.
    let b2 = d.beat(30, beat("b", b.member_epoch, None));
    assert_eq!(count(&b2), 0);
    let a3 = d.beat(40, beat("a", 1, a2.assignment.clone()));
    assert_eq!(a3.member_epoch, 2);
    let b3 = d.beat(50, beat("b", b2.member_epoch, None));
    assert_eq!((b3.member_epoch, count(&b3)), (2, 3));
    assert_eq!(d.shard.consumer_group("g").unwrap().state(), "Stable");
    assert_ne!(a_owned, a2.assignment);
    // A stale epoch is fenced.
    let stale = d.beat(60, beat("a", 7, None));
    assert_eq!(stale.error, ErrorCode::FENCED_MEMBER_EPOCH);
    // b leaves; a gets everything back.
    let left = d.beat(70, beat("b", -1, None));
    assert_eq!((left.error, left.member_epoch), (ErrorCode::NONE, -1));
    let a4 = d.beat(80, beat("a", 2, None));
    assert_eq!((a4.member_epoch, count(&a4)), (3, 6));
    // A reload from the records finds a with its six partitions at epoch 3.
    let mut loaded = Shard::new(GroupConfig::default(), 1 << 20);
    for (k, v) in &d.records {
        loaded.replay(k, v.as_deref(), 100).unwrap();
    }
    let g = loaded.consumer_group("g").unwrap();
    assert_eq!((g.epoch, g.members.len()), (3, 1));
    assert_eq!(g.members["a"].assigned[&T].len(), 6);
}

#[test]
fn a_silent_member_is_removed_after_its_session() {
    let mut d = Driver {
        shard: Shard::new(GroupConfig::default(), 1 << 20),
        records: Vec::new(),
    };
    d.beat(0, join("a"));
    d.beat(0, join("b"));
    let out = d.shard.tick(SESSION_TIMEOUT_MS - 1);
    assert!(out.records.is_empty());
    d.beat(SESSION_TIMEOUT_MS - 1, beat("a", 1, None));
    d.shard.tick(SESSION_TIMEOUT_MS + 1);
    let g = d.shard.consumer_group("g").unwrap();
    assert_eq!(g.members.keys().collect::<Vec<_>>(), vec!["a"]);
}

#[test]
fn bad_heartbeats_are_refused_and_change_nothing() {
    let mut d = Driver {
        shard: Shard::new(GroupConfig::default(), 1 << 20),
        records: Vec::new(),
    };
    let mut no_topics = join("a");
    no_topics.topics_sent = false;
    assert_eq!(d.beat(0, no_topics).error, ErrorCode::INVALID_REQUEST);
    let mut bad_assignor = join("a");
    bad_assignor.value.server_assignor = Some("sticky-ish".into());
    assert_eq!(d.beat(0, bad_assignor).error, ErrorCode::UNSUPPORTED_ASSIGNOR);
    assert_eq!(d.beat(0, beat("ghost", 3, None)).error, ErrorCode::UNKNOWN_MEMBER_ID);
    assert!(d.records.is_empty());
    assert!(d.shard.consumer_group("g").is_none());
}
