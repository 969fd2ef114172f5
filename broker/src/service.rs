//! The `Broker` gRPC service: produce, fetch, and the leader's side of replication. Under an
//! authorizer the gRPC guard admits each call; produce and fetch check their topic here.

use std::sync::Arc;

use proto::acl::Operation;
use proto::errors::ErrorCode;
use proto::ferry::broker_server::Broker;
use proto::ferry::*;
use tonic::{Request, Response, Status, Streaming};

use crate::auth::grpc_guard::check_topic;
use crate::produce::{self, storage_error};
use crate::replica::{Replica, ReplicaError};
use crate::replica_manager::BrokerCore;
use crate::{fetch, partition_log, record_batch};

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
        let limits = fetch::Limits::of_request(
            1,
            req.max_bytes.into(),
            req.max_wait_ms.into(),
            fetch::plan::GRPC_DEFAULT_MAX_BYTES,
        );
        let one = ClientRead {
            core: &self.core,
            r: r.clone(),
            offset: req.offset,
            max_bytes: limits.max_bytes,
        };
        // A pass answers every partition asked, and one was: `pop` finds it.
        let read = fetch::long_poll(&one, &limits)
            .await
            .pop()
            .expect("one partition asked")?;
        let records = partition_log::records_in(read.batches, req.offset, read.high_watermark).map_err(|e| {
            let e = r.log().corrupt_read(req.offset, &e);
            storage_error(&self.core, &r, e)
        })?;
        Ok(FetchResponse {
            high_watermark: read.high_watermark,
            log_start_offset: read.log_start,
            records: records
                .into_iter()
                .map(|(offset, value)| FetchedRecord { offset, value })
                .collect(),
            ..Default::default()
        })
    }
}

/// A client's gRPC fetch of one partition, as the fetch engine reads it: from its leader, up to
/// the high watermark, answered once a record is there.
struct ClientRead<'a> {
    core: &'a BrokerCore,
    r: Arc<Replica>,
    offset: i64,
    max_bytes: usize,
}

impl fetch::Partitions for ClientRead<'_> {
    type Part = Result<fetch::LogRead, ReplicaError>;

    fn count(&self) -> usize {
        1
    }

    fn max_bytes(&self, _: usize) -> usize {
        self.max_bytes
    }

    fn replica(&self, _: usize) -> Option<Arc<Replica>> {
        Some(self.r.clone())
    }

    fn read(&self, _: usize, limit: fetch::ReadLimit) -> (Self::Part, fetch::Found) {
        let read = self
            .r
            .leader_epoch()
            .and_then(|_| self.r.known_high_watermark())
            .and_then(|_| fetch::read_log(self.core, &self.r, self.offset, fetch::Isolation::HighWatermark, limit));
        let found = read.as_ref().map_or(fetch::Found::Error, fetch::LogRead::found);
        (read, found)
    }
}

#[tonic::async_trait]
impl Broker for BrokerService {
    async fn produce(&self, req: Request<ProduceRequest>) -> Result<Response<ProduceResponse>, Status> {
        if let Err(message) = check_topic(&req, Operation::Write, &req.get_ref().topic) {
            return Ok(Response::new(ProduceResponse {
                error_code: ErrorCode::TOPIC_AUTHORIZATION_FAILED.0,
                error_message: message,
                base_offset: -1,
                leader_hint: -1,
            }));
        }
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
        if let Err(message) = check_topic(&req, Operation::Read, &req.get_ref().topic) {
            return Ok(Response::new(FetchResponse {
                error_code: ErrorCode::TOPIC_AUTHORIZATION_FAILED.0,
                error_message: message,
                high_watermark: -1,
                leader_hint: -1,
                ..Default::default()
            }));
        }
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
        let core = self.core.clone();
        let answer = move |req: ReplicaFetchRequest| {
            let core = core.clone();
            async move { fetch::follower::answer(&core, &req).await }
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
