//! A follower's copy loop for one partition: truncate the divergent tail by leader epoch, then
//! pull batches from the leader, each request telling the leader how far this replica has got.
//! The requests of every partition copied from one leader share one stream per lane
//! (`fetch_session.rs`).

use std::sync::Arc;
use std::time::Duration;

use proto::errors::ErrorCode;
use proto::ferry::{EpochEndOffsetRequest, ReplicaFetchRequest};

use crate::fetch_session::Lane;
use crate::replica::Replica;
use crate::replica_manager::BrokerCore;

/// First pause before fetching again after a failure; pauses double up to [`MAX_RETRY`].
const RETRY: Duration = Duration::from_millis(200);
/// Longest pause between fetch attempts while failing (less with a short lag time).
const MAX_RETRY: Duration = Duration::from_secs(3);
/// Metadata answers waited out (about 15 s with the pauses) before the leader's endpoint and
/// epoch are looked at again.
const MAX_WAITS_ON_STREAM: u32 = 8;
/// Bytes a replica out of the ISR asks for per fetch at most (Kafka's `replica.fetch.max.bytes`
/// default). A move's copy then comes in pieces that each take the leader's and this node's
/// event loop a fraction of a millisecond, so the in-sync replicas' fetches, which producers wait
/// on, are not held behind megabytes.
const CATCH_UP_FETCH_BYTES: u32 = 1 << 20;
/// How much longer than its own wait a fetch may take to be answered (the leader's throttle
/// holds answers back too) before the session is taken for stuck.
const ANSWER_SLACK: Duration = Duration::from_secs(30);

/// Pauses between fetch attempts: doubling while they fail, so that many thousands of
/// replicas waiting on one leader do not retry in lockstep every 200 ms.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    /// Pauses for a follower held to `replica.lag.time.max.ms`: at most a quarter of it, so that
    /// waiting alone (for a new leader to learn of its role, say) never takes it out of the ISR.
    pub fn for_lag_max(lag_max_ms: u64) -> Self {
        Self {
            next: RETRY,
            max: Duration::from_millis(lag_max_ms / 4).clamp(RETRY, MAX_RETRY),
        }
    }

    /// The pause to take now; the following one is twice as long, up to the cap.
    pub fn pause(&mut self) -> Duration {
        let p = self.next;
        self.next = (self.next * 2).min(self.max);
        p
    }

    /// Back to the first pause, after a success.
    pub fn reset(&mut self) {
        self.next = RETRY;
    }
}

/// Answers that mean the leader's metadata and this replica's differ for now (the leader has
/// not yet learnt that this broker is a replica, or of this epoch, or the other way round).
/// The follower asks again after a pause, for a while ([`MAX_WAITS_ON_STREAM`]): after a
/// large move, tens of thousands of replicas wait so at once.
pub fn awaits_metadata(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::REPLICA_NOT_AVAILABLE
            | ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
            | ErrorCode::NOT_LEADER_OR_FOLLOWER
            | ErrorCode::UNKNOWN_LEADER_EPOCH
            | ErrorCode::FENCED_LEADER_EPOCH
    )
}

/// After a truncation nothing beyond the log end can count as committed.
fn clamp_high_watermark(r: &Replica, leo: i64) {
    let mut st = r.state();
    st.high_watermark = st.high_watermark.min(leo);
}

/// Runs until aborted (when the role changes).
pub async fn run(core: Arc<BrokerCore>, r: Arc<Replica>, leader: i32, epoch: u32) {
    let mut backoff = Backoff::for_lag_max(core.config.replica_lag_max_ms);
    loop {
        match copy_from_leader(&core, &r, leader, epoch, &mut backoff).await {
            Ok(()) => {}
            Err(FetchError::Log(e)) => {
                tracing::warn!(replica = %r.name(), error = %e, "follower log write failed");
                core.report_log_error(&e);
            }
            Err(e) => {
                tracing::debug!(replica = %r.name(), leader, epoch, error = %e, "fetch from leader failed; retrying")
            }
        }
        tokio::time::sleep(backoff.pause()).await;
    }
}

