//! The group APIs of the Kafka listener: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup, ListGroups, DescribeGroups and DeleteGroups, translated to and from the group
//! coordinator (`crate::coordinator`). The offset APIs are in `offsets`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId, HeartbeatRequest,
    HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest,
    ListGroupsResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use proto::cluster_view::ClusterView;
use proto::errors::ErrorCode;
use tokio::sync::oneshot;

use super::apis::{kafka_brokers, wire};
use crate::controller_channels::ControllerChannels;
use crate::coordinator::group::{JoinAnswer, Out, Reply, SyncAnswer};
use crate::coordinator::membership::{JoinRequest, SyncRequest};
use crate::coordinator::runtime::{Loaded, Runtime};
use crate::coordinator::{self, OFFSETS_TOPIC};
use crate::replica_manager::BrokerCore;

/// What the group APIs share: the coordinator runtime, and a guard against creating the
/// offsets topic twice at once.
pub struct Groups {
    /// The runtime.
    pub runtime: Arc<Runtime>,
    creating: AtomicBool,
}

impl Groups {
    /// The group APIs over `runtime`.
    pub fn new(runtime: Arc<Runtime>) -> Self {
        Self {
            runtime,
            creating: AtomicBool::new(false),
        }
    }
}

/// Runs `f` on the shard of `group` under its lock, appends what it wrote, and answers once that
/// is replicated.
pub(super) async fn on_shard<T>(
    rt: &Runtime,
    group: &str,
    f: impl FnOnce(&mut Loaded, i64) -> (T, Out),
) -> Result<T, ErrorCode> {
    let p = rt.partition_of(group).map_err(|e| e.code())?;
    let shard = rt.shard(p).map_err(|e| e.code())?;
    let (value, wait) = {
        let mut st = shard.lock().await;
        let (value, out) = f(&mut st, rt.now_ms());
        let wait = rt.apply(&mut st, out);
        (value, wait)
    };
    // The shard is not held while waiting: a long JoinGroup must not keep it loaded.
    drop(shard);
    wait.await?;
    Ok(value)
}

/// Waits for an answer the group holds (JoinGroup, SyncGroup).
async fn held(rx: oneshot::Receiver<Reply>) -> Reply {
    rx.await.unwrap_or(Reply::Code(ErrorCode::NOT_COORDINATOR))
}

/// Answers FindCoordinator: the leader of the group's partition of `__consumer_offsets`, which
/// is created on the first request. Transactions are not served.
pub async fn find_coordinator(
    groups: &Groups,
    core: &BrokerCore,
    ch: Option<&ControllerChannels>,
    req: FindCoordinatorRequest,
    (listener, version): (&str, i16),
) -> FindCoordinatorResponse {
    let keys: Vec<StrBytes> = if version >= 4 {
        req.coordinator_keys.clone()
    } else {
        vec![req.key.clone()]
    };
    if groups.runtime.partitions().is_none() && req.key_type == 0 {
        let live = core.view.read().live_brokers().len();
        create_offsets_topic(groups, live, ch).await;
    }
    let view = core.view.read();
    let view = &*view;
    let found: Vec<(StrBytes, Located)> = keys
        .into_iter()
        .map(|k| {
            let found = if req.key_type != 0 {
                Err((
                    ErrorCode::INVALID_REQUEST,
                    "transactions are not served by Ferry yet".into(),
                ))
            } else {
                locate(&groups.runtime, view, &k, listener)
            };
            (k, found)
        })
        .collect();
    let mut r = FindCoordinatorResponse::default();
    if version >= 4 {
        r.coordinators = found
            .into_iter()
            .map(|(key, f)| {
                let mut c = Coordinator::default();
                c.key = key;
                match f {
                    Ok((id, host, port)) => {
                        c.node_id = BrokerId(id);
                        c.host = host;
                        c.port = port;
                    }
                    Err((code, msg)) => {
                        c.node_id = BrokerId(-1);
                        c.port = -1;
                        c.error_code = wire(code);
                        c.error_message = Some(StrBytes::from_string(msg));
                    }
                }
                c
            })
            .collect();
        return r;
    }
    match found.into_iter().next().map(|(_, f)| f) {
        Some(Ok((id, host, port))) => {
            r.node_id = BrokerId(id);
            r.host = host;
            r.port = port;
        }
        Some(Err((code, msg))) => {
            r.error_code = wire(code);
            r.node_id = BrokerId(-1);
            r.port = -1;
            if version >= 1 {
                r.error_message = Some(StrBytes::from_string(msg));
            }
        }
        None => r.error_code = wire(ErrorCode::INVALID_REQUEST),
    }
    r
}

