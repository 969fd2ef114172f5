//! The console's JSON, built from the admin API's answers: plain functions over the gRPC
//! messages, so every number the pages show is decided here and tested here.

use std::collections::{BTreeMap, HashMap};

use controller::reassign_progress::{copies_eta_ms, totals};
use proto::ferry::*;
use proto::topic_config::{
    CORDONED_LOG_DIRS, FOLLOWER_THROTTLED_RATE, FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
};
use serde::Serialize;

/// The brokers page: every registered broker with its dirs.
#[derive(Debug, Serialize, PartialEq)]
pub struct BrokersView {
    /// The active controller's node id, 0 when none is active.
    pub controller_id: u64,
    /// The cluster-wide default of `cordoned.log.dirs`, when set.
    pub cordon_default: Option<String>,
    /// The brokers in id order.
    pub brokers: Vec<BrokerView>,
}

/// One broker.
#[derive(Debug, Serialize, PartialEq)]
pub struct BrokerView {
    /// Broker id.
    pub id: i32,
    /// Rack, empty for none.
    pub rack: String,
    /// Its gRPC address.
    pub endpoint: String,
    /// Its Kafka listener, empty for none.
    pub kafka_endpoint: String,
    /// Partitions it leads.
    pub leaders: u64,
    /// Replicas it holds (adding ones included, as Kafka's replica lists count them).
    pub replicas: u64,
    /// Its own `cordoned.log.dirs`, when set.
    pub cordon_config: Option<String>,
    /// Dirs that take no new replica, as the broker resolved and published them.
    pub cordoned_dirs: Vec<String>,
    /// Why its dirs are unknown, when it did not answer.
    pub error: Option<String>,
    /// Its log dirs in its order.
    pub dirs: Vec<DirView>,
}

/// One log dir of a broker.
#[derive(Debug, Serialize, PartialEq)]
pub struct DirView {
    /// Absolute path.
    pub path: String,
    /// The filesystem's size.
    pub total_bytes: u64,
    /// Bytes used on the filesystem (total minus usable).
    pub used_bytes: u64,
    /// Bytes still usable.
    pub usable_bytes: u64,
    /// Bytes of the replicas in this dir (future logs included).
    pub replica_bytes: u64,
    /// Replicas in this dir (future logs not counted).
    pub replicas: u64,
    /// Future logs (replicas moving in from another dir).
    pub future_replicas: u64,
    /// Takes no new replica.
    pub cordoned: bool,
    /// The dir failed.
    pub offline: bool,
    /// The dir's error, when offline.
    pub error: Option<String>,
}

/// Per broker: (partitions led, replicas held), over every partition described.
pub fn replica_counts(topics: &DescribeTopicsResponse) -> HashMap<i32, (u64, u64)> {
    let mut out: HashMap<i32, (u64, u64)> = HashMap::new();
    for s in topics
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .flat_map(|t| &t.partitions)
        .filter_map(|p| p.state.as_ref())
    {
        if s.leader >= 0 {
            out.entry(s.leader).or_default().0 += 1;
        }
        for r in &s.replicas {
            out.entry(*r).or_default().1 += 1;
        }
    }
    out
}

/// The value of `key` in the DescribeConfigs entry of the broker resource `name`.
fn broker_config<'a>(configs: &'a DescribeConfigsResponse, name: &str, key: &str) -> Option<&'a String> {
    configs
        .results
        .iter()
        .filter(|e| e.error_code == 0)
        .find(|e| e.resource.as_ref().is_some_and(|r| is_broker(r) && r.name == name))
        .and_then(|e| e.config.get(key))
}

fn is_broker(r: &ConfigResource) -> bool {
    r.r#type == config_resource::Type::Broker as i32
}

/// One dir of a broker, from its registration and its DescribeLogDirs answer (if any).
fn dir_view(reg: &BrokerRegistration, path: &str, answer: Option<&LogDirDescription>) -> DirView {
    let (mut replicas, mut future, mut bytes) = (0, 0, 0);
    for r in answer.map(|d| d.replicas.as_slice()).unwrap_or_default() {
        bytes += r.size;
        if r.is_future {
            future += 1;
        } else {
            replicas += 1;
        }
    }
    let total = answer.map_or(0, |d| d.total_bytes);
    let usable = answer.map_or(0, |d| d.usable_bytes);
    let failed = answer.filter(|d| d.error_code != 0);
    DirView {
        path: path.to_string(),
        total_bytes: total,
        used_bytes: total.saturating_sub(usable),
        usable_bytes: usable,
        replica_bytes: bytes,
        replicas,
        future_replicas: future,
        cordoned: reg.cordoned_log_dirs.iter().any(|c| c == path),
        offline: failed.is_some() || reg.offline_log_dirs.iter().any(|o| o == path),
        error: failed.map(|d| d.error_message.clone()),
    }
}

