//! The checker accepts what a register allows and catches stale reads and lost writes.

use super::*;

const BUDGET: u64 = 1_000_000;

fn op(client: u32, call: Call, outcome: Outcome, t: (u64, u64)) -> Op {
    Op {
        client,
        key: "k".into(),
        call,
        outcome,
        invoke_us: t.0,
        complete_us: t.1,
        node: 0,
    }
}

fn w(client: u32, v: &str, t: (u64, u64)) -> Op {
    op(client, Call::Write { value: v.into() }, Outcome::Ok, t)
}

fn w_unknown(client: u32, v: &str, t: (u64, u64)) -> Op {
    op(client, Call::Write { value: v.into() }, Outcome::Unknown, t)
}

fn r(client: u32, v: Option<&str>, t: (u64, u64)) -> Op {
    op(
        client,
        Call::Read,
        Outcome::Read {
            value: v.map(str::to_string),
        },
        t,
    )
}

fn cas(client: u32, from: Option<&str>, to: &str, outcome: Outcome, t: (u64, u64)) -> Op {
    op(
        client,
        Call::Cas {
            from: from.map(str::to_string),
            to: to.into(),
        },
        outcome,
        t,
    )
}

fn verdict(ops: &[Op]) -> Verdict {
    let refs: Vec<&Op> = ops.iter().collect();
    check_key(&refs, BUDGET).0
}

fn assert_ok(ops: &[Op]) {
    assert_eq!(verdict(ops), Verdict::Linearizable, "{ops:#?}");
}

fn assert_violation(ops: &[Op]) {
    assert!(matches!(verdict(ops), Verdict::Violation(_)), "not caught: {ops:#?}");
}

#[test]
fn accepts_a_sequential_history() {
    assert_ok(&[
        r(0, None, (0, 1)),
        w(0, "a", (2, 3)),
        r(1, Some("a"), (4, 5)),
        cas(1, Some("a"), "b", Outcome::Ok, (6, 7)),
        cas(0, Some("a"), "c", Outcome::CasFailed, (8, 9)),
        r(0, Some("b"), (10, 11)),
    ]);
}

#[test]
fn a_read_overlapping_a_write_may_see_either_value() {
    for seen in [Some("a"), Some("b")] {
        assert_ok(&[w(0, "a", (0, 1)), w(1, "b", (2, 10)), r(2, seen, (3, 4))]);
    }
}

#[test]
fn catches_a_stale_read() {
    // b was written after a, and the read began after b completed: it must not see a.
    assert_violation(&[w(0, "a", (0, 1)), w(1, "b", (2, 3)), r(2, Some("a"), (4, 5))]);
    // Two readers: once one has seen the new value, a later read may not see the old one.
    assert_violation(&[
        w(0, "a", (0, 1)),
        w(1, "b", (2, 20)),
        r(2, Some("b"), (3, 4)),
        r(3, Some("a"), (5, 6)),
    ]);
}

#[test]
fn catches_a_lost_write() {
    // An acknowledged write, then a read of the key as if it had never happened.
    assert_violation(&[w(0, "a", (0, 1)), r(1, None, (2, 3))]);
    // An acknowledged compare-and-set undone.
    assert_violation(&[
        w(0, "a", (0, 1)),
        cas(1, Some("a"), "b", Outcome::Ok, (2, 3)),
        r(2, Some("a"), (4, 5)),
    ]);
}

#[test]
fn catches_a_read_of_a_value_never_written_yet() {
    assert_violation(&[r(0, Some("a"), (0, 1)), w(1, "a", (2, 3))]);
    assert_violation(&[r(0, Some("zz"), (0, 1))]);
}

