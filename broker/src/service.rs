//! The `Broker` gRPC service: produce, fetch, and the leader's side of replication.

use std::sync::Arc;
use std::time::Duration;

use proto::errors::ErrorCode;
use proto::ferry::broker_server::Broker;
use proto::ferry::*;
use tonic::{Request, Response, Status, Streaming};

use crate::produce::{self, storage_error, MAX_WAIT_MS};
use crate::record_batch;
use crate::replica::{Replica, ReplicaError, Role};
use crate::replica_manager::BrokerCore;

const DEFAULT_FETCH_BYTES: u32 = 1 << 20;

/// Serves the broker's data plane.
#[derive(Clone)]
pub struct BrokerService {
    core: Arc<BrokerCore>,
}

impl BrokerService {
    /// A service over the broker's replicas.
    pub fn new(core: Arc<BrokerCore>) -> Self {
        Self { core }
    }
}

/// Checks a follower's fetch against this leader's epoch and log; returns the epoch and the log
/// end offset.
fn check_replica_fetch(r: &Replica, req: &ReplicaFetchRequest) -> Result<(u32, i64), ReplicaError> {
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
fn note_follower_fetch(r: &Replica, req: &ReplicaFetchRequest, leo: i64) -> Result<bool, ReplicaError> {
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

impl BrokerService {
    async fn produce_inner(&self, req: ProduceRequest) -> Result<i64, ReplicaError> {
        produce::check_acks(req.acks)?;
        if req.records.is_empty() {
            return Err(ReplicaError::new(
                ErrorCode::INVALID_REQUEST,
                "records: no record given",
            ));
        }
        let r = self.core.replica(&req.topic, req.partition)?;
        // The same batch a Kafka client would send; the leader gives it its offsets.
        let batch = record_batch::try_encode_batch(0, 0, self.core.config.clock.wall_ms() as i64, &req.records)
            .map_err(|e| produce::batch_refusal(&r.name(), &e))?;
        produce::append(&self.core, &r, batch, req.acks, req.timeout_ms).await
    }

    async fn fetch_inner(&self, req: FetchRequest) -> Result<FetchResponse, ReplicaError> {
        let r = self.core.replica(&req.topic, req.partition)?;
        r.leader_epoch()?;
        let (start, leo) = {
            let log = r.log();
            (log.log_start_offset(), log.log_end_offset())
        };
        if req.offset < start || req.offset > leo {
            return Err(ReplicaError::new(
                ErrorCode::OFFSET_OUT_OF_RANGE,
                format!(
                    "offset {} is outside {} (log start {start}, end {leo})",
                    req.offset,
                    r.name()
                ),
            ));
        }
        let wait = Duration::from_millis(req.max_wait_ms.min(MAX_WAIT_MS) as u64);
        let offset = req.offset;
        r.wait_until(wait, |r| r.state().high_watermark > offset).await;
        let hw = r.state().high_watermark;
        let max = if req.max_bytes == 0 {
            DEFAULT_FETCH_BYTES
        } else {
            req.max_bytes
        } as usize;
        let records = if offset < hw {
            r.log()
                .read_records(offset, max, hw)
                .map_err(|e| storage_error(&self.core, &r, e))?
        } else {
            Vec::new()
        };
        Ok(FetchResponse {
            high_watermark: hw,
            log_start_offset: start,
            records: records
                .into_iter()
                .map(|(offset, value)| FetchedRecord { offset, value })
                .collect(),
            ..Default::default()
        })
    }

    /// One follower fetch's answer, an error included.
    async fn replica_fetch_answer(&self, req: &ReplicaFetchRequest) -> ReplicaFetchResponse {
        self.replica_fetch_one(req).await.unwrap_or_else(|e| {
            // A follower ahead of the leader truncates to the leader's end, not to 0; one
            // behind its start starts over there.
            let (log_start_offset, log_end_offset) = match self.core.replica(&req.topic, req.partition) {
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

    /// One follower fetch, answered when there is data or the wait ends.
    async fn replica_fetch_one(&self, req: &ReplicaFetchRequest) -> Result<ReplicaFetchResponse, ReplicaError> {
        let r = self.core.replica(&req.topic, req.partition)?;
        let (epoch, leo) = check_replica_fetch(&r, req)?;
        if note_follower_fetch(&r, req, leo)? {
            self.core.isr_candidates.add((r.topic.clone(), r.partition));
        }
        r.update_high_watermark();
        let from = req.fetch_offset;
        let wait = Duration::from_millis(req.max_wait_ms.min(MAX_WAIT_MS) as u64);
        let start = r.log().log_start_offset();
        r.wait_until(wait, |r| {
            // One lock at a time: elsewhere `state` is taken before `log`. A new log start
            // (DeleteRecords) is news too: the follower's follows it.
            let moved = {
                let log = r.log();
                log.log_end_offset() > from || log.log_start_offset() != start
            };
            moved || r.state().role != (Role::Leader { epoch })
        })
        .await;
        let mut max = if req.max_bytes == 0 {
            DEFAULT_FETCH_BYTES
        } else {
            req.max_bytes
        } as usize;
        let throttle = self.core.leader_throttle(&r, req.replica_id);
        if let Some(rate) = throttle {
            self.core.throttle.acquire(rate).await;
            max = max.min(rate as usize);
        }
        let (batches, leo, start) = {
            let log = r.log();
            let leo = log.log_end_offset();
            let read = match log.read(from, max, leo) {
                // Retention moved the start past it while the fetch waited.
                Err(crate::partition_log::LogError::OffsetOutOfRange { .. }) => {
                    return Err(ReplicaError::new(
                        ErrorCode::OFFSET_OUT_OF_RANGE,
                        format!("{}: fetch offset {from} is below the log start", r.name()),
                    ))
                }
                r2 => r2.map_err(|e| storage_error(&self.core, &r, e))?,
            };
            (read, leo, log.log_start_offset())
        };
        if throttle.is_some() {
            self.core.throttle.charge(batches.len());
        }
        self.core
            .metrics
            .replication_bytes_out
            .add(throttle.is_some(), batches.len());
        let hw = r.state().high_watermark;
        Ok(ReplicaFetchResponse {
            high_watermark: hw,
            log_end_offset: leo,
            log_start_offset: start,
            batches: batches.into(),
            throttled: throttle.is_some(),
            ..Default::default()
        })
    }
}

#[tonic::async_trait]
impl Broker for BrokerService {
    async fn produce(&self, req: Request<ProduceRequest>) -> Result<Response<ProduceResponse>, Status> {
        let resp = match self.produce_inner(req.into_inner()).await {
            Ok(base_offset) => ProduceResponse {
                base_offset,
                leader_hint: -1,
                ..Default::default()
            },
            Err(e) => ProduceResponse {
                error_code: e.code.0,
                error_message: e.message,
                base_offset: -1,
                leader_hint: e.leader_hint,
            },
        };
        Ok(Response::new(resp))
    }

    async fn fetch(&self, req: Request<FetchRequest>) -> Result<Response<FetchResponse>, Status> {
        let resp = self
            .fetch_inner(req.into_inner())
            .await
            .unwrap_or_else(|e| FetchResponse {
                error_code: e.code.0,
                error_message: e.message,
                high_watermark: -1,
                leader_hint: e.leader_hint,
                ..Default::default()
            });
        Ok(Response::new(resp))
    }

    type ReplicaFetchSessionStream = crate::fetch_session::AnswerStream;

    async fn replica_fetch_session(
        &self,
        req: Request<Streaming<ReplicaFetchBatch>>,
    ) -> Result<Response<Self::ReplicaFetchSessionStream>, Status> {
        let this = self.clone();
        let answer = move |req: ReplicaFetchRequest| {
            let this = this.clone();
            async move { this.replica_fetch_answer(&req).await }
        };
        Ok(Response::new(crate::fetch_session::serve(req.into_inner(), answer)))
    }

    async fn epoch_end_offset(
        &self,
        req: Request<EpochEndOffsetRequest>,
    ) -> Result<Response<EpochEndOffsetResponse>, Status> {
        let req = req.into_inner();
        let result = (|| {
            let r = self.core.replica(&req.topic, req.partition)?;
            let epoch = r.leader_epoch()?;
            if req.leader_epoch != epoch {
                return Err(ReplicaError::new(
                    ErrorCode::FENCED_LEADER_EPOCH,
                    format!(
                        "{}: leader epoch {} is not the current {epoch}",
                        r.name(),
                        req.leader_epoch
                    ),
                ));
            }
            let log = r.log();
            Ok(match log.end_offset_for_epoch(req.epoch) {
                Some((e, end)) => (e, end),
                // Nothing at or before that epoch here: everything the follower has from then on diverges.
                None => (req.epoch, log.log_start_offset()),
            })
        })();
        Ok(Response::new(match result {
            Ok((epoch, end_offset)) => EpochEndOffsetResponse {
                epoch,
                end_offset,
                ..Default::default()
            },
            Err(e) => EpochEndOffsetResponse {
                error_code: e.code.0,
                error_message: e.message,
                end_offset: -1,
                ..Default::default()
            },
        }))
    }

    async fn describe_log_dirs(
        &self,
        req: Request<DescribeLogDirsRequest>,
    ) -> Result<Response<DescribeLogDirsResponse>, Status> {
        let core = self.core.clone();
        let topics = req.into_inner().topics;
        let resp = tokio::task::spawn_blocking(move || crate::log_dir_requests::describe(&core, &topics))
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(resp))
    }

    async fn alter_replica_log_dirs(
        &self,
        req: Request<AlterReplicaLogDirsRequest>,
    ) -> Result<Response<AlterReplicaLogDirsResponse>, Status> {
        let moves = req.into_inner().moves;
        let core = self.core.clone();
        // Starting a move creates folders and files: off the async workers.
        let resp = tokio::task::spawn_blocking(move || crate::log_dir_requests::alter(&core, &moves))
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(resp))
    }
}
