//! Helpers for reassignment tests: submit, cancel, list, and a whole-metastore snapshot.

use std::time::Duration;

use broker::ClusterClient;
use proto::ferry::*;

/// Submits targets (`None` cancels that partition) with an optional throttle.
pub async fn alter(
    c: &ClusterClient,
    moves: &[(&str, u32, Option<Vec<i32>>)],
    throttle: Option<i64>,
) -> AlterPartitionReassignmentsResponse {
    let req = AlterPartitionReassignmentsRequest {
        partitions: moves
            .iter()
            .map(|(t, p, r)| ReassignmentTarget {
                topic: t.to_string(),
                partition: *p,
                replicas: r.clone().map(|brokers| Replicas { brokers }),
            })
            .collect(),
        throttle_rate: throttle,
        validate_only: false,
    };
    c.admin_call(|mut a| {
        let req = req.clone();
        async move { a.alter_partition_reassignments(req).await }
    })
    .await
    .expect("admin reachable")
}

/// The ongoing reassignments.
pub async fn list(c: &ClusterClient) -> ListPartitionReassignmentsResponse {
    c.admin_call(|mut a| async move {
        a.list_partition_reassignments(ListPartitionReassignmentsRequest { partitions: vec![] })
            .await
    })
    .await
    .expect("admin reachable")
}

/// Waits until no reassignment is pending.
pub async fn wait_all_done(c: &ClusterClient, timeout: Duration) {
    crate::wait_until(timeout, "every reassignment to complete", || async {
        list(c).await.reassignments.is_empty()
    })
    .await;
}

/// Every key and value in the metastore, to compare before and after a refused request.
pub async fn snapshot(m: &metastore::Client) -> Vec<(String, Vec<u8>, u64)> {
    let r = m
        .range_req(proto::metastore::RangeRequest {
            prefix: "/".into(),
            ..Default::default()
        })
        .await
        .expect("metastore reachable");
    r.kvs
        .into_iter()
        .filter(|kv| !kv.key.starts_with("/brokers/ids/") && kv.key != "/controller")
        .map(|kv| (kv.key, kv.value.to_vec(), kv.mod_revision))
        .collect()
}

/// Replica folders of `<topic>-<p>` under a data dir, at any depth below its log dirs.
pub fn replica_dirs(root: &std::path::Path, topic: &str, p: u32) -> Vec<std::path::PathBuf> {
    let name = format!("{topic}-{p}");
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = e.path();
            if e.file_name().to_string_lossy() == name {
                out.push(path);
            } else if path.is_dir() && !path.join("leader-epoch-checkpoint").exists() {
                stack.push(path);
            }
        }
    }
    out
}