/// A coordinator's id, host and port, or why none is named.
type Located = Result<(i32, StrBytes, i32), (ErrorCode, String)>;

/// The coordinator of `group`: the Kafka address of its partition's leader on `listener`.
fn locate(rt: &Runtime, view: &ClusterView, group: &str, listener: &str) -> Located {
    let unavailable = |why: String| (ErrorCode::COORDINATOR_NOT_AVAILABLE, why);
    let p = rt
        .partition_of(group)
        .map_err(|_| unavailable(format!("{OFFSETS_TOPIC} is being created")))?;
    let leader = view
        .topics
        .get(OFFSETS_TOPIC)
        .and_then(|t| t.partitions.get(&p))
        .map(|e| e.state.leader)
        .filter(|l| *l >= 0)
        .ok_or_else(|| unavailable(format!("{OFFSETS_TOPIC}-{p} has no leader")))?;
    kafka_brokers(view, listener)
        .find(|b| b.id.0 == leader)
        .map(|b| (leader, b.host, b.port))
        .ok_or_else(|| {
            unavailable(format!(
                "broker {leader}, leader of {OFFSETS_TOPIC}-{p}, has no Kafka listener {listener}"
            ))
        })
}

/// Asks the controller for `__consumer_offsets` with `offsets.topic.num.partitions` (50 by
/// default) and `offsets.topic.replication.factor` (3, fewer when fewer brokers live), compacted.
async fn create_offsets_topic(groups: &Groups, live: usize, ch: Option<&ControllerChannels>) {
    let Some(ch) = ch else { return };
    if groups.creating.swap(true, Ordering::AcqRel) {
        return;
    }
    let live = live.max(1);
    let mut t = CreatableTopic::default();
    t.name = TopicName(StrBytes::from_static_str(OFFSETS_TOPIC));
    let cfg = groups.runtime.config();
    t.num_partitions = cfg.offsets_topic_num_partitions;
    t.replication_factor = cfg
        .offsets_topic_replication_factor
        .min(live.min(i16::MAX as usize) as i16);
    t.configs = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", coordinator::OFFSETS_SEGMENT_BYTES),
    ]
    .into_iter()
    .map(|(k, v)| {
        let mut c = CreatableTopicConfig::default();
        c.name = StrBytes::from_static_str(k);
        c.value = Some(StrBytes::from_static_str(v));
        c
    })
    .collect();
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 30_000;
    let answer = super::admin::create_topics(ch, req, 7).await;
    for t in answer.topics {
        if t.error_code != 0 && t.error_code != wire(ErrorCode::TOPIC_ALREADY_EXISTS) {
            tracing::warn!(code = t.error_code, message = ?t.error_message, "cannot create {OFFSETS_TOPIC}");
        }
    }
    groups.creating.store(false, Ordering::Release);
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// Answers JoinGroup; the answer waits for the rebalance.
pub async fn join_group(
    groups: &Groups,
    req: JoinGroupRequest,
    version: i16,
    client_host: &str,
    client_id: &str,
) -> JoinGroupResponse {
    let group = req.group_id.0.to_string();
    let join = JoinRequest {
        member_id: req.member_id.to_string(),
        instance_id: req.group_instance_id.as_ref().map(|i| i.to_string()),
        client_id: client_id.to_string(),
        client_host: client_host.to_string(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: if version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.to_vec()))
            .collect(),
        require_known_member_id: version >= 4,
    };
    let prefix = join.instance_id.clone().unwrap_or_else(|| client_id.to_string());
    let new_id = format!("{prefix}-{}", uuid::Uuid::new_v4());
    let member = join.member_id.clone();
    let rx = on_shard(&groups.runtime, &group, |st, now| {
        let (to, rx) = st.waiter();
        (rx, st.shard.join(&group, now, join, to, new_id))
    })
    .await;
    let answer = match rx {
        Ok(rx) => match held(rx).await {
            Reply::Join(a) => a,
            Reply::Sync(_) | Reply::Code(_) => JoinAnswer::error(ErrorCode::NOT_COORDINATOR, &member),
        },
        Err(code) => JoinAnswer::error(code, &member),
    };
    let mut r = JoinGroupResponse::default();
    r.error_code = wire(answer.error);
    r.generation_id = answer.generation;
    if version >= 7 {
        r.protocol_type = answer.protocol_type.as_deref().map(s);
    }
    r.protocol_name = match (version >= 7, answer.protocol.as_deref()) {
        (true, p) => p.map(s),
        (false, p) => Some(s(p.unwrap_or_default())),
    };
    r.leader = s(&answer.leader);
    r.member_id = s(&answer.member_id);
    r.members = answer
        .members
        .into_iter()
        .map(|(id, instance, metadata)| {
            let mut m = JoinGroupResponseMember::default();
            m.member_id = s(&id);
            if version >= 5 {
                m.group_instance_id = instance.as_deref().map(s);
            }
            m.metadata = metadata.into();
            m
        })
        .collect();
    r
}

