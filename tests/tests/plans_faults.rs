//! Faults and interventions while a plan runs, on real clusters of processes: a broker a drain
//! moves into is SIGKILLed (its moves wait, named in ListPlans, the others go on, and the plan
//! completes once it is back); a cancel with a move toward a dead broker rolls everything back;
//! a pause starts nothing new and a resume runs to the end; an undrain mid-drain drops the
//! queued moves and lets the running ones finish; a partition moved by hand is left out and
//! its hand target stands.

use std::collections::BTreeSet;
use std::time::Duration;

use broker::ClusterClient;
use proto::ferry::alter_plan_request::Action;
use proto::ferry::*;
use tests::plans::{
    alter_plan, cordon_config, create_ok, drain_req, is_terminal, moving, no_throttle_left, poll, show, sorted, states,
    topic_on_four, undrain, until_a_move_runs, wait_cordoned, wait_state,
};
use tests::reassign::{alter, ok, start_brokers, start_four, wait_all_done};
use tests::wait_until;

const TOPIC: &str = "d";

/// Whether a move copies into `broker`.
fn moves_into(m: &PlanMove, broker: i32) -> bool {
    m.to_replicas.contains(&broker) && !m.from_replicas.contains(&broker)
}

/// Waits until plan `id` runs a move into `broker`.
async fn wait_running_into(c: &ClusterClient, id: u64, broker: i32) {
    wait_until(
        Duration::from_secs(120),
        &format!("a move into broker {broker} running"),
        || async {
            show(c, id, true)
                .await
                .moves
                .iter()
                .any(|m| m.state == "running" && moves_into(m, broker))
        },
    )
    .await;
}

/// Every partition of a plan that ended is where its move left it: at the target when done, at
/// its replicas before the plan otherwise. Returns how many were rolled back.
async fn partitions_settled(c: &ClusterClient, meta: &metastore::Client, id: u64) -> usize {
    let plan = show(c, id, true).await;
    let now = states(meta, TOPIC).await;
    let mut rolled_back = 0;
    for m in &plan.moves {
        let got = sorted(&now[&m.partition].replicas);
        match m.state.as_str() {
            "done" => assert_eq!(got, sorted(&m.to_replicas), "{TOPIC}-{} at its target", m.partition),
            "skipped" => {
                assert_eq!(got, sorted(&m.from_replicas), "{TOPIC}-{} back: {m:?}", m.partition);
                rolled_back += usize::from(m.reason.contains("rolled back"));
            }
            other => panic!("{TOPIC}-{} ended {other}: {m:?}", m.partition),
        }
    }
    rolled_back
}

/// Broker 5, which the drain of broker 4 moves into, is SIGKILLed mid-plan: once it is down,
/// its moves (queued, and started before the kill) show "broker 5 is down" in ListPlans while
/// moves into the other brokers go on; when it is back, the plan completes with every
/// partition at its target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_killed_mid_plan_holds_its_moves_until_it_is_back() {
    const PARTITIONS: u32 = 24;
    let dir = tempfile::tempdir().unwrap();
    let mut f = start_brokers(dir.path(), 5);
    let c = f.client.clone();
    topic_on_four(&c, TOPIC, PARTITIONS).await;
    // Broker 5 starts empty, so the drain sends it many replicas; at most 2 move into it at once,
    // so the moves stuck on it leave slots for the others.
    let plan = create_ok(&c, drain_req(4, 2, 5, Some(20_000))).await;
    assert_eq!(plan.moves_total, PARTITIONS, "{plan:?}");
    wait_running_into(&c, plan.id, 5).await;
    f.nodes.get_mut(&5).unwrap().kill();

    let others_done = |p: &PlanInfo| {
        p.moves
            .iter()
            .filter(|m| m.state == "done" && !moves_into(m, 5))
            .count()
    };
    let at_kill = others_done(&show(&c, plan.id, true).await);
    wait_until(Duration::from_secs(120), "a move waiting on broker 5", || async {
        show(&c, plan.id, true)
            .await
            .moves
            .iter()
            .any(|m| m.state == "queued" && moves_into(m, 5) && m.reason == "broker 5 is down")
    })
    .await;
    wait_until(Duration::from_secs(120), "moves into other brokers done", || async {
        others_done(&show(&c, plan.id, true).await) >= at_kill + 3
    })
    .await;
    let p = show(&c, plan.id, true).await;
    assert_eq!(p.state, "running");
    // Queued or started, each move into broker 5 names why it waits.
    for m in p.moves.iter().filter(|m| m.state != "done" && moves_into(m, 5)) {
        assert_eq!(m.reason, "broker 5 is down", "{m:?}");
    }
    // Its load says so too, and no other broker's does.
    let down: Vec<i32> = p.brokers.iter().filter(|b| b.down).map(|b| b.broker).collect();
    assert_eq!(down, [5], "{:?}", p.brokers);
    assert!(
        p.moves.iter().any(|m| m.state == "done" && !moves_into(m, 5)),
        "others went on: {p:?}"
    );

    f.nodes.get_mut(&5).unwrap().spawn();
    let done = wait_state(&c, plan.id, "done", Duration::from_secs(300)).await;
    assert_eq!((done.done, done.skipped, done.failed), (PARTITIONS, 0, 0), "{done:?}");
    assert_eq!(partitions_settled(&c, &f.meta, plan.id).await, 0);
    for (p, s) in states(&f.meta, TOPIC).await {
        assert!(!s.replicas.contains(&4), "{TOPIC}-{p} still on broker 4");
    }
    no_throttle_left(&c, &f.meta, TOPIC, &[1, 2, 3, 4, 5]).await;
}

