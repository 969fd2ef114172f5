//! Helpers for reassignment tests: submit, cancel, list, and a whole-metastore snapshot.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use broker::ClusterClient;
use bytes::Bytes;
use proto::errors::ErrorCode;
use proto::ferry::*;

/// Submits targets (`None` cancels that partition) with an optional throttle.
pub async fn alter(
    c: &ClusterClient,
    moves: &[(&str, u32, Option<Vec<i32>>)],
    throttle: Option<i64>,
) -> AlterPartitionReassignmentsResponse {
    let req = AlterPartitionReassignmentsRequest {
        partitions: moves
            .iter()
            .map(|(t, p, r)| ReassignmentTarget {
                topic: t.to_string(),
                partition: *p,
                replicas: r.clone().map(|brokers| Replicas { brokers }),
                log_dirs: vec![],
            })
            .collect(),
        throttle_rate: throttle,
        validate_only: false,
    };
    c.admin_call(|mut a| {
        let req = req.clone();
        async move { a.alter_partition_reassignments(req).await }
    })
    .await
    .expect("admin reachable")
}

/// The ongoing reassignments.
pub async fn list(c: &ClusterClient) -> ListPartitionReassignmentsResponse {
    c.admin_call(|mut a| async move {
        a.list_partition_reassignments(ListPartitionReassignmentsRequest::default())
            .await
    })
    .await
    .expect("admin reachable")
}

/// Waits until no reassignment is pending.
pub async fn wait_all_done(c: &ClusterClient, timeout: Duration) {
    crate::wait_until(timeout, "every reassignment to complete", || async {
        list(c).await.reassignments.is_empty()
    })
    .await;
}

/// Every key and value in the metastore, to compare before and after a refused request.
pub async fn snapshot(m: &metastore::Client) -> Vec<(String, Vec<u8>, u64)> {
    let r = m
        .range_req(proto::metastore::RangeRequest {
            prefix: "/".into(),
            ..Default::default()
        })
        .await
        .expect("metastore reachable");
    r.kvs
        .into_iter()
        .filter(|kv| !kv.key.starts_with("/brokers/ids/") && kv.key != "/controller")
        .map(|kv| (kv.key, kv.value.to_vec(), kv.mod_revision))
        .collect()
}

/// Replica folders of `<topic>-<p>` under a data dir, at any depth below its log dirs.
pub fn replica_dirs(root: &std::path::Path, topic: &str, p: u32) -> Vec<std::path::PathBuf> {
    let name = format!("{topic}-{p}");
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = e.path();
            if e.file_name().to_string_lossy() == name {
                out.push(path);
            } else if path.is_dir() && !path.join("leader-epoch-checkpoint").exists() {
                stack.push(path);
            }
        }
    }
    out
}

/// Flags of every test node.
const ARGS: &[&str] = &[
    "--session-timeout-ms",
    "2000",
    "--replica-lag-time-max-ms",
    "2000",
    "--leader-imbalance-check-interval-ms",
    "1000",
];

/// [`ARGS`] without the flags (and their values) that `extra` gives itself: a flag may be given
/// only once.
fn base_args<'a>(extra: &[&str]) -> Vec<&'a str> {
    ARGS.chunks(2)
        .filter(|flag| !extra.contains(&flag[0]))
        .flatten()
        .copied()
        .collect()
}

/// Three quorum-and-broker nodes (1-3) and broker-only nodes from 4 (only 4 unless started
/// with [`start_brokers`]), as processes.
pub struct Four {
    /// The processes by id.
    pub nodes: BTreeMap<i32, crate::ProcNode>,
    /// Admin and data client.
    pub client: ClusterClient,
    /// Metastore client.
    pub meta: metastore::Client,
}

/// Starts the four nodes with short session and lag timeouts.
pub fn start_four(dir: &Path) -> Four {
    start_four_with(dir, &[])
}

/// Starts the four nodes, with extra flags for broker 4.
pub fn start_four_with(dir: &Path, four_args: &[&str]) -> Four {
    start_four_each(dir, |id| {
        if id == 4 {
            four_args.iter().map(|a| a.to_string()).collect()
        } else {
            Vec::new()
        }
    })
}

/// Starts the four nodes, with `extra(id)` flags for each.
pub fn start_four_each(dir: &Path, extra: impl Fn(i32) -> Vec<String>) -> Four {
    start_each(dir, 4, extra)
}

/// Starts nodes 1-3 (quorum and broker) and broker-only nodes 4..=`brokers`.
pub fn start_brokers(dir: &Path, brokers: i32) -> Four {
    start_each(dir, brokers, |_| Vec::new())
}

