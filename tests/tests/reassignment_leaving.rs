//! A replica on its way out (being removed) and not in the ISR copies nothing: a throttled move
//! [1,2,3] -> [4,5,6] superseded by [1,2,4] leaves replicas 5 and 6 in the replica set as
//! removing replicas that are out of sync. Their logs stop growing and they never join the ISR,
//! while the new adding replica 4 keeps copying under the throttle. A third target that wants 5
//! again makes it copy again, and the move completes.

use std::time::Duration;

use broker::ClusterClient;
use tests::data::{isr_is, partition_state};
use tests::reassign::{alter, create, ok, produce_n, start_brokers, wait_all_done};
use tests::wait_until;

/// Bytes per second of the moves' throttle.
const THROTTLE: i64 = 20_000;

/// The bytes of `topic` on `broker`.
async fn size(c: &ClusterClient, broker: i32, topic: &str) -> u64 {
    c.describe_log_dirs(&[broker], &[topic.to_string()])
        .await
        .unwrap_or_default()
        .iter()
        .flat_map(|b| &b.dirs)
        .flat_map(|d| &d.replicas)
        .map(|r| r.size)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_leaving_out_of_sync_copies_nothing_until_it_is_wanted_again() {
    let dir = tempfile::tempdir().unwrap();
    let f = start_brokers(dir.path(), 6);
    let c = f.client.clone();
    create(&c, "t", vec![vec![1, 2, 3]], &[]).await;
    wait_until(Duration::from_secs(30), "a full ISR", || isr_is(&c, "t", 0, &[1, 2, 3])).await;
    // About 2 MB in batches of about 10 kB, so a throttled copy grows in small steps.
    produce_n(&c, "t", 0, 200, 10, 1000).await;
    let leader = partition_state(&c, "t", 0).await.unwrap().leader;
    let full = size(&c, leader, "t").await;
    assert!(full > 1_500_000, "{full}");

    ok(&alter(&c, &[("t", 0, Some(vec![4, 5, 6]))], Some(THROTTLE)).await);
    wait_until(Duration::from_secs(60), "replicas 5 and 6 to start copying", || async {
        size(&c, 5, "t").await > 0 && size(&c, 6, "t").await > 0
    })
    .await;

    // Superseded: 5 and 6 are no longer added, but stay in the replica set until the move ends.
    ok(&alter(&c, &[("t", 0, Some(vec![1, 2, 4]))], Some(THROTTLE)).await);
    let s = partition_state(&c, "t", 0).await.unwrap();
    assert_eq!(s.replicas, vec![1, 2, 4, 5, 6, 3], "{s:?}");
    assert_eq!(
        (s.adding.clone(), s.removing.clone()),
        (vec![4], vec![5, 6, 3]),
        "{s:?}"
    );
    let out_of_isr = || async {
        let s = partition_state(&c, "t", 0).await.unwrap();
        assert!(
            !s.isr.contains(&5) && !s.isr.contains(&6),
            "a leaving replica joined the ISR: {s:?}"
        );
    };

    // Their sizes settle (a fetch under way when the brokers learnt of the change may land).
    let mut settled = None;
    let mut last = (u64::MAX, u64::MAX);
    let mut same = 0;
    for _ in 0..60 {
        out_of_isr().await;
        let now = (size(&c, 5, "t").await, size(&c, 6, "t").await);
        same = if now == last { same + 1 } else { 0 };
        last = now;
        if same == 3 {
            settled = Some(now);
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (five, six) = settled.expect("the leaving replicas' logs kept growing");
    assert!(five < full && six < full, "{five} and {six} of {full}: they caught up");

    // While replica 4 copies on, 5 and 6 copy nothing and stay out of the ISR.
    let four = size(&c, 4, "t").await;
    wait_until(Duration::from_secs(60), "replica 4 to copy on", || async {
        out_of_isr().await;
        assert_eq!(size(&c, 5, "t").await, five, "replica 5 copied while leaving");
        assert_eq!(size(&c, 6, "t").await, six, "replica 6 copied while leaving");
        size(&c, 4, "t").await >= four + 3 * THROTTLE as u64
    })
    .await;
    let s = partition_state(&c, "t", 0).await.unwrap();
    assert!(s.removing.contains(&5) && s.removing.contains(&6), "{s:?}");

    // Wanted again, unthrottled: 5 copies again, and the move completes with it in sync.
    ok(&alter(&c, &[("t", 0, Some(vec![1, 2, 5]))], None).await);
    wait_all_done(&c, Duration::from_secs(60)).await;
    let s = partition_state(&c, "t", 0).await.unwrap();
    assert_eq!(s.replicas, vec![1, 2, 5], "{s:?}");
    assert!(s.isr.contains(&5), "{s:?}");
    assert_eq!(size(&c, 5, "t").await, size(&c, s.leader, "t").await);
}
