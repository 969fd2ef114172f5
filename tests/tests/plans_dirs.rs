//! Plans over the log dirs of one broker, on a real cluster of processes (broker 4 with two log
//! dirs, real files): a dir balance of dirs 90% and 10% full ends with both within the
//! tolerance and every record readable; a dir drain moves every replica to the other dir,
//! leaves the dir cordoned, and an undrain uncordons it; a dir that fails mid-drain stops the
//! moves into it, and the plan names the dir as the reason.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use broker::ClusterClient;
use proto::ferry::alter_plan_request::Action;
use proto::ferry::*;
use tests::data::read_all;
use tests::plans::{
    alter_plan, cordon_config, create_ok, no_throttle_left, poll, registration, set_cordon, show, states, undrain,
    wait_cordoned, wait_state,
};
use tests::reassign::{create, produce_n, start_four_with, Four};
use tests::wait_until;

/// Records per batch and bytes per record the topics are filled with.
const PER: usize = 10;
const SIZE: usize = 500;

/// Broker 4 with dirs `a` and `b` (probed often); the dirs as the broker registered them.
async fn start(dir: &Path) -> (Four, String, String) {
    let dirs = format!("{},{}", dir.join("n4/a").display(), dir.join("n4/b").display());
    let f = start_four_with(dir, &["--log-dirs", &dirs, "--log-dir-probe-interval-ms", "200"]);
    let reg = poll(Duration::from_secs(60), "broker 4 to register", || {
        registration(&f.client, 4)
    })
    .await;
    let named = |end: &str| {
        reg.log_dirs
            .iter()
            .find(|d| d.ends_with(end))
            .cloned()
            .unwrap_or_else(|| panic!("no dir {end}: {:?}", reg.log_dirs))
    };
    let (a, b) = (named("/a"), named("/b"));
    (f, a, b)
}

/// Creates `topic` with `partitions` on broker 4 and one other broker each, and `batches`
/// batches in each, while every dir of broker 4 but `into` is cordoned: broker 4 puts each
/// replica in `into`.
async fn fill_dir(c: &ClusterClient, topic: &str, partitions: u32, batches: usize, into: &str, other: &str) {
    set_cordon(c, 4, Some(other), &[other.to_string()]).await;
    let assignment = (0..partitions).map(|p| vec![4, 1 + (p % 3) as i32]).collect();
    create(c, topic, assignment, &[]).await;
    // Broker 4 leads each partition: an acknowledged produce means its replica exists.
    for p in 0..partitions {
        produce_n(c, topic, p, batches, PER, SIZE).await;
    }
    let dirs = dirs_of_four(c).await;
    for (path, (_, names, _)) in &dirs {
        let here = names.iter().filter(|(t, _)| t == topic).count();
        let want = if path == into { partitions as usize } else { 0 };
        assert_eq!(here, want, "{topic} replicas in {path}: {dirs:?}");
    }
}