#[test]
fn compare_and_set_answers_must_fit() {
    // A guard that failed although the key held the expected value and nothing was concurrent.
    assert_violation(&[w(0, "a", (0, 1)), cas(1, Some("a"), "b", Outcome::CasFailed, (2, 3))]);
    // Two compare-and-sets from the same value cannot both succeed.
    assert_violation(&[
        w(0, "a", (0, 1)),
        cas(1, Some("a"), "b", Outcome::Ok, (2, 5)),
        cas(2, Some("a"), "c", Outcome::Ok, (2, 5)),
    ]);
    assert_ok(&[
        cas(0, None, "a", Outcome::Ok, (0, 1)),
        cas(1, None, "b", Outcome::CasFailed, (2, 3)),
        r(2, Some("a"), (4, 5)),
    ]);
}

#[test]
fn an_unknown_write_may_apply_late_or_never() {
    // Seen long after the client gave up on it.
    assert_ok(&[
        w_unknown(0, "a", (0, 1)),
        r(1, None, (2, 3)),
        r(1, Some("a"), (100, 101)),
    ]);
    // Never seen.
    assert_ok(&[w_unknown(0, "a", (0, 1)), r(1, None, (2, 3)), r(1, None, (100, 101))]);
    // But not before it was sent.
    assert_violation(&[r(1, Some("a"), (0, 1)), w_unknown(0, "a", (2, 3))]);
    // And once overwritten by a later acknowledged write that was read, it cannot come back
    // unless it was placed after that write: then the later read must see it, not the older.
    assert_violation(&[
        w_unknown(0, "a", (0, 1)),
        r(1, Some("a"), (2, 3)),
        w(2, "b", (4, 5)),
        r(1, Some("b"), (6, 7)),
        r(1, Some("a"), (8, 9)),
    ]);
}

#[test]
fn a_failed_guard_may_be_explained_by_an_unseen_unknown_write() {
    assert_ok(&[
        w(0, "a", (0, 1)),
        r(1, Some("a"), (2, 3)),
        w_unknown(0, "x", (4, 5)),
        cas(1, Some("a"), "b", Outcome::CasFailed, (6, 7)),
        w(0, "c", (8, 9)),
        r(1, Some("c"), (10, 11)),
    ]);
}

#[test]
fn many_unknown_writes_stay_cheap() {
    // 200 unknown writes nobody read, between reads that always see the last acknowledged
    // value: without the cuts this is 2^200 subsets.
    let mut ops = vec![w(0, "base", (0, 1))];
    for i in 0..200u64 {
        let t = 10 + i * 10;
        ops.push(w_unknown(1, &format!("lost{i}"), (t, t + 1)));
        ops.push(r(2, Some("base"), (t + 2, t + 3)));
    }
    ops.push(cas(3, Some("base"), "next", Outcome::CasFailed, (5000, 5001)));
    ops.push(w(0, "last", (6000, 6001)));
    ops.push(r(2, Some("last"), (7000, 7001)));
    let refs: Vec<&Op> = ops.iter().collect();
    let (v, steps) = check_key(&refs, 200_000);
    assert_eq!(v, Verdict::Linearizable);
    assert!(steps < 200_000, "{steps} steps");
}

#[test]
fn the_budget_bounds_the_search() {
    // Many concurrent writes whose values reads observed in an impossible order.
    let mut ops = Vec::new();
    for i in 0..20u32 {
        ops.push(w(i, &format!("v{i}"), (0, 1000)));
    }
    for i in 0..20u32 {
        ops.push(r(100 + i, Some(&format!("v{}", (i * 7) % 20)), (10 + i as u64, 990)));
    }
    ops.push(r(200, None, (2000, 2001)));
    let refs: Vec<&Op> = ops.iter().collect();
    let (v, steps) = check_key(&refs, 5_000);
    assert_eq!(v, Verdict::Inconclusive);
    assert!(steps <= 5_001);
}

#[test]
fn check_history_keeps_keys_apart() {
    let mut a = w(0, "a", (0, 1));
    a.key = "x".into();
    let mut b = r(1, Some("a"), (2, 3));
    b.key = "y".into();
    let report = check_history(&[a.clone(), b], BUDGET);
    assert_eq!(report.keys, 2);
    assert_eq!(report.violations.len(), 1);
    assert_eq!(report.violations[0].0, "y");
    let mut c = r(1, Some("a"), (2, 3));
    c.key = "x".into();
    let report = check_history(&[a, c], BUDGET);
    assert!(report.violations.is_empty() && report.inconclusive.is_empty());
}

