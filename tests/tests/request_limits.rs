//! Request limits on a `ferry node` process: a request over a limit is refused with Kafka's
//! POLICY_VIOLATION or INVALID_REQUEST and a message naming the limit and its value, nothing is
//! written, and the node goes on serving. One node runs with the defaults (and the CLI), one with
//! every limit set small by flag.

use std::time::Duration;

use broker::ClusterClient;
use proto::errors::ErrorCode;
use proto::ferry::*;
use tests::data::create_topic;
use tests::{run_ferry, wait_until, ProcNode};

/// Starts one quorum-and-broker node with `args` and waits until it can create a topic.
async fn node(dir: &std::path::Path, args: &[&str]) -> (ProcNode, ClusterClient, String) {
    let peers = tests::loopback_peers(1);
    let (id, addr) = peers.iter().next().map(|(i, a)| (*i, a.clone())).unwrap();
    let mut n = ProcNode::new(id, &addr, &dir.join("n1"), &peers, false).with_args(args);
    n.spawn();
    let c = ClusterClient::new(std::slice::from_ref(&addr)).unwrap();
    wait_until(Duration::from_secs(30), "the broker registered", || async {
        create_topic(&c, "good", 1, 1, &[]).await.is_ok()
    })
    .await;
    (n, c, addr)
}

async fn topic_names(c: &ClusterClient) -> Vec<String> {
    let r = c
        .admin_call(|mut a| async move { a.describe_topics(DescribeTopicsRequest { topics: vec![] }).await })
        .await
        .unwrap();
    r.topics.into_iter().map(|t| t.topic).collect()
}

async fn create(c: &ClusterClient, topics: Vec<NewTopic>) -> CreateTopicsResponse {
    let req = CreateTopicsRequest {
        topics,
        validate_only: false,
    };
    c.admin_call(|mut a| {
        let req = req.clone();
        async move { a.create_topics(req).await }
    })
    .await
    .unwrap()
}

fn new_topic(name: &str, partitions: i32, rf: i32) -> NewTopic {
    NewTopic {
        topic: name.into(),
        partitions,
        replication_factor: rf,
        ..Default::default()
    }
}