/// A cancel while a move runs toward a SIGKILLed broker: that move and every other in flight
/// roll back to the partitions' replicas before the plan, the queued ones are dropped, the
/// plan ends cancelled, and no throttle is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_rolls_back_a_move_toward_a_dead_broker() {
    const PARTITIONS: u32 = 12;
    let dir = tempfile::tempdir().unwrap();
    let mut f = start_brokers(dir.path(), 5);
    let c = f.client.clone();
    topic_on_four(&c, TOPIC, PARTITIONS).await;
    // 20 kB at 4 kB/s: each move lasts seconds.
    let plan = create_ok(&c, drain_req(4, 2, 4, Some(4_000))).await;
    wait_running_into(&c, plan.id, 5).await;
    f.nodes.get_mut(&5).unwrap().kill();
    // Once broker 5's registration is gone the plan sees it down.
    wait_until(Duration::from_secs(120), "the plan to see broker 5 down", || async {
        let p = show(&c, plan.id, true).await;
        p.moves.iter().any(|m| m.reason == "broker 5 is down")
    })
    .await;
    let shown = show(&c, plan.id, true).await;
    let toward_dead: BTreeSet<u32> = shown
        .moves
        .iter()
        .filter(|m| m.state == "running" && moves_into(m, 5))
        .map(|m| m.partition)
        .collect();
    for m in shown.moves.iter().filter(|m| toward_dead.contains(&m.partition)) {
        assert_eq!(
            m.reason, "broker 5 is down",
            "a move started toward it says why it waits"
        );
    }
    assert!(!toward_dead.is_empty(), "a move into the dead broker still runs");

    let cancelling = alter_plan(&c, plan.id, Action::Cancel).await;
    assert_eq!(cancelling.queued, 0, "queued moves dropped at once");
    let end = wait_state(&c, plan.id, "cancelled", Duration::from_secs(120)).await;
    assert_eq!(end.queued + end.running, 0, "{end:?}");
    assert_eq!(end.done + end.skipped + end.failed, end.moves_total, "{end:?}");
    let rolled_back = partitions_settled(&c, &f.meta, plan.id).await;
    assert!(rolled_back >= toward_dead.len(), "{rolled_back} rolled back");
    let now = states(&f.meta, TOPIC).await;
    for p in &toward_dead {
        assert!(!now[p].replicas.contains(&5), "{TOPIC}-{p} left the dead broker");
    }
    no_throttle_left(&c, &f.meta, TOPIC, &[1, 2, 3, 4]).await;
}

/// A pause starts no move: from the first look after it, the set of partitions the plan moves
/// (sampled from the metastore) only shrinks, to empty, while moves stay queued; a resume then
/// runs the plan to done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_plan_starts_nothing_and_resumes_to_done() {
    const PARTITIONS: u32 = 16;
    let dir = tempfile::tempdir().unwrap();
    let f = start_four(dir.path());
    let c = f.client.clone();
    topic_on_four(&c, TOPIC, PARTITIONS).await;
    let plan = create_ok(&c, drain_req(4, 2, 2, Some(10_000))).await;
    until_a_move_runs(&c, plan.id).await;
    let paused = alter_plan(&c, plan.id, Action::Pause).await;
    assert_eq!(paused.state, "paused");
    assert!(paused.queued > 0, "{paused:?}");

    let mut seen = moving(&f.meta, TOPIC).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut samples = 0;
    while !seen.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "moves in flight never finished: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = moving(&f.meta, TOPIC).await;
        assert!(
            now.is_subset(&seen),
            "a move started while paused: {now:?} after {seen:?}"
        );
        seen = now;
        samples += 1;
    }
    // Nothing in flight; some seconds later still nothing, and the queued moves wait.
    let quiet = show(&c, plan.id, false).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(moving(&f.meta, TOPIC).await.is_empty(), "a move started while paused");
    let still = show(&c, plan.id, false).await;
    assert_eq!(
        (still.state.as_str(), still.queued, still.running),
        ("paused", quiet.queued, 0)
    );
    assert!(still.queued > 0, "{still:?} after {samples} samples");

    let resumed = alter_plan(&c, plan.id, Action::Resume).await;
    assert_eq!(resumed.state, "running");
    let done = wait_state(&c, plan.id, "done", Duration::from_secs(300)).await;
    assert_eq!((done.done, done.skipped, done.failed), (PARTITIONS, 0, 0), "{done:?}");
    for (p, s) in states(&f.meta, TOPIC).await {
        assert!(!s.replicas.contains(&4), "{TOPIC}-{p} still on broker 4");
    }
    no_throttle_left(&c, &f.meta, TOPIC, &[1, 2, 3, 4]).await;
}

