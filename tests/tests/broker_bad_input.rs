//! Bad requests to the admin and broker services: each gets Kafka's error code and a message
//! naming what is wrong, and none of them changes anything.

use std::time::Duration;

use broker::ClusterClient;
use bytes::Bytes;
use proto::errors::ErrorCode;
use proto::ferry::broker_client::BrokerClient;
use proto::ferry::*;
use tests::data::{create_topic, isr_is, read_all};
use tests::{wait_until, ProcNode};

async fn topics(c: &ClusterClient) -> Vec<TopicDescription> {
    c.admin_call(|mut a| async move { a.describe_topics(DescribeTopicsRequest { topics: vec![] }).await })
        .await
        .unwrap()
        .topics
}

async fn create_partitions(c: &ClusterClient, topic: &str, count: i32, assignment: Vec<Vec<i32>>) -> TopicResult {
    let req = CreatePartitionsRequest {
        topics: vec![PartitionCount {
            topic: topic.into(),
            count,
            assignment: assignment.into_iter().map(|brokers| Replicas { brokers }).collect(),
        }],
        validate_only: false,
    };
    c.admin_call(|mut a| {
        let req = req.clone();
        async move { a.create_partitions(req).await }
    })
    .await
    .unwrap()
    .results
    .remove(0)
}

