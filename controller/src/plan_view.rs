//! The cluster as the plan core sees it, built from what the controller reads: the planners'
//! [`ClusterModel`] (from the cluster view, the brokers' log dir reports and the cordons) and
//! the scheduler's [`Observed`] (from the cluster view alone). Pure: the drivers read, these
//! translate.

use std::collections::{BTreeSet, HashMap, HashSet};

use proto::cluster_view::ClusterView;
use proto::ferry::{BrokerLogDirs, PartitionState};
use proto::{cordon, topic_config};

use crate::plan::schedule::{InFlight, PartitionNow};
use crate::plan::{ClusterBuilder, ClusterModel, DirId, Load, Move, MoveState, Observed, PartitionRef, Plan, Replica};
use crate::throttles::BrokerConfigs;

/// What the brokers' log dir reports say of each replica: its dir and size.
#[derive(Debug, Default, Clone)]
pub struct DirReports {
    /// The dir each replica (topic, partition, broker) is in, as the broker reported it.
    pub replica_dir: HashMap<(String, u32, i32), String>,
    /// Each partition's size: the largest of its replicas' (the leader's, as a rule).
    pub size: HashMap<(String, u32), u64>,
    /// The dirs each broker reported failed.
    pub offline: BTreeSet<(i32, String)>,
}

impl DirReports {
    /// The reports of DescribeLogDirs answers; a broker that did not answer is left out.
    pub fn of(answers: &[BrokerLogDirs]) -> DirReports {
        let mut out = DirReports::default();
        for a in answers {
            let Some(r) = &a.log_dirs else { continue };
            for d in &r.dirs {
                if d.error_code != 0 {
                    out.offline.insert((a.broker, d.path.clone()));
                }
                for rep in d.replicas.iter().filter(|r| !r.is_future) {
                    out.replica_dir
                        .insert((rep.topic.clone(), rep.partition, a.broker), d.path.clone());
                    let s = out.size.entry((rep.topic.clone(), rep.partition)).or_default();
                    *s = (*s).max(rep.size);
                }
            }
        }
        out
    }
}

/// The planners' input: every registered broker with its rack and dirs (offline ones marked),
/// every partition with its replicas' dirs and size, the cordons in force (as the brokers
/// published them and as their config records set them), and as moving (left out) every
/// partition that moves now or that `busy` names (another plan's).
pub fn cluster_model(
    view: &ClusterView,
    reports: &DirReports,
    configs: &BrokerConfigs,
    busy: &HashSet<(String, u32)>,
) -> ClusterModel {
    let mut b = ClusterBuilder::new();
    for (id, reg) in &view.brokers {
        let offline: BTreeSet<&str> = reg.offline_log_dirs.iter().map(String::as_str).collect();
        let dirs: Vec<(&str, bool)> = reg
            .log_dirs
            .iter()
            .map(|d| {
                let off = offline.contains(d.as_str()) || reports.offline.contains(&(*id, d.clone()));
                (d.as_str(), off)
            })
            .collect();
        let rack = (!reg.rack.is_empty()).then_some(reg.rack.as_str());
        b.broker(*id, rack, true, &dirs);
        let brokers_dirs = cordon::BrokerDirs {
            dirs: &reg.log_dirs,
            work_dir: &reg.work_dir,
        };
        let mut cordoned: BTreeSet<String> = reg.cordoned_log_dirs.iter().map(|d| cordon::absolute("/", d)).collect();
        if let Some(v) = configs
            .get(id)
            .and_then(|(rec, _)| rec.config.get(topic_config::CORDONED_LOG_DIRS))
        {
            cordoned.extend(cordon::cordoned(brokers_dirs, v).dirs);
        }
        let all = !reg.log_dirs.is_empty()
            && reg
                .log_dirs
                .iter()
                .all(|d| cordoned.contains(&cordon::absolute("/", d)));
        if all {
            b.cordon_broker(*id);
        } else {
            for d in reg
                .log_dirs
                .iter()
                .filter(|d| cordoned.contains(&cordon::absolute("/", d)))
            {
                b.cordon_dir(*id, d);
            }
        }
    }
    for (topic, t) in &view.topics {
        for (p, e) in &t.partitions {
            let s = &e.state;
            let replicas: Vec<(i32, &str)> = s
                .replicas
                .iter()
                .map(|r| {
                    let dir = reports
                        .replica_dir
                        .get(&(topic.clone(), *p, *r))
                        .map_or("", String::as_str);
                    (*r, dir)
                })
                .collect();
            let bytes = reports.size.get(&(topic.clone(), *p)).copied().unwrap_or(0);
            b.partition(topic, *p, s.leader, bytes, &replicas);
            if s.is_moving() || busy.contains(&(topic.clone(), *p)) {
                b.moving();
            }
        }
    }
    b.build()
}

