//! A cancel of many moving partitions while other writers keep changing some of them, as the ISR
//! changes and completions of a busy cluster do. Each partition is answered on its own, as in
//! Kafka; written as one transaction, the cancel lost every attempt to those changes and refused
//! the whole request.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proto::keys;
use proto::metastore as pb;
use tests::data::{isr_is, partition_state};
use tests::reassign::{alter, create, list, ok, start_four_with};
use tests::wait_until;

const PARTITIONS: u32 = 1000;
/// The partitions the churn rewrites.
const CHURNED: u32 = 40;
/// Writers changing them at once.
const WRITERS: u32 = 6;

/// Rewrites partition `p`'s state with its own value, guarded by the revision read, so that only
/// its revision changes (a stale value is never written back). Returns whether it was written.
async fn touch(m: &metastore::Client, p: u32) -> bool {
    let key = keys::partition("churn", p);
    let Ok(Some(kv)) = m.get(&key).await else {
        return false;
    };
    let txn = pb::TxnRequest {
        guards: vec![pb::Guard {
            key: key.clone(),
            check: Some(pb::guard::Check::ModRevision(kv.mod_revision)),
        }],
        ops: vec![pb::Op {
            op: Some(pb::op::Op::Put(pb::PutOp {
                key,
                value: kv.value,
                lease: 0,
            })),
        }],
        request_id: String::new(),
    };
    m.txn(txn).await.is_ok_and(|r| r.succeeded)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_of_many_moves_goes_through_while_some_of_them_keep_changing() {
    let dir = tempfile::tempdir().unwrap();
    // Broker 4 keeps its registration while paused, so moves to it can be submitted and never end.
    let f = start_four_with(dir.path(), &["--session-timeout-ms", "120000"]);
    let c = f.client.clone();
    create(&c, "churn", (0..PARTITIONS).map(|_| vec![1, 2]).collect(), &[]).await;
    wait_until(Duration::from_secs(60), "full ISRs", || async {
        isr_is(&c, "churn", PARTITIONS - 1, &[1, 2]).await && isr_is(&c, "churn", 0, &[1, 2]).await
    })
    .await;
    f.nodes[&4].pause();
    let moves: Vec<(&str, u32, Option<Vec<i32>>)> = (0..PARTITIONS).map(|p| ("churn", p, Some(vec![1, 4]))).collect();
    ok(&alter(&c, &moves, None).await);
    assert_eq!(list(&c).await.reassignments.len(), PARTITIONS as usize);

    // Two writers keep changing the first partitions' revisions, bounded in count and time.
    let trusted = metastore::Client::new(&f.bootstrap().split(',').map(String::from).collect::<Vec<_>>()).unwrap();
    trusted
        .set_credential_file(&dir.path().join("n1").join(metastore::credential::CREDENTIAL_FILE))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let touched = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (m, stop, touched) = (trusted.clone(), stop.clone(), touched.clone());
            tokio::spawn(async move {
                let start = Instant::now();
                for i in 0..50_000u32 {
                    if stop.load(Ordering::Relaxed) || start.elapsed() > Duration::from_secs(90) {
                        break;
                    }
                    if touch(&m, (i * WRITERS + w) % CHURNED).await {
                        touched.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    wait_until(Duration::from_secs(30), "the writers to change partitions", || async {
        touched.load(Ordering::Relaxed) >= 20
    })
    .await;

    let before = touched.load(Ordering::Relaxed);
    let cancels: Vec<(&str, u32, Option<Vec<i32>>)> = (0..PARTITIONS).map(|p| ("churn", p, None)).collect();
    let r = alter(&c, &cancels, None).await;
    let during = touched.load(Ordering::Relaxed) - before;
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    eprintln!("{during} partition changes landed while the cancel ran");
    assert_eq!(r.error_code, 0, "{}", r.error_message);
    // Only a refused partition is answered on its own.
    assert!(
        r.results.is_empty(),
        "{} not cancelled: {:?}",
        r.results.len(),
        r.results
    );
    assert!(list(&c).await.reassignments.is_empty());
    for p in 0..PARTITIONS {
        let s = partition_state(&c, "churn", p).await.unwrap();
        assert_eq!(
            (s.replicas, s.adding, s.removing),
            (vec![1, 2], vec![], vec![]),
            "churn-{p}"
        );
    }
    f.nodes[&4].resume();
}
