//! The pure half of the fetch engine: Kafka's rules for how much one fetch reads from each
//! partition (`ReplicaManager.readFromLog`) and whether it answers now or waits
//! (`ReplicaManager.fetchMessages`, `DelayedFetch.tryComplete`).

use std::time::Duration;

/// The longest wait a fetch may ask for.
pub const MAX_WAIT_MS: u64 = crate::produce::MAX_WAIT_MS as u64;

/// The most bytes one fetch answer carries, whatever it asks: Kafka's broker default
/// `fetch.max.bytes` (55 MiB), so that no request makes the broker hold gigabytes.
pub const FETCH_MAX_BYTES: usize = 55 << 20;

/// The bytes a gRPC fetch (a client's or a follower's) reads when it names no limit.
pub const GRPC_DEFAULT_MAX_BYTES: usize = 1 << 20;

/// How far a fetch may read: Kafka's `FetchIsolation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// A follower: up to the log end.
    LogEnd,
    /// A consumer reading uncommitted records: up to the high watermark.
    HighWatermark,
    /// A consumer reading committed records: up to the last stable offset.
    TxnCommitted,
}

impl Isolation {
    /// A consumer Fetch's `isolation_level`: 0 is READ_UNCOMMITTED, 1 READ_COMMITTED, any other
    /// value none (Kafka's `IsolationLevel.forId` refuses it).
    pub fn of_consumer(level: i8) -> Option<Self> {
        match level {
            0 => Some(Self::HighWatermark),
            1 => Some(Self::TxnCommitted),
            _ => None,
        }
    }

    /// The offset a read stops before. Ferry has no transactions, so the last stable offset is
    /// the high watermark.
    pub fn end(self, high_watermark: i64, log_end: i64) -> i64 {
        match self {
            Self::LogEnd => log_end,
            Self::HighWatermark | Self::TxnCommitted => high_watermark,
        }
    }
}

/// One fetch's wait and size limits, as Kafka names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes that answer before the wait ends (`min_bytes`).
    pub min_bytes: usize,
    /// Bytes of the whole answer (`max_bytes`), past the one batch always returned.
    pub max_bytes: usize,
    /// How long to wait for `min_bytes` (`max_wait_ms`).
    pub max_wait: Duration,
}

impl Limits {
    /// The limits of a request's fields: negative ones count as 0, a `max_bytes` of 0 or less
    /// is `default_max_bytes`, and both bounds are capped ([`FETCH_MAX_BYTES`],
    /// [`MAX_WAIT_MS`]).
    pub fn of_request(min_bytes: i64, max_bytes: i64, max_wait_ms: i64, default_max_bytes: usize) -> Self {
        let max_bytes = match usize::try_from(max_bytes) {
            Ok(0) | Err(_) => default_max_bytes,
            Ok(n) => n,
        };
        Self {
            min_bytes: usize::try_from(min_bytes).unwrap_or(0),
            max_bytes: max_bytes.min(FETCH_MAX_BYTES),
            max_wait: Duration::from_millis(u64::try_from(max_wait_ms).unwrap_or(0).min(MAX_WAIT_MS)),
        }
    }
}

/// The limit of one partition's read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimit {
    /// Bytes the read stops before.
    pub max_bytes: usize,
    /// Whether the first batch comes whole even when it is larger than `max_bytes`.
    pub min_one: bool,
}

/// The byte budget of one pass over a fetch's partitions, in their order. Each partition may
/// read its own maximum or what is left, the smaller; until one partition returns data, the
/// first batch comes whole even past those limits, so that a batch larger than any limit
/// still makes progress (KIP-74).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    left: usize,
    min_one: bool,
}

impl Budget {
    /// A pass that may answer `max_bytes`.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            left: max_bytes,
            min_one: true,
        }
    }

    /// The limit of the next partition's read, whose own maximum is `partition_max`.
    pub fn limit(&self, partition_max: usize) -> ReadLimit {
        ReadLimit {
            max_bytes: partition_max.min(self.left),
            min_one: self.min_one,
        }
    }

    /// Takes the bytes a partition returned.
    pub fn took(&mut self, bytes: usize) {
        self.left = self.left.saturating_sub(bytes);
        if bytes > 0 {
            self.min_one = false;
        }
    }

    /// Whether nothing more fits: another pass can only return as much.
    pub fn spent(&self) -> bool {
        self.left == 0
    }
}

/// What one partition's read means for the wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// This many bytes of batches (0: nothing yet).
    Bytes(usize),
    /// No bytes, but news the asker must have now (a follower's leader lost its role, or its
    /// log start moved).
    News,
    /// An error, which is answered at once.
    Error,
}

impl Found {
    fn bytes(self) -> usize {
        match self {
            Self::Bytes(n) => n,
            Self::News | Self::Error => 0,
        }
    }
}

/// One pass over a fetch's partitions: each one's answer and what it found.
#[derive(Debug)]
pub struct Pass<T> {
    /// The answers, in the order asked.
    pub parts: Vec<T>,
    /// What each read found.
    pub found: Vec<Found>,
    /// The budget after the pass.
    pub budget: Budget,
}

/// Reads every partition once, in order, within `max_bytes`: partition `i` may return
/// `partition_max[i]` or what is left, the smaller (see [`Budget`]).
pub fn pass<T>(
    partition_max: impl IntoIterator<Item = usize>,
    max_bytes: usize,
    mut read: impl FnMut(usize, ReadLimit) -> (T, Found),
) -> Pass<T> {
    let mut budget = Budget::new(max_bytes);
    let (mut parts, mut found) = (Vec::new(), Vec::new());
    for (i, max) in partition_max.into_iter().enumerate() {
        let (part, f) = read(i, budget.limit(max));
        budget.took(f.bytes());
        parts.push(part);
        found.push(f);
    }
    Pass { parts, found, budget }
}

