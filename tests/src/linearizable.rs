//! A linearizability checker for registers, one key at a time (keys are independent).
//!
//! A depth-first search for an order of the operations that respects real time and the register's
//! rules (Wing & Gong, with Lowe's memoization of (operations linearized, value) pairs already
//! explored). An operation with an unknown outcome has no return: it may be placed anywhere after
//! its invoke, or left out. Two cuts keep that affordable without changing the answer:
//! - every value no read observed behaves alike (only reads and guards tell values apart), so
//!   they are one value, "unseen";
//! - of the unknown writes of unseen values still pending, only the earliest is tried: all of them
//!   stay placeable for ever, so any one can stand in for another; and an unknown operation that
//!   would change nothing right now is never placed (placing it later is as good).
//!
//! The work is bounded by a step budget; past it the answer is [`Verdict::Inconclusive`]. Memory
//! grows with the states explored: 20 bytes each.

use std::collections::{HashMap, HashSet};

use crate::history::{by_key, Call, Op, Outcome};

/// What the checker found for one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Some order of the operations explains every answer.
    Linearizable,
    /// No order does; the text shows the longest explainable prefix and the operation after it.
    Violation(String),
    /// The search used up its budget before finding either.
    Inconclusive,
}

/// The result for a whole history.
#[derive(Debug, Default)]
pub struct Report {
    /// Keys checked.
    pub keys: usize,
    /// Keys with a violation, with its description.
    pub violations: Vec<(String, String)>,
    /// Keys whose search ran out of budget.
    pub inconclusive: Vec<String>,
    /// Search steps taken over all keys.
    pub steps: u64,
}

/// Checks every key of `ops`, each within `budget` search steps.
pub fn check_history(ops: &[Op], budget: u64) -> Report {
    let mut report = Report::default();
    for (key, key_ops) in by_key(ops) {
        report.keys += 1;
        let (verdict, steps) = check_key(&key_ops, budget);
        report.steps += steps;
        match verdict {
            Verdict::Linearizable => {}
            Verdict::Violation(d) => report.violations.push((key.to_string(), d)),
            Verdict::Inconclusive => report.inconclusive.push(key.to_string()),
        }
    }
    report
}

/// The key starts absent.
const ABSENT: u32 = 0;
/// Any value no read or guard ever named.
const UNSEEN: u32 = 1;

#[derive(Clone, Copy, Debug)]
enum Step {
    Read(u32),
    Write(u32),
    /// `result`: `None` when unknown.
    Cas {
        from: u32,
        to: u32,
        result: Option<bool>,
    },
}

impl Step {
    /// The register's rule: the value after this step from `state`, if the step's answer fits.
    fn apply(self, state: u32) -> Option<u32> {
        match self {
            Step::Read(v) => (state == v).then_some(state),
            Step::Write(v) => Some(v),
            Step::Cas {
                from,
                to,
                result: Some(true),
            } => (state == from).then_some(to),
            Step::Cas {
                from,
                result: Some(false),
                ..
            } => (state != from).then_some(state),
            Step::Cas { from, to, result: None } => Some(if state == from { to } else { state }),
        }
    }
}

struct Item<'a> {
    step: Step,
    /// Unknown outcome: no return event.
    unknown: bool,
    /// An unknown write of an unseen value (see the module note).
    unseen_writer: bool,
    op: &'a Op,
}