/// Why one round of copying stopped.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error("leader {0} is not registered")]
    NoEndpoint(i32),
    #[error("rpc: {0}")]
    Rpc(#[from] tonic::Status),
    #[error("leader answered {code}: {message}")]
    Leader { code: ErrorCode, message: String },
    #[error("log: {0}")]
    Log(#[from] crate::partition_log::LogError),
}

async fn copy_from_leader(
    core: &BrokerCore,
    r: &Replica,
    leader: i32,
    epoch: u32,
    backoff: &mut Backoff,
) -> Result<(), FetchError> {
    let endpoint = core.endpoint_of(leader).ok_or(FetchError::NoEndpoint(leader))?;
    let channel = core
        .channels
        .channel(&endpoint)
        .map_err(|_| FetchError::NoEndpoint(leader))?;
    let mut c = core.fetch_sessions.client(channel.clone());
    truncate_divergent_tail(&mut c, r, epoch).await?;

    // The lane is read with the request: a replica that joined the ISR moves to the in-sync
    // session with its next fetch.
    let request = |offset: i64, throttle: Option<u64>| {
        let lane = Lane::of(&r.state().meta.isr, core.id);
        let max_bytes = fetch_max_bytes(core.config.replica_fetch_max_bytes, lane, throttle);
        let req = ReplicaFetchRequest {
            topic: r.topic.clone(),
            partition: r.partition,
            replica_id: core.id,
            leader_epoch: epoch,
            fetch_offset: offset,
            max_bytes,
            max_wait_ms: core.config.replica_fetch_wait_ms,
            incarnation: core.incarnation,
            session_seq: 0,
        };
        (lane, req)
    };
    let deadline = Duration::from_millis(core.config.replica_fetch_wait_ms.into()) + ANSWER_SLACK;
    let fetch = |(lane, req): (Lane, ReplicaFetchRequest)| {
        let channel = channel.clone();
        let endpoint = endpoint.clone();
        async move {
            tokio::time::timeout(deadline, core.fetch_sessions.fetch(&endpoint, lane, channel, req))
                .await
                .map_err(|_| {
                    tonic::Status::deadline_exceeded(format!("no answer from the leader within {deadline:?}"))
                })?
        }
    };
    // One lock at a time: the log's guard must be gone before the throttle reads the state.
    let leo = r.log().log_end_offset();
    let mut next = request(leo, core.follower_throttle(r));
    let mut waits = 0;
    loop {
        let resp = fetch(next).await?;
        if resp.error_code != 0 {
            let code = ErrorCode(resp.error_code);
            if code == ErrorCode::OFFSET_OUT_OF_RANGE {
                let mut log = r.log();
                let leader_end = resp.log_end_offset.max(0);
                if leader_end < log.log_end_offset() {
                    // Ahead of the leader without an epoch to compare: the leader's log is the truth.
                    let leo = r.truncate_log(&mut log, leader_end)?;
                    drop(log);
                    clamp_high_watermark(r, leo);
                } else if resp.log_start_offset > log.log_end_offset() {
                    // Behind the leader's log start (its retention or DeleteRecords went past
                    // what this replica has): start over there, as Kafka's follower does.
                    tracing::info!(replica = %r.name(), from = log.log_end_offset(), to = resp.log_start_offset, "starting the log over at the leader's log start");
                    r.truncations.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    log.reset_to(resp.log_start_offset)?;
                    drop(log);
                    // Everything below the leader's start is committed there.
                    r.state().high_watermark = resp.log_start_offset;
                    let leo = r.log().log_end_offset();
                    next = request(leo, core.follower_throttle(r));
                    continue;
                }
            }
            if awaits_metadata(code) && waits < MAX_WAITS_ON_STREAM {
                waits += 1;
                tracing::debug!(replica = %r.name(), leader, %code, message = resp.error_message, "leader not ready; asking again");
                tokio::time::sleep(backoff.pause()).await;
                let leo = r.log().log_end_offset();
                next = request(leo, core.follower_throttle(r));
                continue;
            }
            return Err(FetchError::Leader {
                code,
                message: resp.error_message,
            });
        }
        backoff.reset();
        waits = 0;
        let leo = {
            let mut log = r.log();
            if !resp.batches.is_empty() {
                log.append_replicated(&resp.batches)?;
                core.metrics
                    .replication_bytes_in
                    .add(resp.throttled, resp.batches.len());
            }
            // The leader's log start, up to what this replica holds committed (Kafka's
            // follower moves its own the same way; retention then deletes below it).
            let hw = resp.high_watermark.min(log.log_end_offset());
            log.increment_log_start(resp.log_start_offset.min(hw))?;
            log.log_end_offset()
        };
        // The leader's watermark is the truth, even when it is lower than ours (after an
        // unclean election, what this replica counted as committed may not be).
        r.state().high_watermark = resp.high_watermark.min(leo);
        r.notify();
        let throttle = core.follower_throttle(r);
        if let Some(rate) = throttle {
            core.follower_throttle.charge(resp.batches.len());
            core.follower_throttle.acquire(rate).await;
        }
        next = request(leo, throttle);
    }
}

/// Bytes to ask for in one fetch: the configured most, less out of the ISR, and less again
/// when throttled.
fn fetch_max_bytes(configured: u32, lane: Lane, throttle: Option<u64>) -> u32 {
    let mut max = configured;
    if lane == Lane::CatchingUp {
        max = max.min(CATCH_UP_FETCH_BYTES);
    }
    // A throttled follower asks for about a tenth of a second's worth, so its rate holds over
    // the move rather than only on average over large fetches.
    if let Some(rate) = throttle {
        max = max.min(u32::try_from(crate::throttle::chunk_bytes(Some(rate))).unwrap_or(u32::MAX));
    }
    max
}

/// Drops what this replica has beyond the leader's end of our last epoch: that tail was written
/// by a leader whose records the new leader never got.
async fn truncate_divergent_tail(
    c: &mut crate::fetch_session::PeerClient,
    r: &Replica,
    epoch: u32,
) -> Result<(), FetchError> {
    let Some(last_epoch) = r.log().latest_epoch() else {
        return Ok(());
    };
    let resp = c
        .epoch_end_offset(EpochEndOffsetRequest {
            topic: r.topic.clone(),
            partition: r.partition,
            leader_epoch: epoch,
            epoch: last_epoch,
        })
        .await?
        .into_inner();
    if resp.error_code != 0 {
        return Err(FetchError::Leader {
            code: ErrorCode(resp.error_code),
            message: resp.error_message,
        });
    }
    let mut log = r.log();
    if resp.end_offset >= 0 && resp.end_offset < log.log_end_offset() {
        tracing::info!(replica = %r.name(), from = log.log_end_offset(), to = resp.end_offset, "truncating divergent tail");
        let leo = r.truncate_log(&mut log, resp.end_offset)?;
        drop(log);
        clamp_high_watermark(r, leo);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_cap_and_reset_after_a_success() {
        let mut b = Backoff::for_lag_max(u64::MAX);
        let ms: Vec<u128> = (0..7).map(|_| b.pause().as_millis()).collect();
        assert_eq!(ms, [200, 400, 800, 1600, 3000, 3000, 3000]);
        b.reset();
        assert_eq!(b.pause(), RETRY);
    }

    #[test]
    fn pauses_stay_under_a_quarter_of_the_lag_time() {
        let mut b = Backoff::for_lag_max(2_000);
        let ms: Vec<u128> = (0..4).map(|_| b.pause().as_millis()).collect();
        assert_eq!(ms, [200, 400, 500, 500]);
        let mut b = Backoff::for_lag_max(30_000);
        assert_eq!((0..6).map(|_| b.pause()).max(), Some(MAX_RETRY));
        let mut b = Backoff::for_lag_max(100);
        assert_eq!((0..3).map(|_| b.pause()).max(), Some(RETRY));
    }

    #[test]
    fn replicas_out_of_the_isr_fetch_on_their_own_lane_in_smaller_pieces() {
        assert_eq!(Lane::of(&[1, 2], 2), Lane::InSync);
        assert_eq!(Lane::of(&[1], 2), Lane::CatchingUp);
        let configured = 8 << 20;
        assert_eq!(fetch_max_bytes(configured, Lane::InSync, None), configured);
        assert_eq!(
            fetch_max_bytes(configured, Lane::CatchingUp, None),
            CATCH_UP_FETCH_BYTES
        );
        assert_eq!(fetch_max_bytes(1000, Lane::CatchingUp, None), 1000);
        let slow = crate::throttle::chunk_bytes(Some(100_000)) as u32;
        assert!(slow < CATCH_UP_FETCH_BYTES);
        assert_eq!(fetch_max_bytes(configured, Lane::CatchingUp, Some(100_000)), slow);
        assert_eq!(fetch_max_bytes(configured, Lane::InSync, Some(100_000)), slow);
    }

    #[test]
    fn only_metadata_lag_is_waited_out_on_the_stream() {
        assert!(awaits_metadata(ErrorCode::REPLICA_NOT_AVAILABLE));
        assert!(awaits_metadata(ErrorCode::FENCED_LEADER_EPOCH));
        assert!(!awaits_metadata(ErrorCode::OFFSET_OUT_OF_RANGE));
        assert!(!awaits_metadata(ErrorCode::KAFKA_STORAGE_ERROR));
    }
}
