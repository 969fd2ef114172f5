//! The `Admin` gRPC service. Any quorum node answers: each request reads the metadata
//! linearizably, decides with the pure functions of this crate, and writes through
//! [`crate::write_runner`] in transactions guarded by the revisions it read, so concurrent admins
//! and the active controller can never interleave half-changes. What one transaction covers
//! follows Kafka's results: a request answered as a whole (a reassignment request, AlterThrottles,
//! AlterConfigs, an ISR change) is validated whole and written in one transaction; a request
//! answered per item (CreateTopics, CreatePartitions, DeleteTopics, ElectLeaders) validates and
//! writes each item in its own transaction, and an item that fails does not stop the others.

use metastore::Client;
use prost::Message;
use proto::ferry::admin_server::Admin;
use proto::ferry::*;
use proto::keys;
use tonic::{Request, Response, Status};

use crate::limits::RequestLimits;
use crate::store::{load_topics_view, load_view, TopicDepth};
use crate::{
    client_quotas, configs, isr_admin, reassign_admin, reassign_cancel, reassign_dir, reassign_progress, topics_admin,
};

/// Serves `Admin` over a metastore client.
#[derive(Clone)]
pub struct AdminService {
    client: Client,
    /// Connections to brokers, for reassignment progress.
    channels: metastore::peers::Peers,
    progress: std::sync::Arc<reassign_progress::ProgressSamples>,
    /// Samples of the plans' running moves, for their rates (kept apart from the list's).
    plan_progress: std::sync::Arc<reassign_progress::ProgressSamples>,
    limits: RequestLimits,
    clock: proto::clock::Clock,
}

impl AdminService {
    /// An admin service that reads and writes through `client`, with the default limits.
    pub fn new(client: Client) -> Self {
        Self {
            // Calls to brokers and to the leader's admin service carry the cluster credential:
            // under an authorizer the caller was checked here already.
            channels: metastore::peers::Peers::default().with_credential(client.credential_interceptor()),
            client,
            progress: Default::default(),
            plan_progress: Default::default(),
            limits: RequestLimits::default(),
            clock: proto::clock::Clock::system(),
        }
    }

    /// The same service on `clock` (reassignments are stamped with its wall time).
    pub fn with_clock(mut self, clock: proto::clock::Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The same service under `limits`.
    pub fn with_limits(mut self, limits: RequestLimits) -> Self {
        self.limits = limits;
        self
    }
}

/// Marks a request forwarded to the leader's admin service, so that it is not forwarded again.
const FORWARDED: &str = "x-ferry-forwarded";

fn forwarded<T>(msg: T) -> Request<T> {
    let mut r = Request::new(msg);
    r.metadata_mut()
        .insert(FORWARDED, tonic::metadata::MetadataValue::from_static("1"));
    r
}

impl AdminService {
    /// The leader's admin service, for a request that writes many keys when this node does not
    /// lead: the request is sent there whole and runs beside the Raft leader, rather than its
    /// transaction (many times larger) crossing from here to the leader. Kafka forwards such
    /// requests to the controller too.
    fn leader_admin<T>(
        &self,
        req: &Request<T>,
    ) -> Option<
        proto::ferry::admin_client::AdminClient<
            tonic::codegen::InterceptedService<tonic::transport::Channel, metastore::CredentialInterceptor>,
        >,
    > {
        if req.metadata().contains_key(FORWARDED) {
            return None;
        }
        let addr = self.client.remote_leader()?;
        let channel = self.channels.channel(&addr).ok()?;
        Some(
            proto::ferry::admin_client::AdminClient::with_interceptor(channel, self.channels.credential())
                .max_decoding_message_size(1 << 30)
                .max_encoding_message_size(1 << 30),
        )
    }

    /// Checks a batch request's item count (a refusal answers every item).
    fn batch_size(&self, n: usize, what: &str) -> Result<(), proto::errors::Refusal> {
        self.limits
            .items("items", n)
            .and_then(|()| crate::batch::within_batch(n, what))
    }
}

fn status(e: metastore::ClientError) -> Status {
    Status::unavailable(format!("metastore: {e}"))
}

#[tonic::async_trait]
impl Admin for AdminService {
    async fn create_topics(&self, req: Request<CreateTopicsRequest>) -> Result<Response<CreateTopicsResponse>, Status> {
        let r = topics_admin::create_topics(&self.client, &self.limits, req.into_inner())
            .await
            .map_err(status)?;
        Ok(Response::new(r))
    }

