//! The Kafka listener of a broker: Kafka's own clients and tools reach Ferry here. It serves
//! the APIs in [`apis::SERVED`]: data (`data`), metadata (`apis`), and admin requests forwarded
//! to the controller (`admin`, `configs`, `partitions`, `log_dirs`); any other API answers
//! nothing and the connection closes, as a Kafka broker does for an API it does not know.
//! Frames are bounded (`frame`) and every count and length in them proven true (`walk`, with
//! the shapes in `schemas`) before the protocol crate decodes them.

pub mod admin;
pub mod apis;
pub mod configs;
pub mod consumer_groups;
pub mod data;
pub mod delete_records;
pub mod frame;
pub mod groups;
pub mod log_dirs;
pub mod offsets;
pub mod partitions;
pub mod producer_ids;
pub mod schemas;
pub mod walk;

#[cfg(test)]
mod fuzz_tests;

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures::stream::{FuturesOrdered, StreamExt};
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest, ApiKey,
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteGroupsRequest, DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest,
    DescribeLogDirsRequest, ElectLeadersRequest, FetchRequest, FindCoordinatorRequest, HeartbeatRequest,
    IncrementalAlterConfigsRequest, InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest,
    ListOffsetsRequest, ListPartitionReassignmentsRequest, MetadataRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, OffsetForLeaderEpochRequest, ProduceRequest, RequestHeader, ResponseHeader, SyncGroupRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use proto::errors::ErrorCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::controller_channels::ControllerChannels;
use crate::replica_manager::BrokerCore;
use frame::FrameError;
use producer_ids::ProducerIds;

/// `socket.request.max.bytes`: Kafka's default.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 100 << 20;
/// `connections.max.idle.ms`: a connection silent this long is closed.
const IDLE: Duration = Duration::from_secs(600);

/// Serves Kafka clients on `listener` until the task is aborted.
pub async fn serve(
    listener: TcpListener,
    core: Arc<BrokerCore>,
    controller: Option<ControllerChannels>,
    metastore: metastore::Client,
    max_request_bytes: usize,
) {
    // Kafka's answers always name the cluster (librdkafka's describe_cluster() crashes its
    // process on a Metadata answer without one), so clients wait in the accept queue until the
    // id is known: the active controller writes it when the cluster first forms.
    let cluster_id = Arc::new(parking_lot::RwLock::new(String::new()));
    while !read_cluster_id(&metastore, &cluster_id).await {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // An import (`ferry migrate-zk`) replaces the id a new cluster was given: follow it.
    let follow_id = cluster_id.clone();
    let follow_client = metastore.clone();
    let _cluster_id = AbortOnDrop(tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            read_cluster_id(&follow_client, &follow_id).await;
        }
    }));
    let runtime = crate::coordinator::runtime::Runtime::new(
        Arc::new(crate::coordinator::broker_log::BrokerOffsetsLog(core.clone())),
        core.config.group.clone(),
    );
    // Stops with the listener: the runtime's loop ends when this task is aborted.
    let _runtime = AbortOnDrop(tokio::spawn(runtime.clone().run()));
    let ctx = Arc::new(Context {
        ids: ProducerIds::new(metastore.clone()),
        controller,
        groups: groups::Groups::new(runtime),
        cluster_id,
    });
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "kafka listener: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let core = core.clone();
        let ctx = ctx.clone();
        tokio::spawn(async move {
            // Kafka names a member's host as `/ip`.
            let host = format!("/{}", peer.ip());
            if let Err(e) = connection(stream, &core, &ctx, &host, max_request_bytes).await {
                tracing::info!(%peer, error = %e, "kafka connection closed");
            }
        });
    }
}

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
enum ConnError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Frame(#[from] FrameError),
    #[error("API key {0} version {1} is not served")]
    Unsupported(i16, i16),
    #[error("idle for {0:?}")]
    Idle(Duration),
}

