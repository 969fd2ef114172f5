use super::*;
use crate::plan::testkit::{mv, on, part, plan_of, Sim};

fn caps(into: u32, out: u32, dir: u32, cluster: u32) -> Caps {
    Caps {
        into_broker: into,
        out_of_broker: out,
        dir_moves_per_broker: dir,
        cluster,
    }
}

fn started(step: &Step) -> Vec<u32> {
    step.start.iter().map(|s| s.partition.partition).collect()
}

#[test]
fn caps_limit_the_starts_and_a_freed_slot_is_refilled_at_once() {
    // Ten moves into broker 9, each from its own broker: only the cap on broker 9 binds.
    let moves = (0..10).map(|p| mv(p, &[p as i32], &[9])).collect();
    let mut plan = plan_of(moves, caps(2, 5, 2, 50));
    let mut sim = Sim::new((0..10).chain([9]), &plan, 1);
    let step = next_moves(&mut plan, &sim.observe());
    assert_eq!(started(&step), vec![0, 1]);
    sim.apply(&plan, &step);
    // Partition 1 finishes first; its slot goes to the next queued move while 0 still runs.
    assert!(sim.complete(part(1), &plan));
    let step = next_moves(&mut plan, &sim.observe());
    assert_eq!(started(&step), vec![2]);
    assert_eq!(plan.moves[1].state, MoveState::Done);
    assert!(matches!(plan.moves[0].state, MoveState::Running { .. }));
}

#[test]
fn a_second_pass_over_the_same_view_starts_nothing() {
    let moves = (0..6).map(|p| mv(p, &[1], &[2])).collect();
    let mut plan = plan_of(moves, caps(3, 5, 2, 50));
    let mut sim = Sim::new([1, 2], &plan, 1);
    let view = sim.observe();
    let first = next_moves(&mut plan, &view);
    assert_eq!(first.start.len(), 3);
    // The driver's write failed or it ran twice: the same view again starts nothing more, and
    // does not take the started moves for cancelled ones.
    let again = next_moves(&mut plan, &view);
    assert!(again.start.is_empty(), "{again:?}");
    assert!(plan.moves[..3]
        .iter()
        .all(|m| matches!(m.state, MoveState::Running { .. })));
    sim.apply(&plan, &first);
    assert!(next_moves(&mut plan, &sim.observe()).start.is_empty());
}

#[test]
fn moves_by_hand_fill_the_caps_and_their_partitions_are_left_out_with_a_note() {
    let moves = vec![mv(0, &[1], &[2]), mv(1, &[1], &[3]), mv(2, &[1], &[2])];
    let mut plan = plan_of(moves, caps(1, 5, 2, 50));
    let mut sim = Sim::new([1, 2, 3, 4], &plan, 1);
    // Someone moves partition 1 by hand; someone else copies another partition into broker 2.
    sim.submit(part(1), &on(&[4]));
    sim.foreign.push(Load {
        into: vec![2],
        out: vec![4],
        dir: vec![],
    });
    let step = next_moves(&mut plan, &sim.observe());
    assert!(step.start.is_empty());
    assert_eq!(plan.moves[1].state, MoveState::Skipped(Reason::MovedByHand));
    assert_eq!(plan.moves[0].state, MoveState::Queued);
    assert_eq!(Reason::MovedByHand.to_string(), "moved by hand");
    sim.foreign.clear();
    sim.revision += 1;
    assert_eq!(started(&next_moves(&mut plan, &sim.observe())), vec![0]);
}

#[test]
fn unsafe_targets_are_refused_and_a_small_isr_waits() {
    let moves = vec![mv(0, &[1, 2], &[3]), mv(1, &[1, 2], &[3, 4]), mv(2, &[1, 2], &[2, 3])];
    let mut plan = plan_of(moves, Caps::default());
    let mut sim = Sim::new([1, 2, 3, 4], &plan, 2);
    sim.racks = BTreeMap::from([
        (1, "a".to_string()),
        (2, "b".to_string()),
        (3, "c".to_string()),
        (4, "c".to_string()),
    ]);
    sim.parts.get_mut(&part(2)).expect("planned").isr = vec![2];
    let step = next_moves(&mut plan, &sim.observe());
    assert!(step.start.is_empty());
    assert_eq!(
        plan.moves[0].state,
        MoveState::Skipped(Reason::TargetBelowMin { replicas: 1, min: 2 })
    );
    assert_eq!(plan.moves[1].state, MoveState::Skipped(Reason::OneRack));
    assert_eq!(
        plan.moves[2].state,
        MoveState::Waiting(Reason::IsrBelowMin { isr: 1, min: 2 })
    );
    sim.parts.get_mut(&part(2)).expect("planned").isr = vec![1, 2];
    sim.revision += 1;
    assert_eq!(started(&next_moves(&mut plan, &sim.observe())), vec![2]);
}

#[test]
fn a_move_onto_a_down_broker_waits_and_goes_on_when_it_is_back() {
    let moves = vec![mv(0, &[1], &[3]), mv(1, &[1], &[2])];
    let mut plan = plan_of(moves, Caps::default());
    let mut sim = Sim::new([1, 2], &plan, 1);
    let step = next_moves(&mut plan, &sim.observe());
    assert_eq!(started(&step), vec![1]);
    assert_eq!(plan.moves[0].state, MoveState::Waiting(Reason::BrokerDown(3)));
    assert_eq!(Reason::BrokerDown(3).to_string(), "broker 3 is down");
    sim.apply(&plan, &step);
    sim.live.insert(3);
    sim.revision += 1;
    assert_eq!(started(&next_moves(&mut plan, &sim.observe())), vec![0]);
}

