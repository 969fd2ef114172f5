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
    let p = propose_moves(&[vec![1, 2, 3], vec![3, 1, 2]], &b, true).unwrap();
    assert_eq!(p, vec![vec![1, 2, 4], vec![1, 2, 4]]);
    // Nothing to move when every replica is on a listed broker.
    let p = propose_moves(&[vec![2, 1]], &b, true).unwrap();
    assert_eq!(p, vec![vec![2, 1]]);
}

#[test]
fn prefers_an_unused_rack_and_refuses_too_few_brokers() {
    let b = slots(&[(1, "a"), (2, "a"), (3, "b"), (4, "b")]);
    let p = propose_moves(&[vec![1, 9]], &b, true).unwrap();
    assert_eq!(p, vec![vec![1, 3]]);
    let p = propose_moves(&[vec![1, 9]], &b, false).unwrap();
    assert_eq!(p, vec![vec![1, 2]]);
    assert!(propose_moves(&[vec![1, 2, 3, 4, 5]], &b, true).is_err());
}
