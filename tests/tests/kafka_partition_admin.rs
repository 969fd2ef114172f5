//! Kafka's own Java tools grow a topic and move leadership back to the preferred replica on a
//! Ferry cluster: `kafka-topics --alter --partitions` (CreatePartitions) and
//! `kafka-leader-election` (ElectLeaders), each printing Kafka's own messages, with Kafka's
//! refusals for a shrink and for an election that is not needed.

use std::time::Duration;

use tests::data::partition_state;

fn tool(name: &str, args: &[&str]) -> (bool, String) {
    tests::kafka::tool(name, args, "")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_tools_add_partitions_and_elect_preferred_leaders() {
    let dir = tempfile::tempdir().unwrap();
    // No automatic rebalance: the preferred replica gets leadership back only when asked.
    let (mut four, k) =
        tests::kafka::start(dir.path(), |_| vec!["--auto-leader-rebalance".into(), "false".into()]).await;
    let c = four.client.clone();
    let b = k.bootstrap();
    let b = b.as_str();

    tests::kafka::create_on_1_and_2(&c, b, None, "pa", &[]).await;

    // CreatePartitions: one partition to three; a shrink is refused as Kafka refuses it.
    let (ok, out) = tool(
        "kafka-topics",
        &["--bootstrap-server", b, "--alter", "--topic", "pa", "--partitions", "3"],
    );
    assert!(ok, "{out}");
    let (ok, out) = tool(
        "kafka-topics",
        &["--bootstrap-server", b, "--describe", "--topic", "pa"],
    );
    assert!(ok && out.contains("PartitionCount: 3"), "{out}");
    for p in 1..3 {
        assert!(partition_state(&c, "pa", p).await.is_some(), "pa-{p} created");
    }
    let (ok, out) = tool(
        "kafka-topics",
        &["--bootstrap-server", b, "--alter", "--topic", "pa", "--partitions", "2"],
    );
    assert!(!ok && out.contains("InvalidPartitionsException"), "{out}");

    // Broker 1 goes away: broker 2 leads pa-0. Back and in sync, it is preferred but not leader.
    four.nodes.get_mut(&1).unwrap().kill();
    tests::wait_until(Duration::from_secs(60), "broker 2 leads pa-0", || {
        let c = c.clone();
        async move { partition_state(&c, "pa", 0).await.is_some_and(|s| s.leader == 2) }
    })
    .await;
    four.nodes.get_mut(&1).unwrap().spawn();
    tests::wait_until(Duration::from_secs(60), "broker 1 back in pa-0's ISR", || {
        tests::data::isr_is(&c, "pa", 0, &[1, 2])
    })
    .await;
    assert_eq!(partition_state(&c, "pa", 0).await.unwrap().leader, 2);

    let election = [
        "--bootstrap-server",
        b,
        "--election-type",
        "PREFERRED",
        "--topic",
        "pa",
        "--partition",
        "0",
    ];
    let (ok, out) = tool("kafka-leader-election", &election);
    assert!(
        ok && out.contains("Successfully completed leader election (PREFERRED) for partitions pa-0"),
        "{out}"
    );
    assert_eq!(partition_state(&c, "pa", 0).await.unwrap().leader, 1);
    let (_, out) = tool("kafka-leader-election", &election);
    assert!(
        out.contains("Valid replica already elected for partitions pa-0"),
        "{out}"
    );
    drop(four);
}