/// The brokers page from DescribeCluster, the admin's DescribeLogDirs, DescribeTopics (every
/// topic) and DescribeConfigs of the broker resources.
pub fn brokers(
    cluster: &DescribeClusterResponse,
    dirs: &AdminDescribeLogDirsResponse,
    topics: &DescribeTopicsResponse,
    configs: &DescribeConfigsResponse,
) -> BrokersView {
    let counts = replica_counts(topics);
    let mut regs: Vec<&BrokerRegistration> = cluster.brokers.iter().collect();
    regs.sort_by_key(|r| r.id);
    let brokers = regs
        .into_iter()
        .map(|reg| {
            let answer = dirs.brokers.iter().find(|b| b.broker == reg.id);
            let described = answer.filter(|b| b.error_code == 0).and_then(|b| b.log_dirs.as_ref());
            let error = match answer {
                None => Some("no answer".to_string()),
                Some(b) if b.error_code != 0 => Some(b.error_message.clone()),
                Some(_) => None,
            };
            // The registration names the dirs; a dir only the answer knows is shown too.
            let mut paths: Vec<&str> = reg.log_dirs.iter().map(String::as_str).collect();
            for d in described.map(|d| d.dirs.as_slice()).unwrap_or_default() {
                if !paths.contains(&d.path.as_str()) {
                    paths.push(&d.path);
                }
            }
            let dirs = paths
                .into_iter()
                .map(|p| {
                    let a = described.and_then(|d| d.dirs.iter().find(|x| x.path == p));
                    dir_view(reg, p, a)
                })
                .collect();
            let (leaders, replicas) = counts.get(&reg.id).copied().unwrap_or_default();
            BrokerView {
                id: reg.id,
                rack: reg.rack.clone(),
                endpoint: reg.endpoint.clone(),
                kafka_endpoint: reg.kafka_endpoint.clone(),
                leaders,
                replicas,
                cordon_config: broker_config(configs, &reg.id.to_string(), CORDONED_LOG_DIRS).cloned(),
                cordoned_dirs: reg.cordoned_log_dirs.clone(),
                error,
                dirs,
            }
        })
        .collect();
    BrokersView {
        controller_id: cluster.controller_id,
        cordon_default: broker_config(configs, "", CORDONED_LOG_DIRS).cloned(),
        brokers,
    }
}

/// The moves page: every reassignment in flight with its progress.
#[derive(Debug, Serialize, PartialEq)]
pub struct MovesView {
    /// A cancel of every reassignment is under way.
    pub cancel_in_progress: bool,
    /// The sum over every move.
    pub total: Progress,
    /// The moving partitions in the order listed.
    pub partitions: Vec<MoveView>,
}

/// Bytes copied and left, rate and ETA: of one copy, one partition or the total.
#[derive(Debug, Serialize, PartialEq, Clone, Copy)]
pub struct Progress {
    /// Bytes copied.
    pub copied: u64,
    /// Bytes left.
    pub left: u64,
    /// Bytes per second, 0 while unknown.
    pub rate: u64,
    /// Milliseconds to go, -1 while unknown.
    pub eta_ms: i64,
}

/// One moving partition.
#[derive(Debug, Serialize, PartialEq)]
pub struct MoveView {
    /// `<topic>-<partition>`, as Kafka's tools name it.
    pub name: String,
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// The replica set now.
    pub replicas: Vec<i32>,
    /// Replicas being added.
    pub adding: Vec<i32>,
    /// Replicas being removed.
    pub removing: Vec<i32>,
    /// The replicas before the move.
    pub original: Vec<i32>,
    /// The replicas it moves to.
    pub target: Vec<i32>,
    /// The throttle this move owns, bytes/s; 0 for none.
    pub throttle_rate: u64,
    /// Replicas not yet in the log dir the move names for them.
    pub dir_pending: Vec<i32>,
    /// The partition's progress: its copies summed, the slowest deciding the ETA.
    pub progress: Progress,
    /// Each copy: an adding replica, or a replica moving between its broker's dirs.
    pub copies: Vec<CopyView>,
}

