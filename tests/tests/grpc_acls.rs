//! The gRPC services under the authorizer: `ferry reassign`, `ferry reassign --cancel-all` and
//! `ferry throttles` are refused with CLUSTER_AUTHORIZATION_FAILED to an anonymous caller and to
//! a user without ALTER on the cluster, `ferry produce` with TOPIC_AUTHORIZATION_FAILED to a
//! user without WRITE on the topic, a wrong password is refused as a failed login, and none of
//! them changes anything; granted with `kafka-acls`, the user reassigns and produces, logged in
//! with the same `client.properties` as Kafka's tools, while the brokers' own replication (the
//! moved replica's copy) passes with the cluster credential.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use tests::kafka::tool;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_service_admits_only_principals_allowed_the_operation_on_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let (four, k) = tests::kafka::start_with_acls(dir.path()).await;
    let node = four.nodes[&1].addr.clone();
    tests::kafka::set_scram(dir.path(), &node, "admin", "admin-secret");
    tests::kafka::set_scram(dir.path(), &node, "bob", "bob-secret");
    let admin = tests::kafka::scram_properties(dir.path(), "admin", "admin-secret", "SCRAM-SHA-512");
    let bob = tests::kafka::scram_properties(dir.path(), "bob", "bob-secret", "SCRAM-SHA-512");
    // bob's name with a wrong password (its own file: the helper names files by user).
    let guesser = dir.path().join("guesser.properties");
    std::fs::copy(&bob, &guesser).unwrap();
    let text = std::fs::read_to_string(&guesser)
        .unwrap()
        .replace("bob-secret", "wrong");
    std::fs::write(&guesser, text).unwrap();
    let guesser = guesser.to_string_lossy().into_owned();
    // The tests' own client calls as the cluster.
    tests::reassign::create(&four.client, "g", vec![vec![1, 2]], &[]).await;

    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"{"version":1,"partitions":[{"topic":"g","partition":0,"replicas":[2,3]}]}"#,
    )
    .unwrap();
    let plan = plan.to_string_lossy().into_owned();
    let ferry = |config: Option<&str>, args: &[&str]| {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--bootstrap-server", node.as_str()]);
        if let Some(c) = config {
            all.extend(["--command-config", c]);
        }
        tests::run_ferry(&all)
    };
    let execute = ["reassign", "--execute", "--reassignment-json-file", plan.as_str()];
    let produce = |config: &str, input: &str| {
        let mut child = Command::new(tests::ferry_bin())
            .args([
                "produce",
                "--topic",
                "g",
                "--bootstrap-server",
                &node,
                "--command-config",
                config,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };

    let kafka = k.bootstrap();
    let grant = |what: &[&str]| {
        let mut args = vec!["--bootstrap-server", kafka.as_str(), "--command-config", admin.as_str()];
        args.extend(["--add", "--allow-principal", "User:bob"]);
        args.extend_from_slice(what);
        let (ok, out) = tool("kafka-acls", &args, "");
        assert!(ok, "{out}");
    };

    // Nobody, and bob without an ACL: refused, naming the code and the principal.
    let (code, _, err) = ferry(None, &execute);
    assert!(
        code != 0 && err.contains("CLUSTER_AUTHORIZATION_FAILED") && err.contains("User:ANONYMOUS"),
        "{err}"
    );
    let (code, _, err) = ferry(Some(&bob), &execute);
    assert!(
        code != 0 && err.contains("CLUSTER_AUTHORIZATION_FAILED") && err.contains("User:bob may not"),
        "{err}"
    );
    let (code, _, err) = ferry(Some(&bob), &["reassign", "--cancel-all"]);
    assert!(code != 0 && err.contains("CLUSTER_AUTHORIZATION_FAILED"), "{err}");
    let (code, _, err) = ferry(Some(&bob), &["throttles", "--brokers", "1", "--leader-rate", "1000"]);
    assert!(code != 0 && err.contains("CLUSTER_AUTHORIZATION_FAILED"), "{err}");
    let (code, _, err) = ferry(Some(&guesser), &execute);
    assert!(
        code != 0 && err.contains("SASL_AUTHENTICATION_FAILED") && err.contains("wrong user name or password"),
        "{err}"
    );
    // Nothing changed: the replicas, no reassignment, no cancel-all marker, no throttle.
    let state = tests::data::partition_state(&four.client, "g", 0).await.unwrap();
    assert_eq!(state.replicas, vec![1, 2]);
    assert!(state.adding.is_empty(), "{state:?}");
    let (code, out, err) = ferry(Some(&admin), &["reassign", "--list"]);
    assert_eq!(code, 0, "the super user lists: {err}");
    assert!(!out.contains("g-0"), "no reassignment was started: {out}");
    let (_, kv, _) = tests::run_ferry(&["kv", "range", "/admin/", "--bootstrap-server", &node]);
    assert!(!kv.contains("cancel"), "no cancel-all marker: {kv}");
    let (_, kv, _) = tests::run_ferry(&["kv", "get", "/config/brokers/1", "--bootstrap-server", &node]);
    assert!(!kv.contains("throttled.rate"), "no throttle: {kv}");

    // Granted ALTER on the cluster with Kafka's tool, bob reassigns.
    grant(&["--operation", "Alter", "--cluster"]);
    // Each node follows the ACLs; the grant reaches the asked node within moments.
    let mut last = String::new();
    for _ in 0..60 {
        let (code, out, err) = ferry(Some(&bob), &execute);
        last = format!("{out}{err}");
        if code == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        last.contains("Successfully started"),
        "bob reassigns once granted ALTER: {last}"
    );
    // ALTER on the cluster implies DESCRIBE (so bob finds the leader), not WRITE on a topic.
    let (ok, err) = produce(&bob, "a\nb\n");
    assert!(
        !ok && err.contains("TOPIC_AUTHORIZATION_FAILED") && err.contains("User:bob may not WRITE topic g"),
        "{err}"
    );
    let credential = tests::credential_file(&dir.path().join("n1"));
    let consume = || {
        let args = [
            "consume",
            "--topic",
            "g",
            "--from-beginning",
            "--max-records",
            "10",
            "--timeout-ms",
            "2000",
            "--bootstrap-server",
            node.as_str(),
            "--cluster-credential-file",
            credential.as_str(),
        ];
        tests::run_ferry(&args).1
    };
    let consumed = consume();
    assert!(consumed.trim().is_empty(), "bob's records were not written: {consumed}");
    // Granted WRITE on the topic, bob produces.
    grant(&["--operation", "Write", "--topic", "g"]);
    let mut last = String::new();
    for _ in 0..60 {
        let (ok, err) = produce(&bob, "a\nb\n");
        last = err;
        if ok {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        !last.contains("AUTHORIZATION"),
        "bob produces once granted WRITE: {last}"
    );
    let consumed = consume();
    assert_eq!(consumed.lines().collect::<Vec<_>>(), ["a", "b"], "{consumed}");
    // The new replica on broker 3 copied from the leader through the guarded broker service.
    let c = four.client.clone();
    tests::wait_until(Duration::from_secs(60), "g-0 on brokers 2 and 3", || {
        let c = c.clone();
        async move {
            tests::data::partition_state(&c, "g", 0)
                .await
                .is_some_and(|s| s.replicas == vec![2, 3])
        }
    })
    .await;
}