/// Answers SyncGroup; a follower's answer waits for the leader's assignment.
pub async fn sync_group(groups: &Groups, req: SyncGroupRequest, version: i16) -> SyncGroupResponse {
    let group = req.group_id.0.to_string();
    let sync = SyncRequest {
        member_id: req.member_id.to_string(),
        instance_id: req.group_instance_id.as_ref().map(|i| i.to_string()),
        generation: req.generation_id,
        protocol_type: req.protocol_type.as_ref().map(|p| p.to_string()),
        protocol: req.protocol_name.as_ref().map(|p| p.to_string()),
        assignments: req
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.to_vec()))
            .collect(),
    };
    let rx = on_shard(&groups.runtime, &group, |st, now| {
        let (to, rx) = st.waiter();
        (rx, st.shard.sync(&group, now, sync, to))
    })
    .await;
    let answer = match rx {
        Ok(rx) => match held(rx).await {
            Reply::Sync(a) => a,
            _ => SyncAnswer {
                error: ErrorCode::NOT_COORDINATOR,
                ..Default::default()
            },
        },
        Err(code) => SyncAnswer {
            error: code,
            ..Default::default()
        },
    };
    let mut r = SyncGroupResponse::default();
    r.error_code = wire(answer.error);
    if version >= 5 {
        r.protocol_type = answer.protocol_type.as_deref().map(s);
        r.protocol_name = answer.protocol.as_deref().map(s);
    }
    r.assignment = answer.assignment.into();
    r
}

/// Answers Heartbeat.
pub async fn heartbeat(groups: &Groups, req: HeartbeatRequest) -> HeartbeatResponse {
    let group = req.group_id.0.to_string();
    let instance = req.group_instance_id.as_ref().map(|i| i.to_string());
    let code = on_shard(&groups.runtime, &group, |st, now| {
        let code = st
            .shard
            .heartbeat(&group, now, &req.member_id, instance.as_deref(), req.generation_id);
        (code, Out::default())
    })
    .await
    .unwrap_or_else(|e| e);
    let mut r = HeartbeatResponse::default();
    r.error_code = wire(code);
    r
}

