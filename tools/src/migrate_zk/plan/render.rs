//! `--dry-run`'s output: the plan as Kafka's JSON for each kind of znode.

use std::collections::BTreeMap;

use proto::ferry::{PartitionState, TopicRecord};
use proto::keys;
use serde::Serialize;

use super::model::{sorted, Plan, Value};
use crate::migrate_zk::parse;

/// Appends one line.
fn line(out: &mut String, s: String) {
    out.push_str(&s);
    out.push('\n');
}

impl Plan {
    /// What `--dry-run` prints: Kafka's JSON for each kind of znode, as Ferry will hold it.
    pub fn render(&self) -> String {
        let mut out = String::new();
        line(&mut out, format!("Cluster id: {}", self.cluster_id));
        line(
            &mut out,
            format!(
                "Brokers in ZooKeeper (Ferry brokers register themselves with these ids): {}",
                join(self.brokers.keys())
            ),
        );
        self.render_topics(&mut out);
        self.render_states(&mut out);
        self.render_configs(&mut out);
        self.render_moves(&mut out);
        self.render_security(&mut out);
        self.render_remarks(&mut out);
        out
    }

    /// The topic znodes, with their partitions' replica sets.
    fn render_topics(&self, out: &mut String) {
        let mut states: BTreeMap<&str, BTreeMap<u32, &PartitionState>> = BTreeMap::new();
        for (t, p, s) in self.partitions() {
            states.entry(t).or_default().insert(p, s);
        }
        line(out, "Topics".into());
        for (t, r) in self.topics() {
            let ps = states.get(t).cloned().unwrap_or_default();
            line(out, format!("{}/{t} {}", parse::TOPICS, to_json(&topic_znode(r, &ps))));
        }
    }

    /// The partition state znodes.
    fn render_states(&self, out: &mut String) {
        line(out, "Partition states".into());
        for (t, p, s) in self.partitions() {
            let st = StateZnode {
                version: 1,
                leader: s.leader,
                leader_epoch: s.leader_epoch,
                isr: &s.isr,
            };
            line(out, format!("{} {}", parse::state_path(t, p), to_json(&st)));
        }
    }

    /// The topic and broker config znodes.
    fn render_configs(&self, out: &mut String) {
        line(out, "Topic configs".into());
        for (t, r) in self.topics().filter(|(_, r)| !r.config.is_empty()) {
            let cfg = ConfigZnode {
                version: 1,
                config: sorted(&r.config),
            };
            line(out, format!("{}/{t} {}", parse::TOPIC_CONFIGS, to_json(&cfg)));
        }
        line(out, "Broker configs".into());
        for (k, v) in &self.writes {
            if let (Some(id), Value::BrokerConfig(b)) = (k.strip_prefix(keys::BROKER_CONFIGS), v) {
                let cfg = ConfigZnode {
                    version: 1,
                    config: sorted(&b.config),
                };
                line(out, format!("{}/{id} {}", parse::BROKER_CONFIGS, to_json(&cfg)));
            }
        }
    }

    /// The reassignments in flight, as one reassignment JSON, and the throttles they own.
    fn render_moves(&self, out: &mut String) {
        let moving = ReassignmentFile {
            version: 1,
            partitions: self
                .reassignments()
                .map(|(topic, partition, r)| MovingPartition {
                    topic,
                    partition,
                    replicas: &r.target,
                    original_replicas: &r.original,
                })
                .collect(),
        };
        line(
            out,
            "Reassignments in flight (cancelling one restores its original_replicas)".into(),
        );
        line(out, to_json(&moving));
        let owned: Vec<String> = self
            .reassignments()
            .filter(|(_, _, r)| r.throttle_rate > 0)
            .map(|(t, p, r)| format!("{t}-{p}: {} B/s", r.throttle_rate))
            .collect();
        if !owned.is_empty() {
            line(
                out,
                format!(
                    "Throttles owned by reassignments (removed when each ends): {}",
                    owned.join(", ")
                ),
            );
        }
    }

    /// Deletions, a cancel-all, the notes and what was skipped.
    fn render_remarks(&self, out: &mut String) {
        let deleting: Vec<&str> = self.topics().filter(|(_, r)| r.deleting).map(|(t, _)| t).collect();
        if !deleting.is_empty() {
            line(out, format!("Topics being deleted: {}", deleting.join(",")));
        }
        if self.writes.contains_key(keys::REASSIGN_CANCEL) {
            line(
                out,
                "A cancel-all is in force: new reassignments are refused until --remove-cancel.".into(),
            );
        }
        for n in &self.notes {
            line(out, format!("Note: {n}"));
        }
        for s in &self.skipped {
            line(out, format!("Skipped: {s}"));
        }
    }
}

/// A topic's znode from its record and its partitions' states.
fn topic_znode<'a>(r: &'a TopicRecord, ps: &BTreeMap<u32, &'a PartitionState>) -> TopicZnode<'a> {
    let pick = |f: fn(&PartitionState) -> &Vec<i32>| -> BTreeMap<u32, &'a Vec<i32>> {
        ps.iter()
            .map(|(p, s)| (*p, f(s)))
            .filter(|(_, l)| !l.is_empty())
            .collect()
    };
    TopicZnode {
        version: 3,
        topic_id: &r.topic_id,
        partitions: pick(|s| &s.replicas),
        adding_replicas: pick(|s| &s.adding),
        removing_replicas: pick(|s| &s.removing),
    }
}

/// Kafka's topic znode, as Ferry will hold the topic.
#[derive(Serialize)]
struct TopicZnode<'a> {
    version: u32,
    topic_id: &'a str,
    partitions: BTreeMap<u32, &'a Vec<i32>>,
    adding_replicas: BTreeMap<u32, &'a Vec<i32>>,
    removing_replicas: BTreeMap<u32, &'a Vec<i32>>,
}

/// Kafka's partition state znode.
#[derive(Serialize)]
struct StateZnode<'a> {
    version: u32,
    leader: i32,
    leader_epoch: u32,
    isr: &'a [i32],
}

/// Kafka's config znode.
#[derive(Serialize)]
struct ConfigZnode<'a> {
    version: u32,
    config: BTreeMap<&'a String, &'a String>,
}

/// Kafka's reassignment JSON, with the cancellation proposal's `original_replicas`.
#[derive(Serialize)]
struct ReassignmentFile<'a> {
    version: u32,
    partitions: Vec<MovingPartition<'a>>,
}

#[derive(Serialize)]
struct MovingPartition<'a> {
    topic: &'a str,
    partition: u32,
    replicas: &'a [i32],
    original_replicas: &'a [i32],
}

fn to_json(v: &impl Serialize) -> String {
    // Serializing plain structs of strings and numbers cannot fail.
    serde_json::to_string(v).unwrap_or_default()
}

fn join<T: ToString>(it: impl IntoIterator<Item = T>) -> String {
    it.into_iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")
}
