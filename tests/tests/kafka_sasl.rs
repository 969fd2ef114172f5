//! SASL on the Kafka listener with real clients: the first user is made with `ferry users`,
//! the next with Kafka's own `kafka-configs` (AlterUserScramCredentials, SCRAM-SHA-256) over a
//! SCRAM-SHA-512 login from a `client.properties`, as an operator writes it. kcat logs in with
//! SCRAM-SHA-256 and kafka-python with PLAIN, each against the same stored credential. A wrong
//! password, an unknown user and a client without SASL are refused, and the refusals are
//! counted; the brokers go on serving the others.

use std::process::Command;

use tests::kafka::{run, tool};

/// A Kafka `client.properties` for a SCRAM-SHA-512 login over SASL_PLAINTEXT.
fn client_properties(dir: &std::path::Path, user: &str, password: &str) -> String {
    tests::kafka::scram_properties(dir, user, password, "SCRAM-SHA-512")
}

/// kcat with a SCRAM-SHA-256 login.
fn kcat(b: &str, user: &str, password: &str, args: &[&str], input: &str) -> (Option<i32>, String, String) {
    let mut cmd = Command::new("timeout");
    cmd.args(["30", "kcat", "-b", b, "-X", "security.protocol=SASL_PLAINTEXT"])
        .args(["-X", "sasl.mechanisms=SCRAM-SHA-256"])
        .args(["-X", &format!("sasl.username={user}")])
        .args(["-X", &format!("sasl.password={password}")])
        .args(args);
    run(&mut cmd, input)
}

const PYTHON_PLAIN: &str = r#"
import sys
from kafka import KafkaConsumer
b, user, password, topic = sys.argv[1:5]
c = KafkaConsumer(topic, bootstrap_servers=b, security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism="PLAIN", sasl_plain_username=user, sasl_plain_password=password,
                  auto_offset_reset="earliest", consumer_timeout_ms=10000)
print(sorted(r.value.decode() for r in c))
c.close()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_and_plain_logins_work_with_kafkas_clients_and_bad_ones_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Each node's metrics, to see the refusals counted.
    let http: Vec<String> = (0..4).map(|_| format!("127.0.0.1:{}", tests::free_port())).collect();
    let h = http.clone();
    let (four, k) = tests::kafka::start(dir.path(), move |id| {
        [
            "--kafka-security-protocol",
            "SASL_PLAINTEXT",
            "--connection-failed-authentication-delay-ms",
            "10",
            "--http-listen",
            &h[id as usize - 1],
        ]
        .map(String::from)
        .into()
    })
    .await;
    let b = k.bootstrap();
    let node = four.nodes[&1].addr.clone();

    // The first user, before any Kafka client can log in; only with the cluster credential.
    let (code, _, err) = tests::run_ferry(&[
        "users",
        "set-scram",
        "mallory",
        "--password",
        "x",
        "--bootstrap-server",
        &node,
    ]);
    assert!(code != 0 && err.contains("cluster credential"), "{err}");
    tests::kafka::set_scram(dir.path(), &node, "admin", "admin-secret");
    let admin = client_properties(dir.path(), "admin", "admin-secret");

    // Kafka's tools log in with it and make the next user.
    let (ok, out) = tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            &b,
            "--command-config",
            &admin,
            "--create",
            "--topic",
            "s",
            "--partitions",
            "1",
            "--replication-factor",
            "3",
        ],
        "",
    );
    assert!(ok && out.contains("Created topic s."), "{out}");
    let (ok, out) = tool(
        "kafka-configs",
        &[
            "--bootstrap-server",
            &b,
            "--command-config",
            &admin,
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--add-config",
            "SCRAM-SHA-256=[iterations=8192,password=alice-secret]",
        ],
        "",
    );
    assert!(ok, "{out}");
    let (ok, out) = tool(
        "kafka-configs",
        &[
            "--bootstrap-server",
            &b,
            "--command-config",
            &admin,
            "--describe",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
        ],
        "",
    );
    assert!(ok && out.contains("SCRAM-SHA-256=iterations=8192"), "{out}");

    // kcat produces and reads back as alice with SCRAM-SHA-256.
    let (code, _, err) = kcat(
        &b,
        "alice",
        "alice-secret",
        &["-P", "-t", "s", "-p", "0"],
        "one\ntwo\nthree\n",
    );
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = kcat(
        &b,
        "alice",
        "alice-secret",
        &["-C", "-t", "s", "-p", "0", "-o", "beginning", "-e"],
        "",
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.lines().collect::<Vec<_>>(), ["one", "two", "three"]);

    // kafka-python reads them as alice with PLAIN, checked against the SCRAM credential.
    let (code, out, err) = run(
        Command::new("timeout").args(["60", "python3", "-c", PYTHON_PLAIN, &b, "alice", "alice-secret", "s"]),
        "",
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), "['one', 'three', 'two']", "{err}");

    // A wrong password, an unknown user and a client without SASL get nothing.
    let (code, _, err) = kcat(&b, "alice", "wrong", &["-L"], "");
    assert_ne!(code, Some(0));
    assert!(err.contains("Authentication failed"), "{err}");
    let (code, _, err) = kcat(&b, "mallory", "alice-secret", &["-L"], "");
    assert_ne!(code, Some(0));
    assert!(err.contains("Authentication failed"), "{err}");
    let (code, _, _) = run(
        Command::new("timeout").args(["20", "kcat", "-b", &b, "-L", "-m", "5"]),
        "",
    );
    assert_ne!(code, Some(0), "a client without SASL is not served");
    let (ok, out) = tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            &b,
            "--command-config",
            &client_properties(dir.path(), "admin", "nope"),
            "--list",
        ],
        "",
    );
    assert!(!ok && out.contains("Authentication failed"), "{out}");

    // Every refused login was counted, by the broker that refused it.
    let refused: f64 = http
        .iter()
        .map(|a| {
            let e = tokio::task::block_in_place(|| tests::metrics::scrape_parsed(a)).unwrap();
            e.value("ferry_authentication_failures_total", &[])
        })
        .sum();
    assert!(refused >= 3.0, "{refused} refusals counted");

    // The brokers go on serving the good logins.
    let (code, out, err) = kcat(
        &b,
        "alice",
        "alice-secret",
        &["-C", "-t", "s", "-p", "0", "-o", "beginning", "-e"],
        "",
    );
    assert_eq!((code, out.lines().count()), (Some(0), 3), "{err}");
}
