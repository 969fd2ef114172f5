//! A broker's reports of many partitions in one request: AlterPartitions (ISR changes) and
//! AssignReplicaDirs (replicas in their named dirs). Each is decided as the request of one
//! decides it, the accepted ones are written in one transaction, and a refused one (stale,
//! unknown, named twice, under a cancel-all) changes nothing of its own.

use std::collections::HashMap;

use metastore::Client;
use prost::Message;
use proto::errors::ErrorCode;
use proto::ferry::{AlterPartitionRequest, AssignReplicaDirRequest, BrokerRegistration, PartitionState};
use proto::keys;

const INCARNATION: u64 = 7;

async fn seed(client: &Client) {
    for id in 1..=3 {
        let reg = BrokerRegistration {
            id,
            endpoint: format!("127.0.0.1:{}", 9000 + id),
            incarnation: INCARNATION,
            ..Default::default()
        };
        client.put(&keys::broker(id), reg.encode_to_vec()).await.unwrap();
    }
    for p in 0..3 {
        let st = PartitionState {
            replicas: vec![1, 2, 3],
            leader: 1,
            leader_epoch: 1,
            isr: vec![1],
            partition_epoch: 1,
            ..Default::default()
        };
        client.put(&keys::partition("t", p), st.encode_to_vec()).await.unwrap();
    }
}

fn change(p: u32, new_isr: &[i32], partition_epoch: u32) -> AlterPartitionRequest {
    let joining: HashMap<i32, u64> = new_isr.iter().filter(|b| **b != 1).map(|b| (*b, INCARNATION)).collect();
    AlterPartitionRequest {
        topic: "t".into(),
        partition: p,
        leader: 1,
        leader_epoch: 1,
        partition_epoch,
        new_isr: new_isr.to_vec(),
        joining_incarnations: joining,
    }
}

async fn stored(client: &Client, p: u32) -> (PartitionState, u64) {
    let kv = client.get(&keys::partition("t", p)).await.unwrap().unwrap();
    (PartitionState::decode(kv.value.as_ref()).unwrap(), kv.mod_revision)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_decided_per_partition_and_written_in_one_transaction() {
    let cluster = tests::Cluster::start(1).await;
    cluster.wait_leader().await;
    let client = cluster.trusted_client().await;
    seed(&client).await;
    let (_, t2_before) = stored(&client, 2).await;
    let batch = vec![
        change(0, &[1, 2], 1),
        change(1, &[1, 2, 3], 1),
        // Decided on a partition epoch that is no longer the stored one.
        change(2, &[1, 2], 0),
        change(9, &[1], 1),
        // t-0 again: decided after the batch, on its own, against what the batch wrote.
        change(0, &[1, 2, 3], 1),
    ];
    let results = controller::isr_admin::alter_partitions(&client, batch).await.unwrap();
    assert_eq!(results.len(), 5, "{results:?}");
    let codes: Vec<ErrorCode> = results.iter().map(|r| ErrorCode(r.error_code)).collect();
    assert_eq!(codes[0], ErrorCode::NONE, "{:?}", results[0]);
    assert_eq!(codes[1], ErrorCode::NONE, "{:?}", results[1]);
    assert_eq!(codes[2], ErrorCode::INVALID_UPDATE_VERSION, "{:?}", results[2]);
    assert_eq!(codes[3], ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, "{:?}", results[3]);
    assert!(results[3].error_message.contains("t-9"), "{:?}", results[3]);
    assert_eq!(codes[4], ErrorCode::INVALID_UPDATE_VERSION, "{:?}", results[4]);

    let ((t0, r0), (t1, r1), (t2, r2)) = (
        stored(&client, 0).await,
        stored(&client, 1).await,
        stored(&client, 2).await,
    );
    assert_eq!((t0.isr, t0.partition_epoch), (vec![1, 2], 2));
    assert_eq!((t1.isr, t1.partition_epoch), (vec![1, 2, 3], 2));
    assert_eq!(results[0].state.as_ref().map(|s| s.isr.clone()), Some(vec![1, 2]));
    assert_eq!(r0, r1, "the accepted changes are one transaction");
    assert_eq!((t2.isr, r2), (vec![1], t2_before), "the stale change wrote nothing");
}

#[test]
fn a_batch_over_the_limit_is_refused() {
    let n = controller::batch::MAX_BATCH + 1;
    let e = controller::batch::within_batch(n, "ISR changes").unwrap_err();
    assert_eq!(e.code, ErrorCode::INVALID_REQUEST);
    assert!(
        e.message.contains("items") && e.message.contains(&n.to_string()),
        "{}",
        e.message
    );
    assert!(controller::batch::within_batch(n - 1, "ISR changes").is_ok());
}

fn dir_report(p: u32, dir: &str) -> AssignReplicaDirRequest {
    AssignReplicaDirRequest {
        topic: "t".into(),
        partition: p,
        broker: 2,
        log_dir: dir.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dir_reports_are_decided_per_partition_written_together_and_held_under_a_cancel_all() {
    let cluster = tests::Cluster::start(1).await;
    cluster.wait_leader().await;
    let client = cluster.trusted_client().await;
    seed(&client).await;
    // Broker 2's replica of each partition has /data/b named for it.
    for p in 0..3 {
        let (mut st, _) = stored(&client, p).await;
        st.log_dirs = vec![String::new(), "/data/b".into(), String::new()];
        st.dir_pending = vec![2];
        client.put(&keys::partition("t", p), st.encode_to_vec()).await.unwrap();
    }
    let (_, t2_before) = stored(&client, 2).await;
    let batch = vec![
        dir_report(0, "/data/b"),
        dir_report(1, "/data/b/"),
        // Another dir than the one named: no change, answered with the state.
        dir_report(2, "/data/c"),
        dir_report(9, "/data/b"),
    ];
    let results = controller::reassign_dir::assign_replica_dirs(&client, batch)
        .await
        .unwrap();
    assert_eq!(results.len(), 4, "{results:?}");
    let codes: Vec<ErrorCode> = results.iter().map(|r| ErrorCode(r.error_code)).collect();
    assert_eq!(&codes[..3], &[ErrorCode::NONE; 3], "{results:?}");
    assert_eq!(codes[3], ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, "{:?}", results[3]);
    assert!(results[3].error_message.contains("t-9"), "{:?}", results[3]);
    let ((t0, r0), (t1, r1), (t2, r2)) = (
        stored(&client, 0).await,
        stored(&client, 1).await,
        stored(&client, 2).await,
    );
    assert!(t0.dir_pending.is_empty() && t1.dir_pending.is_empty(), "{t0:?} {t1:?}");
    assert_eq!(r0, r1, "the accepted reports are one transaction");
    assert_eq!(
        (t2.dir_pending, r2),
        (vec![2], t2_before),
        "a report of another dir wrote nothing"
    );
    assert_eq!(results[2].state.as_ref().map(|s| s.dir_pending.clone()), Some(vec![2]));

    // Under a cancel-all a report that would write is refused, and nothing is written.
    client.put(keys::REASSIGN_CANCEL, b"1".to_vec()).await.unwrap();
    let results = controller::reassign_dir::assign_replica_dirs(&client, vec![dir_report(2, "/data/b")])
        .await
        .unwrap();
    assert_eq!(
        ErrorCode(results[0].error_code),
        ErrorCode::REASSIGNMENT_CANCEL_IN_PROGRESS,
        "{:?}",
        results[0]
    );
    let (t2, r2) = stored(&client, 2).await;
    assert_eq!(
        (t2.dir_pending, r2),
        (vec![2], t2_before),
        "nothing written under a cancel-all"
    );
}
