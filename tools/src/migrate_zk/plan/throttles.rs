//! Throttles due for removal in ZooKeeper, owned by the moves that use them, and broker configs.

use std::collections::{BTreeMap, BTreeSet};

use proto::ferry::{BrokerConfigRecord, TopicRecord};
use proto::{keys, topic_config};

use super::model::{Plan, Value};
use super::moves::Partitions;
use crate::migrate_zk::parse::{self, invalid, ZkCluster};

/// The lowest throttle rate set on the listed brokers of a move, from their configs.
fn owned_rate(c: &ZkCluster, brokers: &BTreeSet<i32>) -> Option<u64> {
    brokers
        .iter()
        .filter(|b| c.throttled_rates_removal.contains(b))
        .filter_map(|b| c.broker_configs.get(b))
        .flat_map(|cfg| {
            [
                topic_config::LEADER_THROTTLED_RATE,
                topic_config::FOLLOWER_THROTTLED_RATE,
            ]
            .into_iter()
            .filter_map(|k| cfg.get(k)?.parse::<u64>().ok().filter(|r| *r > 0))
        })
        .min()
}

/// Throttles due for removal become owned by the reassignments that use them; the topics'
/// throttled replicas are dropped either way.
pub(super) fn own_throttles(
    c: &ZkCluster,
    ps: &mut Partitions,
    topics: &mut BTreeMap<String, TopicRecord>,
    notes: &mut Vec<String>,
) {
    let mut owners: BTreeSet<String> = BTreeSet::new();
    for ((t, _), s) in ps.states.iter_mut() {
        let Some(r) = s
            .reassignment
            .as_mut()
            .filter(|_| c.throttled_replicas_removal.contains(t))
        else {
            continue;
        };
        let brokers: BTreeSet<i32> = r.original.iter().chain(&r.target).copied().collect();
        if let Some(rate) = owned_rate(c, &brokers) {
            r.throttle_rate = rate;
            s.throttle_rate = rate;
            owners.insert(t.clone());
        }
    }
    for t in &c.throttled_replicas_removal {
        if let Some(rec) = topics.get_mut(t) {
            rec.config.remove(topic_config::LEADER_THROTTLED_REPLICAS);
            rec.config.remove(topic_config::FOLLOWER_THROTTLED_REPLICAS);
        }
        if !owners.contains(t) {
            notes.push(format!(
                "{}: the throttled replicas of {t} were due for removal and no reassignment in flight owns them: not imported",
                parse::THROTTLED_REPLICAS_REMOVAL
            ));
        }
    }
}

/// The broker configs, less the rates due for removal (owned by moves, or dropped).
pub(super) fn broker_configs(c: &ZkCluster, out: &mut Plan) {
    for (id, cfg) in &c.broker_configs {
        let path = format!("{}/{id}", parse::BROKER_CONFIGS);
        let mut cfg = cfg.clone();
        if c.throttled_rates_removal.contains(id) {
            cfg.remove(topic_config::LEADER_THROTTLED_RATE);
            cfg.remove(topic_config::FOLLOWER_THROTTLED_RATE);
        }
        let known: std::collections::HashMap<String, String> = cfg
            .iter()
            .filter(|(k, _)| topic_config::is_known_broker(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Err(e) = topic_config::validate_broker(&known) {
            out.skipped.push(invalid(path, e));
            continue;
        }
        if !cfg.is_empty() {
            out.writes.insert(
                keys::broker_config(*id),
                Value::BrokerConfig(BrokerConfigRecord {
                    config: cfg.into_iter().collect(),
                    auto_remove: None,
                }),
            );
        }
    }
}

/// Notes the brokers whose rates were due for removal with no move in flight to own them.
pub(super) fn note_unowned_rates(c: &ZkCluster, ps: &Partitions, notes: &mut Vec<String>) {
    for b in &c.throttled_rates_removal {
        let used = ps
            .states
            .values()
            .filter_map(|s| s.reassignment.as_ref())
            .any(|r| r.throttle_rate > 0 && (r.original.contains(b) || r.target.contains(b)));
        if !used {
            notes.push(format!(
                "{}: the throttle rates of broker {b} were due for removal and no reassignment in flight owns them: not imported",
                parse::THROTTLED_RATES_REMOVAL
            ));
        }
    }
}
