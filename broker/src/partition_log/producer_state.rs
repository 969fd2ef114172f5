//! Idempotent producers' sequence numbers per partition, as Kafka checks them: each producer id
//! writes batches whose sequences follow on from the last, a retried batch that was already
//! written is answered with its first offset instead of being written twice, and an older
//! producer epoch is fenced. Pure: the log feeds it batch headers, on append and when it
//! rebuilds the state from its batches.

use std::collections::{HashMap, VecDeque};

use crate::record_batch::BatchHeader;

/// Batches remembered per producer for duplicate detection: Kafka's
/// `max.in.flight.requests.per.connection` limit for idempotence.
const REMEMBERED: usize = 5;

/// One written batch of a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Written {
    first_seq: i32,
    last_seq: i32,
    base_offset: i64,
}

/// What the log knows of one producer.
#[derive(Debug, Clone, Default)]
struct Producer {
    epoch: i16,
    recent: VecDeque<Written>,
}

/// Why a batch of an idempotent producer is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    /// A newer epoch of this producer id has written: this one is fenced.
    #[error("producer {producer_id} epoch {epoch} is older than its current epoch {current}")]
    FencedEpoch { producer_id: i64, epoch: i16, current: i16 },
    /// The batch does not follow the producer's last sequence.
    #[error("producer {producer_id}: sequence {got} where {want} was expected")]
    OutOfOrder { producer_id: i64, got: i32, want: i32 },
}

/// The outcome of checking a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Not from an idempotent producer, or next in sequence: append it.
    Append,
    /// Already written at this base offset: answer that, write nothing.
    Duplicate(i64),
}

/// The last sequence of a batch, wrapping as Kafka's sequences do.
fn last_seq(h: &BatchHeader) -> i32 {
    ((i64::from(h.base_sequence) + i64::from(h.last_offset_delta)) % (i64::from(i32::MAX) + 1)) as i32
}

fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

/// Every idempotent producer that wrote to a partition.
#[derive(Debug, Clone, Default)]
pub struct ProducerStates {
    producers: HashMap<i64, Producer>,
}

impl ProducerStates {
    /// Checks a batch the leader is about to append.
    pub fn check(&self, h: &BatchHeader) -> Result<SequenceCheck, SequenceError> {
        if h.producer_id < 0 {
            return Ok(SequenceCheck::Append);
        }
        let (pid, epoch, seq) = (h.producer_id, h.producer_epoch, h.base_sequence);
        let Some(p) = self.producers.get(&pid) else {
            // A producer this log never saw starts at 0; one whose batches were all deleted
            // or truncated away may go on from anywhere, as Kafka allows since KIP-360.
            return Ok(SequenceCheck::Append);
        };
        if epoch < p.epoch {
            return Err(SequenceError::FencedEpoch {
                producer_id: pid,
                epoch,
                current: p.epoch,
            });
        }
        if epoch > p.epoch {
            // A new epoch starts its sequences again.
            return if seq == 0 {
                Ok(SequenceCheck::Append)
            } else {
                Err(SequenceError::OutOfOrder {
                    producer_id: pid,
                    got: seq,
                    want: 0,
                })
            };
        }
        if let Some(w) = p
            .recent
            .iter()
            .find(|w| w.first_seq == seq && w.last_seq == last_seq(h))
        {
            return Ok(SequenceCheck::Duplicate(w.base_offset));
        }
        let want = p.recent.back().map_or(0, |w| next_seq(w.last_seq));
        if seq == want {
            Ok(SequenceCheck::Append)
        } else {
            Err(SequenceError::OutOfOrder {
                producer_id: pid,
                got: seq,
                want,
            })
        }
    }

    /// Each producer's last offset: the last offset of its latest batch, which the log cleaner
    /// keeps (emptied if need be) so that a rebuild finds its sequence, as Kafka's does.
    pub fn last_offsets(&self) -> HashMap<i64, i64> {
        let seq_span =
            |w: &Written| (i64::from(w.last_seq) - i64::from(w.first_seq)).rem_euclid(i64::from(i32::MAX) + 1);
        self.producers
            .iter()
            .filter_map(|(pid, p)| p.recent.back().map(|w| (*pid, w.base_offset + seq_span(w))))
            .collect()
    }

