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
    c.stop(leader).await;
    c.stop((leader + 2) % 3).await;
    let client = c.client_at(survivor);
    let req = pb::PutRequest {
        key: "/after".into(),
        value: "2".into(),
        lease: 0,
        request_id: client.new_request_id(),
    };
    let err = client
        .call_endpoint(0, |mut m| async move { m.put(req).await })
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
    let status = raw.put(req).await.expect_err("a lone follower cannot apply a write");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert_eq!(
        status.metadata().get(WRITE_OUTCOME).and_then(|v| v.to_str().ok()),
        Some(NOT_APPLIED),
        "{status:?}"
    );
    assert!(status.message().starts_with("not applied"), "{}", status.message());
    c.shutdown().await;
}
