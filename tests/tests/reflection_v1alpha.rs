//! Server reflection for clients that speak only `grpc.reflection.v1alpha`: Python's
//! grpcio-reflection client lists every node's services and resolves the `ferry` services'
//! methods from the descriptors the node sends (`tools/test.sh` installs the client).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use broker::ClusterClient;
use tests::{wait_until, ProcNode};

/// Runs the Python reflection client against `addrs`; its exit code, stdout and stderr. Killed
/// after two minutes, so that a server that never answers fails the test instead of hanging it.
fn python_reflection(addrs: &[String]) -> (Option<i32>, String, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/reflection_v1alpha.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .args(addrs)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running python3 (tools/test.sh --deps-only installs it and grpcio-reflection)");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().expect("waiting for python3").is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let out = child.wait_with_output().expect("python3's output");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_reflection_lists_and_resolves_the_ferry_services_over_v1alpha() {
    let dir = tempfile::tempdir().unwrap();
    let peers = tests::loopback_peers(3);
    let mut nodes: BTreeMap<u64, ProcNode> = peers
        .iter()
        .map(|(id, addr)| {
            let n = ProcNode::new(*id, addr, &dir.path().join(format!("n{id}")), &peers, false);
            (*id, n)
        })
        .collect();
    for n in nodes.values_mut() {
        n.spawn();
    }
    let addrs: Vec<String> = peers.values().cloned().collect();
    let c = ClusterClient::new(&addrs).unwrap();
    wait_until(Duration::from_secs(60), "three brokers registered", || async {
        c.brokers().await.is_ok_and(|b| b.len() == 3)
    })
    .await;

    let a = addrs.clone();
    let (code, out, err) = tokio::task::spawn_blocking(move || python_reflection(&a))
        .await
        .unwrap();
    assert_eq!(code, Some(0), "the v1alpha reflection client failed:\n{err}{out}");
    for addr in &addrs {
        for service in [
            "ferry.metastore.v1.Metastore",
            "ferry.raft.v1.Raft",
            "ferry.v1.Broker",
            "ferry.v1.Admin",
        ] {
            assert!(
                out.lines().any(|l| l == format!("SERVICE {addr} {service}")),
                "{addr} does not list {service}:\n{out}"
            );
        }
        // Resolved from the file descriptors the node sent, not only named.
        for method in [
            "ferry.metastore.v1.Metastore/Put",
            "ferry.metastore.v1.Metastore/Watch",
            "ferry.v1.Admin/AlterPartitionReassignments",
            "ferry.v1.Broker/Produce",
        ] {
            assert!(
                out.lines().any(|l| l == format!("METHOD {addr} {method}")),
                "{addr}: {method} not resolved:\n{out}"
            );
        }
    }
    drop(nodes);
}
