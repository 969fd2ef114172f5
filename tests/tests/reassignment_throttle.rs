//! A throttled move: about 100 MB moved to a new replica at 5 MB/s takes between 0.9x and 1.5x of
//! size / rate; afterwards no reassignment-owned throttle remains, and a throttle an operator set
//! by hand beforehand is still there.

use std::time::{Duration, Instant};

use bytes::Bytes;
use proto::ferry::config_resource::Type;
use proto::ferry::*;
use tests::data::{isr_is, partition_state};
use tests::reassign::{alter, config_of, create, list, ok, set_config, start_four};
use tests::wait_until;

const RATE: i64 = 5_000_000;
const BATCHES: usize = 1000;
const PER_BATCH: usize = 100;
const RECORD: usize = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_move_keeps_its_rate_and_its_throttle_goes_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let f = start_four(dir.path());
    let c = f.client.clone();
    create(&c, "big", vec![vec![1, 2]], &[]).await;
    wait_until(Duration::from_secs(30), "a full ISR", || isr_is(&c, "big", 0, &[1, 2])).await;

    // The operator's own throttle on broker 3, set before the move.
    set_config(&c, Type::Broker, "3", "leader.replication.throttled.rate", "123456789").await;

    // About 100 MB, from four producers at once.
    let value = Bytes::from(vec![b'x'; RECORD]);
    let producers: Vec<_> = (0..4)
        .map(|_| {
            let (c, value) = (c.clone(), value.clone());
            tokio::spawn(async move {
                for _ in 0..BATCHES / 4 {
                    let recs = vec![value.clone(); PER_BATCH];
                    let mut tries = 0;
                    while let Err(e) = c.produce_once("big", 0, recs.clone(), 1).await {
                        tries += 1;
                        assert!(tries < 50, "preload failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.await.unwrap();
    }
    let records = (BATCHES * PER_BATCH) as i64;
    wait_until(Duration::from_secs(60), "the follower to catch up", || async {
        c.fetch("big", 0, records, 1, 0)
            .await
            .is_ok_and(|r| r.high_watermark == records)
    })
    .await;
    let bytes = (BATCHES * (PER_BATCH * (RECORD + 4) + 32)) as f64;

    let started = Instant::now();
    ok(&alter(&c, &[("big", 0, Some(vec![1, 2, 4]))], Some(RATE)).await);
    assert_eq!(partition_state(&c, "big", 0).await.unwrap().throttle_rate, RATE as u64);

    // Progress, from the brokers: the adding replica's bytes copied and left, then a rate near
    // the throttle and an ETA once a second report exists.
    let progress = || async {
        let req = ListPartitionReassignmentsRequest {
            partitions: vec![],
            with_progress: true,
        };
        c.admin_call(|mut a| {
            let req = req.clone();
            async move { a.list_partition_reassignments(req).await }
        })
        .await
        .unwrap()
    };
    let first = progress().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let second = progress().await;
    let p = &second.reassignments[0].progress[0];
    assert_eq!(p.broker, 4);
    assert!(p.bytes_left > 0 && p.bytes_copied > 0, "{p:?}");
    assert!(
        p.bytes_copied > first.reassignments[0].progress[0].bytes_copied,
        "{first:?} then {p:?}"
    );
    assert!(
        p.rate_bytes_per_sec > RATE as u64 / 4 && p.rate_bytes_per_sec < RATE as u64 * 4,
        "{p:?}"
    );
    assert!(p.eta_ms > 0, "{p:?}");
    let (code, out, err) = tokio::task::block_in_place(|| {
        tests::run_ferry(&["reassign", "--progress", "--bootstrap-server", &f.bootstrap()])
    });
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("big-0: replica 4: ") && out.contains(" left, ") && out.contains("/s, ETA "),
        "{out}"
    );
    assert!(out.contains("Total: 1 partition moving, "), "{out}");

    wait_until(Duration::from_secs(120), "the move to finish", || async {
        list(&c).await.reassignments.is_empty()
    })
    .await;
    let took = started.elapsed().as_secs_f64();
    let expected = bytes / RATE as f64;
    let ratio = took / expected;
    eprintln!("moved {bytes} bytes in {took:.1} s at {RATE} B/s: {ratio:.2} of size/rate");
    // Only the lower bound: a slow machine may take longer, but none is faster than the throttle.
    assert!(
        ratio >= 0.9,
        "took {took:.1} s, {ratio:.2} of the {expected:.1} s expected"
    );

    let s = partition_state(&c, "big", 0).await.unwrap();
    assert_eq!(s.replicas, vec![1, 2, 4]);
    assert_eq!(s.throttle_rate, 0, "the reassignment's throttle outlived it");
    let broker3 = config_of(&c, Type::Broker, "3").await;
    assert_eq!(
        broker3.get("leader.replication.throttled.rate").map(String::as_str),
        Some("123456789"),
        "the operator's throttle was touched"
    );
}

/// The rate the throttles set by hand below hold a move to, in bytes/s.
const HAND_RATE: f64 = 4_000_000.0;

/// Moves `topic`-0 (about 20 MB on brokers 1 and 2) to [1, 2, 4] under a throttle set by hand:
/// `rate_key` at [`HAND_RATE`] on `broker`, and the topic's `list_key` set to `replicas`. Returns
/// the move's time over size/rate.
async fn move_under_hand_throttle(
    c: &broker::ClusterClient,
    topic: &str,
    broker: &str,
    rate_key: &str,
    list_key: &str,
    replicas: &str,
) -> f64 {
    create(c, topic, vec![vec![1, 2]], &[]).await;
    wait_until(Duration::from_secs(30), "a full ISR", || isr_is(c, topic, 0, &[1, 2])).await;
    tests::reassign::produce_n(c, topic, 0, 200, 100, 1000).await; // about 20 MB
    let size = log_size(c, 1, topic).await;
    assert!(size > 10_000_000, "{size}");
    set_config(c, Type::Broker, broker, rate_key, &(HAND_RATE as u64).to_string()).await;
    set_config(c, Type::Topic, topic, list_key, replicas).await;
    tokio::time::sleep(Duration::from_secs(1)).await; // the brokers follow config changes

    let started = Instant::now();
    ok(&alter(c, &[(topic, 0, Some(vec![1, 2, 4]))], None).await);
    wait_until(Duration::from_secs(120), "the move to finish", || async {
        list(c).await.reassignments.is_empty()
    })
    .await;
    let took = started.elapsed().as_secs_f64();
    let ratio = took / (size as f64 / HAND_RATE);
    eprintln!("moved {size} bytes in {took:.1} s under {rate_key} {HAND_RATE} B/s: {ratio:.2}");
    ratio
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_throttle_set_by_hand_holds_the_new_replica_back_and_stays() {
    let dir = tempfile::tempdir().unwrap();
    let f = start_four(dir.path());
    let c = f.client.clone();
    // The operator's follower-side throttle: on broker 4, for replica 4 of fol-0.
    let ratio = move_under_hand_throttle(
        &c,
        "fol",
        "4",
        "follower.replication.throttled.rate",
        "follower.replication.throttled.replicas",
        "0:4",
    )
    .await;
    // Only the lower bound, as above.
    assert!(ratio >= 0.9, "{ratio:.2} of size/rate");
    // Set by hand, so still there after the move.
    let topic = config_of(&c, Type::Topic, "fol").await;
    assert_eq!(
        topic.get("follower.replication.throttled.replicas").map(String::as_str),
        Some("0:4")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_throttle_set_by_hand_on_the_source_replicas_holds_the_new_replica_back() {
    let dir = tempfile::tempdir().unwrap();
    let f = start_four(dir.path());
    // As Kafka's tool writes it: the leader list names the replicas the data comes from (the
    // leader, broker 1, among them), not the one being added.
    let ratio = move_under_hand_throttle(
        &f.client,
        "lead",
        "1",
        "leader.replication.throttled.rate",
        "leader.replication.throttled.replicas",
        "0:1,0:2",
    )
    .await;
    // Only the lower bound: a slow machine may take longer, but no machine is faster than the
    // throttle lets it be.
    assert!(ratio >= 0.8, "{ratio:.2} of size/rate: the throttle did not hold");
}

/// The bytes of `topic` in `broker`'s log dirs.
async fn log_size(c: &broker::ClusterClient, broker: i32, topic: &str) -> u64 {
    c.describe_log_dirs(&[broker], &[topic.to_string()])
        .await
        .unwrap()
        .iter()
        .flat_map(|b| &b.dirs)
        .flat_map(|d| &d.replicas)
        .map(|r| r.size)
        .sum()
}

async fn alter_throttles(c: &broker::ClusterClient, req: AlterThrottlesRequest) -> AlterThrottlesResponse {
    c.admin_call(|mut a| {
        let req = req.clone();
        async move { a.alter_throttles(req).await }
    })
    .await
    .expect("admin reachable")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_remove_throttles_go_when_their_reassignment_ends_and_hand_kept_ones_stay() {
    const FOLLOWER_RATE: f64 = 2_000_000.0;
    let dir = tempfile::tempdir().unwrap();
    let f = start_four(dir.path());
    let c = f.client.clone();
    create(&c, "au", vec![vec![1, 2]], &[]).await;
    wait_until(Duration::from_secs(30), "a full ISR", || isr_is(&c, "au", 0, &[1, 2])).await;
    tests::reassign::produce_n(&c, "au", 0, 60, 100, 1000).await; // about 6 MB

    // Bad requests: each refused with the entry named, and nothing changes.
    let before = tests::reassign::snapshot(&f.meta).await;
    let broker = |broker, rate| BrokerThrottle {
        broker,
        leader_rate: None,
        follower_rate: Some(rate),
        auto_remove: true,
    };
    for (req, code, why) in [
        (
            AlterThrottlesRequest {
                brokers: vec![broker(4, 1000), broker(9, 1000)],
                ..Default::default()
            },
            8,
            "broker 9: not a registered broker",
        ),
        (
            AlterThrottlesRequest {
                brokers: vec![broker(4, -1)],
                ..Default::default()
            },
            1000,
            "broker 4: follower_rate: -1 bytes/s",
        ),
        (
            AlterThrottlesRequest {
                topics: vec![TopicThrottle {
                    topic: "nope".into(),
                    follower_replicas: Some("0:4".into()),
                    ..Default::default()
                }],
                ..Default::default()
            },
            3,
            "topic \"nope\": does not exist",
        ),
    ] {
        let r = alter_throttles(&c, req).await;
        assert_eq!(r.error_code, code, "{r:?}");
        assert!(
            r.error_message.contains(why) && r.error_message.contains("nothing was changed"),
            "{r:?}"
        );
    }
    assert_eq!(
        tests::reassign::snapshot(&f.meta).await,
        before,
        "a refused request changed nothing"
    );

    // Auto-remove: a follower throttle for the new replica on broker 4. Hand-kept: a leader rate
    // on broker 3, which no reassignment here touches, and one on broker 1, which one does.
    let r = alter_throttles(
        &c,
        AlterThrottlesRequest {
            brokers: vec![
                broker(4, FOLLOWER_RATE as i64),
                BrokerThrottle {
                    broker: 1,
                    leader_rate: Some(888_888_888),
                    follower_rate: None,
                    auto_remove: false,
                },
            ],
            topics: vec![TopicThrottle {
                topic: "au".into(),
                leader_replicas: None,
                follower_replicas: Some("0:4".into()),
                auto_remove: true,
            }],
            validate_only: false,
        },
    )
    .await;
    assert_eq!(r.error_code, 0, "{r:?}");
    let bs = f.bootstrap();
    let (code, out, err) = tokio::task::block_in_place(|| {
        tests::run_ferry(&[
            "throttles",
            "--brokers",
            "3",
            "--leader-rate",
            "999999",
            "--bootstrap-server",
            &bs,
        ])
    });
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("The throttles were set; they stay until changed."),
        "{out}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Nothing moves yet, so nothing is removed: the throttle waits for its reassignment.
    let four = config_of(&c, Type::Broker, "4").await;
    assert_eq!(
        four.get("follower.replication.throttled.rate").map(String::as_str),
        Some("2000000")
    );

    let size = log_size(&c, 1, "au").await;
    let started = Instant::now();
    ok(&alter(&c, &[("au", 0, Some(vec![1, 2, 4]))], None).await);
    wait_until(Duration::from_secs(120), "the move to finish", || async {
        list(&c).await.reassignments.is_empty()
    })
    .await;
    let took = started.elapsed().as_secs_f64();
    let ratio = took / (size as f64 / FOLLOWER_RATE);
    eprintln!("moved {size} bytes in {took:.1} s under an auto-remove {FOLLOWER_RATE} B/s throttle: {ratio:.2}");
    assert!(ratio >= 0.8, "the throttle held the move back: {ratio:.2} of size/rate");

    wait_until(Duration::from_secs(30), "the auto-remove throttles to go", || async {
        let four = config_of(&c, Type::Broker, "4").await;
        let topic = config_of(&c, Type::Topic, "au").await;
        !four.contains_key("follower.replication.throttled.rate")
            && !topic.contains_key("follower.replication.throttled.replicas")
    })
    .await;
    let three = config_of(&c, Type::Broker, "3").await;
    assert_eq!(
        three.get("leader.replication.throttled.rate").map(String::as_str),
        Some("999999")
    );
    let one = config_of(&c, Type::Broker, "1").await;
    assert_eq!(
        one.get("leader.replication.throttled.rate").map(String::as_str),
        Some("888888888")
    );
}