/// Answers LeaveGroup: one member before v3, a list from v3.
pub async fn leave_group(groups: &Groups, req: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    let group = req.group_id.0.to_string();
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        req.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|i| i.to_string()),
                )
            })
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    let asked = members.clone();
    let codes = on_shard(&groups.runtime, &group, |st, now| st.shard.leave(&group, now, &members)).await;
    let mut r = LeaveGroupResponse::default();
    match codes {
        Err(code) => r.error_code = wire(code),
        Ok(codes) if version < 3 => r.error_code = wire(codes[0]),
        Ok(codes) => {
            r.members = asked
                .into_iter()
                .zip(codes)
                .map(|((id, instance), code)| {
                    let mut m = MemberResponse::default();
                    m.member_id = s(&id);
                    m.group_instance_id = instance.as_deref().map(s);
                    m.error_code = wire(code);
                    m
                })
                .collect();
        }
    }
    r
}

/// Answers ListGroups with the groups of every partition coordinated here, filtered by state
/// (v4) and type (v5: `classic` or `consumer`).
pub async fn list_groups(groups: &Groups, req: ListGroupsRequest, version: i16) -> ListGroupsResponse {
    let states: Vec<String> = req.states_filter.iter().map(|s| s.to_lowercase()).collect();
    let types: Vec<String> = req.types_filter.iter().map(|s| s.to_lowercase()).collect();
    let mut listed = Vec::new();
    for shard in groups.runtime.loaded() {
        let st = shard.lock().await;
        listed.extend(st.shard.list());
    }
    let mut r = ListGroupsResponse::default();
    r.groups = listed
        .into_iter()
        .filter(|(_, _, state, _)| states.is_empty() || states.contains(&state.to_lowercase()))
        .filter(|(_, _, _, kind)| types.is_empty() || types.iter().any(|t| t == kind))
        .map(|(id, protocol_type, state, kind)| {
            let mut g = ListedGroup::default();
            g.group_id = GroupId(s(&id));
            g.protocol_type = s(&protocol_type);
            if version >= 4 {
                g.group_state = s(state);
            }
            if version >= 5 {
                g.group_type = s(kind);
            }
            g
        })
        .collect();
    r
}

/// Answers DescribeGroups.
pub async fn describe_groups(groups: &Groups, req: DescribeGroupsRequest, version: i16) -> DescribeGroupsResponse {
    let mut r = DescribeGroupsResponse::default();
    for id in req.groups {
        let name = id.0.to_string();
        let described = on_shard(&groups.runtime, &name, |st, _| {
            (st.shard.describe(&name), Out::default())
        })
        .await;
        let mut g = DescribedGroup::default();
        g.group_id = id;
        match described {
            Err(code) => g.error_code = wire(code),
            Ok(None) => {
                g.group_state = s("Dead");
                if version >= 6 {
                    g.error_code = wire(ErrorCode::GROUP_ID_NOT_FOUND);
                    g.error_message = Some(s(&format!("group {name} is not known")));
                }
            }
            Ok(Some(d)) => {
                g.group_state = s(d.state);
                g.protocol_type = s(&d.protocol_type);
                g.protocol_data = s(&d.protocol);
                g.members = d
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut o = DescribedGroupMember::default();
                        o.member_id = s(&m.id);
                        if version >= 4 {
                            o.group_instance_id = m.instance_id.as_deref().map(s);
                        }
                        o.client_id = s(&m.client_id);
                        o.client_host = s(&m.client_host);
                        o.member_metadata = m.metadata.into();
                        o.member_assignment = m.assignment.into();
                        o
                    })
                    .collect();
            }
        }
        r.groups.push(g);
    }
    r
}

/// Answers DeleteGroups: only empty groups go, with their offsets.
pub async fn delete_groups(groups: &Groups, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut r = DeleteGroupsResponse::default();
    for id in req.groups_names {
        let name = id.0.to_string();
        let code = on_shard(&groups.runtime, &name, |st, _| {
            let (codes, out) = st.shard.delete_groups(std::slice::from_ref(&name));
            (codes[0], out)
        })
        .await
        .unwrap_or_else(|e| e);
        let mut d = DeletableGroupResult::default();
        d.group_id = id;
        d.error_code = wire(code);
        r.results.push(d);
    }
    r
}