fn start_each(dir: &Path, brokers: i32, extra: impl Fn(i32) -> Vec<String>) -> Four {
    let peers = crate::loopback_peers(3);
    let quorum = peers.values().cloned().collect::<Vec<_>>();
    let mut nodes: BTreeMap<i32, crate::ProcNode> = peers
        .iter()
        .map(|(id, addr)| {
            let args = extra(*id as i32);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let n = crate::ProcNode::new(*id, addr, &dir.join(format!("n{id}")), &peers, false)
                .with_args(&base_args(&args))
                .with_args(&args);
            (*id as i32, n)
        })
        .collect();
    let q = quorum.join(",");
    for id in 4..=brokers {
        let addr = format!("127.0.0.1:{}", crate::free_port());
        let args = extra(id);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let node = crate::ProcNode::new(
            id as u64,
            &addr,
            &dir.join(format!("n{id}")),
            &Default::default(),
            false,
        )
        .with_args(&base_args(&args))
        .with_args(&["--roles", "broker", "--quorum", &q])
        .with_args(&["--cluster-credential-file", &crate::credential_file(&dir.join("n1"))])
        .with_args(&args);
        nodes.insert(id, node);
    }
    for n in nodes.values_mut() {
        n.spawn();
    }
    // Brokers register once they know the cluster credential; tests name the broker-only
    // brokers in their first moves, so wait for all of them.
    let bootstrap = quorum.join(",");
    let want = brokers.max(3) as usize;
    for _ in 0..600 {
        let (code, out, _) = crate::run_ferry(&["kv", "range", "/brokers/ids/", "--bootstrap-server", &bootstrap]);
        if code == 0 && out.lines().filter(|l| l.starts_with("/brokers/ids/")).count() >= want {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The tests' admin client calls as the cluster, as an operator with the credential file
    // does: a node under an authorizer admits nobody else until ACLs say so.
    let cluster = metastore::Client::new(&quorum).unwrap();
    if let Err(e) = cluster.set_credential_file(Path::new(&crate::credential_file(&dir.join("n1")))) {
        eprintln!("no cluster credential yet for the tests' admin client: {e}");
    }
    let identity = broker::auth::call_identity::CallIdentity::credential(cluster.credential_interceptor());
    Four {
        nodes,
        client: ClusterClient::new(&quorum)
            .unwrap()
            .with_timeout(Duration::from_secs(5))
            .with_identity(identity),
        meta: metastore::Client::new(&quorum).unwrap(),
    }
}

/// Creates a topic with an explicit assignment, waiting for the brokers to register.
pub async fn create(c: &ClusterClient, topic: &str, assignment: Vec<Vec<i32>>, config: &[(&str, &str)]) {
    let req = CreateTopicsRequest {
        topics: vec![NewTopic {
            topic: topic.into(),
            partitions: -1,
            replication_factor: -1,
            assignment: assignment.into_iter().map(|brokers| Replicas { brokers }).collect(),
            config: config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }],
        validate_only: false,
    };
    crate::wait_until(
        Duration::from_secs(30),
        "the brokers to register and the topic to exist",
        || async {
            let req = req.clone();
            let r = c
                .admin_call(|mut a| {
                    let req = req.clone();
                    async move { a.create_topics(req).await }
                })
                .await;
            r.is_ok_and(|r| {
                r.results
                    .iter()
                    .all(|t| t.error_code == 0 || t.error_code == ErrorCode::TOPIC_ALREADY_EXISTS.0)
            })
        },
    )
    .await;
}

impl Four {
    /// `--bootstrap-server` for the CLI: the quorum nodes.
    pub fn bootstrap(&self) -> String {
        self.nodes
            .values()
            .take(3)
            .map(|n| n.addr.clone())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Produces `batches` batches of `per` records of about `size` bytes at acks=all.
pub async fn produce_n(c: &ClusterClient, topic: &str, p: u32, batches: usize, per: usize, size: usize) {
    for b in 0..batches {
        let recs: Vec<Bytes> = (0..per)
            .map(|i| Bytes::from(format!("{b}-{i}-{}", "x".repeat(size))))
            .collect();
        let mut tries = 0;
        while let Err(e) = c.produce_once(topic, p, recs.clone(), -1).await {
            tries += 1;
            assert!(tries < 100, "produce kept failing: {e}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Asserts that a reassignment request was accepted.
pub fn ok(r: &AlterPartitionReassignmentsResponse) {
    assert_eq!(r.error_code, 0, "{}: {:?}", r.error_message, r.results);
}

/// Sets one config of a broker or topic through AlterConfigs.
pub async fn set_config(c: &ClusterClient, kind: config_resource::Type, name: &str, key: &str, value: &str) {
    let req = AlterConfigsRequest {
        resource: Some(ConfigResource {
            r#type: kind as i32,
            name: name.into(),
        }),
        set: [(key.to_string(), value.to_string())].into(),
        delete: vec![],
        validate_only: false,
        ops: vec![],
    };
    let r = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.alter_configs(req).await }
        })
        .await
        .unwrap();
    assert_eq!(r.error_code, 0, "{}", r.error_message);
}

/// The configs of a broker or topic, through DescribeConfigs.
pub async fn config_of(
    c: &ClusterClient,
    kind: config_resource::Type,
    name: &str,
) -> std::collections::HashMap<String, String> {
    let req = DescribeConfigsRequest {
        resources: vec![ConfigResource {
            r#type: kind as i32,
            name: name.into(),
        }],
    };
    let mut d = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.describe_configs(req).await }
        })
        .await
        .unwrap();
    d.results.remove(0).config
}