/// One copy of a move.
#[derive(Debug, Serialize, PartialEq)]
pub struct CopyView {
    /// The broker copying.
    pub broker: i32,
    /// The destination dir for a move between dirs, empty otherwise.
    pub log_dir: String,
    /// Its progress.
    pub progress: Progress,
}

/// The progress of `entries` together, by `controller::reassign_progress`'s rules.
fn progress_of(entries: &[OngoingReassignment]) -> Progress {
    let (copied, left, rate) = totals(entries);
    Progress {
        copied,
        left,
        rate,
        eta_ms: copies_eta_ms(entries.iter().flat_map(|e| &e.progress)),
    }
}

/// The moves page from ListPartitionReassignments with progress.
pub fn moves(l: &ListPartitionReassignmentsResponse) -> MovesView {
    let partitions = l
        .reassignments
        .iter()
        .map(|e| MoveView {
            name: format!("{}-{}", e.topic, e.partition),
            topic: e.topic.clone(),
            partition: e.partition,
            replicas: e.replicas.clone(),
            adding: e.adding.clone(),
            removing: e.removing.clone(),
            original: e.original_replicas.clone(),
            target: e.target.clone(),
            throttle_rate: e.throttle_rate,
            dir_pending: e.dir_pending.clone(),
            progress: progress_of(std::slice::from_ref(e)),
            copies: e
                .progress
                .iter()
                .map(|p| CopyView {
                    broker: p.broker,
                    log_dir: p.log_dir.clone(),
                    progress: Progress {
                        copied: p.bytes_copied,
                        left: p.bytes_left,
                        rate: p.rate_bytes_per_sec,
                        eta_ms: p.eta_ms,
                    },
                })
                .collect(),
        })
        .collect();
    MovesView {
        cancel_in_progress: l.cancel_in_progress,
        total: progress_of(&l.reassignments),
        partitions,
    }
}

/// The throttles page: every throttle in force and who owns it.
#[derive(Debug, Serialize, PartialEq)]
pub struct ThrottlesView {
    /// Throttles in a sorted order: broker rates, topic replica lists, then moves' own.
    pub throttles: Vec<ThrottleView>,
}

/// One throttle.
#[derive(Debug, Serialize, PartialEq)]
pub struct ThrottleView {
    /// `broker`, `broker-default`, `topic` or `move`.
    pub scope: String,
    /// The broker id, topic, or `<topic>-<partition>` of a move; empty for the default.
    pub name: String,
    /// The config key, or `throttle_rate` for a move's own.
    pub key: String,
    /// The value as stored.
    pub value: String,
    /// `move` (goes with its move), `auto-remove` (set by hand, removed by Ferry once no move
    /// in its scope runs), or `hand` (stays until changed).
    pub owner: String,
    /// For auto-remove: a move in its scope has started since it was set.
    pub armed: bool,
}

const THROTTLE_KEYS: [&str; 4] = [
    LEADER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
    FOLLOWER_THROTTLED_REPLICAS,
];

/// The throttle configs of one DescribeConfigs entry.
fn entry_throttles(scope: &str, name: &str, e: &ConfigEntries, out: &mut Vec<ThrottleView>) {
    let mut keys: Vec<(&String, &String)> = e
        .config
        .iter()
        .filter(|(k, v)| THROTTLE_KEYS.contains(&k.as_str()) && !v.is_empty())
        .collect();
    keys.sort();
    for (k, v) in keys {
        let auto = e.auto_remove.contains(k);
        out.push(ThrottleView {
            scope: scope.to_string(),
            name: name.to_string(),
            key: k.clone(),
            value: v.clone(),
            owner: if auto { "auto-remove" } else { "hand" }.to_string(),
            armed: auto && e.auto_remove_armed,
        });
    }
}

/// The throttles page from DescribeConfigs of the brokers (and their default) and of the
/// topics, and the reassignments in flight (each may own a rate).
pub fn throttles(configs: &DescribeConfigsResponse, l: &ListPartitionReassignmentsResponse) -> ThrottlesView {
    let mut entries: Vec<(String, String, &ConfigEntries)> = configs
        .results
        .iter()
        .filter(|e| e.error_code == 0)
        .filter_map(|e| {
            let r = e.resource.as_ref()?;
            let scope = match (is_broker(r), r.name.is_empty()) {
                (true, true) => "broker-default",
                (true, false) => "broker",
                (false, _) => "topic",
            };
            Some((scope.to_string(), r.name.clone(), e))
        })
        .collect();
    // Brokers by number, then the default, then topics by name.
    entries.sort_by_key(|(scope, name, _)| {
        let rank = ["broker", "broker-default", "topic"]
            .iter()
            .position(|s| s == scope)
            .unwrap_or(3);
        (rank, name.parse::<i64>().unwrap_or(i64::MAX), name.clone())
    });
    let mut out = Vec::new();
    for (scope, name, e) in entries {
        entry_throttles(&scope, &name, e, &mut out);
    }
    for e in l.reassignments.iter().filter(|e| e.throttle_rate > 0) {
        out.push(ThrottleView {
            scope: "move".to_string(),
            name: format!("{}-{}", e.topic, e.partition),
            key: "throttle_rate".to_string(),
            value: e.throttle_rate.to_string(),
            owner: "move".to_string(),
            armed: false,
        });
    }
    ThrottlesView { throttles: out }
}