/// Turns one key's operations into steps; reads without an answer and operations known not
/// applied say nothing and are left out.
fn prepare<'a>(ops: &[&'a Op]) -> Vec<Item<'a>> {
    let mut ids: HashMap<&str, u32> = HashMap::new();
    for op in ops {
        let seen = match (&op.call, &op.outcome) {
            (_, Outcome::Read { value: Some(v) }) => Some(v),
            (Call::Cas { from: Some(v), .. }, o) if *o != Outcome::Failed => Some(v),
            _ => None,
        };
        if let Some(v) = seen {
            let next = ids.len() as u32 + 2;
            ids.entry(v.as_str()).or_insert(next);
        }
    }
    let id = |v: &str| ids.get(v).copied().unwrap_or(UNSEEN);
    let id_opt = |v: &Option<String>| v.as_deref().map_or(ABSENT, id);
    let mut items = Vec::new();
    for op in ops {
        let (step, unknown) = match (&op.call, &op.outcome) {
            (_, Outcome::Failed) | (Call::Read, Outcome::Unknown) => continue,
            (Call::Read, Outcome::Read { value }) => (Step::Read(id_opt(value)), false),
            (Call::Write { value }, Outcome::Ok) => (Step::Write(id(value)), false),
            // Anything else a write can end with says nothing definite about it.
            (Call::Write { value }, _) => (Step::Write(id(value)), true),
            (Call::Cas { from, to }, o) => {
                let result = match o {
                    Outcome::Ok => Some(true),
                    Outcome::CasFailed => Some(false),
                    _ => None,
                };
                let step = Step::Cas {
                    from: id_opt(from),
                    to: id(to),
                    result,
                };
                (step, result.is_none())
            }
            // A read answered as if it were a write: a malformed record, read as no information.
            (Call::Read, _) => continue,
        };
        let unseen_writer = unknown && matches!(step, Step::Write(UNSEEN));
        items.push(Item {
            step,
            unknown,
            unseen_writer,
            op,
        });
    }
    items
}

/// Call and return events in a doubly linked list that the search lifts operations out of.
struct Events {
    /// For each event: the item, and whether it is the call.
    ev: Vec<(usize, bool)>,
    /// The return event of each call event.
    ret_of: Vec<usize>,
    next: Vec<usize>,
    prev: Vec<usize>,
    head: usize,
    tail: usize,
}

impl Events {
    fn new(items: &[Item]) -> Self {
        // (time, returns after calls at the same time, item, is_call): ties count as concurrent.
        let mut order: Vec<(u64, u8, usize, bool)> = Vec::with_capacity(items.len() * 2);
        for (i, it) in items.iter().enumerate() {
            order.push((it.op.invoke_us, 0, i, true));
            let ret = if it.unknown { u64::MAX } else { it.op.complete_us };
            order.push((ret, 1, i, false));
        }
        order.sort_unstable();
        let n = order.len();
        let ev: Vec<(usize, bool)> = order.iter().map(|&(_, _, i, c)| (i, c)).collect();
        let mut ret_pos = vec![0; items.len()];
        for (pos, &(i, c)) in ev.iter().enumerate() {
            if !c {
                ret_pos[i] = pos;
            }
        }
        let ret_of = ev
            .iter()
            .map(|&(i, c)| if c { ret_pos[i] } else { usize::MAX })
            .collect();
        let (head, tail) = (n, n + 1);
        // Event x links to x - 1 and x + 1; the head and tail sentinels close the chain.
        let mut next: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<usize> = (0..n).map(|x| x.wrapping_sub(1)).collect();
        if n > 0 {
            next[n - 1] = tail;
            prev[0] = head;
        }
        next.extend([if n == 0 { tail } else { 0 }, usize::MAX]);
        prev.extend([usize::MAX, if n == 0 { head } else { n - 1 }]);
        Self {
            ev,
            ret_of,
            next,
            prev,
            head,
            tail,
        }
    }

    fn remove(&mut self, x: usize) {
        let (p, n) = (self.prev[x], self.next[x]);
        self.next[p] = n;
        self.prev[n] = p;
    }

    fn restore(&mut self, x: usize) {
        let (p, n) = (self.prev[x], self.next[x]);
        self.next[p] = x;
        self.prev[n] = x;
    }

    /// Takes a call and its return out of the list.
    fn lift(&mut self, call: usize) {
        self.remove(call);
        self.remove(self.ret_of[call]);
    }

    /// Undoes the latest [`Events::lift`] of `call`.
    fn unlift(&mut self, call: usize) {
        self.restore(self.ret_of[call]);
        self.restore(call);
    }
}

