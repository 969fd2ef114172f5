//! A client in a quorum node's process (the controller's, the Admin service's) follows its node's
//! view of the leader: a call that failed because the leader is gone goes to the new leader as
//! soon as one is elected, not after the rest of its backoff.

use std::time::Duration;

use metastore::Client;
use tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_pausing_after_its_leader_died_goes_to_the_new_leader_once_elected() {
    tests::init_logging();
    let mut c = Cluster::start(3).await;
    let leader = c.wait_settled_leader().await;
    let old_id = c.nodes[leader].as_ref().map(|n| n.id).expect("the leader runs");
    let follower = (leader + 1) % 3;
    // A backoff far longer than the test may take: only the new leader can end the pause.
    let long = Duration::from_secs(600);
    let client = Client::new(&c.addrs)
        .expect("client")
        .with_backoff(long, long)
        .starting_at(leader);
    client.attach_local(c.nodes[follower].as_ref().expect("the follower runs").local());
    c.stop(leader).await;
    // The follower hears nothing for the lease plus an election timeout (1.8 s at least with
    // the tests' timing) before it campaigns; a stop takes milliseconds.
    assert_eq!(
        c.leader_seen_by(follower),
        Some(old_id),
        "the follower must still follow the stopped leader when the put starts"
    );
    let put = tokio::time::timeout(Duration::from_secs(60), client.put("/after-failover", "v")).await;
    let revision = put
        .expect("the put must not wait out its 600 s backoff")
        .expect("the put lands on the new leader");
    let now_leader = c.wait_leader().await;
    assert_ne!(now_leader, leader);
    let kv = client.get("/after-failover").await.expect("read").expect("the key");
    assert_eq!((kv.value.as_ref(), kv.mod_revision), (&b"v"[..], revision));
    c.shutdown().await;
}
