use super::*;
use proto::ferry::config_resource::Type;

fn state(replicas: &[i32], leader: i32) -> PartitionDescription {
    PartitionDescription {
        partition: 0,
        state: Some(PartitionState {
            replicas: replicas.to_vec(),
            leader,
            ..Default::default()
        }),
    }
}

fn topics() -> DescribeTopicsResponse {
    DescribeTopicsResponse {
        topics: vec![
            TopicDescription {
                topic: "a".into(),
                partitions: vec![state(&[1, 2], 1), state(&[2, 3], 2), state(&[1, 3], -1)],
                config: [(LEADER_THROTTLED_REPLICAS.to_string(), "*".to_string())].into(),
                ..Default::default()
            },
            TopicDescription {
                topic: "b".into(),
                partitions: vec![state(&[3, 1], 3)],
                config: [("retention.ms".to_string(), "1".to_string())].into(),
                ..Default::default()
            },
            // A topic that failed to describe counts for nothing.
            TopicDescription {
                topic: "gone".into(),
                error_code: 3,
                partitions: vec![state(&[1], 1)],
                ..Default::default()
            },
        ],
        ..Default::default()
    }
}

fn entry(kind: Type, name: &str, config: &[(&str, &str)], auto: &[&str], armed: bool) -> ConfigEntries {
    ConfigEntries {
        resource: Some(ConfigResource {
            r#type: kind as i32,
            name: name.into(),
        }),
        config: config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        auto_remove: auto.iter().map(|k| k.to_string()).collect(),
        auto_remove_armed: armed,
        ..Default::default()
    }
}

#[test]
fn leaders_and_replicas_are_counted_per_broker() {
    let c = replica_counts(&topics());
    assert_eq!(c[&1], (1, 3));
    assert_eq!(c[&2], (1, 2));
    assert_eq!(c[&3], (1, 3));
    assert_eq!(c.len(), 3);
}

