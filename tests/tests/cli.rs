//! The `ferry` binary against a real cluster: `kv` and `metastore members` commands, their output,
//! one-line errors and exit codes; `ferry dev` starting, stopping on SIGTERM and reusing its data.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use tests::run_ferry as ferry;
use tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_commands_print_results_and_one_line_errors() {
    let c = Cluster::start(3).await;
    let bs = c.addrs.join(",");
    let one = c.addrs[1].clone();
    tokio::task::spawn_blocking(move || {
        let (code, out, _) = ferry(&["kv", "put", "/cli/a", "hello", "--bootstrap-server", &bs]);
        assert_eq!(code, 0);
        assert!(out.starts_with("OK revision "), "{out}");
        let (code, out, _) = ferry(&["kv", "get", "/cli/a", "--bootstrap-server", &one]);
        assert_eq!((code, out.as_str()), (0, "hello\n"));
        let (code, out, _) = ferry(&["kv", "range", "/cli/", "--bootstrap-server", &one]);
        assert_eq!((code, out.as_str()), (0, "/cli/a\thello\n"));

        let (code, _, err) = ferry(&["kv", "put", "cli/a", "x", "--bootstrap-server", &bs]);
        assert_eq!(code, 1);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("error: key: the key \"cli/a\" does not start with '/'"),
            "{err}"
        );

        let (code, _, err) = ferry(&["kv", "get", "/cli/none", "--bootstrap-server", &bs]);
        assert_eq!(code, 1);
        assert_eq!(err.trim(), "error: key /cli/none not found");

        let txn = std::env::temp_dir().join(format!("ferry-cli-txn-{}.json", std::process::id()));
        std::fs::write(
            &txn,
            r#"{"guards":[{"key":"/cli/a","version":5}],"ops":[{"delete":{"key":"/cli/a"}}]}"#,
        )
        .unwrap();
        let (code, out, _) = ferry(&["kv", "txn", txn.to_str().unwrap(), "--bootstrap-server", &bs]);
        assert_eq!(code, 2, "a failed guard exits 2");
        assert!(
            out.contains("FAILED guard 0 on /cli/a: expected version 5, found 1"),
            "{out}"
        );
        std::fs::write(
            &txn,
            r#"{"guards":[{"key":"/cli/a","version":1}],"ops":[{"delete":{"key":"/cli/a"}}]}"#,
        )
        .unwrap();
        let (code, out, _) = ferry(&["kv", "txn", txn.to_str().unwrap(), "--bootstrap-server", &bs]);
        assert_eq!(code, 0);
        assert!(out.starts_with("SUCCEEDED") && out.contains("deleted 1"), "{out}");
        std::fs::write(&txn, r#"{"ops":[{"put":{"key":"/x"}}]}"#).unwrap();
        let (code, _, err) = ferry(&["kv", "txn", txn.to_str().unwrap(), "--bootstrap-server", &bs]);
        assert_eq!(code, 1);
        assert!(err.starts_with("error: transaction JSON"), "{err}");
        let _ = std::fs::remove_file(&txn);

        let (code, out, _) = ferry(&["metastore", "members", "list", "--bootstrap-server", &bs]);
        assert_eq!(code, 0);
        assert_eq!(out.lines().filter(|l| l.ends_with("\tvoter")).count(), 3, "{out}");

        let (code, _, err) = ferry(&["kv", "get", "/x", "--bootstrap-server", "127.0.0.1:1"]);
        assert_ne!(code, 0);
        assert_eq!(err.lines().count(), 1, "{err}");
    })
    .await
    .unwrap();
    c.shutdown().await;
}

