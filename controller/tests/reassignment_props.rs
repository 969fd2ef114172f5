//! Property tests of the reassignment core over random histories of submit, supersede, cancel,
//! cancel-all, ISR changes, named log dirs reached, broker deaths and controller restarts, on one
//! partition.

use std::collections::BTreeSet;

use controller::partition_change::{IsrChange, NO_LEADER};
use controller::partition_change_builder::{Built, PartitionChangeBuilder};
use controller::reassignment::{self, target_of};
use controller::throttles;
use proptest::prelude::*;
use proto::errors::ErrorCode;
use proto::ferry::{AutoRemove, PartitionState};

const BROKERS: i32 = 6;

#[derive(Debug, Clone)]
enum Step {
    /// A target, and for each replica maybe a named log dir (which of two dirs).
    Submit(Vec<i32>, Vec<Option<u8>>),
    Cancel,
    /// Rolls every move back and leaves the marker, which refuses submits and keeps adding
    /// replicas out of the ISR until it is removed.
    CancelAll,
    RemoveCancel,
    /// A replica catches up and the leader adds it to the ISR.
    Join(i32),
    /// The leader drops a lagging follower.
    Leave(i32),
    Die(i32),
    Return(i32),
    /// A broker reports its replica is in its named dir (or, with `false`, in another one).
    DirReached(i32, bool),
    /// A new controller looks at the stored state only.
    ControllerRestart,
}

fn target() -> impl Strategy<Value = Vec<i32>> {
    Just((1..=BROKERS).collect::<Vec<_>>())
        .prop_shuffle()
        .prop_flat_map(|v| (1usize..=4).prop_map(move |n| v[..n].to_vec()))
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (target(), proptest::collection::vec(proptest::option::of(0u8..2), 4))
            .prop_map(|(t, d)| Step::Submit(t, d)),
        1 => Just(Step::Cancel),
        1 => Just(Step::CancelAll),
        1 => Just(Step::RemoveCancel),
        4 => (1..=BROKERS).prop_map(Step::Join),
        1 => (1..=BROKERS).prop_map(Step::Leave),
        1 => (1..=BROKERS).prop_map(Step::Die),
        2 => (1..=BROKERS).prop_map(Step::Return),
        2 => ((1..=BROKERS), proptest::bool::weighted(0.8)).prop_map(|(b, ok)| Step::DirReached(b, ok)),
        1 => Just(Step::ControllerRestart),
    ]
}

/// The stored metadata of the partition, as the controller would keep it.
struct World {
    /// The partition's state, its reassignment record with it.
    state: PartitionState,
    live: BTreeSet<i32>,
    /// A throttle someone set by hand; Ferry must never change it.
    manual_throttle: u64,
    /// An auto-remove throttle on the partition's topic (AlterThrottles), set before any move.
    auto: AutoRemove,
    /// The cancel-all marker is stored.
    cancel_all: bool,
}

fn check(w: &World, what: &str) {
    let s = &w.state;
    let record = &s.reassignment;
    for r in &s.isr {
        assert!(s.replicas.contains(r), "{what}: ISR member {r} is not a replica: {s:?}");
    }
    assert!(
        s.leader == NO_LEADER || s.isr.contains(&s.leader),
        "{what}: leader outside the ISR: {s:?}"
    );
    assert!(!s.isr.is_empty(), "{what}: empty ISR: {s:?}");
    // The record exists exactly while the partition moves, so the throttle it owns goes with it.
    assert_eq!(
        record.is_some(),
        s.is_moving(),
        "{what}: record and state disagree: {s:?}"
    );
    if record.is_none() {
        assert!(
            s.dir_pending.is_empty(),
            "{what}: a quiet partition waits for a dir: {s:?}"
        );
    }
    assert_eq!(
        s.log_dirs.len(),
        s.replicas.len(),
        "{what}: one log dir per replica: {s:?}"
    );
    if let Some(r) = record {
        assert_eq!(target_of(s), r.target, "{what}: RS does not end in the target");
        for b in &s.dir_pending {
            let i = r
                .target
                .iter()
                .position(|t| t == b)
                .expect("a pending replica is a target");
            assert!(
                !r.target_log_dirs[i].is_empty(),
                "{what}: replica {b} pending for no dir"
            );
        }
        for o in &r.original {
            assert!(s.replicas.contains(o), "{what}: original replica {o} left while moving");
        }
    }
    assert_eq!(w.manual_throttle, 7_000_000, "{what}: manual throttle touched");
    // No auto-remove throttle outlives the reassignments that armed it.
    assert!(
        !w.auto.armed || w.auto.keys.is_empty() || s.is_moving(),
        "{what}: an armed auto-remove throttle outlived its moves: {:?}",
        w.auto
    );
    match record {
        None => assert_eq!(
            s.throttle_rate, 0,
            "{what}: an owned throttle outlived its reassignment"
        ),
        Some(r) => assert_eq!(
            s.throttle_rate, r.throttle_rate,
            "{what}: the throttle is not the owner's"
        ),
    }
}

