//! `ferry migrate-zk` against a real ZooKeeper server loaded with a Kafka cluster's znodes:
//! import, verify, then complete one reassignment and cancel another in Ferry; malformed znodes
//! stop the import with nothing written; a re-run writes nothing; another cluster is refused.

use std::collections::BTreeMap;
use std::time::Duration;

use prost::Message;
use proto::ferry::{BrokerConfigRecord, PartitionState, TopicRecord};
use proto::keys;
use tests::reassign::snapshot;
use tests::zk::{dump, kafka_fixture, write_tree, ZkServer};
use tests::{run_ferry, wait_until, Cluster, ProcNode};

fn ferry(args: &[&str]) -> (i32, String, String) {
    tokio::task::block_in_place(|| run_ferry(args))
}

/// Runs `ferry migrate-zk` with the cluster credential, which an import needs to write the
/// cluster's own keys.
fn migrate(zk: &str, bootstrap: &str, credential: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "migrate-zk",
        "--zookeeper",
        zk,
        "--bootstrap-server",
        bootstrap,
        "--cluster-credential-file",
        credential,
    ];
    args.extend_from_slice(extra);
    // Off the runtime's threads: an in-process cluster writes the file meanwhile.
    tokio::task::block_in_place(|| {
        tests::wait_for_file(credential);
        run_ferry(&args)
    })
}

async fn get<M: Message + Default>(m: &metastore::Client, key: &str) -> Option<M> {
    let kv = m.get(key).await.expect("metastore reachable")?;
    Some(M::decode(kv.value.as_ref()).expect("decodes"))
}

/// The fixture with one znode replaced (or added).
fn fixture_with(id: &str, path: &str, data: &str) -> Vec<(String, Vec<u8>)> {
    let mut nodes: BTreeMap<String, Vec<u8>> = kafka_fixture(id).into_iter().collect();
    nodes.insert(path.to_string(), data.as_bytes().to_vec());
    nodes.into_iter().collect()
}