    async fn delete_topics(&self, req: Request<DeleteTopicsRequest>) -> Result<Response<DeleteTopicsResponse>, Status> {
        let r = topics_admin::delete_topics(&self.client, &self.limits, req.into_inner())
            .await
            .map_err(status)?;
        Ok(Response::new(r))
    }

    async fn describe_topics(
        &self,
        req: Request<DescribeTopicsRequest>,
    ) -> Result<Response<DescribeTopicsResponse>, Status> {
        let req = req.into_inner();
        if let Err(e) = self.limits.items("topics", req.topics.len()) {
            return Ok(Response::new(DescribeTopicsResponse {
                topics: vec![],
                error_code: e.code.0,
                error_message: e.message,
            }));
        }
        // Topics named are read alone, not the whole cluster with them.
        let view = if req.topics.is_empty() {
            load_view(&self.client).await
        } else {
            load_topics_view(&self.client, &req.topics, TopicDepth::AllPartitions).await
        }
        .map_err(status)?;
        let names: Vec<String> = if req.topics.is_empty() {
            view.topics.keys().cloned().collect()
        } else {
            req.topics
        };
        let topics = names
            .into_iter()
            .map(|name| match view.topics.get(&name).filter(|t| t.record.is_some()) {
                None => {
                    let e = topics_admin::unknown_topic(&name);
                    TopicDescription {
                        topic: name,
                        error_code: e.code.0,
                        error_message: e.message,
                        ..Default::default()
                    }
                }
                Some(t) => {
                    let rec = t.record.clone().unwrap_or_default();
                    TopicDescription {
                        topic: name,
                        topic_id: rec.topic_id,
                        config: rec.config,
                        partitions: t
                            .partitions
                            .iter()
                            .map(|(p, e)| PartitionDescription {
                                partition: *p,
                                state: Some(e.state.clone()),
                            })
                            .collect(),
                        ..Default::default()
                    }
                }
            })
            .collect();
        Ok(Response::new(DescribeTopicsResponse {
            topics,
            ..Default::default()
        }))
    }

    async fn describe_cluster(
        &self,
        _req: Request<DescribeClusterRequest>,
    ) -> Result<Response<DescribeClusterResponse>, Status> {
        let view = load_view(&self.client).await.map_err(status)?;
        let controller = self
            .client
            .get(keys::CONTROLLER)
            .await
            .map_err(status)?
            .and_then(|kv| ControllerRecord::decode(kv.value.as_ref()).ok())
            .unwrap_or_default();
        Ok(Response::new(DescribeClusterResponse {
            controller_id: controller.id,
            controller_epoch: controller.epoch,
            brokers: view.brokers.into_values().collect(),
        }))
    }

    async fn elect_leaders(&self, req: Request<ElectLeadersRequest>) -> Result<Response<ElectLeadersResponse>, Status> {
        let r = crate::elect_leaders::elect_leaders(&self.client, &self.limits, req.into_inner())
            .await
            .map_err(status)?;
        Ok(Response::new(r))
    }

    async fn create_partitions(
        &self,
        req: Request<CreatePartitionsRequest>,
    ) -> Result<Response<CreatePartitionsResponse>, Status> {
        let r = topics_admin::create_partitions(&self.client, &self.limits, req.into_inner())
            .await
            .map_err(status)?;
        Ok(Response::new(r))
    }

    async fn alter_partition(
        &self,
        req: Request<AlterPartitionRequest>,
    ) -> Result<Response<AlterPartitionResponse>, Status> {
        let r = isr_admin::alter_partition(&self.client, req.into_inner())
            .await
            .map_err(status)?;
        Ok(Response::new(r))
    }

    async fn alter_partitions(
        &self,
        req: Request<AlterPartitionsRequest>,
    ) -> Result<Response<AlterPartitionsResponse>, Status> {
        let items = req.into_inner().items;
        // Too many items: each is answered with the refusal, and nothing is read or written.
        if let Err(e) = self.batch_size(items.len(), "ISR changes") {
            let results = items
                .iter()
                .map(|_| AlterPartitionResponse {
                    error_code: e.code.0,
                    error_message: e.message.clone(),
                    state: None,
                })
                .collect();
            return Ok(Response::new(AlterPartitionsResponse { results }));
        }
        let results = isr_admin::alter_partitions(&self.client, items).await.map_err(status)?;
        Ok(Response::new(AlterPartitionsResponse { results }))
    }