/// Takes what the builder decided; a completing change also ends the record.
fn apply(w: &mut World, built: Option<Built>) {
    if let Some(Built { state, .. }) = &built {
        assert_eq!(
            state.reassignment.is_some(),
            state.is_moving(),
            "the builder left record and state apart"
        );
    }
    let Some(Built { state, completes }) = built else {
        return;
    };
    if completes {
        assert!(
            w.state.dir_pending.is_empty(),
            "completed before every named dir was reached"
        );
        if let Some(r) = &w.state.reassignment {
            for (b, d) in r.target.iter().zip(&r.target_log_dirs) {
                let i = state.replicas.iter().position(|x| x == b).expect("target replica kept");
                if !d.is_empty() {
                    assert_eq!(&state.log_dirs[i], d, "replica {b} completed outside its named dir");
                }
            }
        }
        assert!(state.reassignment.is_none(), "a completed move keeps its record");
    }
    w.state = state;
}

/// A pass of the active controller: the live brokers, then completion, as `active.rs` asks.
fn controller_pass(w: &mut World) {
    let built = PartitionChangeBuilder::new(&w.state, &w.live)
        .brokers_changed()
        .complete()
        .build()
        .expect("a pass asks for no election that can be refused");
    apply(w, built);
}

/// The leader asks for `isr`, as `AlterPartition` does: completion rides on the same change.
fn change_isr(w: &mut World, isr: Vec<i32>) -> Result<(), proto::errors::Refusal> {
    let s = &w.state;
    let req = IsrChange {
        leader: s.leader,
        leader_epoch: s.leader_epoch,
        partition_epoch: s.partition_epoch,
        new_isr: isr,
    };
    let built = PartitionChangeBuilder::new(s, &w.live)
        .isr(&req, None)
        .cancel_all(w.cancel_all)
        .complete()
        .build()?;
    apply(w, built);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn histories_keep_the_invariants(steps in proptest::collection::vec(step(), 1..40)) {
        let mut w = World {
            state: PartitionState {
                replicas: vec![1, 2, 3],
                leader: 1,
                isr: vec![1, 2, 3],
                log_dirs: vec![String::new(); 3],
                ..Default::default()
            },
            live: (1..=BROKERS).collect(),
            manual_throttle: 7_000_000,
            auto: AutoRemove { keys: vec!["follower.replication.throttled.replicas".into()], armed: false },
            cancel_all: false,
        };
        for (i, s) in steps.iter().enumerate() {
            let what = format!("step {i} {s:?}");
            match s {
                // While the marker is stored every submit is refused.
                Step::Submit(..) if w.cancel_all => {}
                Step::Submit(t, d) => {
                    let before_original = w.state.reassignment.as_ref().map(|r| r.original.clone());
                    let dirs: Vec<String> = t
                        .iter()
                        .zip(d)
                        .map(|(b, k)| k.map_or("any".to_string(), |k| format!("/d{b}-{k}")))
                        .collect();
                    let next = reassignment::submit(&w.state, t, &dirs, 5_000_000, 0, &w.live);
                    if let (Some(o), Some(r)) = (&before_original, &next.reassignment) {
                        prop_assert_eq!(o, &r.original, "a superseding request must keep the first original");
                    }
                    // The submit transaction arms the topic's auto-remove throttle.
                    if let Some(a) = throttles::armed(&w.auto) {
                        w.auto = a;
                    }
                    w.state = next;
                    if w.state.reassignment.is_none() {
                        prop_assert_eq!(&w.state.replicas, t, "a quiet partition sits at its target");
                    }
                }
                Step::RemoveCancel => w.cancel_all = false,
                Step::Cancel | Step::CancelAll => {
                    if matches!(s, Step::CancelAll) {
                        w.cancel_all = true;
                    }
                    let unclean = false;
                    match (w.state.reassignment.clone(), reassignment::cancel(&w.state, &w.live, unclean)) {
                        (None, outcome) => {
                            prop_assert_eq!(outcome.unwrap_err().code, ErrorCode::NO_REASSIGNMENT_IN_PROGRESS);
                        }
                        (Some(r), outcome) => match outcome {
                            Ok(s) => {
                                prop_assert_eq!(&s.replicas, &r.original, "cancel restores the original order");
                                prop_assert_eq!(&s.log_dirs, &r.original_log_dirs, "cancel restores the original dirs");
                                prop_assert!(!s.isr.is_empty());
                                prop_assert!(s.reassignment.is_none());
                                w.state = s;
                            }
                            Err(_) => {
                                // Refused: no original replica in sync; nothing changes.
                                prop_assert!(w.state.isr.iter().all(|x| !r.original.contains(x)));
                            }
                        },
                    }
                }
                Step::Join(b) => {
                    let s = &w.state;
                    if s.leader != NO_LEADER && s.replicas.contains(b) && !s.isr.contains(b) && w.live.contains(b) {
                        let mut isr = s.isr.clone();
                        isr.push(*b);
                        let adding = s.adding.contains(b);
                        match change_isr(&mut w, isr) {
                            Ok(()) => prop_assert!(!(w.cancel_all && adding), "an adding replica joined during a cancel-all"),
                            Err(e) => {
                                prop_assert!(w.cancel_all && adding, "a valid ISR change refused: {e}");
                                prop_assert_eq!(e.code, ErrorCode::REASSIGNMENT_CANCEL_IN_PROGRESS);
                            }
                        }
                    }
                }
                Step::Leave(b) => {
                    let s = &w.state;
                    if s.leader != NO_LEADER && *b != s.leader && s.isr.contains(b) {
                        let isr: Vec<i32> = s.isr.iter().copied().filter(|x| x != b).collect();
                        change_isr(&mut w, isr).expect("shrinking the ISR is always allowed");
                    }
                }
                Step::Die(b) => {
                    w.live.remove(b);
                    controller_pass(&mut w);
                }
                Step::Return(b) => {
                    w.live.insert(*b);
                    controller_pass(&mut w);
                }
                Step::DirReached(b, named) => {
                    let i = w.state.replicas.iter().position(|x| x == b);
                    let dir = match (i, named) {
                        (Some(i), true) => w.state.log_dirs[i].clone(),
                        _ => format!("/elsewhere-{b}"),
                    };
                    if let Some(n) = reassignment::dir_reached(&w.state, *b, &dir, &w.live) {
                        prop_assert!(*named && !n.dir_pending.contains(b));
                        // Completion rides on the same change.
                        if !n.is_moving() {
                            let target = w.state.reassignment.as_ref().map(|r| r.target.clone());
                            prop_assert_eq!(Some(&n.replicas), target.as_ref(), "a quiet partition sits at its target");
                            prop_assert!(n.reassignment.is_none());
                        }
                        w.state = n;
                    }
                }
                Step::ControllerRestart => controller_pass(&mut w),
            }
            // The active controller removes what is due.
            if throttles::due(&w.auto, w.state.is_moving()) {
                let mut config = std::collections::HashMap::new();
                throttles::remove_auto(&mut config, &mut w.auto);
            }
            check(&w, &what);
        }
    }
}
