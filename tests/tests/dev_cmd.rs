//! `ferry dev --nodes N --brokers M`: the cluster it starts, what it prints, and its limits.

use std::process::Command;
use std::time::Duration;

use proto::ferry::DescribeClusterRequest;
use tests::wait_until;

use tests::dev::{start_dev_until, Dev};

/// Starts `ferry dev ARGS` on free ports in `dir`, up to its bootstrap line.
fn start_dev(dir: &std::path::Path, args: &[&str]) -> (Dev, Vec<String>) {
    start_dev_until(dir, args, "bootstrap: ")
}

fn sigterm_and_wait(dev: &mut Dev) -> i32 {
    let _ = Command::new("kill").args(["-TERM", &dev.0.id().to_string()]).status();
    for _ in 0..300 {
        if let Some(status) = dev.0.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("ferry dev did not stop on SIGTERM");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_with_an_extra_broker_registers_four_brokers() {
    let dir = tempfile::tempdir().unwrap();
    let (mut dev, printed) = tokio::task::block_in_place(|| start_dev(dir.path(), &["--nodes", "3", "--brokers", "1"]));
    assert!(
        printed[0].starts_with("ferry dev: 4 nodes (3 quorum and broker, 1 broker only), data in ferry-dev"),
        "{printed:?}"
    );
    let nodes: Vec<&String> = printed.iter().filter(|l| l.starts_with("  node ")).collect();
    assert_eq!(nodes.len(), 4, "{printed:?}");
    assert!(nodes[3].starts_with("  node 4: 127.0.0.1:") && nodes[3].ends_with(" (broker only)"));
    let bootstrap = printed.last().unwrap().strip_prefix("bootstrap: ").unwrap().to_string();

    let c = broker::ClusterClient::new(&[bootstrap])
        .unwrap()
        .with_timeout(Duration::from_secs(5));
    // The ready lines come once the whole cluster is: every broker is registered already.
    let r = c
        .admin_call(|mut a| async move { a.describe_cluster(DescribeClusterRequest {}).await })
        .await
        .unwrap();
    let mut ids: Vec<i32> = r.brokers.iter().map(|b| b.id).collect();
    ids.sort();
    assert_eq!(
        ids,
        [1, 2, 3, 4],
        "every broker registered when ferry dev says it is ready"
    );
    assert!(dir.path().join("ferry-dev/node-4/logs-1").is_dir());
    assert!(dir.path().join("ferry-dev/node-4/logs-2").is_dir());
    // Each node's metrics address follows its line; each node has its own metrics.
    let metrics: Vec<&str> = printed
        .iter()
        .filter_map(|l| l.strip_prefix("    metrics: http://")?.strip_suffix("/metrics"))
        .collect();
    assert_eq!(metrics.len(), 4, "{printed:?}");
    // The web console is served beside the metrics, and said on the next line.
    let consoles: Vec<&str> = printed
        .iter()
        .filter_map(|l| l.strip_prefix("    console: http://")?.strip_suffix('/'))
        .collect();
    assert_eq!(consoles, metrics, "{printed:?}");
    for (i, addr) in metrics.iter().enumerate() {
        let e = tokio::task::block_in_place(|| tests::metrics::scrape_parsed(addr)).unwrap();
        assert!(e.has("ferry_reassigning_partitions", "gauge"), "{addr}");
        assert_eq!(e.has("ferry_metastore_revision", "gauge"), i < 3, "{addr}");
    }
    assert_eq!(tokio::task::block_in_place(|| sigterm_and_wait(&mut dev)), 0);

    // The data dir remembers its shape: other counts are refused, none given reuses it.
    let out = Command::new(tests::ferry_bin())
        .current_dir(dir.path())
        .args(["dev", "--base-port", "0", "--nodes", "5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ferry-dev holds a cluster of 3 nodes and 1 broker-only nodes"),
        "{err}"
    );
    let (mut dev, again) = tokio::task::block_in_place(|| start_dev(dir.path(), &[]));
    // Metrics ports are picked afresh with --base-port 0.
    let nodes_only = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .filter(|l| !l.starts_with("    metrics: ") && !l.starts_with("    console: "))
            .cloned()
            .collect()
    };
    assert_eq!(
        nodes_only(&again),
        nodes_only(&printed),
        "a second start keeps the nodes and their addresses"
    );
    assert_eq!(tokio::task::block_in_place(|| sigterm_and_wait(&mut dev)), 0);
}

#[test]
fn dev_refuses_counts_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (&["--nodes", "0"][..], "0 is not in 1..=7"),
        (&["--nodes", "8"], "8 is not in 1..=7"),
        (&["--brokers", "17"], "17 is not in 0..=16"),
        (&["--brokers=-1"], "invalid value '-1' for '--brokers"),
    ] {
        let out = Command::new(tests::ferry_bin())
            .current_dir(dir.path())
            .arg("dev")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert!(!dir.path().join("ferry-dev").exists());
}

/// The admin service of a node that does not lead names the leader in every answer, and the
/// leader's answers name nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_name_the_leader_in_their_admin_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (_dev, printed) = tokio::task::block_in_place(|| start_dev(dir.path(), &[]));
    let addrs: Vec<String> = printed
        .iter()
        .filter_map(|l| l.strip_prefix("  node ")?.split_once(": ").map(|(_, a)| a.to_string()))
        .collect();
    assert_eq!(addrs.len(), 3, "{printed:?}");
    let hints = || async {
        let mut out = Vec::new();
        for a in &addrs {
            let channel = metastore::peers::channel(a).unwrap();
            let mut admin = proto::ferry::admin_client::AdminClient::new(channel);
            let Ok(r) = admin.describe_cluster(DescribeClusterRequest {}).await else {
                return None;
            };
            out.push(
                r.metadata()
                    .get(proto::LEADER_HINT)
                    .map(|v| v.to_str().unwrap().to_string()),
            );
        }
        Some(out)
    };
    wait_until(
        Duration::from_secs(30),
        "one leader, named by the two others",
        || async {
            let Some(h) = hints().await else { return false };
            let leaders: Vec<usize> = (0..3).filter(|i| h[*i].is_none()).collect();
            leaders.len() == 1
                && (0..3)
                    .filter(|i| *i != leaders[0])
                    .all(|i| h[i].as_deref() == Some(addrs[leaders[0]].as_str()))
        },
    )
    .await;
}
