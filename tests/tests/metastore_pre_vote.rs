//! Raft's pre-vote: a node that cannot reach a majority does not raise its term, so that when it
//! is back it does not depose the leader the others kept (openraft 0.9 alone raised the term at
//! every election timeout, and the leader stepped down on meeting it).

use std::time::Duration;

use tests::Cluster;

fn term_and_vote(c: &Cluster, i: usize) -> (u64, Option<u64>) {
    let n = c.nodes[i].as_ref().expect("the node runs");
    let m = n.raft.metrics().borrow().clone();
    (m.current_term, m.vote.leader_id().voted_for())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_left_without_a_majority_keeps_its_term() {
    tests::init_logging();
    let mut c = Cluster::start(3).await;
    let leader = c.wait_settled_leader().await;
    let alone = (leader + 1) % 3;
    let before = term_and_vote(&c, alone);
    c.stop(leader).await;
    c.stop((leader + 2) % 3).await;
    // The tests' timing waits 1.8 to 2.4 s of silence before each election; 7 s is at least
    // two rounds, each of which raised the term before pre-vote.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let after = term_and_vote(&c, alone);
    assert_eq!(after.0, before.0, "the lone node's term moved: {before:?} -> {after:?}");
    assert_eq!(after, before);
    c.shutdown().await;
}
