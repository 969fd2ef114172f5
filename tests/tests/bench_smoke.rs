//! A few seconds of `ferry-bench` against a real cluster, so that the load generator keeps working.

use std::process::Command;

use tests::Cluster;

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
    assert_eq!(lines.len(), 6, "{stdout}");
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
