//! `ferry reassign` against a real cluster: Kafka's lines for execute, list, verify and cancel,
//! and clear errors for bad files that change nothing.

use std::time::Duration;

use tests::data::isr_is;
use tests::reassign::{create, produce_n, start_four};
use tests::run_ferry as ferry;
use tests::wait_until;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reassign_prints_kafkas_lines() {
    let dir = tempfile::tempdir().unwrap();
    let f = start_four(dir.path());
    let c = f.client.clone();
    create(&c, "t", vec![vec![1, 2], vec![2, 3]], &[]).await;
    wait_until(Duration::from_secs(30), "ISRs", || isr_is(&c, "t", 1, &[2, 3])).await;
    produce_n(&c, "t", 0, 20, 10, 500).await;
    let bs = f
        .nodes
        .values()
        .take(3)
        .map(|n| n.addr.clone())
        .collect::<Vec<_>>()
        .join(",");
    let file = dir.path().join("move.json");
    std::fs::write(
        &file,
        r#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[4,2],"log_dirs":["any","any"]}]}"#,
    )
    .unwrap();
    let file_s = file.to_string_lossy().into_owned();
    let b = |args: &[&str]| {
        let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        v.extend(["--bootstrap-server".to_string(), bs.clone()]);
        v
    };
    let run = |args: Vec<String>| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        ferry(&refs)
    };

    let (code, out, err) = tokio::task::block_in_place(|| {
        run(b(&[
            "reassign",
            "--execute",
            "--reassignment-json-file",
            &file_s,
            "--throttle",
            "2000",
        ]))
    });
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with(
        "Current partition replica assignment\n\n{\"version\":1,\"partitions\":[{\"topic\":\"t\",\"partition\":0,\"replicas\":[1,2],\"log_dirs\":[\"any\",\"any\"]}]}\n\nSave this to use as the --reassignment-json-file option during rollback\n"
    ), "{out}");
    assert!(out.contains("removed when it ends; no --verify is needed"), "{out}");
    assert!(
        out.ends_with("Successfully started partition reassignment for t-0\n"),
        "{out}"
    );

    let (code, out, _) =
        tokio::task::block_in_place(|| run(b(&["reassign", "--execute", "--reassignment-json-file", &file_s])));
    assert_eq!(code, 1);
    assert!(out.contains("Cannot execute because there is an existing partition assignment.  Use --additional to override this and create a new partition assignment in addition to the existing one."), "{out}");

    let (_, out, _) = tokio::task::block_in_place(|| run(b(&["reassign", "--list"])));
    assert_eq!(
        out,
        "Current partition reassignments:\nt-0: replicas: 4,2,1. adding: 4. removing: 1.\n"
    );
    let (code, out, _) =
        tokio::task::block_in_place(|| run(b(&["reassign", "--verify", "--reassignment-json-file", &file_s])));
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "Status of partition reassignment:\nReassignment of partition t-0 is still in progress.\n"
    );

    let (code, out, _) =
        tokio::task::block_in_place(|| run(b(&["reassign", "--cancel", "--reassignment-json-file", &file_s])));
    assert_eq!(
        (code, out.as_str()),
        (0, "Successfully cancelled partition reassignment for: t-0\n")
    );
    let (_, out, _) =
        tokio::task::block_in_place(|| run(b(&["reassign", "--cancel", "--reassignment-json-file", &file_s])));
    assert_eq!(out, "None of the specified partition reassignments are active.\n");
    let (_, out, _) =
        tokio::task::block_in_place(|| run(b(&["reassign", "--verify", "--reassignment-json-file", &file_s])));
    assert_eq!(
        out,
        "Status of partition reassignment:\nThere is no active reassignment of partition t-0, but replica set is 1,2 rather than 4,2.\n"
    );
    let (_, out, _) = tokio::task::block_in_place(|| run(b(&["reassign", "--list"])));
    assert_eq!(out, "No partition reassignments found.\n");

    // An unthrottled move of an empty partition completes.
    std::fs::write(
        &file,
        r#"{"version":1,"partitions":[{"topic":"t","partition":1,"replicas":[3,4]}]}"#,
    )
    .unwrap();
    let (code, out, err) =
        tokio::task::block_in_place(|| run(b(&["reassign", "--execute", "--reassignment-json-file", &file_s])));
    assert_eq!(code, 0, "{out}{err}");
    wait_until(Duration::from_secs(30), "the move to complete", || async {
        let (_, out, _) =
            tokio::task::block_in_place(|| run(b(&["reassign", "--verify", "--reassignment-json-file", &file_s])));
        out.contains("Reassignment of partition t-1 is completed.")
    })
    .await;

    // --generate keeps what it can and fills from the least-loaded listed brokers.
    let topics = dir.path().join("topics.json");
    std::fs::write(&topics, r#"{"topics":[{"topic":"t"}],"version":1}"#).unwrap();
    let topics_s = topics.to_string_lossy().into_owned();
    let (code, out, err) = tokio::task::block_in_place(|| {
        run(b(&[
            "reassign",
            "--generate",
            "--topics-to-move-json-file",
            &topics_s,
            "--broker-list",
            "2,3,4",
        ]))
    });
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        concat!(
            "Current partition replica assignment\n",
            r#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},{"topic":"t","partition":1,"replicas":[3,4],"log_dirs":["any","any"]}]}"#,
            "\n\nProposed partition reassignment configuration\n",
            r#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3],"log_dirs":["any","any"]},{"topic":"t","partition":1,"replicas":[3,4],"log_dirs":["any","any"]}]}"#,
            "\n"
        )
    );

    // Bad files: a clear error, a non-zero exit, nothing changed.
    let before = tests::reassign::snapshot(&f.meta).await;
    for (body, needle) in [
        (r#"{"version":1,"partitions":[{"topic":"t","#, "line 1"),
        (
            r#"{"version":1,"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}"#,
            "invalid type",
        ),
        (
            r#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[-4]}]}"#,
            "t-0: broker id -4 is negative",
        ),
        (
            r#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}"#,
            "t-0 appears twice",
        ),
        (
            r#"{"version":1,"partitions":[{"topic":"nope","partition":0,"replicas":[1]}]}"#,
            "nope-0",
        ),
    ] {
        std::fs::write(&file, body).unwrap();
        let (code, out, err) =
            tokio::task::block_in_place(|| run(b(&["reassign", "--execute", "--reassignment-json-file", &file_s])));
        assert_ne!(code, 0, "{body} was accepted");
        assert!(format!("{out}{err}").contains(needle), "{body}: {out}{err}");
    }
    assert_eq!(tests::reassign::snapshot(&f.meta).await, before);

    // A partition the cluster does not have, beside one it has: the error alone, naming it, as
    // Kafka's tool prints it; no rollback file (it would say `"replicas":[]`) and nothing changed.
    std::fs::write(
        &file,
        r#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]},{"topic":"t","partition":7,"replicas":[2,3]},{"topic":"nope","partition":0,"replicas":[1]}]}"#,
    )
    .unwrap();
    let (code, out, err) =
        tokio::task::block_in_place(|| run(b(&["reassign", "--execute", "--reassignment-json-file", &file_s])));
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (1, "", "error: Unable to find partition: t-7, nope-0\n")
    );
    assert_eq!(tests::reassign::snapshot(&f.meta).await, before);
}