/// One client connection: requests are read as they come and answered in order. Produce
/// requests are pipelined: each is appended to the logs at once, in the order it came, and its
/// wait for the in-sync replicas overlaps the next requests' (Kafka handles one request per
/// connection at a time; a producer with several in flight gains from this). Any other request
/// waits for those before it, so its effects keep their order.
async fn connection(
    stream: TcpStream,
    core: &Arc<BrokerCore>,
    ctx: &Context,
    host: &str,
    max: usize,
) -> Result<(), ConnError> {
    let (rd, mut wr) = stream.into_split();
    let (tx, mut frames) = tokio::sync::mpsc::channel(MAX_IN_FLIGHT);
    // Reading on its own task keeps the reads whole: a read cut off by a select would lose bytes.
    let reader = tokio::spawn(read_frames(rd, max, tx));
    let _stop_reader = AbortOnDrop(reader);
    let mut inflight: FuturesOrdered<Answer<'_>> = FuturesOrdered::new();
    loop {
        tokio::select! {
            Some(done) = inflight.next(), if !inflight.is_empty() => send(&mut wr, done).await?,
            frame = frames.recv(), if inflight.len() < MAX_IN_FLIGHT => {
                let Some(frame) = frame else {
                    // The client is gone: answer what is in flight first.
                    return drain(&mut inflight, &mut wr).await;
                };
                let frame = frame?;
                let produce = frame::key_and_version(&frame).is_ok_and(|(key, _)| key == ApiKey::Produce as i16);
                if !produce {
                    drain(&mut inflight, &mut wr).await?;
                    send(&mut wr, handle(core, ctx, host, frame).await).await?;
                    continue;
                }
                // Polled once here, the request's appends happen now, in arrival order; what is
                // left is the wait for the in-sync replicas.
                let mut answer: Answer<'_> = Box::pin(handle(core, ctx, host, frame));
                match futures::poll!(&mut answer) {
                    std::task::Poll::Ready(r) => inflight.push_back(Box::pin(futures::future::ready(r))),
                    std::task::Poll::Pending => inflight.push_back(answer),
                }
            }
        }
    }
}

/// One request's answer, still to come.
type Answer<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Option<Bytes>, ConnError>> + Send + 'a>>;

/// Writes one answer, if the request has one.
async fn send(
    wr: &mut tokio::net::tcp::OwnedWriteHalf,
    done: Result<Option<Bytes>, ConnError>,
) -> Result<(), ConnError> {
    if let Some(response) = done? {
        wr.write_all(&response).await?;
    }
    Ok(())
}

/// Writes every answer in flight, in order.
async fn drain(
    inflight: &mut FuturesOrdered<Answer<'_>>,
    wr: &mut tokio::net::tcp::OwnedWriteHalf,
) -> Result<(), ConnError> {
    while let Some(done) = inflight.next().await {
        send(wr, done).await?;
    }
    Ok(())
}

/// Requests read ahead of their answers on one connection.
const MAX_IN_FLIGHT: usize = 8;

