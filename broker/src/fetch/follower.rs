//! The leader's answer to a follower's fetch (one partition of a replication session): the
//! epoch and the replica checked, the follower's progress noted (the ISR and the high watermark
//! follow it), the replication throttle taken, then the engine's long poll up to the log end.

use std::sync::Arc;

use proto::errors::ErrorCode;
use proto::ferry::{ReplicaFetchRequest, ReplicaFetchResponse};

use super::engine::{long_poll, Partitions};
use super::log_read::{read_log, LogRead};
use super::plan::{Found, Isolation, Limits, ReadLimit, GRPC_DEFAULT_MAX_BYTES};
use crate::replica::{Replica, ReplicaError, Role};
use crate::replica_manager::BrokerCore;

/// Checks a follower's fetch against this leader's epoch and log; returns the epoch and the log
/// end offset.
fn check(r: &Replica, req: &ReplicaFetchRequest) -> Result<(u32, i64), ReplicaError> {
    let epoch = r.leader_epoch()?;
    if req.leader_epoch < epoch {
        return Err(ReplicaError::new(
            ErrorCode::FENCED_LEADER_EPOCH,
            format!("{}: leader epoch {} is older than {epoch}", r.name(), req.leader_epoch),
        ));
    }
    if req.leader_epoch > epoch {
        return Err(ReplicaError::new(
            ErrorCode::UNKNOWN_LEADER_EPOCH,
            format!("{}: leader epoch {} is newer than {epoch}", r.name(), req.leader_epoch),
        ));
    }
    let (start, leo) = {
        let log = r.log();
        (log.log_start_offset(), log.log_end_offset())
    };
    if req.fetch_offset < start || req.fetch_offset > leo {
        // Below the start, the follower starts over at it (`fetcher.rs`).
        return Err(ReplicaError::new(
            ErrorCode::OFFSET_OUT_OF_RANGE,
            format!(
                "{}: fetch offset {} is outside the log ({start}..{leo})",
                r.name(),
                req.fetch_offset
            ),
        ));
    }
    Ok((epoch, leo))
}

/// Records a follower's fetch in its progress, which the ISR and the watermark follow; returns
/// whether the follower is outside the ISR (so that the ISR may grow).
fn note_fetch(r: &Replica, req: &ReplicaFetchRequest, leo: i64) -> Result<bool, ReplicaError> {
    let now = r.now_ms();
    let mut st = r.state();
    if !st.meta.replicas.contains(&req.replica_id) {
        return Err(ReplicaError::new(
            ErrorCode::REPLICA_NOT_AVAILABLE,
            format!("broker {} is not a replica of {}", req.replica_id, r.name()),
        ));
    }
    let p = st
        .followers
        .entry(req.replica_id)
        .or_insert_with(|| crate::isr::FollowerProgress::new(now));
    p.on_fetch(req.fetch_offset, leo, now);
    p.incarnation = req.incarnation;
    Ok(!st.meta.isr.contains(&req.replica_id))
}

/// One follower's fetch of one partition, as the engine reads it.
struct FollowerRead<'a> {
    core: &'a BrokerCore,
    r: Arc<Replica>,
    from: i64,
    epoch: u32,
    /// The log start when the fetch came: a new one (DeleteRecords, retention) is news, which
    /// the follower's log start follows.
    start: i64,
    max_bytes: usize,
}

impl Partitions for FollowerRead<'_> {
    type Part = Result<LogRead, ReplicaError>;

    fn count(&self) -> usize {
        1
    }

    fn max_bytes(&self, _: usize) -> usize {
        self.max_bytes
    }

    fn replica(&self, _: usize) -> Option<Arc<Replica>> {
        Some(self.r.clone())
    }

    fn read(&self, _: usize, limit: ReadLimit) -> (Self::Part, Found) {
        let leading = self.r.state().role == (Role::Leader { epoch: self.epoch });
        let read = read_log(self.core, &self.r, self.from, Isolation::LogEnd, limit);
        let found = match &read {
            Err(_) => Found::Error,
            Ok(l) if l.batches.is_empty() && (!leading || l.log_start != self.start) => Found::News,
            Ok(l) => l.found(),
        };
        (read, found)
    }
}

/// The answer to one follower fetch, an error included.
pub async fn answer(core: &BrokerCore, req: &ReplicaFetchRequest) -> ReplicaFetchResponse {
    fetch(core, req).await.unwrap_or_else(|e| {
        // A follower ahead of the leader truncates to the leader's end, not to 0; one behind its
        // start starts over there.
        let (log_start_offset, log_end_offset) = match core.replica(&req.topic, req.partition) {
            Ok(r) if e.code == ErrorCode::OFFSET_OUT_OF_RANGE => {
                let log = r.log();
                (log.log_start_offset(), log.log_end_offset())
            }
            _ => (-1, -1),
        };
        ReplicaFetchResponse {
            log_end_offset,
            log_start_offset,
            error_code: e.code.0,
            error_message: e.message,
            high_watermark: -1,
            ..Default::default()
        }
    })
}

/// One follower fetch, answered when there is data, news, or the wait ends.
async fn fetch(core: &BrokerCore, req: &ReplicaFetchRequest) -> Result<ReplicaFetchResponse, ReplicaError> {
    let r = core.replica(&req.topic, req.partition)?;
    let (epoch, leo) = check(&r, req)?;
    if note_fetch(&r, req, leo)? {
        core.isr_candidates.add((r.topic.clone(), r.partition));
    }
    r.update_high_watermark();
    let mut limits = Limits::of_request(1, req.max_bytes.into(), req.max_wait_ms.into(), GRPC_DEFAULT_MAX_BYTES);
    // A throttled follower waits for credit first, holding no records meanwhile, and gets at
    // most a second's worth.
    let throttle = core.leader_throttle(&r, req.replica_id);
    if let Some(rate) = throttle {
        core.throttle.acquire(rate).await;
        limits.max_bytes = limits.max_bytes.min(usize::try_from(rate).unwrap_or(usize::MAX));
    }
    let start = r.log().log_start_offset();
    let one = FollowerRead {
        core,
        r: r.clone(),
        from: req.fetch_offset,
        epoch,
        start,
        max_bytes: limits.max_bytes,
    };
    // A pass answers every partition asked, and one was: `pop` finds it.
    let read = long_poll(&one, &limits).await.pop().expect("one partition asked")?;
    if throttle.is_some() {
        core.throttle.charge(read.batches.len());
    }
    core.metrics
        .replication_bytes_out
        .add(throttle.is_some(), read.batches.len());
    let hw = r.state().high_watermark;
    Ok(ReplicaFetchResponse {
        high_watermark: hw,
        log_end_offset: read.log_end,
        log_start_offset: read.log_start,
        batches: read.batches,
        throttled: throttle.is_some(),
        ..Default::default()
    })
}