/// An undrain while the drain runs: the broker is uncordoned, the queued moves are dropped
/// ("dropped by undrain", partitions left where they were), the moves in flight finish at their
/// target, and the plan ends with its counts adding up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undrain_mid_drain_drops_queued_moves_and_finishes_running_ones() {
    const PARTITIONS: u32 = 16;
    let dir = tempfile::tempdir().unwrap();
    let f = start_four(dir.path());
    let c = f.client.clone();
    topic_on_four(&c, TOPIC, PARTITIONS).await;
    let plan = create_ok(&c, drain_req(4, 2, 2, Some(10_000))).await;
    assert_eq!(cordon_config(&c, 4).await, "*");
    until_a_move_runs(&c, plan.id).await;

    assert_eq!(undrain(&c, 4, None).await, vec![plan.id]);
    let after = show(&c, plan.id, true).await;
    assert_eq!(after.queued, 0, "queued moves dropped: {after:?}");
    let running: BTreeSet<u32> = after
        .moves
        .iter()
        .filter(|m| m.state == "running")
        .map(|m| m.partition)
        .collect();
    assert_eq!(cordon_config(&c, 4).await, "");
    wait_cordoned(&c, 4, &[]).await;

    let end = poll(Duration::from_secs(120), "the plan to end", || async {
        let p = show(&c, plan.id, false).await;
        is_terminal(&p.state).then_some(p)
    })
    .await;
    assert_eq!(end.state, "done", "{end:?}");
    assert_eq!(end.done + end.skipped + end.failed, end.moves_total, "{end:?}");
    assert_eq!((end.queued, end.running, end.failed), (0, 0, 0), "{end:?}");
    assert!(end.skipped > 0, "{end:?}");
    let plan = show(&c, plan.id, true).await;
    for m in &plan.moves {
        if running.contains(&m.partition) {
            assert_eq!(m.state, "done", "a move in flight finishes: {m:?}");
        }
        if m.state == "skipped" {
            assert_eq!(m.reason, "dropped by undrain", "{m:?}");
        }
    }
    assert_eq!(partitions_settled(&c, &f.meta, plan.id).await, 0);
    no_throttle_left(&c, &f.meta, TOPIC, &[1, 2, 3, 4]).await;
}

/// A partition reassigned by hand (AlterPartitionReassignments) while queued in a plan is left
/// out ("moved by hand", named in the notes), the plan never submits its own move for it, and
/// the hand target stands at the end; the other moves complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_moved_by_hand_is_left_out_and_its_target_stands() {
    const PARTITIONS: u32 = 12;
    let dir = tempfile::tempdir().unwrap();
    let f = start_four(dir.path());
    let c = f.client.clone();
    topic_on_four(&c, TOPIC, PARTITIONS).await;
    let plan = create_ok(&c, drain_req(4, 1, 1, Some(10_000))).await;
    until_a_move_runs(&c, plan.id).await;
    // The last queued move: one move runs at a time, so it is far from starting.
    let shown = show(&c, plan.id, true).await;
    let m = shown
        .moves
        .iter()
        .rev()
        .find(|m| m.state == "queued")
        .expect("a queued move")
        .clone();
    let keep = *m.from_replicas.iter().find(|b| **b != 4).expect("a replica kept");
    let other = (1..=3)
        .find(|b| *b != keep && !m.to_replicas.contains(b))
        .expect("a broker the plan does not name");
    let by_hand = vec![keep, other];
    ok(&alter(&c, &[(TOPIC, m.partition, Some(by_hand.clone()))], Some(10_000)).await);

    let done = wait_state(&c, plan.id, "done", Duration::from_secs(300)).await;
    assert_eq!(
        (done.done, done.skipped, done.failed),
        (PARTITIONS - 1, 1, 0),
        "{done:?}"
    );
    let name = format!("{TOPIC}-{}", m.partition);
    assert!(
        done.notes
            .iter()
            .any(|n| n.contains("moved by hand") && n.contains(&name)),
        "{:?}",
        done.notes
    );
    let end = show(&c, plan.id, true).await;
    let left_out = end.moves.iter().find(|x| x.partition == m.partition).unwrap();
    assert_eq!(left_out.state, "skipped");
    // Left out before the plan started it: seen moving ("moved by hand"), or seen already at the
    // hand target ("replicas changed by hand"); never a move of the plan's replaced by hand.
    assert!(
        left_out.reason == "moved by hand" || left_out.reason.starts_with("replicas changed by hand"),
        "{left_out:?}"
    );
    wait_all_done(&c, Duration::from_secs(120)).await;
    let now = states(&f.meta, TOPIC).await;
    assert_eq!(
        sorted(&now[&m.partition].replicas),
        sorted(&by_hand),
        "the hand target stands"
    );
    for x in end.moves.iter().filter(|x| x.state == "done") {
        assert_eq!(sorted(&now[&x.partition].replicas), sorted(&x.to_replicas));
    }
    no_throttle_left(&c, &f.meta, TOPIC, &[1, 2, 3, 4]).await;
}