fn expect(code: i32, message: &str, want: ErrorCode, text: &str) {
    assert_eq!(ErrorCode(code), want, "{message}");
    assert_eq!(message, text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_defaults_refuse_a_hundred_million_partitions_and_the_node_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let (_node, c, addr) = node(dir.path(), &[]).await;
    let r = create(&c, vec![new_topic("huge", 100_000_000, 1)]).await;
    expect(
        r.results[0].error_code,
        &r.results[0].error_message,
        ErrorCode::POLICY_VIOLATION,
        "partitions: 100000000 is over max.partitions.per.topic (1000000)",
    );
    let (code, _, err) = run_ferry(&[
        "topics",
        "--bootstrap-server",
        &addr,
        "--create",
        "--topic",
        "huge",
        "--partitions",
        "1000000000",
    ]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        err.trim(),
        "Error while executing topic command : partitions: 1000000000 is over max.partitions.per.topic (1000000)"
    );
    assert_eq!(topic_names(&c).await, ["good"], "nothing was created");
    // Still serving: a topic within the limits is created and described.
    create_topic(&c, "next", 3, 1, &[]).await.unwrap();
    assert_eq!(topic_names(&c).await, ["good", "next"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_limit_is_set_by_flag_and_checked_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (_node, c, _) = node(
        dir.path(),
        &[
            "--max-partitions-per-topic",
            "100",
            "--max-partitions-per-request",
            "150",
            "--max-replicas-per-partition",
            "3",
            "--max-items-per-request",
            "4",
            "--socket-request-max-bytes",
            "65536",
        ],
    )
    .await;

    // CreateTopics: one topic's own limits, in its result.
    let r = create(&c, vec![new_topic("a", 101, 1)]).await;
    let t = &r.results[0];
    expect(
        t.error_code,
        &t.error_message,
        ErrorCode::POLICY_VIOLATION,
        "partitions: 101 is over max.partitions.per.topic (100)",
    );
    let r = create(&c, vec![new_topic("a", 1, 4)]).await;
    let t = &r.results[0];
    expect(
        t.error_code,
        &t.error_message,
        ErrorCode::POLICY_VIOLATION,
        "replication factor: 4 is over max.replicas.per.partition (3)",
    );
    // Within the replica limit but over the registered brokers: Kafka's code and message.
    let r = create(&c, vec![new_topic("a", 1, 2)]).await;
    let t = &r.results[0];
    expect(
        t.error_code,
        &t.error_message,
        ErrorCode::INVALID_REPLICATION_FACTOR,
        "Replication factor: 2 larger than available brokers: 1.",
    );
    // The request as a whole: refused at the top, no topic created, not even the small one.
    let r = create(&c, vec![new_topic("a", 100, 1), new_topic("b", 51, 1)]).await;
    assert!(r.results.is_empty());
    expect(
        r.error_code,
        &r.error_message,
        ErrorCode::INVALID_REQUEST,
        "topics: 151 partitions in one request is over max.partitions.per.request (150)",
    );
    let five: Vec<NewTopic> = (0..5).map(|i| new_topic(&format!("t{i}"), 1, 1)).collect();
    let r = create(&c, five).await;
    expect(
        r.error_code,
        &r.error_message,
        ErrorCode::INVALID_REQUEST,
        "topics: 5 in one request is over max.items.per.request (4)",
    );

    // CreatePartitions: the new total.
    let req = CreatePartitionsRequest {
        topics: vec![PartitionCount {
            topic: "good".into(),
            count: 1_000_000_000,
            assignment: vec![],
        }],
        validate_only: false,
    };
    let r = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.create_partitions(req).await }
        })
        .await
        .unwrap();
    expect(
        r.error_code,
        &r.error_message,
        ErrorCode::POLICY_VIOLATION,
        "good: partitions: 1000000000 is over max.partitions.per.topic (100)",
    );

    // AlterPartitionReassignments: partitions per request, replicas per partition.
    let targets = |n: u32, replicas: Vec<i32>| AlterPartitionReassignmentsRequest {
        partitions: (0..n)
            .map(|p| ReassignmentTarget {
                topic: "good".into(),
                partition: p,
                replicas: Some(Replicas {
                    brokers: replicas.clone(),
                }),
                log_dirs: vec![],
            })
            .collect(),
        throttle_rate: None,
        validate_only: false,
    };
    for (req, code, text) in [
        (
            targets(151, vec![1]),
            ErrorCode::INVALID_REQUEST,
            "partitions: 151 partitions in one request is over max.partitions.per.request (150)",
        ),
        (
            targets(1, vec![1, 2, 3, 4]),
            ErrorCode::POLICY_VIOLATION,
            "good-0: replicas: 4 is over max.replicas.per.partition (3)",
        ),
    ] {
        let r = c
            .admin_call(|mut a| {
                let req = req.clone();
                async move { a.alter_partition_reassignments(req).await }
            })
            .await
            .unwrap();
        expect(r.error_code, &r.error_message, code, text);
    }

    // List-like requests: items per request.
    let r = c
        .admin_call(|mut a| async move {
            let topics = (0..5).map(|i| format!("t{i}")).collect();
            a.delete_topics(DeleteTopicsRequest { topics }).await
        })
        .await
        .unwrap();
    expect(
        r.error_code,
        &r.error_message,
        ErrorCode::INVALID_REQUEST,
        "topics: 5 in one request is over max.items.per.request (4)",
    );
    let r = c
        .admin_call(|mut a| async move {
            let resources = vec![ConfigResource::default(); 5];
            a.describe_configs(DescribeConfigsRequest { resources }).await
        })
        .await
        .unwrap();
    assert_eq!(
        ErrorCode(r.error_code),
        ErrorCode::INVALID_REQUEST,
        "{}",
        r.error_message
    );
    let r = c
        .admin_call(|mut a| async move {
            let req = AlterConfigsRequest {
                resource: Some(ConfigResource {
                    r#type: 0,
                    name: "good".into(),
                }),
                delete: (0..5).map(|i| format!("k{i}")).collect(),
                ..Default::default()
            };
            a.alter_configs(req).await
        })
        .await
        .unwrap();
    expect(
        r.error_code,
        &r.error_message,
        ErrorCode::INVALID_REQUEST,
        "configs: 5 in one request is over max.items.per.request (4)",
    );

    // Bytes: a request larger than socket.request.max.bytes is not even read.
    let mut big = new_topic("big", 1, 1);
    big.config.insert("cleanup.policy".into(), "x".repeat(100_000));
    let req = CreateTopicsRequest {
        topics: vec![big],
        validate_only: false,
    };
    let e = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.create_topics(req).await }
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::INVALID_REQUEST), "{e}");
    assert!(e.to_string().contains("socket.request.max.bytes"), "{e}");

    assert_eq!(topic_names(&c).await, ["good"], "nothing was created");
    // Still serving, and requests at the limits pass.
    let r = create(&c, vec![new_topic("a", 100, 1), new_topic("b", 50, 1)]).await;
    assert!(
        r.error_code == 0 && r.results.iter().all(|t| t.error_code == 0),
        "{r:?}"
    );
    assert_eq!(topic_names(&c).await, ["a", "b", "good"]);
}
