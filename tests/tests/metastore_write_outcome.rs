//! A failed write says whether it may have applied: one refused before it reached the leader's
//! log is "not applied", so a client can act on it.

use metastore::{ClientError, NOT_APPLIED, WRITE_OUTCOME};
use proto::metastore as pb;
use tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_cannot_reach_a_leader_is_answered_not_applied() {
    let mut c = Cluster::start(3).await;
    let leader = c.wait_leader().await;
    c.client().put("/before", "1").await.unwrap();
    // Leave one follower alone: it can neither reach the old leader nor elect a new one, so no
    // write sent to it can reach any leader's log.
    let survivor = (leader + 1) % 3;
    // Each step is bounded, so that the rare hang of this test names the step it hung in.
    step("stopping the leader", c.stop(leader)).await;
    step("stopping a follower", c.stop((leader + 2) % 3)).await;
    let client = c.client_at(survivor);
    let req = pb::PutRequest {
        key: "/after".into(),
        value: "2".into(),
        lease: 0,
        request_id: client.new_request_id(),
    };
    let err = step(
        "the client's put to the lone follower",
        client.call_endpoint(0, |mut m| async move { m.put(req).await }),
    )
    .await
    .expect_err("a lone follower cannot apply a write");
    assert!(
        matches!(err, ClientError::NotApplied(_)),
        "want NotApplied, got {err:?}"
    );
    // The raw answer carries the outcome for clients in other languages too.
    let req = pb::PutRequest {
        key: "/after".into(),
        value: "2".into(),
        lease: 0,
        request_id: client.new_request_id(),
    };
    let mut raw = pb::metastore_client::MetastoreClient::connect(format!("http://{}", c.addrs[survivor]))
        .await
        .unwrap();
    let status = step("the raw put to the lone follower", raw.put(req))
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

/// Awaits one step of a test for at most a minute, naming the step if it hangs.
async fn step<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(std::time::Duration::from_secs(60), f).await {
        Ok(v) => v,
        Err(_) => panic!("hung for 60 s: {what}"),
    }
}