fn expect(r: Result<(), (i32, String)>, code: ErrorCode, needle: &str) {
    let (got, msg) = r.expect_err("the request should be refused");
    assert_eq!(ErrorCode(got), code, "{msg}");
    assert!(msg.contains(needle), "message {msg:?} does not mention {needle:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_kafka_codes_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let peers = tests::loopback_peers(3);
    let mut nodes: Vec<ProcNode> = peers
        .iter()
        .map(|(id, addr)| ProcNode::new(*id, addr, &dir.path().join(format!("n{id}")), &peers, false))
        .collect();
    for n in &mut nodes {
        n.spawn();
    }
    let endpoints: Vec<String> = peers.values().cloned().collect();
    let c = ClusterClient::new(&endpoints).unwrap();
    wait_until(Duration::from_secs(30), "three brokers and a topic", || async {
        create_topic(&c, "good", 2, 3, &[("max.message.bytes", "2000")])
            .await
            .is_ok()
    })
    .await;
    create_topic(&c, "strict", 1, 1, &[("min.insync.replicas", "2")])
        .await
        .unwrap();
    wait_until(Duration::from_secs(30), "leaders", || isr_is(&c, "good", 1, &[1, 2, 3])).await;
    let before = topics(&c).await;

    // Topic creation.
    expect(
        create_topic(&c, "a/b", 1, 1, &[]).await,
        ErrorCode::INVALID_TOPIC_EXCEPTION,
        "'/'",
    );
    expect(
        create_topic(&c, "..", 1, 1, &[]).await,
        ErrorCode::INVALID_TOPIC_EXCEPTION,
        "\"..\"",
    );
    expect(
        create_topic(&c, &"x".repeat(250), 1, 1, &[]).await,
        ErrorCode::INVALID_TOPIC_EXCEPTION,
        "249",
    );
    expect(
        create_topic(&c, "t", 1, 4, &[]).await,
        ErrorCode::INVALID_REPLICATION_FACTOR,
        "larger than available brokers: 3",
    );
    expect(
        create_topic(&c, "t", 0, 1, &[]).await,
        ErrorCode::INVALID_PARTITIONS,
        "larger than 0",
    );
    expect(
        create_topic(&c, "good", 1, 1, &[]).await,
        ErrorCode::TOPIC_ALREADY_EXISTS,
        "already exists",
    );
    expect(
        create_topic(&c, "t", 1, 1, &[("bogus.config", "1")]).await,
        ErrorCode::INVALID_CONFIG,
        "bogus.config",
    );
    expect(
        create_topic(&c, "t", 1, 1, &[("min.insync.replicas", "-1")]).await,
        ErrorCode::INVALID_CONFIG,
        "min.insync.replicas",
    );

    // Partition counts.
    let r = create_partitions(&c, "good", 2, vec![]).await;
    assert_eq!(
        ErrorCode(r.error_code),
        ErrorCode::INVALID_PARTITIONS,
        "{}",
        r.error_message
    );
    let r = create_partitions(&c, "good", 4, vec![vec![1, 2, 3]]).await;
    assert_eq!(
        ErrorCode(r.error_code),
        ErrorCode::INVALID_REPLICA_ASSIGNMENT,
        "{}",
        r.error_message
    );
    let r = create_partitions(&c, "good", 3, vec![vec![1, 2, 9]]).await;
    assert_eq!(ErrorCode(r.error_code), ErrorCode::INVALID_REPLICA_ASSIGNMENT);
    assert!(r.error_message.contains("broker 9"), "{}", r.error_message);
    let r = create_partitions(&c, "good", 3, vec![vec![1, 2]]).await;
    assert_eq!(
        ErrorCode(r.error_code),
        ErrorCode::INVALID_REPLICA_ASSIGNMENT,
        "{}",
        r.error_message
    );
    let r = create_partitions(&c, "nope", 3, vec![]).await;
    assert_eq!(ErrorCode(r.error_code), ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);

    // Produce and fetch.
    let one = || vec![Bytes::from_static(b"x")];
    let code = |r: Result<i64, broker::DataError>| r.unwrap_err().code();
    assert_eq!(
        code(c.produce_once("nope", 0, one(), 1).await),
        Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
    );
    assert_eq!(
        code(c.produce_once("good", 7, one(), 1).await),
        Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
    );
    let big = vec![Bytes::from(vec![0u8; 3000])];
    let e = c.produce_once("good", 0, big, 1).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::MESSAGE_TOO_LARGE));
    assert!(e.to_string().contains("max.message.bytes 2000"), "{e}");
    let e = c.produce_once("strict", 0, one(), -1).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NOT_ENOUGH_REPLICAS));
    assert!(e.to_string().contains("min.insync.replicas 2"), "{e}");
    assert_eq!(
        code(c.produce_once("good", 0, one(), 5).await),
        Some(ErrorCode::INVALID_REQUIRED_ACKS)
    );
    assert_eq!(
        code(c.produce_once("good", 0, vec![], 1).await),
        Some(ErrorCode::INVALID_REQUEST)
    );
    let fetch = |offset| c.fetch("good", 0, offset, 1 << 20, 0);
    assert_eq!(
        fetch(-1).await.unwrap_err().code(),
        Some(ErrorCode::OFFSET_OUT_OF_RANGE)
    );
    assert_eq!(fetch(5).await.unwrap_err().code(), Some(ErrorCode::OFFSET_OUT_OF_RANGE));

    // A follower-only RPC from a stranger is refused too.
    let state = tests::data::partition_state(&c, "good", 0).await.unwrap();
    let leader_addr = &peers[&(state.leader as u64)];
    let mut b = BrokerClient::connect(format!("http://{leader_addr}")).await.unwrap();
    let r = b
        .epoch_end_offset(EpochEndOffsetRequest {
            topic: "good".into(),
            partition: 0,
            leader_epoch: state.leader_epoch + 5,
            epoch: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ErrorCode(r.error_code), ErrorCode::FENCED_LEADER_EPOCH);

    // ElectLeaders: nothing to do where the preferred replica leads; an unknown partition is named.
    let req = ElectLeadersRequest {
        partitions: vec![
            TopicPartition {
                topic: "good".into(),
                partition: 0,
            },
            TopicPartition {
                topic: "good".into(),
                partition: 9,
            },
        ],
        unclean: false,
    };
    let r = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.elect_leaders(req).await }
        })
        .await
        .unwrap();
    assert_eq!(
        ErrorCode(r.results[0].error_code),
        ErrorCode::ELECTION_NOT_NEEDED,
        "{:?}",
        r.results[0]
    );
    assert_eq!(
        ErrorCode(r.results[1].error_code),
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
    );
    assert!(r.results[1].error_message.contains("good-9"), "{:?}", r.results[1]);

    // Nothing changed: same topics, same partitions, and no record was written.
    let after = topics(&c).await;
    assert_eq!(before, after);
    assert!(read_all(&c, "good", 0).await.is_empty());
    assert!(read_all(&c, "strict", 0).await.is_empty());
}
