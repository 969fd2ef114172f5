//! A history of register operations as clients saw them, and what it says about availability.
//!
//! Times are microseconds on one clock (the workload process's). An operation whose outcome is
//! [`Outcome::Unknown`] may have taken effect at any moment after its invoke, or never.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a client asked of one key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "lowercase")]
pub enum Call {
    /// A linearizable read.
    Read,
    /// A put of a value no other write uses.
    Write {
        /// The value written.
        value: String,
    },
    /// A transaction that puts `to` only if the key holds `from` (`None`: only if absent).
    Cas {
        /// The value the guard expects.
        from: Option<String>,
        /// The value put when the guard holds.
        to: String,
    },
}

/// How an operation ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "o", rename_all = "lowercase")]
pub enum Outcome {
    /// A read answered with this value (`None`: the key was absent).
    Read {
        /// The value read.
        value: Option<String>,
    },
    /// A write, or a compare-and-set whose guard held, took effect.
    Ok,
    /// A compare-and-set whose guard did not hold: it took no effect.
    CasFailed,
    /// Definitely took no effect (refused before it could be applied).
    Failed,
    /// Timed out or unavailable: may have taken effect, at any time after its invoke.
    Unknown,
}

/// One operation of one client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// The client (one at a time per client: a client's operations never overlap).
    pub client: u32,
    /// The key.
    pub key: String,
    /// What was asked.
    pub call: Call,
    /// How it ended.
    pub outcome: Outcome,
    /// When it was sent.
    pub invoke_us: u64,
    /// When its answer (or the client's giving up) came.
    pub complete_us: u64,
    /// The node that answered, 0 when none did.
    #[serde(default)]
    pub node: u64,
}

impl Op {
    /// Whether this is a read that got an answer.
    pub fn read_ok(&self) -> bool {
        matches!(self.outcome, Outcome::Read { .. })
    }

    /// Whether this is a write or compare-and-set known to have taken effect.
    pub fn write_ok(&self) -> bool {
        matches!(self.outcome, Outcome::Ok)
    }

    /// The value this operation wrote, if it may have written one.
    pub fn written(&self) -> Option<&str> {
        match (&self.call, &self.outcome) {
            (_, Outcome::Failed | Outcome::CasFailed | Outcome::Read { .. }) => None,
            (Call::Write { value }, _) | (Call::Cas { to: value, .. }, _) => Some(value),
            (Call::Read, _) => None,
        }
    }
}

/// Renders a history as JSON lines.
pub fn to_json_lines(ops: &[Op]) -> String {
    let mut out = String::new();
    for op in ops {
        // A struct of strings, integers and enums always serializes.
        out.push_str(&serde_json::to_string(op).expect("an Op serializes"));
        out.push('\n');
    }
    out
}

/// Parses JSON lines written by [`to_json_lines`].
pub fn from_json_lines(text: &str) -> Result<Vec<Op>, serde_json::Error> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect()
}

/// The operations of each key, in invoke order.
pub fn by_key(ops: &[Op]) -> BTreeMap<&str, Vec<&Op>> {
    let mut keys: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        keys.entry(op.key.as_str()).or_default().push(op);
    }
    for v in keys.values_mut() {
        v.sort_by_key(|o| (o.invoke_us, o.complete_us));
    }
    keys
}

/// The longest stretch within `[from_us, to_us]` in which no operation matching `pred`
/// completed: (length, start) in microseconds.
pub fn longest_gap(ops: &[Op], from_us: u64, to_us: u64, pred: impl Fn(&Op) -> bool) -> (u64, u64) {
    longest_gap_outside(ops, from_us, to_us, &[], pred)
}

/// Like [`longest_gap`], but a stretch's length leaves out its overlap with the `excluded`
/// windows (disjoint `(start, end)` pairs): time in which no success was possible, such as a
/// majority of the nodes being down, does not count.
pub fn longest_gap_outside(
    ops: &[Op],
    from_us: u64,
    to_us: u64,
    excluded: &[(u64, u64)],
    pred: impl Fn(&Op) -> bool,
) -> (u64, u64) {
    let mut ends: Vec<u64> = ops
        .iter()
        .filter(|o| pred(o))
        .map(|o| o.complete_us.clamp(from_us, to_us))
        .collect();
    ends.push(from_us);
    ends.push(to_us);
    ends.sort_unstable();
    let overlap = |a: u64, b: u64| -> u64 { excluded.iter().map(|&(s, e)| e.min(b).saturating_sub(s.max(a))).sum() };
    ends.windows(2)
        .map(|w| (w[1] - w[0] - overlap(w[0], w[1]).min(w[1] - w[0]), w[0]))
        .max_by_key(|(len, _)| *len)
        .unwrap_or((0, from_us))
}