#[test]
fn a_broker_shows_its_dirs_usage_cordons_and_counts() {
    let cluster = DescribeClusterResponse {
        controller_id: 2,
        brokers: vec![
            BrokerRegistration {
                id: 2,
                log_dirs: vec!["/d2".into()],
                ..Default::default()
            },
            BrokerRegistration {
                id: 1,
                log_dirs: vec!["/a".into(), "/b".into()],
                cordoned_log_dirs: vec!["/b".into()],
                offline_log_dirs: vec![],
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let replica = |size, is_future| LogDirReplica {
        topic: "a".into(),
        size,
        is_future,
        ..Default::default()
    };
    let dirs = AdminDescribeLogDirsResponse {
        brokers: vec![
            BrokerLogDirs {
                broker: 1,
                log_dirs: Some(DescribeLogDirsResponse {
                    broker_id: 1,
                    dirs: vec![
                        LogDirDescription {
                            path: "/a".into(),
                            total_bytes: 1000,
                            usable_bytes: 400,
                            replicas: vec![replica(100, false), replica(50, false), replica(7, true)],
                            ..Default::default()
                        },
                        LogDirDescription {
                            path: "/b".into(),
                            error_code: 56,
                            error_message: "disk gone".into(),
                            ..Default::default()
                        },
                    ],
                }),
                ..Default::default()
            },
            BrokerLogDirs {
                broker: 2,
                error_code: 8,
                error_message: "broker 2 did not answer".into(),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let configs = DescribeConfigsResponse {
        results: vec![
            entry(Type::Broker, "1", &[(CORDONED_LOG_DIRS, "/b")], &[], false),
            entry(Type::Broker, "", &[(CORDONED_LOG_DIRS, "*")], &[], false),
        ],
        ..Default::default()
    };
    let v = brokers(&cluster, &dirs, &topics(), &configs);
    assert_eq!(v.controller_id, 2);
    assert_eq!(v.cordon_default.as_deref(), Some("*"));
    assert_eq!(v.brokers.iter().map(|b| b.id).collect::<Vec<_>>(), [1, 2]);
    let b1 = &v.brokers[0];
    assert_eq!((b1.leaders, b1.replicas), (1, 3));
    assert_eq!(b1.cordon_config.as_deref(), Some("/b"));
    assert_eq!(b1.error, None);
    let a = &b1.dirs[0];
    assert_eq!((a.total_bytes, a.used_bytes, a.usable_bytes), (1000, 600, 400));
    assert_eq!((a.replicas, a.future_replicas, a.replica_bytes), (2, 1, 157));
    assert!(!a.cordoned && !a.offline);
    let b = &b1.dirs[1];
    assert!(b.cordoned && b.offline);
    assert_eq!(b.error.as_deref(), Some("disk gone"));
    let b2 = &v.brokers[1];
    assert_eq!(b2.error.as_deref(), Some("broker 2 did not answer"));
    assert_eq!(b2.cordon_config, None, "no config of its own: absent");
    assert_eq!(b2.dirs.len(), 1, "its registered dirs, without sizes");
    assert_eq!(b2.dirs[0].total_bytes, 0);
}

fn moving(topic: &str, progress: Vec<ReplicaProgress>, throttle_rate: u64) -> OngoingReassignment {
    OngoingReassignment {
        topic: topic.into(),
        partition: 0,
        replicas: vec![1, 2, 3],
        adding: vec![3],
        removing: vec![1],
        original_replicas: vec![1, 2],
        target: vec![2, 3],
        throttle_rate,
        progress,
        ..Default::default()
    }
}

fn copy(broker: i32, copied: u64, left: u64, rate: u64, eta_ms: i64) -> ReplicaProgress {
    ReplicaProgress {
        broker,
        bytes_copied: copied,
        bytes_left: left,
        rate_bytes_per_sec: rate,
        eta_ms,
        log_dir: String::new(),
    }
}

#[test]
fn moves_carry_each_partition_and_the_total_by_the_cli_rules() {
    let l = ListPartitionReassignmentsResponse {
        reassignments: vec![
            moving("t", vec![copy(3, 10_000, 40_000, 5_000, 8_000)], 500_000),
            // Rate still unknown: the ETA of the partition and of the total is unknown.
            moving("u", vec![copy(3, 1_000, 2_000, 0, -1)], 0),
        ],
        cancel_in_progress: true,
        ..Default::default()
    };
    let v = moves(&l);
    assert!(v.cancel_in_progress);
    assert_eq!(v.partitions[0].name, "t-0");
    assert_eq!(
        v.partitions[0].progress,
        Progress {
            copied: 10_000,
            left: 40_000,
            rate: 5_000,
            eta_ms: 8_000
        }
    );
    assert_eq!(v.partitions[0].copies[0].broker, 3);
    assert_eq!(
        (v.partitions[0].original.clone(), v.partitions[0].target.clone()),
        (vec![1, 2], vec![2, 3])
    );
    assert_eq!(v.partitions[1].progress.eta_ms, -1);
    assert_eq!(
        v.total,
        Progress {
            copied: 11_000,
            left: 42_000,
            rate: 5_000,
            eta_ms: -1
        }
    );
    // The same numbers `ferry reassign --progress` prints.
    let cli = crate::reassign_progress::bar_state(&l.reassignments);
    assert_eq!(
        (cli.copied, cli.left, cli.eta_ms),
        (v.total.copied, v.total.left, v.total.eta_ms)
    );
}

#[test]
fn throttles_name_their_scope_and_owner() {
    let configs = DescribeConfigsResponse {
        results: vec![
            entry(
                Type::Topic,
                "a",
                &[(LEADER_THROTTLED_REPLICAS, "*"), ("retention.ms", "5")],
                &[],
                false,
            ),
            entry(
                Type::Broker,
                "10",
                &[(LEADER_THROTTLED_RATE, "1000"), (FOLLOWER_THROTTLED_RATE, "2000")],
                &[FOLLOWER_THROTTLED_RATE],
                true,
            ),
            entry(
                Type::Broker,
                "2",
                &[(LEADER_THROTTLED_RATE, "300"), (CORDONED_LOG_DIRS, "*")],
                &[],
                false,
            ),
            entry(Type::Broker, "", &[(LEADER_THROTTLED_RATE, "")], &[], false),
        ],
        ..Default::default()
    };
    let l = ListPartitionReassignmentsResponse {
        reassignments: vec![moving("t", vec![], 500_000), moving("u", vec![], 0)],
        ..Default::default()
    };
    let v = throttles(&configs, &l);
    let got: Vec<(&str, &str, &str, &str, &str, bool)> = v
        .throttles
        .iter()
        .map(|t| {
            (
                t.scope.as_str(),
                t.name.as_str(),
                t.key.as_str(),
                t.value.as_str(),
                t.owner.as_str(),
                t.armed,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("broker", "2", LEADER_THROTTLED_RATE, "300", "hand", false),
            ("broker", "10", FOLLOWER_THROTTLED_RATE, "2000", "auto-remove", true),
            ("broker", "10", LEADER_THROTTLED_RATE, "1000", "hand", false),
            ("topic", "a", LEADER_THROTTLED_REPLICAS, "*", "hand", false),
            ("move", "t-0", "throttle_rate", "500000", "move", false),
        ]
    );
}

#[test]
fn only_topics_with_a_throttle_are_described_and_leaders_are_per_partition() {
    assert_eq!(throttled_topics(&topics()), ["a"]);
    let l = partition_leaders(&topics());
    assert_eq!(l[&("b".to_string(), 0)], 3);
    assert!(!l.contains_key(&("gone".to_string(), 0)));
}

#[test]
fn plans_show_newest_first_with_moves_not_done_first() {
    let mv = |p: u32, state: &str| PlanMove {
        topic: "t".into(),
        partition: p,
        from_replicas: vec![1, 4],
        to_replicas: vec![1, 2],
        state: state.into(),
        bytes: 100,
        bytes_left: if state == "running" { 40 } else { 0 },
        ..Default::default()
    };
    let r = ListPlansResponse {
        plans: vec![
            PlanInfo {
                id: 1,
                state: "done".into(),
                ..Default::default()
            },
            PlanInfo {
                id: 2,
                kind: "drain-broker".into(),
                state: "running".into(),
                moves_total: 3,
                queued: 1,
                running: 1,
                done: 1,
                bytes_left: 140,
                brokers: vec![PlanBrokerLoad {
                    broker: 2,
                    moving_in: 1,
                    bytes_left: 40,
                    ..Default::default()
                }],
                moves: vec![mv(0, "done"), mv(1, "queued"), mv(2, "running")],
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let v = plans(&r);
    assert!(v.available);
    let ids: Vec<u64> = v.plans.iter().map(|p| p["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, vec![2, 1]);
    let p = &v.plans[0];
    assert_eq!((p["running"].as_u64(), p["bytes_left"].as_u64()), (Some(1), Some(140)));
    assert_eq!(p["brokers"][0]["moving_in"].as_u64(), Some(1));
    let order: Vec<&str> = p["moves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(order, vec!["t-2", "t-1", "t-0"]);
}
