//! The Kafka listener of a broker: Kafka's own clients and tools reach Ferry here. It serves
//! ApiVersions, Metadata, Produce, Fetch, ListOffsets and OffsetForLeaderEpoch; any other API
//! answers nothing and the connection closes, as a Kafka broker does for an API it does not
//! know. Frames are bounded (`frame`) and every count and length in them proven true (`walk`,
//! with the shapes in `schemas`) before the protocol crate decodes them; the answers are built
//! in `apis` (metadata) and `data` (records).

pub mod admin;
pub mod apis;
pub mod configs;
pub mod data;
pub mod frame;
pub mod groups;
pub mod log_dirs;
pub mod producer_ids;
pub mod schemas;
pub mod walk;

#[cfg(test)]
mod fuzz_tests;

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest, ApiKey, CreateTopicsRequest, DeleteTopicsRequest,
    DescribeClusterRequest, DescribeConfigsRequest, DescribeLogDirsRequest, FetchRequest, FindCoordinatorRequest,
    IncrementalAlterConfigsRequest, InitProducerIdRequest, ListOffsetsRequest, ListPartitionReassignmentsRequest,
    MetadataRequest, OffsetForLeaderEpochRequest, ProduceRequest, RequestHeader, ResponseHeader,
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
    max_request_bytes: usize,
) {
    let ctx = Arc::new(Context {
        ids: ProducerIds::new(core.id, core.config.clock.wall_ms()),
        controller,
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
            if let Err(e) = connection(stream, &core, &ctx, max_request_bytes).await {
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

/// One client connection: requests are answered in order, as Kafka does.
async fn connection(mut stream: TcpStream, core: &Arc<BrokerCore>, ctx: &Context, max: usize) -> Result<(), ConnError> {
    loop {
        let size = match tokio::time::timeout(IDLE, stream.read_i32()).await {
            Err(_) => return Err(ConnError::Idle(IDLE)),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(r) => r?,
        };
        let size = frame::check_size(size, max)?;
        let mut buf = vec![0u8; size];
        stream.read_exact(&mut buf).await?;
        if let Some(response) = handle(core, ctx, Bytes::from(buf)).await? {
            stream.write_all(&response).await?;
        }
    }
}

/// Answers one request frame with the response frame (size prefix included), or `None` when
/// Kafka sends no answer (Produce at acks 0).
async fn handle(core: &Arc<BrokerCore>, ctx: &Context, mut frame: Bytes) -> Result<Option<Bytes>, ConnError> {
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
    if let Some((fields, flexible)) = schemas::schema(api, version) {
        walk::walk(&frame, &fields, flexible)?;
    }
    let answer = match api {
        ApiKey::ApiVersions if !served => {
            // Kafka answers an unknown ApiVersions version with v0 and UNSUPPORTED_VERSION.
            respond(api, 0, c, &apis::api_versions(ErrorCode::UNSUPPORTED_VERSION))
        }
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
            let answer = apis::metadata(&core.view.read(), topics, core.id);
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
        ApiKey::InitProducerId => {
            let req = InitProducerIdRequest::decode(&mut frame, version).map_err(malformed)?;
            respond(api, version, c, &producer_ids::init_producer_id(&ctx.ids, &req))
        }
        ApiKey::FindCoordinator => {
            let req = FindCoordinatorRequest::decode(&mut frame, version).map_err(malformed)?;
            respond(api, version, c, &groups::find_coordinator(req, version))
        }
        ApiKey::DescribeCluster => {
            DescribeClusterRequest::decode(&mut frame, version).map_err(malformed)?;
            respond(api, version, c, &admin::describe_cluster(&core.view.read(), core.id))
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
        | ApiKey::AlterPartitionReassignments
        | ApiKey::ListPartitionReassignments => {
            let Some(ch) = ctx.controller.as_ref() else {
                return Err(ConnError::Unsupported(key, version));
            };
            forward(api, version, c, ch, &mut frame).await
        }
        _ => Err(ConnError::Unsupported(key, version)),
    }?;
    Ok(Some(answer))
}

/// What every connection of the listener shares.
struct Context {
    ids: ProducerIds,
    controller: Option<ControllerChannels>,
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
            respond(api, version, c, &configs::describe_configs(ch, req).await)
        }
        ApiKey::IncrementalAlterConfigs => {
            let req = IncrementalAlterConfigsRequest::decode(frame, version).map_err(malformed)?;
            respond(api, version, c, &configs::incremental_alter_configs(ch, req).await)
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