/// Starts `ferry dev` and returns it with the bootstrap address it printed.
fn start_dev(dir: &std::path::Path) -> (std::process::Child, String) {
    let mut child = Command::new(tests::ferry_bin())
        .args(["dev", "--base-port", "0", "--data-dir"])
        .arg(dir)
        .stdout(Stdio::piped())
        // Shown with a failure: why a dev cluster did not start.
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting ferry dev");
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let bootstrap = loop {
        let line = lines.next().expect("ferry dev printed its bootstrap line").unwrap();
        if let Some(addr) = line.strip_prefix("bootstrap: ") {
            break addr.to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, bootstrap)
}

fn sigterm_and_wait(child: &mut std::process::Child) -> i32 {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    for _ in 0..300 {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("ferry dev did not stop on SIGTERM");
}

#[test]
fn dev_cluster_stops_on_sigterm_and_reuses_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let (mut dev, bootstrap) = start_dev(dir.path());
    let (code, _, err) = ferry(&["kv", "put", "/dev/k", "kept", "--bootstrap-server", &bootstrap]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(sigterm_and_wait(&mut dev), 0);

    let (mut dev, bootstrap2) = start_dev(dir.path());
    assert_eq!(bootstrap, bootstrap2, "a second start keeps the same addresses");
    let (code, out, err) = ferry(&["kv", "get", "/dev/k", "--bootstrap-server", &bootstrap2]);
    assert_eq!((code, out.as_str()), (0, "kept\n"), "{err}");
    assert_eq!(sigterm_and_wait(&mut dev), 0);
}

fn ferry_stdin(args: &[&str], input: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(tests::ferry_bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running ferry");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn replica_folders(dir: &std::path::Path, topic: &str) -> usize {
    let mut n = 0;
    for node in std::fs::read_dir(dir).unwrap().flatten() {
        for logs in std::fs::read_dir(node.path()).into_iter().flatten().flatten() {
            for e in std::fs::read_dir(logs.path()).into_iter().flatten().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.rsplit_once('-').is_some_and(|(t, _)| t == topic) {
                    n += 1;
                }
            }
        }
    }
    n
}

#[test]
fn dev_cluster_serves_topics_produce_and_consume_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (mut dev, bs) = start_dev(dir.path());
    let create = [
        "topics",
        "--create",
        "--topic",
        "demo",
        "--partitions",
        "3",
        "--replication-factor",
        "3",
        "--bootstrap-server",
        &bs,
    ];
    // The brokers register a moment after the quorum answers.
    let mut out = ferry(&create);
    for _ in 0..100 {
        if out.0 == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        out = ferry(&create);
    }
    assert_eq!(out.1, "Created topic demo.\n", "{}", out.2);
    let (code, _, err) = ferry(&create);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "Error while executing topic command : Topic 'demo' already exists.\n"
    );

    let input: String = (1..=100).map(|i| format!("line {i}\n")).collect();
    let (code, _, err) = ferry_stdin(&["produce", "--topic", "demo", "--bootstrap-server", &bs], &input);
    assert_eq!(code, 0, "{err}");
    let consume = [
        "consume",
        "--topic",
        "demo",
        "--from-beginning",
        "--max-records",
        "100",
        "--bootstrap-server",
        &bs,
    ];
    let sorted = |out: &str| {
        let mut v: Vec<String> = out.lines().map(String::from).collect();
        v.sort();
        v
    };
    let mut want: Vec<String> = (1..=100).map(|i| format!("line {i}")).collect();
    want.sort();
    let (code, out, err) = ferry(&consume);
    assert_eq!(code, 0, "{err}");
    assert_eq!(sorted(&out), want);

    let (code, out, _) = ferry(&["topics", "--describe", "--topic", "demo", "--bootstrap-server", &bs]);
    assert_eq!(code, 0);
    assert!(out.starts_with("Topic: demo\tTopicId: "), "{out}");
    assert_eq!(out.lines().filter(|l| l.contains("\tLeader: ")).count(), 3, "{out}");
    assert_eq!(replica_folders(dir.path(), "demo"), 9);

    // The records are still there after a restart.
    assert_eq!(sigterm_and_wait(&mut dev), 0);
    let (mut dev, bs) = start_dev(dir.path());
    let consume: Vec<&str> = consume
        .iter()
        .map(|a| if a.contains(':') { bs.as_str() } else { a })
        .collect();
    let mut got = (1, String::new(), String::new());
    for _ in 0..100 {
        got = ferry(&consume);
        if got.0 == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(got.0, 0, "{}", got.2);
    assert_eq!(sorted(&got.1), want);

    // Deleting the topic removes every replica from disk.
    let (code, out, err) = ferry(&["topics", "--delete", "--topic", "demo", "--bootstrap-server", &bs]);
    assert_eq!((code, out.as_str()), (0, "Deleted topic demo.\n"), "{err}");
    for _ in 0..100 {
        if replica_folders(dir.path(), "demo") == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(replica_folders(dir.path(), "demo"), 0);
    let (_, out, _) = ferry(&["topics", "--list", "--bootstrap-server", &bs]);
    assert!(!out.lines().any(|l| l == "demo"), "{out}");
    assert_eq!(sigterm_and_wait(&mut dev), 0);
}