    async fn assign_replica_dirs(
        &self,
        req: Request<AssignReplicaDirsRequest>,
    ) -> Result<Response<AssignReplicaDirsResponse>, Status> {
        let items = req.into_inner().items;
        if let Err(e) = self.batch_size(items.len(), "dir reports") {
            let results = items
                .iter()
                .map(|_| AssignReplicaDirResponse {
                    error_code: e.code.0,
                    error_message: e.message.clone(),
                    state: None,
                })
                .collect();
            return Ok(Response::new(AssignReplicaDirsResponse { results }));
        }
        let results = reassign_dir::assign_replica_dirs(&self.client, items)
            .await
            .map_err(status)?;
        Ok(Response::new(AssignReplicaDirsResponse { results }))
    }

    async fn describe_log_dirs(
        &self,
        req: Request<AdminDescribeLogDirsRequest>,
    ) -> Result<Response<AdminDescribeLogDirsResponse>, Status> {
        let req = req.into_inner();
        let within = self
            .limits
            .items("brokers", req.brokers.len())
            .and_then(|()| self.limits.items("topics", req.topics.len()));
        if let Err(e) = within {
            return Ok(Response::new(AdminDescribeLogDirsResponse {
                brokers: vec![],
                error_code: e.code.0,
                error_message: e.message,
            }));
        }
        let view = load_view(&self.client).await.map_err(status)?;
        let brokers = crate::log_dirs::describe_log_dirs(&view, &self.channels, &req.brokers, &req.topics).await;
        Ok(Response::new(AdminDescribeLogDirsResponse {
            brokers,
            ..Default::default()
        }))
    }

    async fn alter_throttles(
        &self,
        req: Request<AlterThrottlesRequest>,
    ) -> Result<Response<AlterThrottlesResponse>, Status> {
        let req = req.into_inner();
        if let Err(e) = self
            .limits
            .items("brokers and topics", req.brokers.len() + req.topics.len())
        {
            return Ok(Response::new(AlterThrottlesResponse {
                error_code: e.code.0,
                error_message: e.message,
            }));
        }
        let r = crate::throttles::alter(&self.client, req).await.map_err(status)?;
        Ok(Response::new(r))
    }

    async fn assign_replica_dir(
        &self,
        req: Request<AssignReplicaDirRequest>,
    ) -> Result<Response<AssignReplicaDirResponse>, Status> {
        let r = reassign_dir::assign_replica_dir(&self.client, req.into_inner())
            .await
            .map_err(status)?;
        Ok(Response::new(r))
    }

    async fn alter_partition_reassignments(
        &self,
        req: Request<AlterPartitionReassignmentsRequest>,
    ) -> Result<Response<AlterPartitionReassignmentsResponse>, Status> {
        // Checked here, before the request is forwarded or planned.
        if let Err(e) = self.limits.reassignments(req.get_ref()) {
            return Ok(Response::new(AlterPartitionReassignmentsResponse {
                error_code: e.code.0,
                error_message: e.message,
                results: vec![],
            }));
        }
        if let Some(mut leader) = self.leader_admin(&req) {
            return leader.alter_partition_reassignments(forwarded(req.into_inner())).await;
        }
        let (req, now) = (req.into_inner(), self.clock.wall_ms());
        let (started, partitions) = (std::time::Instant::now(), req.partitions.len());
        let r = if reassign_cancel::is_cancel(&req) {
            reassign_cancel::cancel(&self.client, req, now).await
        } else {
            reassign_admin::alter(&self.client, req, now).await
        }
        .map_err(status)?;
        tracing::debug!(
            partitions,
            ms = started.elapsed().as_millis() as u64,
            "reassignment request served"
        );
        Ok(Response::new(r))
    }