/// Broker 4's dirs: for each, the bytes and the (topic, partition) of its current replicas, and
/// how many future replicas it holds.
async fn dirs_of_four(c: &ClusterClient) -> BTreeMap<String, (u64, Vec<(String, u32)>, usize)> {
    let mut d = None;
    for _ in 0..100 {
        if let Ok(mut r) = c.describe_log_dirs(&[4], &[]).await {
            d = Some(r.remove(0));
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let d = d.expect("broker 4 answers DescribeLogDirs");
    d.dirs
        .into_iter()
        .map(|dir| {
            let current: Vec<&LogDirReplica> = dir.replicas.iter().filter(|r| !r.is_future).collect();
            let bytes = current.iter().map(|r| r.size).sum();
            let names = current.iter().map(|r| (r.topic.clone(), r.partition)).collect();
            let futures = dir.replicas.iter().filter(|r| r.is_future).count();
            (dir.path, (bytes, names, futures))
        })
        .collect()
}

/// Every record produced by [`fill_dir`] is read back, at offsets 0 to n-1.
async fn all_readable(c: &ClusterClient, topic: &str, partitions: u32, batches: usize) {
    for p in 0..partitions {
        let log = read_all(c, topic, p).await;
        assert_eq!(log.len(), batches * PER, "{topic}-{p}");
        for (i, (offset, value)) in log.iter().enumerate() {
            assert_eq!(*offset, i as i64, "{topic}-{p}");
            assert!(value.ends_with(&"x".repeat(SIZE)), "{topic}-{p} offset {offset}");
        }
    }
}

/// A plan that drains broker 4's dir `dir`, under `caps` when given.
fn drain_dir_of_four(dir: &str, caps: Option<PlanCaps>) -> CreatePlanRequest {
    CreatePlanRequest {
        kind: Some(create_plan_request::Kind::DrainDir(DrainDirPlan {
            broker: 4,
            dir: dir.to_string(),
        })),
        caps,
        ..Default::default()
    }
}

/// The most replicas of broker 4 moving between its dirs at once, sampled from the partitions'
/// reassignment state until `stop`.
fn sample_dir_moves(meta: metastore::Client, topics: &[&str], stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<usize> {
    let topics: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
    tokio::spawn(async move {
        let mut peak = 0;
        while !stop.load(Ordering::Relaxed) {
            let mut now = 0;
            for t in &topics {
                now += states(&meta, t)
                    .await
                    .values()
                    .filter(|s| s.dir_pending.contains(&4))
                    .count();
            }
            peak = peak.max(now);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        peak
    })
}

/// Dirs 90% and 10% full: a balance-dirs plan moves replicas from the full dir to the other, no
/// more than the dir cap at once, ends done, both dirs end within the tolerance of the mean,
/// and every record is still readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dir_balance_of_dirs_ninety_and_ten_percent_full_ends_within_the_tolerance() {
    let dir = tempfile::tempdir().unwrap();
    let (f, a, b) = start(dir.path()).await;
    let c = f.client.clone();
    // About 900 kB in `a` (18 partitions of 50 kB) and 100 kB in `b` (2 of 50 kB).
    fill_dir(&c, "big", 18, 10, &a, &b).await;
    fill_dir(&c, "small", 2, 10, &b, &a).await;
    set_cordon(&c, 4, None, &[]).await;
    let before = dirs_of_four(&c).await;
    let (ba, bb) = (before[&a].0, before[&b].0);
    assert_eq!((before[&a].1.len(), before[&b].1.len()), (18, 2), "{before:?}");
    assert!(ba >= 8 * bb, "a about 90% full, b about 10%: {ba} and {bb}");

    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_dir_moves(f.meta.clone(), &["big", "small"], stop.clone());
    let plan = create_ok(
        &c,
        CreatePlanRequest {
            kind: Some(create_plan_request::Kind::BalanceDirs(BalanceDirsPlan {
                broker: 4,
                tolerance_pct: None,
            })),
            ..Default::default()
        },
    )
    .await;
    assert!(plan.moves_total > 0, "{plan:?}");
    assert!(
        plan.notes.iter().all(|n| !n.contains("cannot bring")),
        "{:?}",
        plan.notes
    );
    let cap = plan
        .caps
        .and_then(|c| c.max_dir_moves_per_broker)
        .expect("caps answered");
    let done = wait_state(&c, plan.id, "done", Duration::from_secs(300)).await;
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.await.unwrap();
    assert_eq!(
        (done.done, done.skipped, done.failed),
        (done.moves_total, 0, 0),
        "{done:?}"
    );
    assert!(peak as i64 <= cap, "{peak} dir moves at once, cap {cap}");

    // Every move went from a to b, and the dirs end within 10% of the mean.
    let plan = show(&c, plan.id, true).await;
    for m in &plan.moves {
        assert_eq!(m.to_replicas[0], 4, "{m:?}");
        assert_eq!(m.to_dirs[0], b, "{m:?}");
    }
    let after = dirs_of_four(&c).await;
    let total: u64 = after.values().map(|d| d.0).sum();
    assert_eq!(total, ba + bb, "no byte lost or doubled: {after:?}");
    let (lo, hi) = (total * 90 / 200, (total * 110).div_ceil(200));
    for (path, (bytes, names, futures)) in &after {
        assert!(
            (lo..=hi).contains(bytes),
            "{path}: {bytes} outside {lo}..={hi}: {after:?}"
        );
        assert_eq!(*futures, 0, "{path} keeps a future replica");
        assert!(!names.is_empty(), "{path}");
    }
    assert_eq!(
        after.values().map(|d| d.1.len()).sum::<usize>(),
        20,
        "each replica once"
    );
    all_readable(&c, "big", 18, 10).await;
    all_readable(&c, "small", 2, 10).await;
    no_throttle_left(&c, &f.meta, "big", &[1, 2, 3, 4]).await;
}

/// A dir drain: broker 4's dir `a` is cordoned at once, every replica in it moves to `b`, the
/// plan ends done with `a` empty and still cordoned, every record readable; an undrain of the
/// dir then uncordons it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dir_drain_empties_the_dir_and_undrain_uncordons_it() {
    let dir = tempfile::tempdir().unwrap();
    let (f, a, b) = start(dir.path()).await;
    let c = f.client.clone();
    fill_dir(&c, "ina", 8, 4, &a, &b).await;
    fill_dir(&c, "inb", 4, 4, &b, &a).await;
    set_cordon(&c, 4, None, &[]).await;
    let before = dirs_of_four(&c).await;
    assert_eq!((before[&a].1.len(), before[&b].1.len()), (8, 4), "{before:?}");

    let plan = create_ok(&c, drain_dir_of_four(&a, None)).await;
    assert_eq!((plan.kind.as_str(), plan.moves_total), ("drain-dir", 8), "{plan:?}");
    // The cordon is stored with the plan, and the broker takes it.
    assert_eq!(cordon_config(&c, 4).await, a);
    wait_cordoned(&c, 4, std::slice::from_ref(&a)).await;
    let done = wait_state(&c, plan.id, "done", Duration::from_secs(300)).await;
    assert_eq!((done.done, done.skipped, done.failed), (8, 0, 0), "{done:?}");

    let after = dirs_of_four(&c).await;
    assert!(after[&a].1.is_empty() && after[&a].2 == 0, "{a} still holds: {after:?}");
    let mut in_b = after[&b].1.clone();
    in_b.sort();
    let mut want: Vec<(String, u32)> = (0..8).map(|p| ("ina".to_string(), p)).collect();
    want.extend((0..4).map(|p| ("inb".to_string(), p)));
    assert_eq!(in_b, want, "every replica of broker 4 in {b}");
    // The old replica folders leave the drained dir.
    wait_until(Duration::from_secs(60), "no replica folder left in a", || async {
        std::fs::read_dir(&a)
            .into_iter()
            .flatten()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with("ina-"))
    })
    .await;
    all_readable(&c, "ina", 8, 4).await;
    all_readable(&c, "inb", 4, 4).await;
    assert_eq!(cordon_config(&c, 4).await, a, "the drained dir stays cordoned");
    no_throttle_left(&c, &f.meta, "ina", &[1, 2, 3, 4]).await;

    // Undrain: nothing runs any more, so no plan is stopped; the dir is uncordoned.
    assert_eq!(undrain(&c, 4, Some(&a)).await, Vec::<u64>::new());
    assert_eq!(cordon_config(&c, 4).await, "");
    wait_cordoned(&c, 4, &[]).await;
}

/// A dir drain of `a` into `b`, one dir move at a time, paused at once; then `b` fails (gone, a
/// file in its place). Resumed, the plan starts nothing into `b`: every move not done waits or
/// failed with the reason naming `b` offline, the replicas not moved stay in `a`, and every
/// record stays readable (from the other replicas where broker 4's are offline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dir_that_fails_mid_plan_stops_its_moves_and_the_plan_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let (f, a, b) = start(dir.path()).await;
    let c = f.client.clone();
    fill_dir(&c, "ina", 16, 2, &a, &b).await;
    set_cordon(&c, 4, None, &[]).await;
    let one_at_a_time = PlanCaps {
        max_dir_moves_per_broker: Some(1),
        ..Default::default()
    };
    let plan = create_ok(&c, drain_dir_of_four(&a, Some(one_at_a_time))).await;
    assert_eq!(plan.moves_total, 16, "{plan:?}");
    // One move at a time, each a round of the broker's half-second dir loop: most are queued.
    alter_plan(&c, plan.id, Action::Pause).await;
    wait_state(&c, plan.id, "paused", Duration::from_secs(30)).await;

    let failed = std::path::PathBuf::from(&b);
    std::fs::rename(&failed, failed.with_extension("gone")).unwrap();
    std::fs::write(&failed, b"not a dir").unwrap();
    poll(Duration::from_secs(60), "broker 4 to publish b offline", || async {
        registration(&c, 4).await.filter(|r| r.offline_log_dirs.contains(&b))
    })
    .await;
    alter_plan(&c, plan.id, Action::Resume).await;

    let offline = format!("dir {b} of broker 4 is offline");
    let stopped = poll(Duration::from_secs(60), "every open move to name b offline", || async {
        let p = show(&c, plan.id, true).await;
        let open: Vec<&PlanMove> = p.moves.iter().filter(|m| m.state != "done").collect();
        let named = !open.is_empty() && open.iter().all(|m| m.reason == offline);
        named.then_some(p)
    })
    .await;
    let open = stopped.moves.iter().filter(|m| m.state != "done").count();
    assert!(open >= 8, "most moves were queued when b failed: {stopped:?}");
    assert!(
        stopped
            .moves
            .iter()
            .all(|m| matches!(m.state.as_str(), "done" | "queued" | "failed")),
        "{stopped:?}"
    );
    assert_eq!(stopped.state, "running", "the plan waits for the dir: {stopped:?}");
    // Nothing more moves: the replicas not moved are still in `a`.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let dirs = dirs_of_four(&c).await;
    let in_a = dirs.get(&a).map_or(0, |d| d.1.len());
    assert!(
        in_a >= open - 1,
        "{in_a} replicas left in a, {open} moves open: {dirs:?}"
    );
    all_readable(&c, "ina", 16, 2).await;
}
