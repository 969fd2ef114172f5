//! The leader's produce path, one for every edge: gRPC hands it the batch it encoded from its
//! values, the Kafka listener the batch a client sent. The batch is checked, given its offsets
//! and written as it came; then the answer waits for the in-sync replicas when acks is all.

use std::time::Duration;

use proto::errors::ErrorCode;
use proto::topic_config;

use crate::partition_log::producer_state::SequenceError;
use crate::record_batch::{self, BatchError};
use crate::replica::{Replica, ReplicaError, Role};
use crate::replica_manager::BrokerCore;

/// The wait for the in-sync replicas when the request names none.
pub const DEFAULT_ACK_TIMEOUT_MS: u32 = 30_000;
/// The longest wait a request may ask for.
pub const MAX_WAIT_MS: u32 = 60_000;

/// Checks `acks`, which must be 0, 1 or -1 (all).
pub fn check_acks(acks: i32) -> Result<(), ReplicaError> {
    if (-1..=1).contains(&acks) {
        Ok(())
    } else {
        Err(ReplicaError::new(
            ErrorCode::INVALID_REQUIRED_ACKS,
            format!("acks must be 0, 1 or -1 (all), got {acks}"),
        ))
    }
}

/// A batch refused before it is written, as Kafka answers it: a batch whose bytes are damaged
/// (CRC, framing) is CORRUPT_MESSAGE; one whose content breaks the format's rules (magic,
/// counts, records) is INVALID_RECORD.
pub fn batch_refusal(partition: &str, e: &BatchError) -> ReplicaError {
    let code = match e {
        BatchError::CrcMismatch { .. }
        | BatchError::Incomplete { .. }
        | BatchError::BadLength(_)
        | BatchError::LengthMismatch { .. } => ErrorCode::CORRUPT_MESSAGE,
        BatchError::BadCodec(_) => ErrorCode::UNSUPPORTED_COMPRESSION_TYPE,
        _ => ErrorCode::INVALID_RECORD,
    };
    ReplicaError::new(code, format!("{partition}: {e}"))
}

/// Checks a client's records for a partition by their header alone: exactly one batch (Kafka's
/// rule since produce v3), neither transactional nor a control batch. The CRC and the records
/// are checked once, by the log's append.
pub fn check_produced(partition: &str, records: &[u8]) -> Result<(), ReplicaError> {
    let not_one = |what: &str| {
        ReplicaError::new(
            ErrorCode::INVALID_RECORD,
            format!("{partition}: a produce request carries exactly one record batch per partition, {what}"),
        )
    };
    if records.is_empty() {
        return Err(not_one("got none"));
    }
    let h = record_batch::peek_header(records)
        .map_err(|e| batch_refusal(partition, &e))?
        .ok_or_else(|| {
            let e = BatchError::Incomplete {
                needed: record_batch::HEADER_LEN,
                available: records.len(),
            };
            batch_refusal(partition, &e)
        })?;
    if records.len() > h.total_len {
        return Err(not_one("got more bytes than one batch"));
    }
    if h.is_transactional() || h.is_control() {
        return Err(ReplicaError::new(
            ErrorCode::INVALID_RECORD,
            format!("{partition}: transactional and control batches are not supported"),
        ));
    }
    Ok(())
}

/// The topic's `min.insync.replicas` and `max.message.bytes`, read without copying its configs
/// (this runs for every produce).
fn produce_limits(core: &BrokerCore, topic: &str) -> (usize, u64) {
    let view = core.view.read();
    let none = std::collections::HashMap::new();
    let config = view
        .topics
        .get(topic)
        .and_then(|t| t.record.as_ref())
        .map_or(&none, |r| &r.config);
    (
        topic_config::min_insync_replicas(config),
        topic_config::max_message_bytes(config),
    )
}

/// Whether `topic`'s `cleanup.policy` holds `compact`: its records must have keys.
fn is_compacted(core: &BrokerCore, topic: &str) -> bool {
    let view = core.view.read();
    view.topics
        .get(topic)
        .and_then(|t| t.record.as_ref())
        .is_some_and(|r| crate::cleaner::policy::CompactionPolicy::of(&r.config).compact)
}

/// Appends a checked batch as `r`'s leader and answers by `acks`: the base offset, or -1 for
/// acks 0 (Kafka's answer). `timeout_ms` bounds the wait for the in-sync replicas.
pub async fn append(
    core: &BrokerCore,
    r: &Replica,
    batch: Vec<u8>,
    acks: i32,
    timeout_ms: u32,
) -> Result<i64, ReplicaError> {
    check_acks(acks)?;
    let (min_isr, max) = produce_limits(core, &r.topic);
    if batch.len() as u64 > max {
        return Err(ReplicaError::new(
            ErrorCode::MESSAGE_TOO_LARGE,
            format!(
                "the batch for {} is {} bytes, larger than max.message.bytes {max}",
                r.name(),
                batch.len()
            ),
        ));
    }
    if is_compacted(core, &r.topic) && crate::cleaner::batch_codec::has_keyless_record(&batch) {
        return Err(ReplicaError::new(
            ErrorCode::INVALID_RECORD,
            format!(
                "Compacted topic cannot accept message without key in topic partition {}.",
                r.name()
            ),
        ));
    }
    let (epoch, base, next) = append_as_leader(core, r, batch, acks, min_isr)?;
    r.update_high_watermark();
    r.notify();
    if acks != -1 {
        return Ok(if acks == 0 { -1 } else { base });
    }
    let timeout = match timeout_ms {
        0 => DEFAULT_ACK_TIMEOUT_MS,
        t => t.min(MAX_WAIT_MS),
    };
    await_in_sync(r, epoch, next, timeout).await?;
    Ok(base)
}