/// Whether a fetch answers after a pass or waits for a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Send what the pass read.
    Answer,
    /// Wait for a change (or the end of the wait) and read again.
    Wait,
}

/// Kafka answers at once when the wait is over (a `max_wait_ms` of 0 included), no partition
/// is asked, a partition errs, the bytes read reach `min_bytes`, or (Ferry's too) a partition
/// has news or the answer is full.
pub fn next<T>(pass: &Pass<T>, min_bytes: usize, expired: bool) -> Next {
    let bytes: usize = pass.found.iter().map(|f| f.bytes()).sum();
    let told = pass.found.iter().any(|f| matches!(f, Found::Error | Found::News));
    if expired || pass.found.is_empty() || told || bytes >= min_bytes || pass.budget.spent() {
        Next::Answer
    } else {
        Next::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads from partitions holding batches of the given sizes, as a log does: whole batches,
    /// the first past the limit only when `min_one`.
    fn reader<'a>(logs: &'a [&'a [usize]]) -> impl FnMut(usize, ReadLimit) -> (Vec<usize>, Found) + 'a {
        move |i, limit| {
            let mut taken = Vec::new();
            let mut bytes = 0;
            for &b in logs[i] {
                let fits = bytes + b <= limit.max_bytes || (taken.is_empty() && limit.min_one);
                if !fits {
                    break;
                }
                taken.push(b);
                bytes += b;
            }
            (taken, Found::Bytes(bytes))
        }
    }

    #[test]
    fn the_first_batch_comes_whole_past_every_limit() {
        let p = pass([10, 10], 5, reader(&[&[100, 1], &[1]]));
        assert_eq!(p.parts, vec![vec![100], vec![]], "only the first non-empty partition");
        assert!(p.budget.spent());
    }

    #[test]
    fn empty_partitions_before_the_first_data_keep_the_whole_batch_rule() {
        let p = pass([10, 10, 10], 1000, reader(&[&[], &[50, 1], &[50]]));
        assert_eq!(p.parts, vec![vec![], vec![50], vec![]]);
    }

    #[test]
    fn each_partition_reads_its_own_maximum_or_what_is_left() {
        let p = pass([25, 25, 25], 50, reader(&[&[10, 10, 10], &[10, 10, 10], &[10, 10]]));
        assert_eq!(p.parts, vec![vec![10, 10], vec![10, 10], vec![10]]);
        assert_eq!(p.found, vec![Found::Bytes(20), Found::Bytes(20), Found::Bytes(10)]);
        assert!(p.budget.spent());
    }

    #[test]
    fn a_partition_maximum_of_zero_still_gets_one_batch_while_nothing_came() {
        // Kafka's log read widens a limit of 0 to the first batch under minOneMessage.
        let p = pass([0, 0], 100, reader(&[&[7], &[7]]));
        assert_eq!(p.parts, vec![vec![7], vec![]]);
    }

    #[test]
    fn a_fetch_waits_until_min_bytes_arrive() {
        let p = pass([100, 100], 1000, reader(&[&[10], &[10]]));
        assert_eq!(next(&p, 30, false), Next::Wait);
        assert_eq!(next(&p, 20, false), Next::Answer);
        assert_eq!(next(&p, 30, true), Next::Answer, "the wait is over");
    }

    #[test]
    fn a_fetch_with_min_bytes_zero_answers_at_once_even_empty() {
        let p = pass([100], 1000, reader(&[&[]]));
        assert_eq!(next(&p, 0, false), Next::Answer);
        assert_eq!(next(&p, 1, false), Next::Wait);
    }

    #[test]
    fn an_error_or_news_answers_at_once() {
        let mut read = |i: usize, _: ReadLimit| ((), [Found::Bytes(0), Found::Error, Found::News][i]);
        let errs = pass([1, 1], 10, &mut read);
        assert_eq!(next(&errs, 1, false), Next::Answer);
        let news = pass([1], 10, |_, _| ((), Found::News));
        assert_eq!(next(&news, 1, false), Next::Answer);
        let none = pass([1], 10, |_, _| ((), Found::Bytes(0)));
        assert_eq!(next(&none, 1, false), Next::Wait);
    }

    #[test]
    fn a_full_answer_or_no_partition_answers_at_once() {
        let full = pass([100], 10, reader(&[&[10]]));
        assert_eq!(next(&full, 1 << 20, false), Next::Answer);
        let empty = pass(Vec::<usize>::new(), 10, reader(&[]));
        assert_eq!(next(&empty, 1, false), Next::Answer);
    }

    #[test]
    fn request_limits_are_bounded_and_defaulted() {
        let l = Limits::of_request(-1, 0, -5, 1 << 20);
        assert_eq!((l.min_bytes, l.max_bytes, l.max_wait), (0, 1 << 20, Duration::ZERO));
        let l = Limits::of_request(1, i64::from(i32::MAX), i64::from(i32::MAX), 1 << 20);
        assert_eq!(l.max_bytes, FETCH_MAX_BYTES);
        assert_eq!(l.max_wait, Duration::from_millis(MAX_WAIT_MS));
        assert_eq!(Limits::of_request(1, 500, 100, 1).max_bytes, 500);
    }

    #[test]
    fn consumers_read_to_the_watermark_and_followers_to_the_log_end() {
        assert_eq!(Isolation::of_consumer(0).map(|i| i.end(5, 9)), Some(5));
        assert_eq!(Isolation::of_consumer(1).map(|i| i.end(5, 9)), Some(5));
        assert_eq!(Isolation::of_consumer(2), None);
        assert_eq!(Isolation::LogEnd.end(5, 9), 9);
    }
}