/// Every order that real time allows, tried one by one; unknown operations may be left out.
fn brute_force(ops: &[Op]) -> bool {
    fn rec(ops: &[Op], done: &mut Vec<bool>, state: Option<String>) -> bool {
        let open = |i: usize| !done[i] && !matches!(ops[i].outcome, Outcome::Unknown | Outcome::Failed);
        if !(0..ops.len()).any(open) {
            return true;
        }
        let first_return = (0..ops.len()).filter(|i| open(*i)).map(|i| ops[i].complete_us).min();
        for i in 0..ops.len() {
            let o = &ops[i];
            if done[i] || matches!(o.outcome, Outcome::Failed) || first_return.is_some_and(|r| o.invoke_us > r) {
                continue;
            }
            if matches!((&o.call, &o.outcome), (Call::Read, Outcome::Unknown)) {
                continue;
            }
            let next = match (&o.call, &o.outcome) {
                (Call::Read, Outcome::Read { value }) => (*value == state).then(|| state.clone()),
                (Call::Write { value }, _) => Some(Some(value.clone())),
                (Call::Cas { from, to }, Outcome::Ok) => (*from == state).then(|| Some(to.clone())),
                (Call::Cas { from, .. }, Outcome::CasFailed) => (*from != state).then(|| state.clone()),
                (Call::Cas { from, to }, _) => Some(if *from == state {
                    Some(to.clone())
                } else {
                    state.clone()
                }),
                _ => None,
            };
            if let Some(next) = next {
                done[i] = true;
                let ok = rec(ops, done, next);
                done[i] = false;
                if ok {
                    return true;
                }
            }
        }
        false
    }
    rec(ops, &mut vec![false; ops.len()], None)
}

#[test]
fn agrees_with_brute_force_on_random_small_histories() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(18);
    let (mut ok, mut bad) = (0, 0);
    for case in 0..20_000 {
        let mut ops = Vec::new();
        let mut written: Vec<String> = Vec::new();
        for client in 0..3u32 {
            let mut t = rng.random_range(0..4u64);
            for _ in 0..rng.random_range(1..4) {
                let (inv, ret) = (t, t + rng.random_range(1..6));
                t = ret + rng.random_range(0..3);
                let pick = |rng: &mut rand::rngs::StdRng, w: &Vec<String>| {
                    let i = rng.random_range(0..=w.len());
                    w.get(i).cloned()
                };
                let o = match rng.random_range(0..3) {
                    0 => {
                        let value = format!("v{}", written.len());
                        written.push(value.clone());
                        let outcome = [Outcome::Ok, Outcome::Ok, Outcome::Unknown, Outcome::Failed]
                            [rng.random_range(0..4)]
                        .clone();
                        op(client, Call::Write { value }, outcome, (inv, ret))
                    }
                    1 => {
                        let value = pick(&mut rng, &written);
                        op(client, Call::Read, Outcome::Read { value }, (inv, ret))
                    }
                    _ => {
                        let from = pick(&mut rng, &written);
                        let to = format!("v{}", written.len());
                        written.push(to.clone());
                        let outcome =
                            [Outcome::Ok, Outcome::CasFailed, Outcome::Unknown][rng.random_range(0..3)].clone();
                        op(client, Call::Cas { from, to }, outcome, (inv, ret))
                    }
                };
                ops.push(o);
            }
        }
        let expect = brute_force(&ops);
        let got = verdict(&ops);
        assert_eq!(got == Verdict::Linearizable, expect, "case {case}: {got:?}\n{ops:#?}");
        if expect {
            ok += 1;
        } else {
            bad += 1;
        }
    }
    // Both kinds must be well represented for the comparison to mean something.
    assert!(ok > 2_000 && bad > 2_000, "{ok} linearizable, {bad} not");
}
