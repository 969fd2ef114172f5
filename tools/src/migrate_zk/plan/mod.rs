//! From a typed ZooKeeper snapshot to the keys and values Ferry stores: partition states,
//! reassignments with their original replicas, owned throttles, configs, the cluster id, ACLs
//! and SCRAM credentials.
//! Znodes that contradict each other are reported by path; the unit they belong to is left out.

mod model;
mod moves;
mod render;
mod security;
mod throttles;
mod topic;

use std::collections::{BTreeMap, BTreeSet};

use proto::ferry::{ClusterIdRecord, TopicRecord};
use proto::keys;

use super::parse::{self, ZkCluster};
pub use model::{Plan, Value};
use moves::Partitions;
pub use security::security_differences;

/// Plans the import of a typed snapshot. Problems (from parsing and from here) are in
/// `skipped`; the caller refuses to write unless it was asked to skip them.
pub fn plan(c: &ZkCluster) -> Plan {
    let mut out = Plan {
        cluster_id: c.cluster_id.clone(),
        brokers: c.brokers.clone(),
        skipped: c.problems.clone(),
        notes: c.notes.clone(),
        ..Default::default()
    };
    let live: BTreeSet<i32> = c.brokers.keys().copied().collect();
    let mut ps = Partitions::default();
    let mut topics = plan_topics(c, &mut ps, &mut out);
    note_strays(c, &mut out.notes);
    moves::apply_znodes(c, &mut ps, &live, &mut out.skipped);
    throttles::own_throttles(c, &mut ps, &mut topics, &mut out.notes);
    if c.cancel_all {
        moves::cancel_all(&mut ps, &topics, &live, &mut out);
    }
    throttles::broker_configs(c, &mut out);
    throttles::note_unowned_rates(c, &ps, &mut out.notes);
    write_planned(c, &topics, ps, &mut out);
    security::plan_security(&c.security, &mut out);
    out.skipped.sort();
    out.skipped.dedup();
    out
}

/// Plans every topic as Kafka left it; a topic that contradicts is skipped.
fn plan_topics(c: &ZkCluster, ps: &mut Partitions, out: &mut Plan) -> BTreeMap<String, TopicRecord> {
    let mut topics = BTreeMap::new();
    for (name, t) in &c.topics {
        match topic::plan_topic(c, name, t) {
            Ok((record, states)) => {
                let mut unstarted = 0;
                for (p, s) in states.into_iter().enumerate() {
                    if !t.states.contains_key(&(p as u32)) {
                        unstarted += 1;
                    }
                    ps.adopt((name.clone(), p as u32), s, t.ctime_ms.max(0) as u64);
                }
                if unstarted > 0 {
                    out.notes.push(format!(
                        "{}/{name}: {unstarted} partition(s) have no state yet; Ferry's controller elects their leaders",
                        parse::TOPICS
                    ));
                }
                topics.insert(name.clone(), record);
            }
            Err(e) => out.skipped.push(e),
        }
    }
    topics
}

/// Notes the configs and deletions of topics that do not exist.
fn note_strays(c: &ZkCluster, notes: &mut Vec<String>) {
    for name in c.topic_configs.keys().filter(|t| !c.topics.contains_key(*t)) {
        notes.push(format!(
            "{}/{name}: the topic does not exist; its config is not imported",
            parse::TOPIC_CONFIGS
        ));
    }
    for name in c.delete_topics.iter().filter(|t| !c.topics.contains_key(*t)) {
        notes.push(format!("{}/{name}: the topic is already gone", parse::DELETE_TOPICS));
    }
}

