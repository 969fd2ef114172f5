//! A few seconds of `ferry-bench` against a real cluster, so that the load generator keeps working.

use std::process::Command;
use std::time::Duration;

use tests::{Cluster, ProcNode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferry_bench_runs_each_workload_and_reports_json() {
    let c = Cluster::start(3).await;
    let endpoints = c.addrs.join(",");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(tests::ferry_bench_bin())
            .args([
                "--endpoints",
                &endpoints,
                "--workload",
                "put,txn10,get",
                "--clients",
                "1,4",
            ])
            .args(["--duration", "1", "--warmup", "0.2", "--keys", "500", "--json"])
            .output()
            .expect("running ferry-bench")
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    // One line per workload and client count, and the Raft term at the start and the end.
    assert_eq!(lines.len(), 7, "{stdout}");
    let terms = lines
        .iter()
        .find(|l| l.contains("\"raft_term_start\""))
        .unwrap_or_else(|| panic!("no Raft terms: {stdout}"));
    assert!(json_u64(terms, "raft_term_start") >= 1, "{terms}");
    assert!(
        json_u64(terms, "raft_term_end") >= json_u64(terms, "raft_term_start"),
        "{terms}"
    );
    for w in ["put", "txn10", "get"] {
        for c in [1, 4] {
            let line = lines
                .iter()
                .find(|l| l.contains(&format!("\"workload\":\"{w}\",\"clients\":{c},")))
                .unwrap_or_else(|| panic!("no result for {w} at {c} clients: {stdout}"));
            assert!(line.contains("\"errors\":0"), "{line}");
            assert!(!line.contains("\"ops\":0,"), "{line}");
        }
    }
    c.shutdown().await;
}

/// The number after `"name":` in a JSON line.
fn json_u64(line: &str, name: &str) -> u64 {
    let key = format!("\"{name}\":");
    let rest = &line[line.find(&key).unwrap_or_else(|| panic!("no {name} in {line}")) + key.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a count in {line}"))
}

#[test]
fn ferry_bench_produce_reports_records_per_acks() {
    let dir = tempfile::tempdir().unwrap();
    let peers = tests::loopback_peers(3);
    let _nodes: Vec<ProcNode> = peers
        .iter()
        .map(|(id, addr)| {
            let mut n = ProcNode::new(*id, addr, &dir.path().join(format!("n{id}")), &peers, false);
            n.spawn();
            n
        })
        .collect();
    let bootstrap = peers.values().cloned().collect::<Vec<_>>().join(",");
    // Creation fails until the quorum is up and all three brokers have registered.
    let created = (0..300).any(|_| {
        let out = Command::new(tests::ferry_bin())
            .args(["topics", "--create", "--topic", "smoke", "--partitions", "3"])
            .args(["--replication-factor", "3", "--bootstrap-server", &bootstrap])
            .output()
            .expect("running ferry topics");
        if !out.status.success() {
            std::thread::sleep(Duration::from_millis(100));
        }
        out.status.success()
    });
    assert!(created, "the topic was not created within 30 s");

    let out = Command::new(tests::ferry_bench_bin())
        .args(["--endpoints", &bootstrap, "--workload", "produce", "--topic", "smoke"])
        .args([
            "--acks",
            "1,all",
            "--clients",
            "2",
            "--record-bytes",
            "100",
            "--batch-records",
            "10",
        ])
        .args(["--duration", "1", "--warmup", "0.3", "--json"])
        .output()
        .expect("running ferry-bench");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    // One line per acks value, and the Raft terms.
    assert_eq!(lines.len(), 3, "{stdout}");
    for acks in ["1", "all"] {
        let line = lines
            .iter()
            .find(|l| l.contains(&format!("\"acks\":\"{acks}\",")))
            .unwrap_or_else(|| panic!("no result for acks={acks}: {stdout}"));
        assert!(line.contains("\"workload\":\"produce\",\"clients\":2,"), "{line}");
        assert_eq!(json_u64(line, "errors"), 0, "{line}");
        let ops = json_u64(line, "ops");
        assert!(ops > 0, "{line}");
        assert_eq!(json_u64(line, "records"), ops * 10, "{line}");
    }
}