/// Appends a batch the broker wrote itself (a coordinator's records) as `r`'s leader at
/// `epoch`, at once and in call order, and returns the wait for the in-sync replicas (acks=all),
/// so that a caller can append again before the first is replicated.
pub fn append_internal(
    core: &BrokerCore,
    r: std::sync::Arc<Replica>,
    epoch: u32,
    batch: Vec<u8>,
) -> Result<impl std::future::Future<Output = Result<(), ReplicaError>> + Send + 'static, ReplicaError> {
    if r.state().role != (Role::Leader { epoch }) {
        return Err(ReplicaError::new(
            ErrorCode::NOT_LEADER_OR_FOLLOWER,
            format!("{} is no longer led here at epoch {epoch}", r.name()),
        ));
    }
    let (min_isr, _) = produce_limits(core, &r.topic);
    let (epoch, _, next) = append_as_leader(core, &r, batch, -1, min_isr)?;
    r.update_high_watermark();
    r.notify();
    Ok(async move { await_in_sync(&r, epoch, next, DEFAULT_ACK_TIMEOUT_MS).await })
}

/// Appends the batch as this partition's leader, once acks=all finds enough replicas in sync;
/// returns the leader epoch, the first offset and the offset after the last.
fn append_as_leader(
    core: &BrokerCore,
    r: &Replica,
    batch: Vec<u8>,
    acks: i32,
    min_isr: usize,
) -> Result<(u32, i64, i64), ReplicaError> {
    let st = r.state();
    let Role::Leader { epoch } = st.role else {
        drop(st);
        return Err(r
            .leader_epoch()
            .err()
            .unwrap_or_else(|| ReplicaError::new(ErrorCode::NOT_LEADER_OR_FOLLOWER, "leadership moved")));
    };
    if acks == -1 && st.meta.isr.len() < min_isr {
        return Err(ReplicaError::new(
            ErrorCode::NOT_ENOUGH_REPLICAS,
            format!(
                "{} has {} in-sync replicas {:?}, fewer than min.insync.replicas {min_isr}",
                r.name(),
                st.meta.isr.len(),
                st.meta.isr
            ),
        ));
    }
    let res = r.log().append_batch_as_leader(batch, epoch);
    let (base, next) = match res {
        Ok(v) => v,
        Err(crate::partition_log::LogError::InvalidBatch(e)) => return Err(batch_refusal(&r.name(), &e)),
        Err(crate::partition_log::LogError::Sequence(e)) => return Err(sequence_refusal(&r.name(), &e)),
        Err(e) => return Err(storage_error(core, r, e)),
    };
    Ok((epoch, base, next))
}

/// Waits until the in-sync replicas hold everything before `next`, for at most `timeout_ms`,
/// while this broker still leads at `epoch`.
async fn await_in_sync(r: &Replica, epoch: u32, next: i64, timeout_ms: u32) -> Result<(), ReplicaError> {
    let mut lost = false;
    let done = r
        .wait_until(Duration::from_millis(timeout_ms as u64), |r| {
            let st = r.state();
            if st.role != (Role::Leader { epoch }) {
                lost = true;
                return true;
            }
            st.high_watermark >= next
        })
        .await;
    if lost {
        return Err(ReplicaError::new(
            ErrorCode::NOT_LEADER_OR_FOLLOWER,
            format!("leadership of {} moved before the records were replicated", r.name()),
        ));
    }
    if !done {
        return Err(ReplicaError::new(
            ErrorCode::REQUEST_TIMED_OUT,
            format!(
                "{}: the in-sync replicas did not confirm within {timeout_ms} ms",
                r.name()
            ),
        ));
    }
    Ok(())
}

/// A log operation failed: a failed disk takes its dir offline; the client sees
/// KAFKA_STORAGE_ERROR.
pub fn storage_error(core: &BrokerCore, r: &Replica, e: crate::partition_log::LogError) -> ReplicaError {
    core.report_log_error(&e);
    ReplicaError::new(ErrorCode::KAFKA_STORAGE_ERROR, format!("{}: {e}", r.name()))
}

/// An idempotent producer's batch refused as Kafka answers it.
fn sequence_refusal(partition: &str, e: &SequenceError) -> ReplicaError {
    let code = match e {
        SequenceError::FencedEpoch { .. } => ErrorCode::INVALID_PRODUCER_EPOCH,
        SequenceError::OutOfOrder { .. } => ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
    };
    ReplicaError::new(code, format!("{partition}: {e}"))
}