/// Checks one key's operations within `budget` steps; returns the verdict and the steps taken.
pub fn check_key(ops: &[&Op], budget: u64) -> (Verdict, u64) {
    let items = prepare(ops);
    let mut ev = Events::new(&items);
    // The set of operations linearized, as the XOR of a random 128-bit code per operation.
    let codes: Vec<u128> = (0..items.len() as u64).map(code).collect();
    let mut linearized = 0u128;
    let mut cache: HashSet<(u128, u32)> = HashSet::new();
    // (call event, value before it)
    let mut stack: Vec<(usize, u32)> = Vec::new();
    let mut best: (usize, Vec<usize>, usize) = (0, Vec::new(), usize::MAX);
    let mut state = ABSENT;
    let mut entry = ev.next[ev.head];
    // Whether an unknown writer of an unseen value comes before `entry` in the list.
    let mut unseen_writer_before = false;
    let mut steps = 0u64;
    loop {
        if entry == ev.tail {
            return (Verdict::Linearizable, steps);
        }
        steps += 1;
        if steps > budget {
            return (Verdict::Inconclusive, steps);
        }
        let (i, is_call) = ev.ev[entry];
        let it = &items[i];
        if is_call {
            let mut try_it = true;
            if it.unseen_writer {
                try_it = !unseen_writer_before;
                unseen_writer_before = true;
            }
            let next_state = if try_it { it.step.apply(state) } else { None };
            if let Some(ns) = next_state.filter(|ns| !(it.unknown && *ns == state)) {
                linearized ^= codes[i];
                if cache.insert((linearized, ns)) {
                    stack.push((entry, state));
                    state = ns;
                    ev.lift(entry);
                    entry = ev.next[ev.head];
                    unseen_writer_before = false;
                    continue;
                }
                linearized ^= codes[i];
            }
            entry = ev.next[entry];
        } else {
            if it.unknown {
                // Only returns that never come are left: everything else has a place.
                return (Verdict::Linearizable, steps);
            }
            if best.2 == usize::MAX || stack.len() > best.0 {
                best = (stack.len(), stack.iter().map(|(e, _)| ev.ev[*e].0).collect(), i);
            }
            let Some((call, before)) = stack.pop() else {
                return (Verdict::Violation(describe_violation(&items, &best)), steps);
            };
            let ci = ev.ev[call].0;
            state = before;
            linearized ^= codes[ci];
            ev.unlift(call);
            entry = ev.next[call];
            unseen_writer_before = false;
            let mut e = ev.next[ev.head];
            while e != entry {
                let (j, c) = ev.ev[e];
                unseen_writer_before |= c && items[j].unseen_writer;
                e = ev.next[e];
            }
        }
    }
}

/// A pseudo-random 128-bit code for operation `i` (splitmix64, twice). Two sets of operations
/// share a code with odds of about one in 2^128 per pair; such a clash could only make the search
/// skip a path and report a violation that is not one, never hide one.
fn code(i: u64) -> u128 {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let a = mix(i.wrapping_mul(2).wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let b = mix(i.wrapping_mul(2).wrapping_add(2).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    ((a as u128) << 64) | b as u128
}

fn describe_violation(items: &[Item], best: &(usize, Vec<usize>, usize)) -> String {
    let (depth, order, stuck) = best;
    let mut s = format!("{depth} operations fit in order; the last of them:\n");
    for &i in &order[order.len().saturating_sub(6)..] {
        s.push_str(&format!("    {}\n", describe(items[i].op)));
    }
    if let Some(it) = items.get(*stuck) {
        s.push_str(&format!(
            "  then nothing fits before this one returns:\n    {}",
            describe(it.op)
        ));
    }
    s
}

/// One operation for people: client, call, outcome, answering node, invoke and return times in
/// seconds.
pub fn describe(op: &Op) -> String {
    let call = match &op.call {
        Call::Read => "read".to_string(),
        Call::Write { value } => format!("write {value}"),
        Call::Cas { from, to } => format!("cas {} -> {to}", from.as_deref().unwrap_or("<absent>")),
    };
    let outcome = match &op.outcome {
        Outcome::Read { value } => format!("= {}", value.as_deref().unwrap_or("<absent>")),
        Outcome::Ok => "ok".into(),
        Outcome::CasFailed => "guard failed".into(),
        Outcome::Failed => "failed".into(),
        Outcome::Unknown => "unknown".into(),
    };
    let by = if op.node == 0 {
        String::new()
    } else {
        format!(" by node {}", op.node)
    };
    format!(
        "client {} {} {call} {outcome}{by} [{:.6} s .. {:.6} s]",
        op.client,
        op.key,
        op.invoke_us as f64 / 1e6,
        op.complete_us as f64 / 1e6
    )
}

#[cfg(test)]
#[path = "linearizable_tests.rs"]
mod tests;
