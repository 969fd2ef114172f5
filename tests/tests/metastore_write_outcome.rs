//! A failed write says whether it may have applied: one refused before it reached the leader's
//! log is "not applied", so a client can act on it; one a lone leader could not commit is
//! answered "maybe applied" within its deadline, not held forever.

use metastore::{ClientError, NOT_APPLIED, WRITE_OUTCOME};
use proto::metastore as pb;
use tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_cannot_reach_a_leader_is_answered_not_applied() {
    tests::init_logging();
    let (c, survivor) = one_node_left(false).await;
    // Once the follower stops knowing a leader, no cached connection to the stopped one can
    // carry the write, whose fate would then be unknown; this one surely reaches no log.
    step("the follower giving up its leader", async {
        while c.leader_seen_by(survivor).is_some() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    let client = c.client_at(survivor);
    let err = step(
        "the client's put to the lone follower",
        client.call_endpoint(0, |mut m| async move { m.put(put_request(&client_id())).await }),
    )
    .await
    .expect_err("a lone follower cannot apply a write");
    assert!(
        matches!(err, ClientError::NotApplied(_)),
        "want NotApplied, got {err:?}"
    );
    // The raw answer carries the outcome for clients in other languages too.
    let mut raw = pb::metastore_client::MetastoreClient::connect(format!("http://{}", c.addrs[survivor]))
        .await
        .unwrap();
    let status = step("the raw put to the lone follower", raw.put(put_request(&client_id())))
        .await
        .expect_err("a lone follower cannot apply a write");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert_eq!(
        status.metadata().get(WRITE_OUTCOME).and_then(|v| v.to_str().ok()),
        Some(NOT_APPLIED),
        "{status:?}"
    );
    assert!(status.message().starts_with("not applied"), "{}", status.message());
    step("shutting the cluster down", c.shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_its_quorum_answers_maybe_applied_within_its_deadline() {
    tests::init_logging();
    let (c, leader) = one_node_left(true).await;
    let client = c.client_at(leader);
    // The entry is in the leader's log and could still commit if the others came back, so the
    // answer must not claim it was not applied; it must come, not hang.
    let err = step(
        "the put to the lone leader",
        client.call_endpoint(0, |mut m| async move { m.put(put_request(&client_id())).await }),
    )
    .await
    .expect_err("a lone leader cannot commit a write");
    assert!(
        matches!(&err, ClientError::Unavailable(m) if m.contains("did not commit")),
        "want a maybe-applied Unavailable, got {err:?}"
    );
    step("shutting the cluster down", c.shutdown()).await;
}

/// A fresh request id for each put.
fn client_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "write-outcome-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn put_request(request_id: &str) -> pb::PutRequest {
    pb::PutRequest {
        key: "/after".into(),
        value: "2".into(),
        lease: 0,
        request_id: request_id.into(),
    }
}

/// A 3-node cluster with two nodes stopped, and the index of the one left running: the last
/// leader when `leading`, else a follower, which can then neither reach a leader nor become one.
/// Leadership can move between looking and stopping, so the result is checked and the set-up
/// retried on a fresh cluster when it moved.
async fn one_node_left(leading: bool) -> (Cluster, usize) {
    for _ in 0..5 {
        let mut c = Cluster::start(3).await;
        let leader = c.wait_leader().await;
        c.client().put("/before", "1").await.unwrap();
        let left = if leading {
            step("stopping a follower", c.stop((leader + 1) % 3)).await;
            step("stopping a follower", c.stop((leader + 2) % 3)).await;
            leader
        } else {
            step("stopping the leader", c.stop(leader)).await;
            // The two left elect one of them; stopping that one leaves a follower whose only
            // peer that could vote for it is gone.
            let next = step("electing a new leader", c.wait_leader()).await;
            step("stopping the new leader", c.stop(next)).await;
            (0..3).find(|i| *i != leader && *i != next).expect("three nodes")
        };
        if c.leads(left) == leading {
            return (c, left);
        }
        c.shutdown().await;
    }
    panic!("leadership moved during each of 5 set-ups");
}

/// Awaits one step of a test for at most a minute, naming the step if it hangs.
async fn step<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(std::time::Duration::from_secs(60), f).await {
        Ok(v) => v,
        Err(_) => panic!("hung for 60 s: {what}"),
    }
}