/// How long after `from_us` the first operation matching `pred` that began then or later
/// completed, in microseconds; `None` if none did.
pub fn first_after(ops: &[Op], from_us: u64, pred: impl Fn(&Op) -> bool) -> Option<u64> {
    ops.iter()
        .filter(|o| o.invoke_us >= from_us && pred(o))
        .map(|o| o.complete_us - from_us)
        .min()
}

/// Counts of a history, for the report.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// All operations.
    pub ops: usize,
    /// Reads answered.
    pub reads_ok: usize,
    /// Writes and compare-and-sets known applied.
    pub writes_ok: usize,
    /// Compare-and-sets whose guard failed.
    pub cas_failed: usize,
    /// Operations with an unknown outcome (reads that failed included).
    pub unknown: usize,
    /// Operations known not applied.
    pub failed: usize,
}

/// Tallies a history.
pub fn counts(ops: &[Op]) -> Counts {
    let mut c = Counts {
        ops: ops.len(),
        ..Counts::default()
    };
    for op in ops {
        match op.outcome {
            Outcome::Read { .. } => c.reads_ok += 1,
            Outcome::Ok => c.writes_ok += 1,
            Outcome::CasFailed => c.cas_failed += 1,
            Outcome::Unknown => c.unknown += 1,
            Outcome::Failed => c.failed += 1,
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(call: Call, outcome: Outcome, invoke_us: u64, complete_us: u64) -> Op {
        Op {
            client: 0,
            key: "k".into(),
            call,
            outcome,
            invoke_us,
            complete_us,
            node: 0,
        }
    }

    #[test]
    fn json_lines_round_trip() {
        let ops = vec![
            op(Call::Read, Outcome::Read { value: None }, 1, 2),
            op(Call::Write { value: "a".into() }, Outcome::Unknown, 3, 9),
            op(
                Call::Cas {
                    from: Some("a".into()),
                    to: "b".into(),
                },
                Outcome::CasFailed,
                4,
                5,
            ),
        ];
        assert_eq!(from_json_lines(&to_json_lines(&ops)).unwrap(), ops);
    }

    #[test]
    fn longest_gap_counts_the_edges_and_the_middle() {
        let ops = vec![
            op(Call::Read, Outcome::Read { value: None }, 0, 10),
            op(Call::Read, Outcome::Unknown, 0, 50),
            op(Call::Read, Outcome::Read { value: None }, 0, 70),
        ];
        assert_eq!(longest_gap(&ops, 0, 100, Op::read_ok), (60, 10));
        assert_eq!(longest_gap(&ops, 0, 200, Op::read_ok), (130, 70));
        assert_eq!(longest_gap(&[], 5, 20, Op::read_ok), (15, 5));
    }

    #[test]
    fn excluded_time_does_not_count_in_a_gap() {
        let ops = vec![
            op(Call::Read, Outcome::Read { value: None }, 0, 10),
            op(Call::Read, Outcome::Read { value: None }, 0, 70),
            op(Call::Read, Outcome::Read { value: None }, 0, 100),
        ];
        // 10..70 holds 50 excluded: 10 left; 70..100 is then the longest.
        assert_eq!(longest_gap_outside(&ops, 0, 100, &[(15, 65)], Op::read_ok), (30, 70));
        // A window reaching past the stretch counts only where they overlap.
        assert_eq!(longest_gap_outside(&ops, 0, 100, &[(60, 200)], Op::read_ok), (50, 10));
    }

    #[test]
    fn first_after_takes_operations_begun_after_the_moment() {
        let ops = vec![
            op(Call::Read, Outcome::Read { value: None }, 5, 40),
            op(Call::Read, Outcome::Read { value: None }, 10, 30),
            op(Call::Read, Outcome::Unknown, 11, 12),
        ];
        assert_eq!(first_after(&ops, 10, Op::read_ok), Some(20));
        assert_eq!(first_after(&ops, 11, Op::read_ok), None);
    }

    #[test]
    fn counts_tally_each_outcome() {
        let ops = vec![
            op(Call::Read, Outcome::Read { value: None }, 0, 1),
            op(Call::Write { value: "a".into() }, Outcome::Ok, 0, 1),
            op(Call::Write { value: "b".into() }, Outcome::Unknown, 0, 1),
        ];
        let c = counts(&ops);
        assert_eq!((c.ops, c.reads_ok, c.writes_ok, c.unknown), (3, 1, 1, 1));
    }
}
