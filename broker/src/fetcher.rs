//! A follower's copy loop for one partition: truncate the divergent tail by leader epoch, then
//! pull batches from the leader over one streaming fetch, each request telling the leader how
//! far this replica has got.

use std::sync::Arc;
use std::time::Duration;

use proto::errors::ErrorCode;
use proto::ferry::broker_client::BrokerClient;
use proto::ferry::{EpochEndOffsetRequest, ReplicaFetchRequest};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

use crate::replica::Replica;
use crate::replica_manager::BrokerCore;

const RETRY: Duration = Duration::from_millis(200);

fn client(channel: Channel) -> BrokerClient<Channel> {
    BrokerClient::new(channel)
        .max_decoding_message_size(1 << 30)
        .max_encoding_message_size(1 << 30)
}

/// After a truncation nothing beyond the log end can count as committed.
fn clamp_high_watermark(r: &Replica, leo: i64) {
    let mut st = r.state.lock();
    st.high_watermark = st.high_watermark.min(leo);
}

/// Runs until aborted (when the role changes).
pub async fn run(core: Arc<BrokerCore>, r: Arc<Replica>, leader: i32, epoch: u32) {
    loop {
        match copy_from_leader(&core, &r, leader, epoch).await {
            Ok(()) => {}
            Err(FetchError::Log(e)) => {
                tracing::warn!(replica = %r.name(), error = %e, "follower log write failed");
                core.report_log_error(&e);
            }
            Err(e) => {
                tracing::debug!(replica = %r.name(), leader, epoch, error = %e, "fetch from leader failed; retrying")
            }
        }
        tokio::time::sleep(RETRY).await;
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

async fn copy_from_leader(core: &BrokerCore, r: &Replica, leader: i32, epoch: u32) -> Result<(), FetchError> {
    let endpoint = core.endpoint_of(leader).ok_or(FetchError::NoEndpoint(leader))?;
    let channel = core
        .channels
        .channel(&endpoint)
        .map_err(|_| FetchError::NoEndpoint(leader))?;
    let mut c = client(channel);

    // Drop what this replica has beyond the leader's end of our last epoch: that tail was
    // written by a leader whose records the new leader never got.
    let latest = r.log.lock().latest_epoch();
    if let Some(last_epoch) = latest {
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
        let mut log = r.log.lock();
        if resp.end_offset >= 0 && resp.end_offset < log.log_end_offset() {
            tracing::info!(replica = %r.name(), from = log.log_end_offset(), to = resp.end_offset, "truncating divergent tail");
            let leo = r.truncate_log(&mut log, resp.end_offset)?;
            drop(log);
            clamp_high_watermark(r, leo);
        }
    }

    let request = |offset: i64, throttle: Option<u64>| ReplicaFetchRequest {
        topic: r.topic.clone(),
        partition: r.partition,
        replica_id: core.id,
        leader_epoch: epoch,
        fetch_offset: offset,
        // A throttled follower asks for about a tenth of a second's worth, so its rate holds
        // over the move rather than only on average over large fetches.
        max_bytes: match throttle {
            Some(rate) => core
                .config
                .replica_fetch_max_bytes
                .min(crate::throttle::chunk_bytes(Some(rate)) as u32),
            None => core.config.replica_fetch_max_bytes,
        },
        max_wait_ms: core.config.replica_fetch_wait_ms,
    };
    let (tx, rx) = mpsc::channel(2);
    let leo = r.log.lock().log_end_offset();
    // The receiver is alive: it is moved into the call below.
    let _ = tx.send(request(leo, core.follower_throttle(r))).await;
    let mut stream = c.replica_fetch(ReceiverStream::new(rx)).await?.into_inner();
    while let Some(resp) = stream.message().await? {
        if resp.error_code != 0 {
            let code = ErrorCode(resp.error_code);
            if code == ErrorCode::OFFSET_OUT_OF_RANGE {
                // Ahead of the leader without an epoch to compare: the leader's log is the truth.
                let mut log = r.log.lock();
                let leader_end = resp.log_end_offset.max(0);
                if leader_end < log.log_end_offset() {
                    let leo = r.truncate_log(&mut log, leader_end)?;
                    drop(log);
                    clamp_high_watermark(r, leo);
                }
            }
            return Err(FetchError::Leader {
                code,
                message: resp.error_message,
            });
        }
        let leo = {
            let mut log = r.log.lock();
            if !resp.batches.is_empty() {
                log.append_replicated(&resp.batches)?;
                core.metrics
                    .replication_bytes_in
                    .add(resp.throttled, resp.batches.len());
            }
            log.log_end_offset()
        };
        // The leader's watermark is the truth, even when it is lower than ours (after an
        // unclean election, what this replica counted as committed may not be).
        r.state.lock().high_watermark = resp.high_watermark.min(leo);
        r.notify();
        let throttle = core.follower_throttle(r);
        if let Some(rate) = throttle {
            core.follower_throttle.charge(resp.batches.len());
            core.follower_throttle.acquire(rate).await;
        }
        if tx.send(request(leo, throttle)).await.is_err() {
            break;
        }
    }
    Ok(())
}
