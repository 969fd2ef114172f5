//! ACLs with Kafka's own tools on a cluster with SASL and the authorizer on: `kafka-acls
//! --add`, `--list` and `--remove` as the super user; a user with READ on one topic and one
//! group consumes it but cannot produce to it, and cannot see or describe another topic;
//! `kafka-reassign-partitions` as that user is refused for want of ALTER on the cluster, and
//! succeeds as the super user; `kafka-delete-records` likewise needs DELETE on the topic.

use tests::kafka::tool;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_acls_grant_read_on_one_topic_and_group_and_cluster_changes_need_alter() {
    let dir = tempfile::tempdir().unwrap();
    let (four, k) = tests::kafka::start_with_acls(dir.path()).await;
    let b = k.bootstrap();
    let node = four.nodes[&1].addr.clone();
    tests::kafka::set_scram(dir.path(), &node, "admin", "admin-secret");
    tests::kafka::set_scram(dir.path(), &node, "bob", "bob-secret");
    let admin = tests::kafka::scram_properties(dir.path(), "admin", "admin-secret", "SCRAM-SHA-512");
    let bob = tests::kafka::scram_properties(dir.path(), "bob", "bob-secret", "SCRAM-SHA-512");
    let run = |props: &str, name: &str, args: &[&str], input: &str| {
        let mut all = vec!["--bootstrap-server", b.as_str(), "--command-config", props];
        all.extend_from_slice(args);
        tool(name, &all, input)
    };

    for (topic, replicas) in [("t1", "1:2:3"), ("t2", "2:3:4")] {
        let (ok, out) = run(
            &admin,
            "kafka-topics",
            &["--create", "--topic", topic, "--replica-assignment", replicas],
            "",
        );
        assert!(ok, "{out}");
    }
    let (ok, out) = tool(
        "kafka-console-producer",
        &["--bootstrap-server", &b, "--command-config", &admin, "--topic", "t1"],
        "a\nb\nc\n",
    );
    assert!(ok, "{out}");

    // Bob may read t1 in group g1, and nothing else.
    let (ok, out) = run(
        &admin,
        "kafka-acls",
        &[
            "--add",
            "--allow-principal",
            "User:bob",
            "--operation",
            "Read",
            "--topic",
            "t1",
            "--group",
            "g1",
        ],
        "",
    );
    assert!(ok, "{out}");
    let (ok, out) = run(&admin, "kafka-acls", &["--list"], "");
    assert!(ok, "{out}");
    assert!(
        out.contains("ResourcePattern(resourceType=TOPIC, name=t1, patternType=LITERAL)")
            && out.contains("ResourcePattern(resourceType=GROUP, name=g1, patternType=LITERAL)")
            && out.contains("(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)"),
        "{out}"
    );

    let (ok, out) = tool(
        "kafka-console-consumer",
        &[
            "--bootstrap-server",
            &b,
            "--command-config",
            &bob,
            "--topic",
            "t1",
            "--group",
            "g1",
            "--from-beginning",
            "--max-messages",
            "3",
            "--timeout-ms",
            "30000",
        ],
        "",
    );
    assert!(ok, "{out}");
    assert_eq!(out.lines().filter(|l| ["a", "b", "c"].contains(l)).count(), 3, "{out}");

    // The console producer logs the refusal and exits 0 all the same. Its idempotent producer
    // asks for a producer id first, which needs WRITE on some topic (or IDEMPOTENT_WRITE on
    // the cluster): Kafka refuses that with a cluster authorization error.
    let (_, out, err) = tests::kafka::run(
        tests::kafka::kafka_tool("kafka-console-producer").args([
            "--bootstrap-server",
            &b,
            "--command-config",
            &bob,
            "--topic",
            "t1",
        ]),
        "nope\n",
    );
    assert!(
        err.contains("ClusterAuthorizationException") || err.contains("TopicAuthorizationException"),
        "bob may not write t1: {out}{err}"
    );
    let (ok, out) = run(&bob, "kafka-topics", &["--list"], "");
    assert!(ok, "{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with('t')).collect::<Vec<_>>(),
        ["t1"],
        "{out}"
    );
    let (ok, out) = run(&bob, "kafka-topics", &["--describe", "--topic", "t2"], "");
    assert!(!ok, "bob may not describe t2: {out}");

    // Deleting records needs DELETE on the topic: bob's READ is not enough.
    let offsets = dir.path().join("delete.json");
    std::fs::write(
        &offsets,
        r#"{"version":1,"partitions":[{"topic":"t1","partition":0,"offset":1}]}"#,
    )
    .unwrap();
    let offsets = offsets.to_string_lossy().into_owned();
    let (_, out) = run(&bob, "kafka-delete-records", &["--offset-json-file", &offsets], "");
    assert!(
        out.contains("TopicAuthorizationException") && !out.contains("low_watermark: 1"),
        "bob may not delete t1's records: {out}"
    );
    let (ok, out) = run(&admin, "kafka-delete-records", &["--offset-json-file", &offsets], "");
    assert!(ok && out.contains("low_watermark: 1"), "{out}");

    // A reassignment needs ALTER on the cluster.
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"{"version":1,"partitions":[{"topic":"t2","partition":0,"replicas":[1,2,3]}]}"#,
    )
    .unwrap();
    let plan = plan.to_string_lossy().into_owned();
    let (ok, out) = run(
        &bob,
        "kafka-reassign-partitions",
        &["--execute", "--reassignment-json-file", &plan],
        "",
    );
    assert!(
        !ok && out.contains("ClusterAuthorizationException"),
        "bob may not reassign: {out}"
    );
    let (ok, out) = run(
        &admin,
        "kafka-reassign-partitions",
        &["--execute", "--reassignment-json-file", &plan],
        "",
    );
    assert!(
        ok && out.contains("Successfully started partition reassignment"),
        "{out}"
    );

    // Removed, the ACLs no longer let bob read.
    let (ok, out) = run(
        &admin,
        "kafka-acls",
        &[
            "--remove",
            "--force",
            "--allow-principal",
            "User:bob",
            "--operation",
            "Read",
            "--topic",
            "t1",
            "--group",
            "g1",
        ],
        "",
    );
    assert!(ok, "{out}");
    let (ok, out) = run(&admin, "kafka-acls", &["--list"], "");
    assert!(ok && !out.contains("User:bob"), "{out}");
    let (ok, out) = run(&bob, "kafka-topics", &["--list"], "");
    assert!(ok && !out.lines().any(|l| l == "t1"), "{out}");
}
