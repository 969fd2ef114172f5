//! The active controller's process is SIGKILLed at each moment of a reassignment: during a
//! submit, mid-copy, at completion, and during a cancel. The next controller carries on from the
//! metastore alone: nothing is lost, done twice or left stuck, and no reassignment-owned throttle
//! outlives its reassignment.

use std::time::Duration;

use broker::ClusterClient;
use proto::ferry::*;
use tests::data::{isr_is, partition_state};
use tests::reassign::{alter, create, list, produce_n, start_four, wait_all_done, Four};
use tests::wait_until;

async fn controller(c: &ClusterClient) -> i32 {
    for _ in 0..300 {
        let r = c
            .admin_call(|mut a| async move { a.describe_cluster(DescribeClusterRequest {}).await })
            .await;
        if let Some(id) = r.ok().map(|r| r.controller_id as i32).filter(|id| *id != 0) {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no active controller");
}

/// A client that talks only to node `id`, so the request is handled there.
fn client_of(f: &Four, id: i32) -> ClusterClient {
    ClusterClient::new(&[f.nodes[&id].addr.clone()])
        .unwrap()
        .with_timeout(Duration::from_secs(3))
}

async fn kill_and_restart(f: &mut Four, id: i32) {
    f.nodes.get_mut(&id).unwrap().kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    f.nodes.get_mut(&id).unwrap().spawn();
}

/// Quiet and consistent: no pending move, replicas as expected, ISR whole, no owned throttle,
/// and the stored reassignment records agree with the partitions.
async fn settled(c: &ClusterClient, p: u32, allowed: &[Vec<i32>]) -> Vec<i32> {
    wait_all_done(c, Duration::from_secs(90)).await;
    let s = partition_state(c, "f", p).await.unwrap();
    assert!(allowed.contains(&s.replicas), "partition {p} ended at {:?}", s.replicas);
    assert!(s.adding.is_empty() && s.removing.is_empty());
    assert_eq!(s.throttle_rate, 0, "an owned throttle outlived its reassignment");
    wait_until(Duration::from_secs(60), "a whole ISR", || {
        isr_is(c, "f", p, &s.replicas)
    })
    .await;
    s.replicas
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_controller_at_any_moment_leaves_nothing_stuck() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = start_four(dir.path());
    let c = f.client.clone();
    // Leaders on broker 4 (broker-only), so killing a quorum node never kills the copy source.
    create(&c, "f", vec![vec![4, 1], vec![4, 2], vec![4, 3], vec![4, 1]], &[]).await;
    for p in 0..4 {
        wait_until(Duration::from_secs(30), "ISRs", || async {
            partition_state(&c, "f", p).await.is_some_and(|s| s.isr.len() == 2)
        })
        .await;
        produce_n(&c, "f", p, 20, 10, 1000).await;
    }

    // During a submit: the request goes to the controller's node, which dies as it answers.
    let ctl = controller(&c).await;
    let victim = client_of(&f, ctl);
    let submit = tokio::spawn(async move { alter(&victim, &[("f", 0, Some(vec![4, 2]))], None).await });
    tokio::time::sleep(Duration::from_millis(5)).await;
    kill_and_restart(&mut f, ctl).await;
    let _ = submit.await;
    settled(&c, 0, &[vec![4, 1], vec![4, 2]]).await;

    // Mid-copy: a throttled move is running when the controller dies.
    let ctl = controller(&c).await;
    let r = alter(&c, &[("f", 1, Some(vec![4, 3]))], Some(40_000)).await;
    assert_eq!(r.error_code, 0, "{}", r.error_message);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        list(&c).await.reassignments.len(),
        1,
        "the throttled move ended too soon"
    );
    kill_and_restart(&mut f, ctl).await;
    assert_eq!(settled(&c, 1, &[vec![4, 3]]).await, vec![4, 3]);

    // At completion: an unthrottled move completes within moments of the submit.
    let ctl = controller(&c).await;
    let r = alter(&c, &[("f", 2, Some(vec![4, 1]))], None).await;
    assert_eq!(r.error_code, 0, "{}", r.error_message);
    kill_and_restart(&mut f, ctl).await;
    assert_eq!(settled(&c, 2, &[vec![4, 1]]).await, vec![4, 1]);

    // During a cancel: the cancel goes to the controller's node, which dies as it answers.
    let ctl = controller(&c).await;
    let r = alter(&c, &[("f", 3, Some(vec![4, 2]))], Some(20_000)).await;
    assert_eq!(r.error_code, 0, "{}", r.error_message);
    let victim = client_of(&f, ctl);
    let cancel = tokio::spawn(async move { alter(&victim, &[("f", 3, None)], None).await });
    tokio::time::sleep(Duration::from_millis(5)).await;
    kill_and_restart(&mut f, ctl).await;
    let cancelled = cancel.await.is_ok_and(|r| r.error_code == 0);
    if !cancelled {
        // The cancel may not have committed; cancelling again must work, or it already happened.
        let r = alter(&c, &[("f", 3, None)], None).await;
        assert!(
            r.error_code == 0 || list(&c).await.reassignments.is_empty(),
            "{}",
            r.error_message
        );
    }
    assert_eq!(settled(&c, 3, &[vec![4, 1]]).await, vec![4, 1]);

    // The data survived all of it.
    for p in 0..4 {
        assert_eq!(tests::data::read_all(&c, "f", p).await.len(), 200, "partition {p}");
    }
}
