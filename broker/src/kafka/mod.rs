//! The Kafka listener of a broker: Kafka's own clients and tools reach Ferry here. It serves
//! the APIs in [`apis::SERVED`]: data (`data`), metadata (`apis`), and admin requests forwarded
//! to the controller (`admin`, `configs`, `partitions`, `log_dirs`); any other API answers
//! nothing and the connection closes, as a Kafka broker does for an API it does not know.
//! Frames are bounded (`frame`) and every count and length in them proven true (`walk`, with
//! the shapes in `schemas`) before the protocol crate decodes them.

pub mod acls;
pub mod admin;
pub mod apis;
mod authz;
mod authz_admin;
mod authz_groups;
mod authz_records;
pub mod client_quotas;
pub mod configs;
mod connection;
pub mod consumer_groups;
pub mod data;
pub mod delete_records;
pub mod frame;
pub mod groups;
pub mod listeners;
pub mod log_dirs;
pub mod offsets;
pub mod old_versions;
pub mod partitions;
pub mod producer_ids;
pub mod quorum;
mod refusals;
mod routes;
mod sasl_apis;
pub mod schemas;
pub mod scram_credentials;
pub mod throttling;
pub mod walk;

#[cfg(test)]
mod fuzz_tests;

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, ApiKey, DescribeClusterRequest, DescribeLogDirsRequest, DescribeQuorumRequest,
    FetchRequest, FindCoordinatorRequest, InitProducerIdRequest, ListOffsetsRequest, MetadataRequest,
    OffsetForLeaderEpochRequest, ProduceRequest, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use proto::errors::ErrorCode;

use crate::auth::session::{Gate, Session};
use crate::controller_channels::ControllerChannels;
use crate::replica_manager::BrokerCore;
use authz::Who;
use connection::ConnError;
use frame::FrameError;
use producer_ids::ProducerIds;
use routes::{forward, group_api};

/// `socket.request.max.bytes`: Kafka's default.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 100 << 20;

/// Serves Kafka clients on every listener until the task is aborted. The listeners share
/// one group coordinator, one set of quotas and one security view; each has its own protocol.
pub async fn serve(
    listeners: Vec<listeners::Listener>,
    core: Arc<BrokerCore>,
    controller: Option<ControllerChannels>,
    metastore: metastore::Client,
    max_request_bytes: usize,
    security: crate::auth::ListenerSecurity,
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
    // The quotas this broker enforces, followed from the metastore.
    let quotas = Arc::new(throttling::Quotas::new(core.config.clock.clone()));
    let _quotas = AbortOnDrop(tokio::spawn(throttling::follow(metastore.clone(), quotas.clone())));
    // Each TLS listener's certificates, read again when their files change; listeners with the
    // same files share them.
    let mut certificates: Vec<(metastore::tls::TlsFiles, Arc<metastore::tls::Reloading>)> = Vec::new();
    let mut tls_of = Vec::with_capacity(listeners.len());
    for l in listeners.iter() {
        if !l.protocol.tls() {
            tls_of.push(None);
            continue;
        }
        let Some(files) = security.tls_of(&l.name) else {
            tracing::error!(listener = %l.name, "kafka listener: a TLS listener has no certificate; not serving");
            return;
        };
        if let Some((_, shared)) = certificates.iter().find(|(f, _)| f == files) {
            tls_of.push(Some(shared.clone()));
            continue;
        }
        match metastore::tls::Reloading::new(files.clone()) {
            Ok(t) => {
                let t = Arc::new(t);
                certificates.push((files.clone(), t.clone()));
                tls_of.push(Some(t));
            }
            Err(e) => {
                tracing::error!(listener = %l.name, error = %e, "kafka listener: the TLS certificates do not load; not serving");
                return;
            }
        }
    }
    let _tls: Vec<_> = certificates
        .iter()
        .map(|(_, t)| AbortOnDrop(tokio::spawn(t.clone().watch(metastore::tls::RELOAD_EVERY))))
        .collect();
    // Who may log in and what each principal may do, followed from the metastore.
    let security = Arc::new(crate::auth::view::SecurityView::new(security));
    let _security = AbortOnDrop(tokio::spawn(crate::auth::view::follow(
        metastore.clone(),
        security.clone(),
    )));
    let ctx = Arc::new(Context {
        security,
        quotas,
        metastore: metastore.clone(),
        ids: ProducerIds::new(metastore.clone()),
        controller,
        groups: groups::Groups::new(runtime),
        cluster_id,
    });
    let accepting = listeners
        .into_iter()
        .zip(tls_of)
        .map(|(l, tls)| accept_loop(l, tls, core.clone(), ctx.clone(), max_request_bytes));
    futures::future::join_all(accepting).await;
}

