//! Leases: keys live while their holder keeps the lease alive and vanish on every node when it stops.

use std::time::{Duration, Instant};

use tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_expires_after_keepalives_stop_and_its_keys_vanish_everywhere() {
    let c = Cluster::start(3).await;
    let client = c.client();
    let lease = client.lease_grant(1500).await.unwrap();
    client.put_with_lease("/sessions/1", "b1", lease).await.unwrap();
    client.put("/plain", "stays").await.unwrap();

    // Kept alive for longer than the TTL: the key stays.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert_eq!(client.lease_keep_alive(lease).await.unwrap(), 1500);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(client.get("/sessions/1").await.unwrap().is_some());

    // Stop: the key goes on all nodes.
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 0..3 {
        let node = c.client_at(i);
        loop {
            if node.get_opt("/sessions/1", true).await.unwrap().is_none() {
                break;
            }
            assert!(Instant::now() < deadline, "lease key still on node {i}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(node.get_opt("/plain", true).await.unwrap().is_some());
    }
    let err = client.lease_keep_alive(lease).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    let err = client.put_with_lease("/late", "x", lease).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert!(err.to_string().contains("not found"), "{err}");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_lease_deletes_its_keys() {
    let c = Cluster::start(3).await;
    let client = c.client();
    let lease = client.lease_grant(60_000).await.unwrap();
    client.put_with_lease("/e/1", "a", lease).await.unwrap();
    client.put_with_lease("/e/2", "b", lease).await.unwrap();
    client.lease_revoke(lease).await.unwrap();
    assert!(client.range("/e/", 0).await.unwrap().kvs.is_empty());
    c.shutdown().await;
}
