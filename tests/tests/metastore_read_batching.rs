//! Concurrent linearizable reads share quorum rounds instead of taking one each.

use tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_linearizable_reads_share_quorum_rounds() {
    let c = Cluster::start(3).await;
    let leader = c.wait_leader().await;
    let client = c.client_at(leader);
    client.put("/r", "v").await.unwrap();
    // Summed over every node: leadership may move between the put and the reads (a young
    // cluster can still hold an election), and then the new leader takes the rounds.
    let total_rounds = || -> u64 { c.nodes.iter().flatten().map(|n| n.read_index_rounds()).sum() };
    let before = total_rounds();
    let reads = 200;
    let tasks: Vec<_> = (0..reads)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.get("/r").await })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap().unwrap().value, "v".as_bytes());
    }
    let rounds = total_rounds() - before;
    assert!(rounds >= 1, "no quorum round was taken");
    assert!(rounds < reads, "{reads} concurrent reads took {rounds} quorum rounds");
    eprintln!("{reads} concurrent linearizable reads shared {rounds} quorum rounds");
    c.shutdown().await;
}