const NODE_ARGS: &[&str] = &[
    "--session-timeout-ms",
    "2000",
    "--replica-lag-time-max-ms",
    "2000",
    "--leader-imbalance-check-interval-ms",
    "1000",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrates_a_kafka_cluster_then_completes_and_cancels_in_ferry() {
    let zk = ZkServer::start().await;
    let zkc = zk.client().await;
    write_tree(&zkc, "/kafka", &kafka_fixture("kafka-prod-1")).await;
    let zk_before = dump(&zkc, "/kafka").await;
    let zk_addr = format!("{}/kafka", zk.addr);

    // Quorum-only nodes 11-13, and brokers with Kafka's ids; broker 3 comes later.
    let dir = tempfile::tempdir().unwrap();
    let peers: BTreeMap<u64, String> = (11..=13)
        .map(|id| (id, format!("127.0.0.1:{}", tests::free_port())))
        .collect();
    let quorum = peers.values().cloned().collect::<Vec<_>>().join(",");
    let credential = tests::credential_file(&dir.path().join("n11"));
    let mut nodes: Vec<ProcNode> = peers
        .iter()
        .map(|(id, addr)| {
            ProcNode::new(*id, addr, &dir.path().join(format!("n{id}")), &peers, false)
                .with_args(NODE_ARGS)
                .with_args(&["--roles", "quorum"])
        })
        .collect();
    let broker = |id: u64| {
        let addr = format!("127.0.0.1:{}", tests::free_port());
        ProcNode::new(
            id,
            &addr,
            &dir.path().join(format!("b{id}")),
            &Default::default(),
            false,
        )
        .with_args(NODE_ARGS)
        .with_args(&["--roles", "broker", "--quorum", &quorum])
        .with_args(&["--cluster-credential-file", &credential])
    };
    nodes.push(broker(1));
    nodes.push(broker(2));
    for n in &mut nodes {
        n.spawn();
    }
    let meta = metastore::Client::new(&peers.values().cloned().collect::<Vec<_>>()).unwrap();
    wait_until(Duration::from_secs(30), "brokers 1 and 2 to register", || async {
        meta.range(keys::BROKER_IDS, 0).await.is_ok_and(|r| r.kvs.len() == 2)
    })
    .await;

    // --dry-run prints Kafka's JSON and writes nothing.
    let empty = snapshot(&meta).await;
    let (code, out, err) = migrate(&zk_addr, &quorum, &credential, &["--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(r#"{"version":1,"partitions":[{"topic":"events","partition":0,"replicas":[2,3],"original_replicas":[2,1]},{"topic":"legacy","partition":0,"replicas":[1,3],"original_replicas":[2,1]}]}"#), "{out}");
    assert!(
        out.contains("Throttles owned by reassignments (removed when each ends): events-0: 40000 B/s"),
        "{out}"
    );
    assert!(out.contains("Topics being deleted: old"), "{out}");
    assert!(out.ends_with("Dry run: nothing was written.\n"), "{out}");
    assert_eq!(snapshot(&meta).await, empty, "a dry run writes nothing");

    let (code, out, err) = migrate(&zk_addr, &quorum, &credential, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with("Imported cluster kafka-prod-1: 4 topics (1 being deleted), 6 partitions, 2 reassignments in flight (1 with a throttle that goes with them), 1 broker configs"),
        "{out}"
    );

    let (code, out, err) = migrate(&zk_addr, &quorum, &credential, &["--verify"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("No differences"), "{out}");

    // A re-run writes nothing.
    let before = snapshot(&meta).await;
    let (code, out, err) = migrate(&zk_addr, &quorum, &credential, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("Nothing changed"), "{out}");
    assert_eq!(snapshot(&meta).await, before);

    // What was imported: Kafka's sets, the original replicas, owned throttles, configs.
    let events: PartitionState = get(&meta, &keys::partition("events", 0)).await.unwrap();
    let rec = events.reassignment.clone().expect("a move in flight keeps its record");
    assert_eq!(
        (events.replicas, events.adding, events.removing, events.throttle_rate),
        (vec![2, 3, 1], vec![3], vec![1], 40000)
    );
    // The topic znode keeps no original order: the originals are RS minus adding, as in Kafka.
    assert_eq!(
        (rec.original, rec.target, rec.throttle_rate),
        (vec![2, 1], vec![2, 3], 40000)
    );
    let topic: TopicRecord = get(&meta, &keys::topic("events")).await.unwrap();
    assert!(
        topic.config.is_empty(),
        "the owned throttle lists went: {:?}",
        topic.config
    );
    let old: TopicRecord = get(&meta, &keys::topic("old")).await.unwrap();
    assert!(old.deleting);
    let orders: TopicRecord = get(&meta, &keys::topic("orders")).await.unwrap();
    // ZooKeeper's id, in Kafka's form, is stored hyphenated.
    assert_eq!(
        proto::kafka_uuid::encode(uuid::Uuid::parse_str(&orders.topic_id).unwrap()),
        "b6yjn7dvSGaQ1JYDkG9B7w"
    );
    assert_eq!(
        orders.config.get("compression.type").map(String::as_str),
        Some("producer")
    );
    let b2: BrokerConfigRecord = get(&meta, &keys::broker_config(2)).await.unwrap();
    assert_eq!(b2.config.len(), 1, "only the log-dir rate stays: {:?}", b2.config);
    assert!(get::<BrokerConfigRecord>(&meta, &keys::broker_config(1))
        .await
        .is_none());

    let (_, out, _) = ferry(&["reassign", "--list", "--bootstrap-server", &quorum]);
    assert_eq!(
        out,
        "Current partition reassignments:\nevents-0: replicas: 2,3,1. adding: 3. removing: 1.\nlegacy-0: replicas: 1,3,2. adding: 3. removing: 2.\n"
    );

    // Cancel legacy-0: the original replicas come back in ZooKeeper's original order.
    let file = dir.path().join("legacy.json");
    std::fs::write(
        &file,
        r#"{"version":1,"partitions":[{"topic":"legacy","partition":0,"replicas":[1,3]}]}"#,
    )
    .unwrap();
    let file_s = file.to_string_lossy().into_owned();
    let (code, out, err) = ferry(&[
        "reassign",
        "--cancel",
        "--reassignment-json-file",
        &file_s,
        "--bootstrap-server",
        &quorum,
    ]);
    assert_eq!(
        (code, out.as_str()),
        (0, "Successfully cancelled partition reassignment for: legacy-0\n"),
        "{err}"
    );
    let legacy: PartitionState = get(&meta, &keys::partition("legacy", 0)).await.unwrap();
    assert_eq!(
        (legacy.replicas, legacy.adding, legacy.removing),
        (vec![2, 1], vec![], vec![])
    );

    // Broker 3 joins and catches up: events-0 completes, and its throttle goes with it.
    let mut b3 = broker(3);
    b3.spawn();
    wait_until(Duration::from_secs(60), "events-0 to complete", || async {
        get::<PartitionState>(&meta, &keys::partition("events", 0))
            .await
            .is_some_and(|s| s.replicas == [2, 3] && s.adding.is_empty() && s.throttle_rate == 0)
    })
    .await;
    let done: PartitionState = get(&meta, &keys::partition("events", 0)).await.unwrap();
    assert!(done.reassignment.is_none(), "the record goes with the move");
    let (_, out, _) = ferry(&["reassign", "--list", "--bootstrap-server", &quorum]);
    assert_eq!(out, "No partition reassignments found.\n");

    assert_eq!(dump(&zkc, "/kafka").await, zk_before, "ZooKeeper is only read");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_znodes_stop_the_import_with_nothing_written() {
    let zk = ZkServer::start().await;
    let zkc = zk.client().await;
    let cluster = Cluster::start(3).await;
    let bs = cluster.addrs.join(",");
    let cred = cluster.credential_file();
    let meta = cluster.client();
    let empty = snapshot(&meta).await;
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "/json",
            "/brokers/topics/orders",
            r#"{"version":3,"partitions":{"0":[1,2]"#,
            "error: /brokers/topics/orders: malformed JSON: ",
        ),
        (
            "/unassigned",
            "/brokers/topics/orders/partitions/0/state",
            r#"{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":3,"isr":[1,7]}"#,
            "error: /brokers/topics/orders/partitions/0/state: replica 7 is not assigned to orders-0\n",
        ),
        (
            "/version",
            "/brokers/topics/orders",
            r#"{"version":4,"partitions":{"0":[1,2],"1":[2,1]}}"#,
            "error: /brokers/topics/orders: unknown version 4; versions 1 to 3 are known\n",
        ),
        (
            "/reassign",
            "/admin/reassign_partitions",
            r#"{"version":1,"partitions":[{"topic":"legacy","partition":0,"replicas":[1,3],"original_replicas":[2,4]}]}"#,
            "error: /admin/reassign_partitions: legacy-0: the assigned replicas [1, 3, 2] are neither original_replicas [2, 4] nor the target followed by them [1, 3, 2, 4]\n",
        ),
        (
            "/reassign-json",
            "/admin/reassign_partitions",
            r#"{"version":1,"partitions":[{"topic":"legacy","partition":"zero"}]}"#,
            "error: /admin/reassign_partitions: malformed JSON: ",
        ),
        (
            "/config",
            "/config/topics/orders",
            r#"{"version":1,"config":{"min.insync.replicas":"zero"}}"#,
            "error: /config/topics/orders: invalid value \"zero\" for topic config min.insync.replicas\n",
        ),
        (
            "/removal",
            "/admin/throttled_rates_removal",
            r#"{"version":1,"brokers":"all"}"#,
            "error: /admin/throttled_rates_removal: malformed JSON: ",
        ),
        (
            "/epoch",
            "/brokers/topics/events/partitions/1/state",
            r#"{"controller_epoch":8,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}"#,
            "error: /brokers/topics/events/partitions/1/state: written by controller epoch 8, later than 7 in /controller_epoch\n",
        ),
    ];
    for (root, path, data, want) in cases {
        write_tree(&zkc, root, &fixture_with("kafka-prod-1", path, data)).await;
        let (code, out, err) = migrate(&format!("{}{root}", zk.addr), &bs, &cred, &[]);
        assert_eq!(code, 1, "{root}: {out}{err}");
        assert!(err.contains(want), "{root}: wanted {want:?} in:\n{err}");
        assert!(
            err.contains("Nothing was imported: 1 znode(s) are malformed"),
            "{root}: {err}"
        );
        assert_eq!(snapshot(&meta).await, empty, "{root}: nothing is written");
    }

    // With --skip-invalid the rest is imported, and the skipped znode is listed.
    let (code, out, err) = migrate(&format!("{}/unassigned", zk.addr), &bs, &cred, &["--skip-invalid"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with("Skipped: /brokers/topics/orders/partitions/0/state: replica 7 is not assigned to orders-0\n"),
        "{out}"
    );
    assert!(meta.get(&keys::topic("orders")).await.unwrap().is_none());
    assert!(meta.get(&keys::topic("events")).await.unwrap().is_some());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerun_imports_nothing_and_another_cluster_is_refused() {
    let zk = ZkServer::start().await;
    let zkc = zk.client().await;
    write_tree(&zkc, "/a", &kafka_fixture("cluster-a")).await;
    write_tree(&zkc, "/b", &kafka_fixture("cluster-b")).await;
    let cluster = Cluster::start(3).await;
    let bs = cluster.addrs.join(",");
    let cred = cluster.credential_file();
    let meta = cluster.client();
    let a = format!("{}/a", zk.addr);

    let (code, out, err) = migrate(&a, &bs, &cred, &[]);
    assert_eq!(code, 0, "{out}{err}");
    let after_first = snapshot(&meta).await;
    assert!(after_first.iter().any(|(k, _, _)| k == keys::CLUSTER_ID));

    for _ in 0..2 {
        let (code, out, err) = migrate(&a, &bs, &cred, &[]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(
            out.starts_with("Nothing changed: the metastore already holds cluster cluster-a"),
            "{out}"
        );
        assert_eq!(snapshot(&meta).await, after_first, "a re-run writes nothing");
    }

    let (code, out, err) = migrate(&format!("{}/b", zk.addr), &bs, &cred, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("error: /cluster/id: the metastore already holds cluster \"cluster-a\", and ZooKeeper holds cluster \"cluster-b\"; refusing to import. Nothing was written."),
        "{err}"
    );
    assert_eq!(snapshot(&meta).await, after_first);

    // --verify names each difference once Ferry's metadata moves away from ZooKeeper's.
    let trusted = cluster.trusted_client().await;
    let key = keys::partition("events", 0);
    let mut changed: PartitionState = get(&trusted, &key).await.unwrap();
    changed.reassignment.as_mut().unwrap().original = vec![1, 2];
    trusted.put(&key, changed.encode_to_vec()).await.unwrap();
    let (code, out, _) = migrate(&a, &bs, &cred, &["--verify"]);
    assert_eq!(code, 1);
    assert!(
        out.contains("/brokers/topics/events/partitions/0: in ZooKeeper {")
            && out.contains("\"original_replicas\":[2,1]"),
        "{out}"
    );
    assert!(
        out.ends_with("1 difference(s) between ZooKeeper and the metastore.\n"),
        "{out}"
    );
    let (code, _, err) = migrate(&a, &bs, &cred, &[]);
    assert_eq!(code, 1);
    assert!(
        err.contains("error: the metastore already holds an import of cluster cluster-a and 1 key(s) differ from ZooKeeper, the first: /brokers/topics/events/partitions/0."),
        "{err}"
    );
    cluster.shutdown().await;
}