/// Reads frames until the client goes, idles out, or sends a frame that is refused (which is
/// sent on as the last item).
async fn read_frames(
    mut rd: tokio::net::tcp::OwnedReadHalf,
    max: usize,
    tx: tokio::sync::mpsc::Sender<Result<Bytes, ConnError>>,
) {
    loop {
        let size = match tokio::time::timeout(IDLE, rd.read_i32()).await {
            Err(_) => Err(ConnError::Idle(IDLE)),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return,
            Ok(r) => r.map_err(ConnError::from),
        };
        let frame = match size.and_then(|s| Ok(frame::check_size(s, max)?)) {
            Ok(size) => {
                let mut buf = vec![0u8; size];
                match rd.read_exact(&mut buf).await {
                    Ok(_) => Ok(Bytes::from(buf)),
                    Err(e) => Err(e.into()),
                }
            }
            Err(e) => Err(e),
        };
        let last = frame.is_err();
        if tx.send(frame).await.is_err() || last {
            return;
        }
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Answers one request frame with the response frame (size prefix included), or `None` when
/// Kafka sends no answer (Produce at acks 0).
async fn handle(
    core: &Arc<BrokerCore>,
    ctx: &Context,
    host: &str,
    mut frame: Bytes,
) -> Result<Option<Bytes>, ConnError> {
    let (key, version) = frame::key_and_version(&frame)?;
    let api = ApiKey::try_from(key).map_err(|_| ConnError::Unsupported(key, version))?;
    let served = apis::served(key, version);
    if !served && api != ApiKey::ApiVersions {
        return Err(ConnError::Unsupported(key, version));
    }
    // A version too new for the header decoder is read as the newest one served: ApiVersions
    // must answer any version, and its header layout never changed past v2.
    let header_version = api.request_header_version(if served { version } else { 3 });
    let header = RequestHeader::decode(&mut frame, header_version).map_err(malformed)?;
    let c = header.correlation_id;
    let started = std::time::Instant::now();
    if let Some((fields, flexible)) = schemas::schema(api, version) {
        walk::walk(&frame, &fields, flexible)?;
    }
    let answer = match api {
        ApiKey::ApiVersions if !served => {
            // Kafka answers an unknown ApiVersions version with v0 and UNSUPPORTED_VERSION.
            respond(api, 0, c, &apis::api_versions(ErrorCode::UNSUPPORTED_VERSION))
        }
        ApiKey::ApiVersions if version >= 3 => respond(
            api,
            version,
            c,
            &apis::with_features(apis::api_versions(ErrorCode::NONE)),
        ),
        ApiKey::ApiVersions => respond(api, version, c, &apis::api_versions(ErrorCode::NONE)),
        ApiKey::Metadata => {
            let req = MetadataRequest::decode(&mut frame, version).map_err(malformed)?;
            let topics = match req.topics {
                // v0 asks for every topic with an empty list; later versions with null.
                Some(t) if !(t.is_empty() && version == 0) => {
                    Some(t.into_iter().filter_map(|t| t.name.map(|n| n.0.to_string())).collect())
                }
                _ => None,
            };
            let mut answer = apis::metadata(&core.view.read(), topics, core.id);
            if version == 0 {
                // v0 has no internal flag, and a field a version lacks must keep its default.
                answer.topics.iter_mut().for_each(|t| t.is_internal = false);
            }
            if version >= 2 {
                let id = ctx.cluster_id.read().clone();
                answer.cluster_id = Some(kafka_protocol::protocol::StrBytes::from_string(id));
            }
            respond(api, version, c, &answer)
        }
        ApiKey::Produce => {
            let req = ProduceRequest::decode(&mut frame, version).map_err(malformed)?;
            match data::produce(core, req, version).await {
                Some(answer) => respond(api, version, c, &answer),
                None => return Ok(None),
            }
        }
        ApiKey::Fetch => {
            let req = FetchRequest::decode(&mut frame, version).map_err(malformed)?;
            respond(api, version, c, &data::fetch(core, req, version).await)
        }
        ApiKey::ListOffsets => {
            let req = ListOffsetsRequest::decode(&mut frame, version).map_err(malformed)?;
            respond(api, version, c, &data::list_offsets(core, req, version))
        }
        ApiKey::OffsetForLeaderEpoch => {
            let req = OffsetForLeaderEpochRequest::decode(&mut frame, version).map_err(malformed)?;
            respond(api, version, c, &data::offset_for_leader_epoch(core, req))
        }
        ApiKey::DeleteRecords => {
            let req = kafka_protocol::messages::DeleteRecordsRequest::decode(&mut frame, version).map_err(malformed)?;
            respond(api, version, c, &delete_records::delete_records(core, req).await)
        }
        ApiKey::InitProducerId => {
            let req = InitProducerIdRequest::decode(&mut frame, version).map_err(malformed)?;
            respond(api, version, c, &producer_ids::init_producer_id(&ctx.ids, &req).await)
        }
        ApiKey::FindCoordinator => {
            let req = FindCoordinatorRequest::decode(&mut frame, version).map_err(malformed)?;
            let answer = groups::find_coordinator(&ctx.groups, core, ctx.controller.as_ref(), req, version).await;
            respond(api, version, c, &answer)
        }
        ApiKey::JoinGroup
        | ApiKey::SyncGroup
        | ApiKey::Heartbeat
        | ApiKey::LeaveGroup
        | ApiKey::OffsetCommit
        | ApiKey::OffsetFetch
        | ApiKey::ListGroups
        | ApiKey::DescribeGroups
        | ApiKey::DeleteGroups
        | ApiKey::OffsetDelete
        | ApiKey::ConsumerGroupHeartbeat
        | ApiKey::ConsumerGroupDescribe => {
            let client = header.client_id.as_ref().map(|c| c.to_string()).unwrap_or_default();
            group_api(api, version, c, core, &ctx.groups, &mut frame, host, &client).await
        }
        ApiKey::DescribeCluster => {
            DescribeClusterRequest::decode(&mut frame, version).map_err(malformed)?;
            let id = ctx.cluster_id.read().clone();
            respond(
                api,
                version,
                c,
                &admin::describe_cluster(&core.view.read(), core.id, id),
            )
        }
        ApiKey::DescribeLogDirs => {
            let req = DescribeLogDirsRequest::decode(&mut frame, version).map_err(malformed)?;
            respond(api, version, c, &log_dirs::describe_log_dirs(core, req, version).await)
        }
        ApiKey::AlterReplicaLogDirs => {
            let req = AlterReplicaLogDirsRequest::decode(&mut frame, version).map_err(malformed)?;
            respond(api, version, c, &log_dirs::alter_replica_log_dirs(core, req).await)
        }
        ApiKey::CreateTopics
        | ApiKey::DeleteTopics
        | ApiKey::DescribeConfigs
        | ApiKey::IncrementalAlterConfigs
        | ApiKey::AlterConfigs
        | ApiKey::CreatePartitions
        | ApiKey::ElectLeaders
        | ApiKey::AlterPartitionReassignments
        | ApiKey::ListPartitionReassignments => {
            let Some(ch) = ctx.controller.as_ref() else {
                return Err(ConnError::Unsupported(key, version));
            };
            forward(api, version, c, ch, &mut frame).await
        }
        _ => Err(ConnError::Unsupported(key, version)),
    }?;
    // Per-request timings, to find where a client's time goes.
    tracing::debug!(
        ?api,
        version,
        ms = started.elapsed().as_millis() as u64,
        "kafka request served"
    );
    Ok(Some(answer))
}

/// What every connection of the listener shares.
struct Context {
    ids: ProducerIds,
    controller: Option<ControllerChannels>,
    groups: groups::Groups,
    /// The cluster's id (`/cluster/id`).
    cluster_id: Arc<parking_lot::RwLock<String>>,
}

/// Reads the cluster's id into `into`; false while there is none (the active controller writes
/// it when a cluster first forms). Metadata and DescribeCluster answer it, as Kafka always does.
async fn read_cluster_id(client: &metastore::Client, into: &parking_lot::RwLock<String>) -> bool {
    let Ok(Some(kv)) = client.get(proto::keys::CLUSTER_ID).await else {
        return false;
    };
    match <proto::ferry::ClusterIdRecord as prost::Message>::decode(kv.value.as_ref()) {
        Ok(r) => {
            *into.write() = r.id;
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "{} is undecodable", proto::keys::CLUSTER_ID);
            false
        }
    }
}

/// Decodes a group or offset request, has the coordinator carry it out, and encodes the answer.
#[allow(clippy::too_many_arguments)]
async fn group_api(
    api: ApiKey,
    version: i16,
    c: i32,
    core: &BrokerCore,
    g: &groups::Groups,
    frame: &mut Bytes,
    host: &str,
    client: &str,
) -> Result<Bytes, ConnError> {
    match api {
        ApiKey::JoinGroup => {
            let req = JoinGroupRequest::decode(frame, version).map_err(malformed)?;
            respond(
                api,
                version,
                c,
                &groups::join_group(g, req, version, host, client).await,
            )
        }
        ApiKey::SyncGroup => {
            let req = SyncGroupRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &groups::sync_group(g, req, version).await)
        }
        ApiKey::Heartbeat => {
            let req = HeartbeatRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &groups::heartbeat(g, req).await)
        }
        ApiKey::LeaveGroup => {
            let req = LeaveGroupRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &groups::leave_group(g, req, version).await)
        }
        ApiKey::OffsetCommit => {
            let req = OffsetCommitRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &offsets::offset_commit(g, req).await)
        }
        ApiKey::OffsetFetch => {
            let req = OffsetFetchRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &offsets::offset_fetch(g, req, version).await)
        }
        ApiKey::ListGroups => {
            let req = ListGroupsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &groups::list_groups(g, req, version).await)
        }
        ApiKey::DescribeGroups => {
            let req = DescribeGroupsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &groups::describe_groups(g, req, version).await)
        }
        ApiKey::DeleteGroups => {
            let req = DeleteGroupsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &groups::delete_groups(g, req).await)
        }
        ApiKey::ConsumerGroupHeartbeat => {
            let req = ConsumerGroupHeartbeatRequest::decode(frame, version).map_err(malformed)?;
            respond(
                api,
                version,
                c,
                &consumer_groups::heartbeat(g, core, req, host, client).await,
            )
        }
        ApiKey::ConsumerGroupDescribe => {
            let req = ConsumerGroupDescribeRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &consumer_groups::describe(g, core, req).await)
        }
        _ => {
            let req = OffsetDeleteRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &offsets::offset_delete(g, req).await)
        }
    }
}