    async fn list_partition_reassignments(
        &self,
        req: Request<ListPartitionReassignmentsRequest>,
    ) -> Result<Response<ListPartitionReassignmentsResponse>, Status> {
        let req = req.into_inner();
        if let Err(e) = self
            .limits
            .partitions_in_request("partitions", req.partitions.len() as u64)
        {
            return Ok(Response::new(ListPartitionReassignmentsResponse {
                error_code: e.code.0,
                error_message: e.message,
                ..Default::default()
            }));
        }
        let with_progress = req.with_progress;
        let mut r = reassign_admin::list(&self.client, req).await.map_err(status)?;
        if with_progress && !r.reassignments.is_empty() {
            let topics = reassign_admin::topics_of(r.reassignments.iter().map(|m| m.topic.as_str()));
            let view = load_topics_view(&self.client, &topics, TopicDepth::AllPartitions)
                .await
                .map_err(status)?;
            let sizes = reassign_progress::replica_sizes(&view, &self.channels, &r.reassignments).await;
            let leaders = reassign_progress::leaders(&view, &r.reassignments);
            self.progress.fill(&mut r.reassignments, &leaders, &sizes);
        }
        Ok(Response::new(r))
    }

    async fn cancel_all_reassignments(
        &self,
        req: Request<CancelAllReassignmentsRequest>,
    ) -> Result<Response<CancelAllReassignmentsResponse>, Status> {
        if let Some(mut leader) = self.leader_admin(&req) {
            return leader.cancel_all_reassignments(forwarded(req.into_inner())).await;
        }
        let r = reassign_cancel::cancel_all(&self.client).await.map_err(status)?;
        Ok(Response::new(r))
    }

    async fn remove_cancel(
        &self,
        _req: Request<RemoveCancelRequest>,
    ) -> Result<Response<RemoveCancelResponse>, Status> {
        let r = reassign_cancel::remove_cancel(&self.client).await.map_err(status)?;
        Ok(Response::new(r))
    }

    async fn describe_configs(
        &self,
        req: Request<DescribeConfigsRequest>,
    ) -> Result<Response<DescribeConfigsResponse>, Status> {
        let req = req.into_inner();
        if let Err(e) = self.limits.items("resources", req.resources.len()) {
            return Ok(Response::new(DescribeConfigsResponse {
                results: vec![],
                error_code: e.code.0,
                error_message: e.message,
            }));
        }
        let r = configs::describe(&self.client, req).await.map_err(status)?;
        Ok(Response::new(r))
    }

    async fn alter_configs(&self, req: Request<AlterConfigsRequest>) -> Result<Response<AlterConfigsResponse>, Status> {
        let req = req.into_inner();
        if let Err(e) = self.limits.items("configs", req.set.len() + req.delete.len()) {
            return Ok(Response::new(AlterConfigsResponse {
                error_code: e.code.0,
                error_message: e.message,
            }));
        }
        let r = configs::alter(&self.client, req).await.map_err(status)?;
        Ok(Response::new(r))
    }

    async fn describe_client_quotas(
        &self,
        req: Request<DescribeClientQuotasRequest>,
    ) -> Result<Response<DescribeClientQuotasResponse>, Status> {
        let r = client_quotas::describe(&self.client, &self.limits, req.into_inner()).await;
        Ok(Response::new(r.map_err(status)?))
    }

    async fn alter_client_quotas(
        &self,
        req: Request<AlterClientQuotasRequest>,
    ) -> Result<Response<AlterClientQuotasResponse>, Status> {
        let r = client_quotas::alter(&self.client, &self.limits, req.into_inner()).await;
        Ok(Response::new(r.map_err(status)?))
    }

    async fn create_plan(&self, req: Request<CreatePlanRequest>) -> Result<Response<CreatePlanResponse>, Status> {
        let r = crate::plan_admin::create(&self.client, &self.channels, req.into_inner()).await;
        Ok(Response::new(r.map_err(status)?))
    }

    async fn list_plans(&self, req: Request<ListPlansRequest>) -> Result<Response<ListPlansResponse>, Status> {
        let r = crate::plan_admin::list(&self.client, &self.channels, &self.plan_progress, req.into_inner()).await;
        Ok(Response::new(r.map_err(status)?))
    }

    async fn alter_plan(&self, req: Request<AlterPlanRequest>) -> Result<Response<AlterPlanResponse>, Status> {
        let r = crate::plan_admin::alter(&self.client, req.into_inner()).await;
        Ok(Response::new(r.map_err(status)?))
    }

    async fn undrain(&self, req: Request<UndrainRequest>) -> Result<Response<UndrainResponse>, Status> {
        let r = crate::plan_admin::undrain(&self.client, req.into_inner()).await;
        Ok(Response::new(r.map_err(status)?))
    }
}