/// What a moving partition loads: its adding and removing replicas, and its replicas moving
/// between dirs that are not also adding.
pub fn in_flight(s: &PartitionState) -> InFlight {
    InFlight {
        target: crate::reassignment::target_of(s),
        load: Load {
            into: s.adding.clone(),
            out: s.removing.clone(),
            dir: s
                .dir_pending
                .iter()
                .copied()
                .filter(|b| !s.adding.contains(b))
                .collect(),
        },
    }
}

/// The dir of replica `broker` of a partition now: the dir its state names, else where the
/// move found it (a replica never named a dir stays where it was), else any.
fn dir_now(named: Option<&str>, broker: i32, m: &Move, dirs: &HashMap<&str, DirId>) -> DirId {
    match named.filter(|d| !d.is_empty()) {
        Some(d) => dirs.get(d).copied().unwrap_or(DirId::ANY),
        None => m.from.iter().find(|r| r.broker == broker).map_or(DirId::ANY, |r| r.dir),
    }
}

/// The cluster as `plan`'s scheduler sees it at `revision`: brokers, racks, failed dirs, the
/// plan's partitions now whose moves may still change, and every other partition's move in
/// flight (they count against the caps). A move done or left out needs no look: a pass over a
/// large plan costs what is still open, and a later move on its partition counts as another's.
pub fn observed(view: &ClusterView, revision: u64, plan: &Plan) -> Observed {
    let dirs: HashMap<&str, DirId> = plan
        .names
        .dirs
        .iter()
        .enumerate()
        .map(|(i, d)| (d.as_str(), DirId(i as u32)))
        .collect();
    let mut obs = Observed {
        revision,
        live_brokers: view.live_brokers(),
        ..Default::default()
    };
    for (id, reg) in &view.brokers {
        if !reg.rack.is_empty() {
            obs.racks.insert(*id, reg.rack.clone());
        }
        for d in &reg.offline_log_dirs {
            if let Some(dir) = dirs.get(d.as_str()) {
                obs.offline_dirs.insert((*id, *dir));
            }
        }
    }
    let open = plan
        .moves
        .iter()
        .filter(|m| !matches!(m.state, MoveState::Done | MoveState::Skipped(_)));
    let mut mine: HashSet<(&str, u32)> = HashSet::new();
    // Moves are grouped by topic: its entry is looked up once per run of them.
    let mut last: Option<(u32, Option<&proto::cluster_view::TopicEntry>)> = None;
    for m in open {
        let topic = plan.names.topic(m.partition);
        mine.insert((topic, m.partition.partition));
        let t = match last {
            Some((i, t)) if i == m.partition.topic => t,
            _ => {
                let t = view.topics.get(topic);
                last = Some((m.partition.topic, t));
                t
            }
        };
        let Some(t) = t else { continue };
        let Some(e) = t.partitions.get(&m.partition.partition) else {
            continue;
        };
        let s = &e.state;
        let min = t
            .record
            .as_ref()
            .map_or(1, |r| topic_config::min_insync_replicas(&r.config));
        let replicas = s
            .replicas
            .iter()
            .enumerate()
            .map(|(i, b)| Replica::new(*b, dir_now(s.log_dirs.get(i).map(String::as_str), *b, m, &dirs)))
            .collect();
        obs.partitions.insert(
            m.partition,
            PartitionNow {
                replicas,
                isr: s.isr.clone(),
                min_insync: min.min(usize::from(u16::MAX)) as u16,
                moving: s.is_moving().then(|| in_flight(s)),
            },
        );
    }
    for (topic, t) in &view.topics {
        for (p, e) in &t.partitions {
            if e.state.is_moving() && !mine.contains(&(topic.as_str(), *p)) {
                obs.foreign.push(in_flight(&e.state).load);
            }
        }
    }
    obs
}

/// The partitions of `plan`'s moves not ended yet, by name (another plan leaves them out).
pub fn open_partitions(plan: &Plan) -> impl Iterator<Item = (String, u32)> + '_ {
    plan.moves
        .iter()
        .filter(|m| !m.state.is_terminal())
        .map(|m| (plan.names.topic(m.partition).to_string(), m.partition.partition))
}