/// The topics whose configs hold a throttle, from DescribeTopics: the only topics whose
/// DescribeConfigs the throttles page needs.
pub fn throttled_topics(topics: &DescribeTopicsResponse) -> Vec<String> {
    let mut out: Vec<String> = topics
        .topics
        .iter()
        .filter(|t| {
            t.error_code == 0
                && t.config
                    .iter()
                    .any(|(k, v)| THROTTLE_KEYS.contains(&k.as_str()) && !v.is_empty())
        })
        .map(|t| t.topic.clone())
        .collect();
    out.sort();
    out
}

/// The plans page: the controller's move plans.
#[derive(Debug, Serialize, PartialEq, Default)]
pub struct PlansView {
    /// Whether the admin API listed the plans.
    pub available: bool,
    /// The plans, newest first.
    pub plans: Vec<serde_json::Value>,
}

/// Moves of one plan drawn on the page; the rest count in the plan's totals.
pub const PLAN_MOVES_DRAWN: usize = 200;

/// The plans page from a ListPlans answer: each plan's counts, bytes, caps, per-broker loads and
/// its first [`PLAN_MOVES_DRAWN`] moves (those not yet done first).
pub fn plans(r: &ListPlansResponse) -> PlansView {
    let mut plans: Vec<&PlanInfo> = r.plans.iter().collect();
    plans.sort_by_key(|p| std::cmp::Reverse(p.id));
    let plan = |p: &PlanInfo| {
        let caps = p.caps.unwrap_or_default();
        let mut moves: Vec<&PlanMove> = p.moves.iter().collect();
        moves.sort_by_key(|m| (m.state == "done", m.state != "running"));
        serde_json::json!({
            "id": p.id,
            "kind": p.kind,
            "target": p.target,
            "state": p.state,
            "throttle_rate": p.throttle_rate,
            "caps": {
                "into_broker": caps.max_moves_into_broker,
                "out_of_broker": caps.max_moves_out_of_broker,
                "dir_moves_per_broker": caps.max_dir_moves_per_broker,
                "cluster": caps.max_moves_in_cluster,
            },
            "moves_total": p.moves_total,
            "queued": p.queued,
            "running": p.running,
            "done": p.done,
            "skipped": p.skipped,
            "failed": p.failed,
            "bytes_total": p.bytes_total,
            "bytes_left": p.bytes_left,
            "eta_ms": p.eta_ms,
            "brokers": p.brokers.iter().map(|b| serde_json::json!({
                "broker": b.broker,
                "moving_in": b.moving_in,
                "moving_out": b.moving_out,
                "dir_moves": b.dir_moves,
                "queued": b.queued,
                "bytes_left": b.bytes_left,
                "rate": b.rate,
                "eta_ms": b.eta_ms,
                "down": b.down,
            })).collect::<Vec<_>>(),
            "moves": moves.iter().take(PLAN_MOVES_DRAWN).map(|m| serde_json::json!({
                "name": format!("{}-{}", m.topic, m.partition),
                "from": m.from_replicas,
                "to": m.to_replicas,
                "state": m.state,
                "reason": m.reason,
                "bytes": m.bytes,
                "bytes_left": m.bytes_left,
            })).collect::<Vec<_>>(),
            "notes": p.notes,
        })
    };
    PlansView {
        available: true,
        plans: plans.into_iter().map(plan).collect(),
    }
}

/// Per-topic leaders of every partition: `(topic, partition) -> leader`, -1 for none.
pub fn partition_leaders(topics: &DescribeTopicsResponse) -> BTreeMap<(String, u32), i32> {
    topics
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    (t.topic.clone(), p.partition),
                    p.state.as_ref().map_or(-1, |s| s.leader),
                )
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