/// Writes the cluster id, the topics kept and their partitions (with their reassignments).
fn write_planned(c: &ZkCluster, topics: &BTreeMap<String, TopicRecord>, ps: Partitions, out: &mut Plan) {
    // A topic left out leaves out what refers to it.
    let kept: BTreeSet<&String> = topics.keys().collect();
    out.writes.insert(
        keys::CLUSTER_ID.into(),
        Value::ClusterId(ClusterIdRecord {
            id: c.cluster_id.clone(),
            generated: false,
        }),
    );
    for (t, r) in topics {
        out.writes.insert(keys::topic(t), Value::Topic(r.clone()));
    }
    for ((t, p), s) in ps.states {
        if kept.contains(&t) {
            out.writes.insert(keys::partition(&t, p), Value::Partition(s));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use controller::reassignment;
    use proto::ferry::{PartitionState, ReassignmentRecord};
    use proto::keys;

    use super::*;
    use crate::migrate_zk::parse::tests::snapshot;
    use crate::migrate_zk::parse::{parse, RawSnapshot};

    const BASE: &[(&str, &str)] = &[
        ("/cluster/id", r#"{"version":"1","id":"kc"}"#),
        ("/controller_epoch", "7"),
        (
            "/brokers/ids/1",
            r#"{"version":5,"host":"a","port":9092,"endpoints":["PLAINTEXT://a:9092"],"rack":null}"#,
        ),
        (
            "/brokers/ids/2",
            r#"{"version":5,"host":"b","port":9092,"endpoints":["PLAINTEXT://b:9092"],"rack":null}"#,
        ),
        (
            "/brokers/ids/3",
            r#"{"version":5,"host":"c","port":9092,"endpoints":["PLAINTEXT://c:9092"],"rack":null}"#,
        ),
    ];

    fn with(extra: &[(&str, &str)]) -> RawSnapshot {
        let mut all = BASE.to_vec();
        all.extend_from_slice(extra);
        snapshot(&all)
    }

    fn planned(extra: &[(&str, &str)]) -> Plan {
        plan(&parse(&with(extra)).unwrap())
    }

    fn state(p: &Plan, t: &str, n: u32) -> PartitionState {
        match &p.writes[&keys::partition(t, n)] {
            Value::Partition(s) => s.clone(),
            v => panic!("{v:?}"),
        }
    }

    fn record(p: &Plan, t: &str, n: u32) -> Option<ReassignmentRecord> {
        state(p, t, n).reassignment.map(|r| *r)
    }

    #[test]
    fn in_flight_move_keeps_kafkas_sets_and_learns_the_original_order() {
        let p = planned(&[
            (
                "/brokers/topics/foo",
                r#"{"version":2,"partitions":{"0":[2,3,1],"1":[1,2]},"adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]}}"#,
            ),
            (
                "/brokers/topics/foo/partitions/0/state",
                r#"{"version":1,"leader":2,"leader_epoch":4,"controller_epoch":7,"isr":[1,2]}"#,
            ),
            (
                "/brokers/topics/foo/partitions/1/state",
                r#"{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":7,"isr":[1,2]}"#,
            ),
            (
                "/admin/reassign_partitions",
                r#"{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[2,3],"original_replicas":[2,1]}]}"#,
            ),
        ]);
        assert!(p.skipped.is_empty(), "{:?}", p.skipped);
        let s = state(&p, "foo", 0);
        assert_eq!(
            (s.replicas, s.adding, s.removing, s.leader),
            (vec![2, 3, 1], vec![3], vec![1], 2)
        );
        let r = record(&p, "foo", 0).unwrap();
        assert_eq!((r.original, r.target), (vec![2, 1], vec![2, 3]));
        assert!(record(&p, "foo", 1).is_none());
    }

    #[test]
    fn legacy_move_with_original_replicas_is_started_as_ferry_would() {
        let p = planned(&[
            ("/brokers/topics/leg", r#"{"version":1,"partitions":{"0":[1,3,2]}}"#),
            (
                "/brokers/topics/leg/partitions/0/state",
                r#"{"version":1,"leader":1,"leader_epoch":2,"controller_epoch":7,"isr":[2,1]}"#,
            ),
            (
                "/admin/reassign_partitions",
                r#"{"version":1,"partitions":[{"topic":"leg","partition":0,"replicas":[1,3],"original_replicas":[2,1]}]}"#,
            ),
        ]);
        assert!(p.skipped.is_empty(), "{:?}", p.skipped);
        let s = state(&p, "leg", 0);
        assert_eq!(
            (s.replicas.clone(), s.adding.clone(), s.removing.clone()),
            (vec![1, 3, 2], vec![3], vec![2])
        );
        let r = record(&p, "leg", 0).unwrap();
        assert_eq!(r.original, vec![2, 1], "the order comes from original_replicas");
        let back = reassignment::cancel(&s, &BTreeSet::from([1, 2, 3]), false).unwrap();
        assert_eq!(back.replicas, vec![2, 1]);
    }

    #[test]
    fn throttles_due_for_removal_become_owned() {
        let p = planned(&[
            (
                "/brokers/topics/foo",
                r#"{"version":2,"partitions":{"0":[2,3,1]},"adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]}}"#,
            ),
            (
                "/brokers/topics/foo/partitions/0/state",
                r#"{"version":1,"leader":2,"leader_epoch":4,"controller_epoch":7,"isr":[1,2]}"#,
            ),
            (
                "/config/topics/foo",
                r#"{"version":1,"config":{"leader.replication.throttled.replicas":"0:1,0:2","follower.replication.throttled.replicas":"0:3","retention.ms":"100"}}"#,
            ),
            (
                "/config/brokers/1",
                r#"{"version":1,"config":{"leader.replication.throttled.rate":"5000","follower.replication.throttled.rate":"5000"}}"#,
            ),
            (
                "/config/brokers/3",
                r#"{"version":1,"config":{"leader.replication.throttled.rate":"3000","follower.replication.throttled.rate":"3000"}}"#,
            ),
            ("/admin/throttled_replicas_removal", r#"{"version":1,"topics":["foo"]}"#),
            ("/admin/throttled_rates_removal", r#"{"version":1,"brokers":[1,3]}"#),
        ]);
        assert!(p.skipped.is_empty(), "{:?}", p.skipped);
        assert_eq!(record(&p, "foo", 0).unwrap().throttle_rate, 3000);
        assert_eq!(state(&p, "foo", 0).throttle_rate, 3000);
        let Value::Topic(t) = &p.writes["/brokers/topics/foo"] else {
            panic!()
        };
        assert_eq!(t.config.len(), 1, "only retention.ms stays: {:?}", t.config);
        assert!(
            !p.writes.contains_key("/config/brokers/1"),
            "the rates were owned, nothing else was set"
        );
    }

    #[test]
    fn contradictions_name_the_znode() {
        let p = planned(&[
            ("/brokers/topics/foo", r#"{"version":1,"partitions":{"0":[1,2]}}"#),
            (
                "/brokers/topics/foo/partitions/0/state",
                r#"{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":7,"isr":[1,7]}"#,
            ),
            ("/brokers/topics/bar", r#"{"version":1,"partitions":{"0":[1,2]}}"#),
            (
                "/brokers/topics/bar/partitions/0/state",
                r#"{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":9,"isr":[1]}"#,
            ),
            ("/brokers/topics/gap", r#"{"version":1,"partitions":{"1":[1]}}"#),
            ("/brokers/topics/ok", r#"{"version":1,"partitions":{"0":[1,2]}}"#),
            (
                "/admin/reassign_partitions",
                r#"{"version":1,"partitions":[{"topic":"nope","partition":0,"replicas":[1]},{"topic":"ok","partition":0,"replicas":[3,2],"original_replicas":[3,1]}]}"#,
            ),
        ]);
        let msgs: Vec<String> = p.skipped.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            msgs,
            [
                "/admin/reassign_partitions: nope-0: no such partition is imported",
                "/admin/reassign_partitions: ok-0: the assigned replicas [1, 2] are neither original_replicas [3, 1] nor the target followed by them [3, 2, 1]",
                "/brokers/topics/bar/partitions/0/state: written by controller epoch 9, later than 7 in /controller_epoch",
                "/brokers/topics/foo/partitions/0/state: replica 7 is not assigned to foo-0",
                "/brokers/topics/gap: the partitions are not numbered 0 to 0",
            ]
        );
        assert!(p.writes.contains_key("/brokers/topics/ok") && !p.writes.contains_key("/brokers/topics/foo"));
    }

    #[test]
    fn requests_supersede_and_cancel_all_rolls_back() {
        let base = [
            (
                "/brokers/topics/foo",
                r#"{"version":3,"topic_id":"tid","partitions":{"0":[1,2]}}"#,
            ),
            (
                "/brokers/topics/foo/partitions/0/state",
                r#"{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":7,"isr":[1,2]}"#,
            ),
            (
                "/admin/reassignment_requests/request_0000000001",
                r#"{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[2,3]}]}"#,
            ),
            (
                "/admin/reassignment_requests/request_0000000002",
                r#"{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[3,1]}]}"#,
            ),
        ];
        let p = planned(&base);
        let r = record(&p, "foo", 0).unwrap();
        assert_eq!((r.original, r.target), (vec![1, 2], vec![3, 1]));
        let mut cancelled = base.to_vec();
        cancelled.push(("/admin/reassign_cancel", ""));
        let p = planned(&cancelled);
        assert!(record(&p, "foo", 0).is_none());
        assert_eq!(state(&p, "foo", 0).replicas, vec![1, 2]);
        assert!(p.writes.contains_key(keys::REASSIGN_CANCEL));
    }

    #[test]
    fn deleting_topics_and_stable_ids() {
        let extra = [
            ("/brokers/topics/old", r#"{"version":1,"partitions":{"0":[1]}}"#),
            ("/admin/delete_topics/old", ""),
            ("/admin/delete_topics/gone", ""),
        ];
        let (a, b) = (planned(&extra), planned(&extra));
        let Value::Topic(t) = &a.writes["/brokers/topics/old"] else {
            panic!()
        };
        assert!(t.deleting);
        assert_eq!(a.writes, b.writes, "a re-run plans the same values");
        assert_eq!(
            state(&a, "old", 0).isr,
            vec![1],
            "a partition without state starts with every replica"
        );
        assert!(a.notes.iter().any(|n| n.contains("/admin/delete_topics/gone")));
        assert!(a.render().contains("Topics being deleted: old"));
    }
}