/// Accepts the clients of one listener, each served on its own task.
async fn accept_loop(
    l: listeners::Listener,
    tls: Option<Arc<metastore::tls::Reloading>>,
    core: Arc<BrokerCore>,
    ctx: Arc<Context>,
    max_request_bytes: usize,
) {
    let via = listeners::Via::new(&l.name, l.protocol);
    loop {
        let (stream, peer) = match l.socket.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(listener = %l.name, error = %e, "kafka listener: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let core = core.clone();
        let ctx = ctx.clone();
        let tls = tls.clone();
        let via = via.clone();
        tokio::spawn(async move {
            // Kafka names a member's host as `/ip`.
            let host = format!("/{}", peer.ip());
            let served = connection::accept(stream, tls.as_deref(), &core, &ctx, (&host, &via), max_request_bytes);
            if let Err(e) = served.await {
                tracing::info!(%peer, listener = %via.name, error = %e, "kafka connection closed");
            }
        });
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
    (host, via): (&str, &listeners::Via),
    session: &parking_lot::Mutex<Session>,
    mute: &throttling::Mute,
    mut frame: Bytes,
) -> Result<Option<Bytes>, ConnError> {
    // What a produce counts against its client's quota, as Kafka counts it: the whole request.
    let request_bytes = frame.len();
    let (key, version) = frame::key_and_version(&frame)?;
    let api = ApiKey::try_from(key).map_err(|_| ConnError::Unsupported(key, version))?;
    if let Gate::Close(why) = session.lock().gate(api, std::time::Instant::now()) {
        return Err(ConnError::Sasl(why));
    }
    let served = apis::served(key, version);
    if apis::advertised_only(key, version) {
        return Ok(old_versions::answer(api, version, frame)?);
    }
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
    let who = Who::new(&ctx.security, core, session.lock().principal().to_string(), host);
    if let Some(op) = authz::cluster_operation(api) {
        let allowed = who.cluster(op);
        who.audit(api, op, "Cluster:kafka-cluster", allowed);
        if !allowed {
            let why = format!("{} may not {op} the cluster", who.principal);
            return refusals::cluster_refused(api, version, c, &mut frame, &why)
                .unwrap_or(Err(ConnError::Unsupported(key, version)))
                .map(Some);
        }
    }
    if let Some(answer) = authz_admin::check(&who, api, version, c, &frame, &core.view.read()) {
        return answer.map(Some);
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
            let named = topics.is_some();
            let mut answer = apis::metadata(&core.view.read(), topics, core.id, (&via.name, version));
            authz::metadata(&who, &mut answer, named);
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
            let mut req = ProduceRequest::decode(&mut frame, version).map_err(malformed)?;
            let denied = authz::produce(&who, &mut req);
            // Recorded before the append, so the mute holds the connection's next request.
            let throttle = ctx
                .quotas
                .produce(mute, &who.principal, &client_id(&header), request_bytes);
            let answer = data::produce(core, req, version).await;
            throttling::hold(api, version, throttle).await;
            match answer {
                Some(mut answer) => {
                    authz::produce_denied(&mut answer, denied);
                    answer.throttle_time_ms = throttle;
                    respond(api, version, c, &answer)
                }
                None => return Ok(None),
            }
        }
        ApiKey::Fetch => {
            let mut req = FetchRequest::decode(&mut frame, version).map_err(malformed)?;
            let denied = authz::fetch(&who, &mut req, version);
            let client = client_id(&header);
            ctx.quotas.cap_fetch(&who.principal, &client, &mut req.max_bytes);
            let mut answer = data::fetch(core, req, version).await;
            authz::fetch_denied(&mut answer, denied);
            let throttle = ctx.quotas.fetched(mute, &who.principal, &client, &mut answer, version);
            throttling::hold(api, version, throttle).await;
            respond(api, version, c, &answer)
        }
        ApiKey::ListOffsets => {
            let mut req = ListOffsetsRequest::decode(&mut frame, version).map_err(malformed)?;
            let denied = authz::list_offsets(&who, &mut req);
            let mut answer = data::list_offsets(core, req, version);
            authz::list_offsets_denied(&mut answer, denied);
            respond(api, version, c, &answer)
        }
        ApiKey::OffsetForLeaderEpoch => {
            let mut req = OffsetForLeaderEpochRequest::decode(&mut frame, version).map_err(malformed)?;
            let denied = authz_records::offset_for_leader_epoch(&who, &mut req);
            let mut answer = data::offset_for_leader_epoch(core, req);
            authz_records::offset_for_leader_epoch_denied(&mut answer, denied);
            respond(api, version, c, &answer)
        }
        ApiKey::DeleteRecords => {
            let mut req =
                kafka_protocol::messages::DeleteRecordsRequest::decode(&mut frame, version).map_err(malformed)?;
            let denied = authz_records::delete_records(&who, &mut req);
            let mut answer = delete_records::delete_records(core, req).await;
            authz_records::delete_records_denied(&mut answer, denied);
            respond(api, version, c, &answer)
        }
        ApiKey::InitProducerId => {
            let req = InitProducerIdRequest::decode(&mut frame, version).map_err(malformed)?;
            if req.transactional_id.is_none() && !authz::idempotent_producer(&who) {
                let mut r = kafka_protocol::messages::InitProducerIdResponse::default();
                r.error_code = apis::wire(ErrorCode::CLUSTER_AUTHORIZATION_FAILED);
                r.producer_id = kafka_protocol::messages::ProducerId(-1);
                r.producer_epoch = -1;
                return respond(api, version, c, &r).map(Some);
            }
            respond(api, version, c, &producer_ids::init_producer_id(&ctx.ids, &req).await)
        }
        ApiKey::FindCoordinator => {
            let req = FindCoordinatorRequest::decode(&mut frame, version).map_err(malformed)?;
            let asked = req.clone();
            let mut answer =
                groups::find_coordinator(&ctx.groups, core, ctx.controller.as_ref(), req, (&via.name, version)).await;
            authz_groups::find_coordinator(&who, &asked, &mut answer);
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
            group_api(api, version, c, core, &ctx.groups, &mut frame, &who, host, &client).await
        }
        ApiKey::DescribeCluster => {
            DescribeClusterRequest::decode(&mut frame, version).map_err(malformed)?;
            let id = ctx.cluster_id.read().clone();
            respond(
                api,
                version,
                c,
                &admin::describe_cluster(&core.view.read(), core.id, id, &via.name),
            )
        }
        ApiKey::DescribeQuorum => {
            let req = DescribeQuorumRequest::decode(&mut frame, version).map_err(malformed)?;
            respond(api, version, c, &quorum::describe(&ctx.metastore, &req).await)
        }
        ApiKey::SaslHandshake => {
            let req = SaslHandshakeRequest::decode(&mut frame, version).map_err(malformed)?;
            respond(api, version, c, &sasl_apis::handshake(session, &req))
        }
        ApiKey::SaslAuthenticate => {
            let req = SaslAuthenticateRequest::decode(&mut frame, version).map_err(malformed)?;
            let answer = sasl_apis::authenticate(core, session, &ctx.security, &req).await;
            respond(api, version, c, &answer)
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
        | ApiKey::ListPartitionReassignments
        | ApiKey::DescribeClientQuotas
        | ApiKey::AlterClientQuotas
        | ApiKey::DescribeUserScramCredentials
        | ApiKey::AlterUserScramCredentials
        | ApiKey::CreateAcls
        | ApiKey::DescribeAcls
        | ApiKey::DeleteAcls => {
            let Some(ch) = ctx.controller.as_ref() else {
                return Err(ConnError::Unsupported(key, version));
            };
            forward(api, version, c, ch, core, &mut frame).await
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
    /// Credentials, ACLs and the listener's security settings.
    security: Arc<crate::auth::view::SecurityView>,
    /// The metastore, whose Raft quorum DescribeQuorum describes.
    metastore: metastore::Client,
    ids: ProducerIds,
    controller: Option<ControllerChannels>,
    groups: groups::Groups,
    /// Client quotas, enforced on produce and fetch.
    quotas: Arc<throttling::Quotas>,
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

/// The request's client id, empty when null (as Kafka's quotas take it).
fn client_id(header: &RequestHeader) -> String {
    header.client_id.as_ref().map(|c| c.to_string()).unwrap_or_default()
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