    /// Records a batch written to the log (appended here or replicated from the leader).
    pub fn record(&mut self, h: &BatchHeader) {
        if h.producer_id < 0 {
            return;
        }
        let p = self.producers.entry(h.producer_id).or_default();
        if h.producer_epoch != p.epoch {
            p.epoch = h.producer_epoch;
            p.recent.clear();
        }
        p.recent.push_back(Written {
            first_seq: h.base_sequence,
            last_seq: last_seq(h),
            base_offset: h.base_offset,
        });
        while p.recent.len() > REMEMBERED {
            p.recent.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_batch::{peek_header, try_encode_batch};

    fn batch(pid: i64, epoch: i16, seq: i32, records: u32, base: i64) -> BatchHeader {
        let values: Vec<&[u8]> = (0..records).map(|_| b"v".as_slice()).collect();
        let b = try_encode_batch(base, 0, 0, &values).unwrap();
        let mut h = peek_header(&b).unwrap().unwrap();
        h.producer_id = pid;
        h.producer_epoch = epoch;
        h.base_sequence = seq;
        h
    }

    #[test]
    fn sequences_follow_on_and_a_retry_is_answered_with_its_offset() {
        let mut s = ProducerStates::default();
        let first = batch(7, 0, 0, 3, 0);
        assert_eq!(s.check(&first), Ok(SequenceCheck::Append));
        s.record(&first);
        let second = batch(7, 0, 3, 2, 3);
        assert_eq!(s.check(&second), Ok(SequenceCheck::Append));
        s.record(&second);
        assert_eq!(s.check(&batch(7, 0, 0, 3, 99)), Ok(SequenceCheck::Duplicate(0)));
        assert_eq!(s.check(&batch(7, 0, 3, 2, 99)), Ok(SequenceCheck::Duplicate(3)));
        assert_eq!(
            s.check(&batch(7, 0, 9, 1, 5)),
            Err(SequenceError::OutOfOrder {
                producer_id: 7,
                got: 9,
                want: 5
            })
        );
        // Non-idempotent batches and other producers are independent.
        assert_eq!(s.check(&batch(-1, -1, -1, 1, 5)), Ok(SequenceCheck::Append));
        assert_eq!(s.check(&batch(8, 0, 0, 1, 5)), Ok(SequenceCheck::Append));
    }

    #[test]
    fn an_old_epoch_is_fenced_and_a_new_one_starts_at_zero() {
        let mut s = ProducerStates::default();
        s.record(&batch(7, 2, 0, 1, 0));
        assert!(matches!(
            s.check(&batch(7, 1, 1, 1, 1)),
            Err(SequenceError::FencedEpoch { current: 2, .. })
        ));
        assert!(matches!(
            s.check(&batch(7, 3, 4, 1, 1)),
            Err(SequenceError::OutOfOrder { want: 0, .. })
        ));
        let next = batch(7, 3, 0, 1, 1);
        assert_eq!(s.check(&next), Ok(SequenceCheck::Append));
        s.record(&next);
        assert!(matches!(
            s.check(&batch(7, 2, 1, 1, 2)),
            Err(SequenceError::FencedEpoch { .. })
        ));
    }

    #[test]
    fn only_the_last_five_batches_are_remembered_and_sequences_wrap() {
        let mut s = ProducerStates::default();
        for i in 0..7 {
            s.record(&batch(1, 0, i, 1, i64::from(i)));
        }
        assert!(matches!(
            s.check(&batch(1, 0, 0, 1, 9)),
            Err(SequenceError::OutOfOrder { .. })
        ));
        assert_eq!(s.check(&batch(1, 0, 2, 1, 9)), Ok(SequenceCheck::Duplicate(2)));
        let mut s = ProducerStates::default();
        s.record(&batch(1, 0, i32::MAX - 1, 2, 0));
        assert_eq!(s.check(&batch(1, 0, 0, 1, 2)), Ok(SequenceCheck::Append));
        // The last offset spans the wrap too.
        assert_eq!(s.last_offsets(), HashMap::from([(1, 1)]));
    }
}
