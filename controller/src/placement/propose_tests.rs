//! Tests of `propose_moves`.

use super::*;

fn slots(ids: &[(i32, &str)]) -> Vec<BrokerSlot> {
    ids.iter()
        .map(|(id, rack)| BrokerSlot {
            id: *id,
            rack: (!rack.is_empty()).then(|| rack.to_string()),
        })
        .collect()
}

#[test]
fn keeps_what_it_can_and_fills_from_the_least_loaded() {
    let b = slots(&[(1, ""), (2, ""), (4, "")]);
    let p = propose_moves(&[vec![1, 2, 3], vec![3, 1, 2]], &b, true, &BTreeSet::new()).unwrap();
    assert_eq!(p, vec![vec![1, 2, 4], vec![1, 2, 4]]);
    // Nothing to move when every replica is on a listed broker.
    let p = propose_moves(&[vec![2, 1]], &b, true, &BTreeSet::new()).unwrap();
    assert_eq!(p, vec![vec![2, 1]]);
}

#[test]
fn prefers_an_unused_rack_and_refuses_too_few_brokers() {
    let b = slots(&[(1, "a"), (2, "a"), (3, "b"), (4, "b")]);
    let p = propose_moves(&[vec![1, 9]], &b, true, &BTreeSet::new()).unwrap();
    assert_eq!(p, vec![vec![1, 3]]);
    let p = propose_moves(&[vec![1, 9]], &b, false, &BTreeSet::new()).unwrap();
    assert_eq!(p, vec![vec![1, 2]]);
    assert!(propose_moves(&[vec![1, 2, 3, 4, 5]], &b, true, &BTreeSet::new()).is_err());
}

#[test]
fn a_cordoned_broker_keeps_its_replicas_and_takes_none_new() {
    let b = slots(&[(1, ""), (2, ""), (3, "")]);
    let closed = BTreeSet::from([3]);
    // Partition 0 keeps its replica on 3; partition 1's replica from 9 goes to 1 or 2, never 3.
    let p = propose_moves(&[vec![3, 1], vec![9, 2]], &b, true, &closed).unwrap();
    assert_eq!(p[0], vec![3, 1]);
    assert_eq!(p[1], vec![2, 1]);
    let e = propose_moves(&[vec![9, 8, 7]], &b, true, &closed).unwrap_err();
    assert_eq!(
        e,
        PlacementError::NoBrokerFor {
            index: 0,
            missing: 1,
            closed: vec![3]
        }
    );
    assert!(e.to_string().contains("cordoned"), "{e}");
}
