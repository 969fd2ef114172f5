//! JBOD in a real cluster (3 quorum-and-broker nodes and broker 4 with two log dirs, as
//! processes): a move under produce load, SIGKILL at random points of moves and between the
//! renames of a swap, a failed dir, a reassignment with `log_dirs`, and bad requests that change
//! nothing.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use broker::partition_log::{LogConfig, PartitionLog};
use broker::ClusterClient;
use bytes::Bytes;
use proto::ferry::config_resource::Type;
use proto::ferry::*;
use rand::Rng;
use tests::data::{isr_is, partition_state, read_all};
use tests::reassign::{create, produce_n, set_config, start_four_with, Four};
use tests::{run_ferry, wait_until};

/// Broker 4 with dirs `a` and `b`, probed often.
fn start(dir: &Path) -> Four {
    let dirs = format!("{},{}", dir.join("n4/a").display(), dir.join("n4/b").display());
    start_four_with(dir, &["--log-dirs", &dirs, "--log-dir-probe-interval-ms", "200"])
}

async fn describe(c: &ClusterClient) -> DescribeLogDirsResponse {
    for _ in 0..100 {
        if let Ok(mut r) = c.describe_log_dirs(&[4], &[]).await {
            return r.remove(0);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("broker 4 does not answer DescribeLogDirs");
}

/// The dir holding the current (not future) replica, and whether a future one exists.
fn placement(d: &DescribeLogDirsResponse, topic: &str, p: u32) -> (Option<String>, bool) {
    let mut current = None;
    let mut future = false;
    for dir in &d.dirs {
        for r in dir.replicas.iter().filter(|r| r.topic == topic && r.partition == p) {
            if r.is_future {
                future = true;
            } else {
                current = Some(dir.path.clone());
            }
        }
    }
    (current, future)
}

fn other_dir(d: &DescribeLogDirsResponse, not: &str) -> String {
    d.dirs.iter().map(|x| x.path.clone()).find(|p| p != not).unwrap()
}

fn ferry(f: &Four, args: &[&str]) -> (i32, String, String) {
    let bs = f.bootstrap();
    let mut v: Vec<&str> = args.to_vec();
    v.extend(["--bootstrap-server", &bs]);
    tokio::task::block_in_place(|| run_ferry(&v))
}

/// `ferry log-dirs --move` of one of broker 4's replicas; returns what it printed.
fn move_replica(f: &Four, partition: &str, to: &str) -> String {
    let (code, out, err) = ferry(
        f,
        &[
            "log-dirs",
            "--move",
            "--broker",
            "4",
            "--partitions",
            partition,
            "--log-dir",
            to,
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    out
}

/// Replica folders of `<topic>-<p>` (current, `.move` or `.delete`) under broker 4's dirs.
fn folders(root: &Path, topic: &str, p: u32) -> Vec<PathBuf> {
    let name = format!("{topic}-{p}");
    let mut out = Vec::new();
    for d in ["a", "b"] {
        for e in std::fs::read_dir(root.join("n4").join(d))
            .into_iter()
            .flatten()
            .flatten()
        {
            let f = e.file_name().to_string_lossy().into_owned();
            if f == name || f.starts_with(&format!("{name}.")) {
                out.push(e.path());
            }
        }
    }
    out
}

/// Every batch of the log in `folder` verifies; returns the number of records.
fn verify_folder(folder: &Path) -> i64 {
    let log = PartitionLog::open(folder, LogConfig::default()).unwrap();
    let mut at = 0;
    while at < log.log_end_offset() {
        let raw = log.read(at, 4 << 20, i64::MAX).unwrap();
        let batches = broker::record_batch::split_batches(&raw).unwrap();
        at = batches.last().unwrap().0.next_offset();
    }
    log.log_end_offset()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_under_produce_load_keeps_every_acknowledged_record() {
    let dir = tempfile::tempdir().unwrap();
    let f = start(dir.path());
    let c = f.client.clone();
    create(&c, "m", vec![vec![4, 1, 2]], &[("min.insync.replicas", "2")]).await;
    wait_until(Duration::from_secs(30), "a full ISR", || isr_is(&c, "m", 0, &[4, 1, 2])).await;
    produce_n(&c, "m", 0, 100, 100, 1000).await; // about 10 MB
    set_config(
        &c,
        Type::Broker,
        "4",
        "replica.alter.log.dirs.io.max.bytes.per.second",
        "5000000",
    )
    .await;

    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (c, stop) = (c.clone(), stop.clone());
        tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let recs: Vec<Bytes> = (0..10).map(|i| Bytes::from(format!("live-{n}-{i}"))).collect();
                if c.produce_once("m", 0, recs.clone(), -1).await.is_ok() {
                    acked.extend(recs.iter().map(|r| String::from_utf8_lossy(r).into_owned()));
                }
                n += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            acked
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = describe(&c).await;
    let (from, _) = placement(&before, "m", 0);
    let from = from.expect("m-0 is on broker 4");
    let to = other_dir(&before, &from);
    let out = move_replica(&f, "m-0", &to);
    assert!(out.contains(&format!("Moving replica m-0-4 to {to}.")), "{out}");
    // While it copies, the future log shows up in the destination with its lag.
    let during = describe(&c).await;
    let fut = during
        .dirs
        .iter()
        .find(|d| d.path == to)
        .and_then(|d| d.replicas.iter().find(|r| r.topic == "m" && r.is_future).cloned());
    let fut = fut.expect("a future log in the destination while the move runs");
    assert!(fut.offset_lag > 0, "{fut:?}");
    wait_until(Duration::from_secs(60), "the move to finish", || async {
        placement(&describe(&c).await, "m", 0) == (Some(to.clone()), false)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let acked = producer.await.unwrap();
    assert!(acked.len() > 100, "the producer ran during the move: {}", acked.len());

    let all = read_all(&c, "m", 0).await;
    let live: std::collections::HashMap<&str, usize> =
        all.iter()
            .filter(|(_, v)| v.starts_with("live-"))
            .fold(Default::default(), |mut m, (_, v)| {
                *m.entry(v.as_str()).or_default() += 1;
                m
            });
    for a in &acked {
        assert_eq!(live.get(a.as_str()), Some(&1), "acknowledged record {a} once");
    }
    assert_eq!(folders(dir.path(), "m", 0).len(), 1);
    // The moved log's checksums verify, record for record.
    let mut f = f;
    f.nodes.get_mut(&4).unwrap().kill();
    let folder = PathBuf::from(&to).join("m-0");
    assert_eq!(verify_folder(&folder), all.len() as i64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_random_points_of_moves_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = start(dir.path());
    let c = f.client.clone();
    create(&c, "k", vec![vec![4]], &[]).await;
    produce_n(&c, "k", 0, 100, 100, 1000).await; // about 10 MB
    let want = read_all(&c, "k", 0).await;
    set_config(
        &c,
        Type::Broker,
        "4",
        "replica.alter.log.dirs.io.max.bytes.per.second",
        "5000000",
    )
    .await;
    let mut rng = rand::rng();
    let mut killed_mid_copy = 0;
    // The incarnation of the broker 4 process killed last (0: none; a live one is never 0).
    let mut killed_incarnation = 0u64;
    for round in 0..10 {
        // Start a move to the other dir unless one resumed after the last restart.
        let d = describe(&c).await;
        let (cur, moving) = placement(&d, "k", 0);
        let cur = cur.expect("k-0 is on broker 4");
        if !moving {
            let to = other_dir(&d, &cur);
            // The restarted broker may not have registered again yet (the checks above can pass
            // on its old registration, which then expires), and `ferry log-dirs` finds it by its
            // registration: wait for the new process's own.
            wait_until(Duration::from_secs(30), "broker 4 registered again", || async {
                c.brokers()
                    .await
                    .is_ok_and(|b| b.iter().any(|b| b.id == 4 && b.incarnation != killed_incarnation))
            })
            .await;
            move_replica(&f, "k-0", &to);
        }
        let wait_ms = rng.random_range(0..2000);
        tokio::time::sleep(Duration::from_millis(wait_ms)).await;
        if placement(&describe(&c).await, "k", 0).1 {
            killed_mid_copy += 1;
        }
        killed_incarnation = c
            .brokers()
            .await
            .ok()
            .and_then(|b| b.iter().find(|b| b.id == 4).map(|b| b.incarnation))
            .unwrap_or(0);
        let four = f.nodes.get_mut(&4).unwrap();
        four.kill();
        four.spawn();
        // After the restart the move finishes (resumed from the .move folder) and no record is lost.
        wait_until(
            Duration::from_secs(60),
            "the move to finish after a restart",
            || async {
                let d = describe(&c).await;
                placement(&d, "k", 0).0.is_some() && !placement(&d, "k", 0).1
            },
        )
        .await;
        wait_until(Duration::from_secs(30), "exactly one folder", || async {
            folders(dir.path(), "k", 0).len() == 1
        })
        .await;
        wait_until(Duration::from_secs(30), "k-0 led again", || async {
            partition_state(&c, "k", 0).await.is_some_and(|s| s.leader == 4)
        })
        .await;
        assert_eq!(
            read_all(&c, "k", 0).await,
            want,
            "round {round} (killed after {wait_ms} ms)"
        );
    }
    assert!(killed_mid_copy >= 3, "only {killed_mid_copy} kills landed mid-copy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_between_the_swaps_renames_is_finished_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = start(dir.path());
    let c = f.client.clone();
    create(&c, "w", vec![vec![4]], &[]).await;
    produce_n(&c, "w", 0, 50, 100, 100).await;
    let want = read_all(&c, "w", 0).await;
    assert_eq!(want.len(), 5000);
    // Broker 4 again, now holding each swap for a while between its two renames.
    let four = f.nodes.get_mut(&4).unwrap();
    four.kill();
    four.set_env("FERRY_TEST_DIR_MOVE_SWAP_PAUSE_MS", Some("5000"));
    four.spawn();
    wait_until(Duration::from_secs(60), "w-0 served again", || async {
        placement(&describe(&c).await, "w", 0).0.is_some()
    })
    .await;
    let d = describe(&c).await;
    let to = other_dir(&d, &placement(&d, "w", 0).0.unwrap());
    move_replica(&f, "w-0", &to);
    // Between the renames: the current folder is `.delete` already, the new one still `.move`.
    let between = || {
        let names: Vec<String> = folders(dir.path(), "w", 0)
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        names.contains(&"w-0.delete".to_string()) && names.contains(&"w-0.move".to_string())
    };
    wait_until(Duration::from_secs(60), "the swap's first rename", || async {
        between()
    })
    .await;
    let four = f.nodes.get_mut(&4).unwrap();
    four.kill();
    assert!(between(), "the kill landed between the renames");
    four.set_env("FERRY_TEST_DIR_MOVE_SWAP_PAUSE_MS", None);
    four.spawn();
    wait_until(
        Duration::from_secs(60),
        "the swap finished after the restart",
        || async {
            placement(&describe(&c).await, "w", 0) == (Some(to.clone()), false)
                && folders(dir.path(), "w", 0).len() == 1
        },
    )
    .await;
    assert_eq!(folders(dir.path(), "w", 0)[0], PathBuf::from(&to).join("w-0"));
    assert_eq!(read_all(&c, "w", 0).await, want, "no record lost or changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_dir_goes_offline_and_the_others_keep_serving() {
    let dir = tempfile::tempdir().unwrap();
    let f = start(dir.path());
    let c = f.client.clone();
    create(&c, "f", vec![vec![4, 1, 2]], &[]).await;
    create(&c, "g", vec![vec![4, 1, 2]], &[]).await;
    for t in ["f", "g"] {
        wait_until(Duration::from_secs(30), "a full ISR", || isr_is(&c, t, 0, &[4, 1, 2])).await;
    }
    // A new partition's ISR is whole from the start: wait for broker 4 to create both replicas.
    wait_until(Duration::from_secs(30), "f and g on broker 4", || async {
        let d = describe(&c).await;
        placement(&d, "f", 0).0.is_some() && placement(&d, "g", 0).0.is_some()
    })
    .await;
    // Put f and g in different dirs.
    let d = describe(&c).await;
    let (fd, _) = placement(&d, "f", 0);
    let (gd, _) = placement(&d, "g", 0);
    let (fd, gd) = (fd.unwrap(), gd.unwrap());
    if fd == gd {
        let to = other_dir(&d, &fd);
        move_replica(&f, "g-0", &to);
        wait_until(Duration::from_secs(30), "g moved", || async {
            placement(&describe(&c).await, "g", 0) == (Some(to.clone()), false)
        })
        .await;
    }
    produce_n(&c, "f", 0, 5, 10, 100).await;
    produce_n(&c, "g", 0, 5, 10, 100).await;

    // The dir under f stops working: it is gone and a file stands in its place.
    let failed = PathBuf::from(&fd);
    std::fs::rename(&failed, failed.with_extension("gone")).unwrap();
    std::fs::write(&failed, b"not a dir").unwrap();

    wait_until(Duration::from_secs(30), "f to lose broker 4", || async {
        partition_state(&c, "f", 0)
            .await
            .is_some_and(|s| s.leader != 4 && s.leader >= 0 && !s.isr.contains(&4))
    })
    .await;
    let d = describe(&c).await;
    let dead = d.dirs.iter().find(|x| x.path == fd).unwrap();
    assert_eq!(dead.error_code, 56, "{dead:?}");
    let (code, out, _) = ferry(&f, &["log-dirs", "--describe", "--broker-list", "4"]);
    assert_eq!(code, 0);
    assert!(out.contains("\"error\":\"KafkaStorageException:"), "{out}");
    // The admin service's fan-out shows it too, and names a broker that is not there.
    let req = AdminDescribeLogDirsRequest {
        brokers: vec![4, 9],
        topics: vec![],
    };
    let all = c
        .admin_call(|mut a| {
            let req = req.clone();
            async move { a.describe_log_dirs(req).await }
        })
        .await
        .unwrap();
    let four = all.brokers.iter().find(|b| b.broker == 4).unwrap();
    assert_eq!(four.error_code, 0, "{four:?}");
    let dirs = &four.log_dirs.as_ref().unwrap().dirs;
    assert_eq!(
        dirs.iter().find(|x| x.path == fd).map(|x| x.error_code),
        Some(56),
        "{dirs:?}"
    );
    let nine = all.brokers.iter().find(|b| b.broker == 9).unwrap();
    assert_eq!(nine.error_code, 8, "{nine:?}");
    assert!(
        nine.error_message.contains("broker 9: not a registered broker"),
        "{nine:?}"
    );
    // g, in the other dir, still has broker 4 in its ISR and as its leader, and both take writes.
    let g = partition_state(&c, "g", 0).await.unwrap();
    assert_eq!(g.leader, 4, "{g:?}");
    assert!(g.isr.contains(&4), "{g:?}");
    produce_n(&c, "f", 0, 5, 10, 100).await;
    produce_n(&c, "g", 0, 5, 10, 100).await;
    assert_eq!(read_all(&c, "f", 0).await.len(), 100);
    assert_eq!(read_all(&c, "g", 0).await.len(), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reassignment_files_place_replicas_in_named_dirs_and_bad_moves_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = start(dir.path());
    let c = f.client.clone();
    create(&c, "r", vec![vec![1, 2]], &[]).await;
    create(&c, "s", vec![vec![4, 1]], &[]).await;
    wait_until(Duration::from_secs(30), "ISRs", || isr_is(&c, "s", 0, &[4, 1])).await;
    produce_n(&c, "r", 0, 10, 10, 100).await;
    produce_n(&c, "s", 0, 40, 50, 1000).await; // about 2 MB, so that a throttled move lasts
    let d = describe(&c).await;
    let (sd, _) = placement(&d, "s", 0);
    let s_to = other_dir(&d, &sd.unwrap());
    let r_to = d.dirs[1].path.clone();

    // Bad moves: each refused with the reason, and nothing changes.
    let snapshot = |d: &DescribeLogDirsResponse| {
        d.dirs
            .iter()
            .map(|x| {
                (
                    x.path.clone(),
                    x.replicas
                        .iter()
                        .map(|r| (r.topic.clone(), r.is_future))
                        .collect::<Vec<_>>(),
                )
            })
            .collect::<Vec<_>>()
    };
    let before = snapshot(&describe(&c).await);
    for (args, why) in [
        (
            vec!["--partitions", "s-0", "--log-dir", "relative/dir"],
            "is not an absolute path",
        ),
        (
            vec!["--partitions", "s-0", "--log-dir", "/no/such/dir"],
            "is not a log dir of broker 4",
        ),
        (
            vec!["--partitions", "nope-0", "--log-dir", &s_to],
            "nope-0: no such topic-partition",
        ),
        (
            vec!["--partitions", "s-0,s-7", "--log-dir", &s_to],
            "s-7: no such topic-partition",
        ),
    ] {
        let mut a = vec!["log-dirs", "--move", "--broker", "4"];
        a.extend(args);
        let (code, out, err) = ferry(&f, &a);
        assert_eq!(code, 1, "{a:?}: {out}{err}");
        assert!(err.contains(why) && err.contains("nothing was changed"), "{a:?}: {err}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(snapshot(&describe(&c).await), before);

    // r gains a replica on broker 4 in a named dir; s's replica on 4 moves to the other dir.
    let file = dir.path().join("dirs.json");
    std::fs::write(
        &file,
        format!(
            r#"{{"version":1,"partitions":[{{"topic":"r","partition":0,"replicas":[4,2],"log_dirs":["{r_to}","any"]}},{{"topic":"s","partition":0,"replicas":[4,1],"log_dirs":["{s_to}","any"]}}]}}"#
        ),
    )
    .unwrap();
    let file = file.to_string_lossy().into_owned();

    // Named dirs the brokers do not have, or given wrongly: refused with the partition named,
    // and the metastore is unchanged.
    let before = tests::reassign::snapshot(&f.meta).await;
    for (dirs, code, why) in [
        (
            vec!["/no/such/dir", "any"],
            57,
            "s-0: broker 4 has no log dir '/no/such/dir'",
        ),
        (
            vec!["relative", "any"],
            57,
            "s-0: log dir 'relative' for broker 4 is neither",
        ),
        (vec![s_to.as_str()], 42, "s-0: 1 log_dirs for 2 replicas"),
    ] {
        let req = AlterPartitionReassignmentsRequest {
            partitions: vec![ReassignmentTarget {
                topic: "s".into(),
                partition: 0,
                replicas: Some(Replicas { brokers: vec![4, 1] }),
                log_dirs: dirs.iter().map(|d| d.to_string()).collect(),
            }],
            throttle_rate: None,
            validate_only: false,
        };
        let r = c
            .admin_call(|mut a| {
                let req = req.clone();
                async move { a.alter_partition_reassignments(req).await }
            })
            .await
            .unwrap();
        assert_eq!(r.results[0].error_code, code, "{dirs:?}: {r:?}");
        assert!(r.results[0].error_message.contains(why), "{dirs:?}: {r:?}");
    }
    assert_eq!(
        tests::reassign::snapshot(&f.meta).await,
        before,
        "a refused request changed nothing"
    );

    // s's move is throttled so that it is seen pending, and broker 4 is killed in the middle of it.
    let (code, out, err) = ferry(
        &f,
        &[
            "reassign",
            "--execute",
            "--reassignment-json-file",
            &file,
            "--replica-alter-log-dirs-throttle",
            "400000",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("Successfully started log directory moves for: r-0-4,s-0-4"),
        "{out}"
    );
    // The named dirs are stored with the target, and s (same replicas, another dir) is a running
    // reassignment until its replica is there, even though its ISR is whole.
    let l = tests::reassign::list(&c).await;
    let s_move = l.reassignments.iter().find(|r| r.topic == "s").expect("s is moving");
    assert_eq!(s_move.target_log_dirs, vec![s_to.clone(), String::new()]);
    wait_until(Duration::from_secs(30), "s's future log to appear", || async {
        placement(&describe(&c).await, "s", 0).1
    })
    .await;
    let (_, out, _) = ferry(&f, &["reassign", "--verify", "--reassignment-json-file", &file]);
    assert!(
        out.contains("Reassignment of partition s-0 is still in progress."),
        "{out}"
    );
    let st = partition_state(&c, "s", 0).await.unwrap();
    assert_eq!(st.dir_pending, vec![4], "{st:?}");
    let (code, out, err) = ferry(&f, &["reassign", "--progress"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("s-0: replica 4 to log dir {s_to}: ")), "{out}");
    let four = f.nodes.get_mut(&4).unwrap();
    four.kill();
    four.spawn();
    wait_until(Duration::from_secs(90), "both replicas in their named dirs", || async {
        let (_, out, _) = ferry(&f, &["reassign", "--verify", "--reassignment-json-file", &file]);
        out.contains("Reassignment of replica r-0-4 completed successfully.")
            && out.contains("Reassignment of replica s-0-4 completed successfully.")
            && out.contains("Reassignment of partition r-0 is completed.")
            && out.contains("Reassignment of partition s-0 is completed.")
    })
    .await;
    let d = describe(&c).await;
    assert_eq!(placement(&d, "r", 0), (Some(r_to.clone()), false));
    assert_eq!(placement(&d, "s", 0), (Some(s_to.clone()), false));
    // The old folder becomes `s-0.delete`, which the broker removes in the background.
    wait_until(Duration::from_secs(30), "one folder for s-0", || async {
        folders(dir.path(), "s", 0).len() == 1
    })
    .await;
    assert_eq!(folders(dir.path(), "s", 0).len(), 1, "one folder for s-0");
    let st = partition_state(&c, "s", 0).await.unwrap();
    assert!(st.dir_pending.is_empty(), "{st:?}");
    assert_eq!(st.log_dirs[0], s_to);
    assert_eq!(read_all(&c, "r", 0).await.len(), 100);
    assert_eq!(read_all(&c, "s", 0).await.len(), 2000);
}
