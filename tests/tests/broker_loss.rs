//! A lost broker's partitions all elect new leaders, however many there are: the active
//! controller writes a pass's changes many to a transaction, and a batch that lost a guard to a
//! change made meanwhile is written partition by partition.
//!
//! Three quorum-only nodes run as processes; the brokers are registrations only (no broker
//! process), so what is checked is the controller's decision and its writes.

use std::time::Duration;

use broker::ClusterClient;
use prost::Message;
use proto::ferry::{BrokerRegistration, CreateTopicsRequest, NewTopic, Replicas};
use tests::{wait_until, ProcNode};

const TOPIC: &str = "many";
/// More than two of the controller's batches (`controller::active::PASS_BATCH`).
const PARTITIONS: u32 = 600;

/// The (leader, ISR) of every partition of [`TOPIC`], in partition order.
async fn leaders(c: &ClusterClient) -> Vec<(i32, Vec<i32>)> {
    tests::data::partition_states(c, TOPIC)
        .await
        .expect("the topic can be described")
        .into_iter()
        .map(|(_, s)| (s.leader, s.isr))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_partition_of_a_lost_broker_elects_a_new_leader_though_some_change_meanwhile() {
    assert!(PARTITIONS as usize > 2 * controller::active::PASS_BATCH);
    let dir = tempfile::tempdir().unwrap();
    let peers = tests::loopback_peers(3);
    let mut quorum: Vec<ProcNode> = peers
        .iter()
        .map(|(id, addr)| {
            ProcNode::new(*id, addr, &dir.path().join(format!("q{id}")), &peers, false)
                .with_args(&["--roles", "quorum"])
        })
        .collect();
    for n in &mut quorum {
        n.spawn();
    }
    let endpoints: Vec<String> = peers.values().cloned().collect();
    let credential = tests::credential_file(&dir.path().join("q1"));
    tests::wait_for_file(&credential);
    let m = metastore::Client::new(&endpoints).unwrap();
    m.set_credential_file(std::path::Path::new(&credential)).unwrap();
    for id in [1, 2] {
        let reg = BrokerRegistration {
            id,
            endpoint: "127.0.0.1:1".into(),
            ..Default::default()
        };
        m.put(&proto::keys::broker(id), reg.encode_to_vec()).await.unwrap();
    }
    let c = ClusterClient::new(&endpoints)
        .unwrap()
        .with_timeout(Duration::from_secs(10));
    let req = CreateTopicsRequest {
        topics: vec![NewTopic {
            topic: TOPIC.into(),
            partitions: -1,
            replication_factor: -1,
            assignment: (0..PARTITIONS).map(|_| Replicas { brokers: vec![1, 2] }).collect(),
            config: Default::default(),
        }],
        validate_only: false,
    };
    let r = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.create_topics(req).await }
        })
        .await
        .expect("admin reachable");
    assert!(r.results.iter().all(|t| t.error_code == 0), "{r:?}");
    let before = leaders(&c).await;
    assert_eq!(before.len(), PARTITIONS as usize);
    assert!(before.iter().all(|(l, isr)| *l == 1 && *isr == [1, 2]), "{before:?}");

    // Broker 1 goes. While the controller writes its pass, a few partitions change under it
    // (their states written again as they are): a batch holding one must not leave the others
    // of the batch behind, and the changed ones are decided again.
    m.delete(&proto::keys::broker(1)).await.unwrap();
    for p in (0..PARTITIONS).step_by(97) {
        let key = proto::keys::partition(TOPIC, p);
        if let Some(kv) = m.get(&key).await.unwrap() {
            m.put(&key, kv.value).await.unwrap();
        }
    }
    wait_until(
        Duration::from_secs(60),
        "every partition led by broker 2 with ISR [2]",
        || async { leaders(&c).await.iter().all(|(l, isr)| *l == 2 && *isr == [2]) },
    )
    .await;
    for mut n in quorum {
        n.kill();
    }
}