#[test]
fn a_paused_plan_starts_nothing_until_resumed() {
    let mut plan = plan_of(vec![mv(0, &[1], &[2])], Caps::default());
    let sim = Sim::new([1, 2], &plan, 1);
    pause(&mut plan).expect("running");
    assert!(next_moves(&mut plan, &sim.observe()).start.is_empty());
    assert_eq!(plan.state, PlanState::Paused);
    resume(&mut plan).expect("paused");
    assert_eq!(started(&next_moves(&mut plan, &sim.observe())), vec![0]);
}

#[test]
fn cancel_rolls_back_moves_in_flight_and_drops_the_queued() {
    let moves = (0..4).map(|p| mv(p, &[1], &[2])).collect();
    let mut plan = plan_of(moves, caps(2, 5, 2, 50));
    let mut sim = Sim::new([1, 2], &plan, 1);
    let step = next_moves(&mut plan, &sim.observe());
    sim.apply(&plan, &step);
    // Partition 0 completes just before the cancel lands.
    assert!(sim.complete(part(0), &plan));
    cancel(&mut plan).expect("running");
    assert_eq!(plan.moves[2].state, MoveState::Skipped(Reason::Cancelled));
    let step = next_moves(&mut plan, &sim.observe());
    assert!(step.start.is_empty());
    assert_eq!(step.roll_back, vec![part(1)]);
    assert_eq!(plan.moves[0].state, MoveState::Done);
    assert_eq!(plan.state, PlanState::Cancelling);
    sim.apply(&plan, &step);
    let step = next_moves(&mut plan, &sim.observe());
    assert!(step.roll_back.is_empty());
    assert_eq!(plan.moves[1].state, MoveState::Skipped(Reason::RolledBack));
    assert_eq!(plan.state, PlanState::Cancelled);
    assert!(cancel(&mut plan).is_err());
    assert!(resume(&mut plan).unwrap_err().to_string().contains("cancelled"));
}

#[test]
fn a_reassignment_cancelled_or_replaced_by_hand_is_not_fought() {
    let moves = vec![mv(0, &[1], &[2]), mv(1, &[1], &[2])];
    let mut plan = plan_of(moves, Caps::default());
    let mut sim = Sim::new([1, 2, 3], &plan, 1);
    let step = next_moves(&mut plan, &sim.observe());
    sim.apply(&plan, &step);
    sim.cancel(part(0));
    sim.submit(part(1), &on(&[3]));
    let step = next_moves(&mut plan, &sim.observe());
    assert!(step.start.is_empty() && step.roll_back.is_empty());
    assert_eq!(plan.moves[0].state, MoveState::Skipped(Reason::CancelledByHand));
    assert_eq!(plan.moves[1].state, MoveState::Skipped(Reason::SupersededByHand));
    assert_eq!(plan.state, PlanState::Done);
}

#[test]
fn a_target_dir_that_fails_mid_move_fails_the_move_and_rolls_it_back() {
    let mut m = mv(0, &[1], &[1]);
    m.from = vec![Replica::new(1, DirId(0))].into();
    m.to = vec![Replica::new(1, DirId(1))].into();
    let mut plan = plan_of(vec![m], Caps::default());
    plan.names.dirs = vec!["/a".into(), "/b".into()];
    let mut sim = Sim::new([1], &plan, 1);
    let step = next_moves(&mut plan, &sim.observe());
    assert_eq!(started(&step), vec![0]);
    sim.apply(&plan, &step);
    sim.offline_dirs.insert((1, DirId(1)));
    sim.revision += 1;
    let step = next_moves(&mut plan, &sim.observe());
    assert_eq!(step.roll_back, vec![part(0)]);
    assert_eq!(plan.moves[0].state, MoveState::Failed(Reason::DirOffline(1, DirId(1))));
    // The plan ends once the rollback shows.
    assert_eq!(plan.state, PlanState::Running);
    sim.apply(&plan, &step);
    assert!(next_moves(&mut plan, &sim.observe()).roll_back.is_empty());
    assert_eq!(plan.state, PlanState::Failed);
    assert_eq!(
        Reason::DirOffline(1, DirId(1)).describe(&plan.names),
        "dir /b of broker 1 is offline"
    );
}

#[test]
fn dir_moves_have_their_own_cap_and_count_in_the_cluster() {
    let dir_move = |p: u32| {
        let mut m = mv(p, &[1], &[1]);
        m.from = vec![Replica::new(1, DirId(0))].into();
        m.to = vec![Replica::new(1, DirId(1))].into();
        m
    };
    let moves = vec![
        dir_move(0),
        dir_move(1),
        dir_move(2),
        mv(3, &[2], &[3]),
        mv(4, &[2], &[3]),
    ];
    let mut plan = plan_of(moves, caps(5, 5, 2, 3));
    let sim = Sim::new([1, 2, 3], &plan, 1);
    // Two dir moves on broker 1 (its dir cap), then one broker move fills the cluster cap of 3.
    assert_eq!(started(&next_moves(&mut plan, &sim.observe())), vec![0, 1, 3]);
}

#[test]
fn moves_already_at_their_target_or_on_deleted_partitions_end_without_starting() {
    let moves = vec![mv(0, &[1], &[2]), mv(1, &[1], &[2])];
    let mut plan = plan_of(moves, Caps::default());
    let mut sim = Sim::new([1, 2], &plan, 1);
    sim.parts.get_mut(&part(0)).expect("planned").replicas = on(&[2]).to_vec();
    sim.parts.remove(&part(1));
    let step = next_moves(&mut plan, &sim.observe());
    assert!(step.start.is_empty());
    assert_eq!(plan.moves[0].state, MoveState::Done);
    assert_eq!(plan.moves[1].state, MoveState::Skipped(Reason::PartitionGone));
    assert_eq!(plan.state, PlanState::Done);
}