/// A plan partition's name parts.
pub fn partition_name(plan: &Plan, p: PartitionRef) -> (&str, u32) {
    (plan.names.topic(p), p.partition)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Caps, MoveState, Names, PlanKind, PlanState};
    use prost::Message;
    use proto::ferry::{BrokerRegistration, TopicRecord};
    use proto::keys;

    fn view() -> ClusterView {
        let mut v = ClusterView::default();
        for id in [1, 2, 3] {
            let reg = BrokerRegistration {
                id,
                rack: if id == 3 { String::new() } else { "r".into() },
                log_dirs: vec!["/d/a".into(), "/d/b".into()],
                offline_log_dirs: if id == 2 { vec!["/d/b".into()] } else { vec![] },
                ..Default::default()
            };
            v.apply(&keys::broker(id), Some(&reg.encode_to_vec()), 1);
        }
        v.apply(&keys::topic("t"), Some(&TopicRecord::default().encode_to_vec()), 2);
        let quiet = PartitionState {
            replicas: vec![1, 2],
            isr: vec![1, 2],
            leader: 1,
            ..Default::default()
        };
        v.apply(&keys::partition("t", 0), Some(&quiet.encode_to_vec()), 3);
        let moving = PartitionState {
            replicas: vec![3, 1],
            adding: vec![3],
            removing: vec![1],
            isr: vec![1],
            leader: 1,
            reassignment: Some(Default::default()),
            ..Default::default()
        };
        v.apply(&keys::partition("t", 1), Some(&moving.encode_to_vec()), 4);
        v
    }

    #[test]
    fn the_model_takes_dirs_sizes_cordons_and_moving_partitions() {
        let v = view();
        let reports = DirReports {
            replica_dir: [(("t".to_string(), 0, 1), "/d/b".to_string())].into(),
            size: [(("t".to_string(), 0), 700)].into(),
            offline: Default::default(),
        };
        let mut configs = BrokerConfigs::new();
        let mut rec = proto::ferry::BrokerConfigRecord::default();
        rec.config.insert(topic_config::CORDONED_LOG_DIRS.into(), "*".into());
        configs.insert(3, (rec, 9));
        let m = cluster_model(&v, &reports, &configs, &HashSet::new());
        assert!(m.cordons.brokers.contains(&3));
        assert_eq!(m.open_dirs(3), None);
        let b = m.dir_id(1, "/d/b").expect("known dir");
        let p0 = &m.partitions[0];
        assert_eq!((p0.bytes, p0.replicas[0]), (700, Replica::new(1, b)));
        assert!(!p0.moving && m.partitions[1].moving);
        // Broker 2's /d/b is offline: only /d/a is open.
        assert_eq!(m.open_dirs(2).map(|d| d.len()), Some(1));
    }

    #[test]
    fn observed_holds_the_plan_partitions_and_counts_other_moves() {
        let v = view();
        let plan = Plan {
            id: 1,
            kind: PlanKind::DrainBroker { broker: 2 },
            caps: Caps::default(),
            throttle_rate: 0,
            state: PlanState::Running,
            names: Names {
                topics: vec!["t".into()],
                dirs: vec!["/d/a".into(), "/d/b".into()],
            },
            moves: vec![Move {
                partition: PartitionRef { topic: 0, partition: 0 },
                from: vec![Replica::new(1, DirId(1)), Replica::new(2, DirId::ANY)].into(),
                to: vec![Replica::new(1, DirId(1)), Replica::new(3, DirId(0))].into(),
                bytes: 1,
                state: MoveState::Queued,
            }],
        };
        let obs = observed(&v, 10, &plan);
        assert_eq!(obs.revision, 10);
        let now = &obs.partitions[&PartitionRef { topic: 0, partition: 0 }];
        // Replica 1 was never named a dir: it is where the plan found it.
        assert_eq!(now.replicas[0], Replica::new(1, DirId(1)));
        assert_eq!((now.min_insync, now.moving.is_none()), (1, true));
        assert_eq!(obs.foreign.len(), 1, "t-1 moves outside the plan");
        assert_eq!(obs.foreign[0].into, vec![3]);
        assert!(obs.offline_dirs.contains(&(2, DirId(1))));
        assert_eq!(obs.racks.len(), 2);

        // A move that ended is not looked at; a move on its partition since is another's.
        let mut ended = plan.clone();
        ended.moves[0].partition.partition = 1;
        ended.moves[0].state = MoveState::Done;
        let obs = observed(&v, 11, &ended);
        assert!(obs.partitions.is_empty());
        assert_eq!(obs.foreign.len(), 1, "t-1 moves, and the plan's move there is done");
        ended.moves[0].state = MoveState::Running { since: 5 };
        let obs = observed(&v, 11, &ended);
        assert_eq!((obs.partitions.len(), obs.foreign.len()), (1, 0));
    }
}
