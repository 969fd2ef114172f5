//! Kafka's own Java tools (from Kafka's Maven artifacts, run by `tools/kafka-tool.sh`) against
//! a Ferry cluster: kafka-topics creates and describes, the console producer with its default,
//! idempotent settings writes, the console consumer reads back from the earliest offset,
//! kafka-reassign-partitions moves a partition under a throttle, lists and verifies it (which
//! removes the throttles), kafka-configs shows the throttle while it acts, and kafka-log-dirs
//! describes the dirs. Each prints Kafka's own messages. Once with Kafka 4.x's tools, once with
//! Kafka 3.9's.

use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_4_tools_create_produce_consume_and_reassign_with_a_throttle() {
    create_produce_consume_and_reassign(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_3_9_tools_create_produce_consume_and_reassign_with_a_throttle() {
    create_produce_consume_and_reassign(Some(tests::kafka_zk::VERSION)).await;
}

async fn create_produce_consume_and_reassign(version: Option<&str>) {
    let tool = |name: &str, args: &[&str], input: &str| tests::kafka::tool_of(version, name, args, input);
    let dir = tempfile::tempdir().unwrap();
    let (four, k) = tests::kafka::start(dir.path(), |_| Vec::new()).await;
    let c = four.client.clone();
    let b = k.bootstrap();
    let b = b.as_str();

    tests::kafka::create_on_1_and_2(&c, b, version, "jt", &["--config", "retention.ms=86400000"]).await;
    let (ok, out) = tool(
        "kafka-topics",
        &["--bootstrap-server", b, "--describe", "--topic", "jt"],
        "",
    );
    assert!(ok && out.contains("Configs: retention.ms=86400000"), "{out}");
    assert!(
        out.contains("Partition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2"),
        "{out}"
    );

    // The console producer with its defaults: idempotent, acks=all.
    let lines: Vec<String> = (0..3000).map(|i| format!("record-{i}-{}", "y".repeat(100))).collect();
    let (ok, out) = tool(
        "kafka-console-producer",
        &["--bootstrap-server", b, "--topic", "jt"],
        &(lines.join("\n") + "\n"),
    );
    assert!(ok, "{out}");
    let (ok, out) = tool(
        "kafka-console-consumer",
        &[
            "--bootstrap-server",
            b,
            "--topic",
            "jt",
            "--partition",
            "0",
            "--offset",
            "earliest",
            "--max-messages",
            "3000",
        ],
        "",
    );
    assert!(ok, "{out}");
    assert_eq!(out.lines().collect::<Vec<_>>(), lines, "every record, in order, once");

    // kafka-get-offsets (ListOffsets v7 and up): latest, earliest, earliest on local disk, and
    // the first record stamped with the largest timestamp, which kcat's timestamps confirm.
    let (code, stamped, err) = tests::kafka::run(
        std::process::Command::new("timeout").args([
            "60",
            "kcat",
            "-C",
            "-b",
            b,
            "-t",
            "jt",
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%o %T\\n",
        ]),
        "",
    );
    assert_eq!(code, Some(0), "{err}");
    let stamped: Vec<(i64, i64)> = stamped
        .lines()
        .map(|l| {
            let (o, t) = l.split_once(' ').unwrap();
            (o.parse().unwrap(), t.parse().unwrap())
        })
        .collect();
    let max = stamped.iter().map(|(_, t)| *t).max().unwrap();
    let first_max = stamped.iter().find(|(_, t)| *t == max).unwrap().0;
    for (time, want) in [("-1", 3000), ("-2", 0), ("-4", 0), ("-3", first_max)] {
        let (ok, out) = tool(
            "kafka-get-offsets",
            &["--bootstrap-server", b, "--topic", "jt", "--time", time],
            "",
        );
        assert!(ok, "{out}");
        assert_eq!(out.trim(), format!("jt:0:{want}"), "--time {time}");
    }

    // A move from broker 2 to broker 4 at 20 kB/s for about 330 kB: it lasts.
    let plan = dir.path().join("move.json");
    std::fs::write(
        &plan,
        r#"{"version":1,"partitions":[{"topic":"jt","partition":0,"replicas":[1,4]}]}"#,
    )
    .unwrap();
    let plan = plan.to_str().unwrap();
    let (ok, out) = tool(
        "kafka-reassign-partitions",
        &[
            "--bootstrap-server",
            b,
            "--reassignment-json-file",
            plan,
            "--execute",
            "--throttle",
            "20000",
        ],
        "",
    );
    assert!(
        ok && out.contains("Successfully started partition reassignment for jt-0"),
        "{out}"
    );
    assert!(
        out.contains("The inter-broker throttle limit was set to 20000 B/s"),
        "{out}"
    );
    let (ok, out) = tool("kafka-reassign-partitions", &["--bootstrap-server", b, "--list"], "");
    assert!(
        ok && out.contains("jt-0: replicas: ") && out.contains("adding: 4. removing: 2."),
        "{out}"
    );
    let (ok, out) = tool(
        "kafka-configs",
        &[
            "--bootstrap-server",
            b,
            "--describe",
            "--entity-type",
            "brokers",
            "--entity-name",
            "4",
        ],
        "",
    );
    assert!(ok && out.contains("follower.replication.throttled.rate=20000"), "{out}");
    let (ok, out) = tool(
        "kafka-log-dirs",
        &["--bootstrap-server", b, "--describe", "--topic-list", "jt"],
        "",
    );
    assert!(ok && out.contains("\"partition\":\"jt-0\""), "{out}");

    // --verify until done; the last one removes the throttles, as on Kafka.
    let mut verified = String::new();
    tests::wait_until(Duration::from_secs(120), "the move to complete", || {
        let (ok, out) = tool(
            "kafka-reassign-partitions",
            &["--bootstrap-server", b, "--reassignment-json-file", plan, "--verify"],
            "",
        );
        verified = out.clone();
        async move { ok && out.contains("Reassignment of partition jt-0 is completed.") }
    })
    .await;
    assert!(
        verified.contains("Clearing broker-level throttles on brokers"),
        "{verified}"
    );
    let (ok, out) = tool(
        "kafka-configs",
        &[
            "--bootstrap-server",
            b,
            "--describe",
            "--entity-type",
            "brokers",
            "--entity-name",
            "4",
        ],
        "",
    );
    assert!(ok && !out.contains("throttled.rate"), "{out}");
    let (ok, out) = tool(
        "kafka-topics",
        &["--bootstrap-server", b, "--describe", "--topic", "jt"],
        "",
    );
    assert!(ok && out.contains("Replicas: 1,4"), "{out}");
    drop(four);
}