/// Decodes an admin request, has the controller carry it out, and encodes the answer.
async fn forward(
    api: ApiKey,
    version: i16,
    c: i32,
    ch: &ControllerChannels,
    frame: &mut Bytes,
) -> Result<Bytes, ConnError> {
    match api {
        ApiKey::CreateTopics => {
            let req = CreateTopicsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &admin::create_topics(ch, req, version).await)
        }
        ApiKey::DeleteTopics => {
            let req = DeleteTopicsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &admin::delete_topics(ch, req).await)
        }
        ApiKey::DescribeConfigs => {
            let req = DescribeConfigsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &configs::describe_configs(ch, req, version).await)
        }
        ApiKey::IncrementalAlterConfigs => {
            let req = IncrementalAlterConfigsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &configs::incremental_alter_configs(ch, req).await)
        }
        ApiKey::AlterConfigs => {
            let req = AlterConfigsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &configs::alter_configs(ch, req).await)
        }
        ApiKey::CreatePartitions => {
            let req = CreatePartitionsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &partitions::create_partitions(ch, req).await)
        }
        ApiKey::ElectLeaders => {
            let req = ElectLeadersRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &partitions::elect_leaders(ch, req, version).await)
        }
        ApiKey::AlterPartitionReassignments => {
            let req = AlterPartitionReassignmentsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &admin::alter_partition_reassignments(ch, req).await)
        }
        _ => {
            let req = ListPartitionReassignmentsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &admin::list_partition_reassignments(ch, req).await)
        }
    }
}

fn malformed(e: impl std::fmt::Display) -> ConnError {
    ConnError::Frame(FrameError::Malformed(e.to_string()))
}

/// Encodes a response frame: size, header, body.
fn respond<M: Encodable>(api: ApiKey, version: i16, correlation: i32, body: &M) -> Result<Bytes, ConnError> {
    let mut out = BytesMut::new();
    out.put_i32(0);
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation;
    header
        .encode(&mut out, api.response_header_version(version))
        .map_err(malformed)?;
    body.encode(&mut out, version).map_err(malformed)?;
    let size = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&size.to_be_bytes());
    Ok(out.freeze())
}
