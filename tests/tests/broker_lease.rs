//! Broker sessions: a broker that stops answering loses its lease, and with it its leadership,
//! within a bounded time. When it returns it truncates the tail that the new leader never had,
//! catches up, rejoins the ISR, and takes its preferred leadership back.
//!
//! Three quorum-only nodes and two broker-only nodes run as processes; brokers are frozen with
//! SIGSTOP so that their sockets stay open but nothing answers, as with a hung machine.

use std::time::{Duration, Instant};

use broker::ClusterClient;
use bytes::Bytes;
use proto::ferry::{CreateTopicsRequest, NewTopic, Replicas};
use tests::data::{isr_is, partition_state, read_all};
use tests::{wait_until, ProcNode};

const TOPIC: &str = "sessions";
const SESSION_MS: u64 = 2000;

async fn produce(c: &ClusterClient, prefix: &str, n: usize, acks: i32) {
    for i in 0..n {
        let rec = vec![Bytes::from(format!("{prefix}-{i}"))];
        let mut tries = 0;
        while let Err(e) = c.produce_once(TOPIC, 0, rec.clone(), acks).await {
            tries += 1;
            assert!(tries < 100, "producing {prefix}-{i} kept failing: {e}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_broker_loses_leadership_and_returns_truncated_and_in_sync() {
    let dir = tempfile::tempdir().unwrap();
    let peers = tests::loopback_peers(3);
    let mut quorum: Vec<ProcNode> = peers
        .iter()
        .map(|(id, addr)| {
            ProcNode::new(*id, addr, &dir.path().join(format!("q{id}")), &peers, false)
                .with_args(&["--roles", "quorum"])
        })
        .collect();
    let quorum_list = peers.values().cloned().collect::<Vec<_>>().join(",");
    let session = SESSION_MS.to_string();
    let credential = tests::credential_file(&dir.path().join("q1"));
    let broker_args = [
        "--roles",
        "broker",
        "--quorum",
        &quorum_list,
        "--session-timeout-ms",
        &session,
        "--replica-lag-time-max-ms",
        "1500",
        "--cluster-credential-file",
        &credential,
    ];
    let mut brokers: Vec<ProcNode> = [11u64, 12]
        .iter()
        .map(|id| {
            let addr = format!("127.0.0.1:{}", tests::free_port());
            ProcNode::new(
                *id,
                &addr,
                &dir.path().join(format!("b{id}")),
                &Default::default(),
                false,
            )
            .with_args(&broker_args)
        })
        .collect();
    for n in quorum.iter_mut().chain(brokers.iter_mut()) {
        n.spawn();
    }
    let c = ClusterClient::new(&peers.values().cloned().collect::<Vec<_>>())
        .unwrap()
        .with_timeout(Duration::from_secs(3));

    // Replicas [11, 12]: 11 is the preferred leader. Unclean election is allowed so that 12 can
    // lead while 11 is away, which is what makes 11's tail divergent.
    let req = CreateTopicsRequest {
        topics: vec![NewTopic {
            topic: TOPIC.into(),
            partitions: -1,
            replication_factor: -1,
            assignment: vec![Replicas { brokers: vec![11, 12] }],
            config: [("unclean.leader.election.enable".to_string(), "true".to_string())].into(),
        }],
        validate_only: false,
    };
    wait_until(
        Duration::from_secs(30),
        "both brokers registered and the topic created",
        || async {
            let req = req.clone();
            let r = c.admin_call(|mut a| {
                let req = req.clone();
                async move { a.create_topics(req).await }
            });
            r.await.is_ok_and(|r| r.results.iter().all(|t| t.error_code == 0))
        },
    )
    .await;
    wait_until(Duration::from_secs(30), "a full ISR", || {
        isr_is(&c, TOPIC, 0, &[11, 12])
    })
    .await;
    produce(&c, "common", 20, -1).await;

    // 12 goes silent: it leaves the ISR when its session ends.
    eprintln!("step: produced common");
    brokers[1].pause();
    wait_until(Duration::from_secs(30), "12 to leave the ISR", || {
        isr_is(&c, TOPIC, 0, &[11])
    })
    .await;
    // Only 11 gets these.
    produce(&c, "only-on-11", 15, 1).await;

    // 11 goes silent, 12 comes back: 12 must take over within a bounded time.
    eprintln!("step: produced only-on-11");
    brokers[0].pause();
    brokers[1].resume();
    let t0 = Instant::now();
    wait_until(Duration::from_secs(30), "12 to lead", || async {
        partition_state(&c, TOPIC, 0).await.is_some_and(|s| s.leader == 12)
    })
    .await;
    let took = t0.elapsed();
    // Session timeout plus a generous margin for a loaded machine.
    assert!(
        took < Duration::from_millis(SESSION_MS) + Duration::from_secs(15),
        "took {took:?}"
    );
    eprintln!("step: 12 leads");
    produce(&c, "after", 10, -1).await;
    eprintln!("step: produced after");

    // 11 returns: it must drop its divergent tail, catch up, rejoin the ISR, and lead again as
    // the preferred replica.
    brokers[0].resume();
    wait_until(Duration::from_secs(60), "11 back in the ISR", || {
        isr_is(&c, TOPIC, 0, &[11, 12])
    })
    .await;
    eprintln!("step: 11 in isr");
    wait_until(Duration::from_secs(60), "11 to lead again", || async {
        partition_state(&c, TOPIC, 0).await.is_some_and(|s| s.leader == 11)
    })
    .await;
    // Served by 11 now: its log must be exactly the new leader's history. A fetch of 12 parked
    // at 11 before 12 froze may have carried the first "only-on-11" records across; the rest of
    // them existed only on 11 and must be gone.
    let values: Vec<String> = read_all(&c, TOPIC, 0).await.into_iter().map(|(_, v)| v).collect();
    let common: Vec<String> = (0..20).map(|i| format!("common-{i}")).collect();
    let after: Vec<String> = (0..10).map(|i| format!("after-{i}")).collect();
    assert!(values.len() >= 30, "records were lost: {values:?}");
    assert_eq!(&values[..20], &common[..], "{values:?}");
    assert_eq!(&values[values.len() - 10..], &after[..], "{values:?}");
    let carried = &values[20..values.len() - 10];
    let expected: Vec<String> = (0..carried.len()).map(|i| format!("only-on-11-{i}")).collect();
    assert_eq!(
        carried,
        &expected[..],
        "the returning broker kept a divergent tail: {values:?}"
    );
    assert!(
        carried.len() < 15,
        "12 had every record, so nothing was truncated: {values:?}"
    );
}

/// A controlled shutdown: SIGTERM on a broker-only node that leads partitions moves every
/// leadership to another in-sync replica before the process goes, and the process always ends,
/// within 25 s: at most 2 s to deregister, 15 s of waiting for leadership to move (Kafka's 3
/// retries of 5 s), 2 s for open gRPC streams and 2 s for blocking tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_on_a_leading_broker_moves_its_leadership_and_the_process_exits() {
    let dir = tempfile::tempdir().unwrap();
    let mut four = tests::reassign::start_brokers(dir.path(), 4);
    let c = four.client.clone();
    let assignment: Vec<Vec<i32>> = (0..6).map(|i| vec![4, 1 + i % 3, 1 + (i + 1) % 3]).collect();
    tests::reassign::create(&c, "led", assignment, &[]).await;
    wait_until(
        Duration::from_secs(60),
        "broker 4 leads every partition, all in sync",
        || {
            let c = c.clone();
            async move {
                let Some(ps) = tests::data::partition_states(&c, "led").await else {
                    return false;
                };
                ps.len() == 6 && ps.iter().all(|(_, s)| s.leader == 4 && s.isr.len() == 3)
            }
        },
    )
    .await;
    let took = tokio::task::spawn_blocking(move || {
        let took = four.nodes.get_mut(&4).unwrap().terminate(Duration::from_secs(25));
        (took, four)
    })
    .await
    .unwrap();
    let (took, four) = took;
    let took = took.expect("the broker-only node exited within 25 s of SIGTERM");
    // Read at once: the leaders were moved before the process went, not after its lease ran out.
    let ps = tests::data::partition_states(&four.client, "led").await.unwrap();
    assert!(ps.iter().all(|(_, s)| s.leader != 4 && s.leader > 0), "{ps:?}");
    eprintln!("broker 4 exited {took:?} after SIGTERM");
}
