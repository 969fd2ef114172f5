//! Named Kafka listeners with real clients (`--listeners`, `--advertised-listeners`,
//! `--listener-security-protocol-map`, as Kafka's `listeners` settings): one node serves an
//! INTERNAL and an EXTERNAL plaintext listener on different addresses and a SASL_PLAINTEXT
//! one. kcat's metadata through each names the broker at that listener's advertised address;
//! kcat produces and kafka-python consumes in a group through EXTERNAL, so the leader and the
//! group coordinator are both reached at EXTERNAL's address (INTERNAL advertises an address
//! nobody serves); the SASL listener refuses a client
//! without a login and serves one with it. Bad listener flags stop the node naming the flag.

use std::process::Command;
use std::time::Duration;

use tests::kafka::run;

/// kcat's `-L` (metadata) through `bootstrap`, with `extra` settings.
fn kcat_metadata(bootstrap: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new("timeout");
    cmd.args(["30", "kcat", "-L", "-b", bootstrap, "-m", "10"]).args(extra);
    run(&mut cmd, "")
}

const PYTHON_GROUP: &str = r#"
import sys
from kafka import KafkaConsumer
b, topic = sys.argv[1:3]
c = KafkaConsumer(topic, bootstrap_servers=b, group_id="listeners-g", auto_offset_reset="earliest",
                  consumer_timeout_ms=15000)
got = []
for r in c:
    got.append(r.value.decode())
    if len(got) == 3:
        break
c.commit()
print(sorted(got))
c.close()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_listener_answers_with_its_own_addresses_and_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let (internal, external, secure) = (tests::free_port(), tests::free_port(), tests::free_port());
    let listeners =
        format!("INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.2:{external},SECURE://127.0.0.1:{secure}");
    // INTERNAL tells its clients an address that nobody serves on this machine (as a private
    // network's address would be from outside it): a client of EXTERNAL sent there would fail.
    let advertised = format!("INTERNAL://127.0.0.9:{internal}");
    let peers = tests::loopback_peers(1);
    let mut node = tests::ProcNode::new(1, &peers[&1], &dir.path().join("n1"), &peers, false).with_args(&[
        "--listeners",
        &listeners,
        "--advertised-listeners",
        &advertised,
        "--listener-security-protocol-map",
        "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,SECURE:SASL_PLAINTEXT",
        "--connection-failed-authentication-delay-ms",
        "10",
    ]);
    node.spawn();
    let ext = format!("127.0.0.2:{external}");
    tests::wait_until(Duration::from_secs(60), "the broker serving EXTERNAL", || {
        let ext = ext.clone();
        async move { kcat_metadata(&ext, &[]).0 == Some(0) }
    })
    .await;

    // Each listener's metadata names the broker at that listener's advertised address.
    let (_, out, err) = kcat_metadata(&format!("127.0.0.1:{internal}"), &[]);
    assert!(out.contains(&format!("broker 1 at 127.0.0.9:{internal}")), "{out}{err}");
    let (_, out, err) = kcat_metadata(&ext, &[]);
    assert!(out.contains(&format!("broker 1 at 127.0.0.2:{external}")), "{out}{err}");

    // SECURE asks for a login: a client without one is refused, one with it is served there.
    let sec = format!("127.0.0.1:{secure}");
    let (code, out, _) = kcat_metadata(&sec, &["-m", "3"]);
    assert_ne!(code, Some(0), "a client without SASL on SECURE: {out}");
    let node_addr = peers[&1].clone();
    set_scram(dir.path(), &node_addr);
    let login = [
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanisms=SCRAM-SHA-512",
        "-X",
        "sasl.username=alice",
        "-X",
        "sasl.password=alice-secret",
    ];
    let (code, out, err) = kcat_metadata(&sec, &login);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(&format!("broker 1 at 127.0.0.1:{secure}")), "{out}{err}");

    // Data and a group through EXTERNAL: the leader and the coordinator are found there.
    let client = broker::ClusterClient::new(std::slice::from_ref(&node_addr))
        .unwrap()
        .with_timeout(Duration::from_secs(5))
        .with_identity(broker::auth::call_identity::CallIdentity::credential({
            let m = metastore::Client::new(std::slice::from_ref(&node_addr)).unwrap();
            m.set_credential_file(std::path::Path::new(&tests::credential_file(&dir.path().join("n1"))))
                .unwrap();
            m.credential_interceptor()
        }));
    tests::reassign::create(&client, "lt", vec![vec![1]], &[]).await;
    let (code, _, err) = run(
        Command::new("timeout").args(["60", "kcat", "-P", "-b", &ext, "-t", "lt", "-p", "0"]),
        "a\nb\nc\n",
    );
    assert_eq!(code, Some(0), "kcat produce through EXTERNAL: {err}");
    let (code, out, err) = run(
        Command::new("timeout").args(["90", "python3", "-c", PYTHON_GROUP, &ext, "lt"]),
        "",
    );
    assert_eq!(code, Some(0), "kafka-python through EXTERNAL: {out}{err}");
    // The records came from the leader, and the commit went to the coordinator: both were
    // named at EXTERNAL's address (INTERNAL's would not connect).
    assert!(out.contains("['a', 'b', 'c']"), "{out}{err}");
    drop(node);
}

/// Makes `alice` a SCRAM-SHA-512 user through the node at `node`, with the cluster credential.
fn set_scram(dir: &std::path::Path, node: &str) {
    let credential = tests::credential_file(&dir.join("n1"));
    tests::wait_for_file(&credential);
    let (code, out, err) = tests::run_ferry(&[
        "users",
        "set-scram",
        "alice",
        "--password",
        "alice-secret",
        "--mechanism",
        "SCRAM-SHA-512",
        "--bootstrap-server",
        node,
        "--cluster-credential-file",
        &credential,
    ]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn bad_listener_flags_stop_the_node_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let base = |extra: &[&str]| tests::refused_node(&dir.path().join("n1"), extra);
    let err = base(&["--listeners", "INTERNAL://127.0.0.1:0"]);
    assert!(
        err.contains("--listener-security-protocol-map: no security protocol for listener INTERNAL"),
        "{err}"
    );
    let err = base(&[
        "--listeners",
        "PLAINTEXT://127.0.0.1:0",
        "--advertised-listeners",
        "SSL://h:1",
    ]);
    assert!(err.contains("--advertised-listeners: SSL is not a listener"), "{err}");
    let err = base(&["--listeners", "SSL://127.0.0.1:0"]);
    assert!(
        err.contains("--ssl-keystore-location: listener SSL is SSL and needs a certificate"),
        "{err}"
    );
    let err = base(&["--advertised-listeners", "PLAINTEXT://h:1"]);
    assert!(err.contains("--advertised-listeners: needs --listeners"), "{err}");
    // Nothing was written for a node refused at its flags.
    assert!(!dir.path().join("n1").exists());
}
