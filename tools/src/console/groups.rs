//! The groups page: every consumer group with its committed offsets and lag, as
//! `kafka-consumer-groups --describe` computes it (the partition's log end offset, from
//! ListOffsets latest, minus the group's committed offset). Asked over Kafka's protocol:
//! ListGroups of every broker (each lists the groups it coordinates), OffsetFetch of each group
//! at that broker, ListOffsets at each partition's leader.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use broker::kafka::listeners::plain_endpoint;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    BrokerId, GroupId, ListGroupsRequest, ListOffsetsRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use proto::ferry::BrokerRegistration;
use serde::Serialize;

use crate::kafka_client::responses::{LIST_GROUPS, LIST_OFFSETS, OFFSET_FETCH};
use crate::kafka_client::{check, KafkaConn};

/// Committed offsets by topic and partition.
type Committed = BTreeMap<(String, i32), i64>;

/// Most groups shown: the page says when there are more.
pub const MAX_GROUPS: usize = 500;

/// The groups page.
#[derive(Debug, Serialize, PartialEq, Default)]
pub struct GroupsView {
    /// Groups by name.
    pub groups: Vec<GroupView>,
    /// More groups exist than [`MAX_GROUPS`].
    pub truncated: bool,
    /// Brokers that could not be asked, and why.
    pub errors: Vec<String>,
}

/// One group.
#[derive(Debug, Serialize, PartialEq)]
pub struct GroupView {
    /// Group id.
    pub group: String,
    /// Its state (Stable, Empty, ...).
    pub state: String,
    /// `consumer`, or empty for a KIP-848 group.
    pub protocol_type: String,
    /// The broker coordinating it.
    pub coordinator: i32,
    /// The sum of the lag of its partitions with a committed offset.
    pub total_lag: i64,
    /// Why its offsets are unknown, if they are.
    pub error: Option<String>,
    /// Its committed partitions, by topic and partition.
    pub partitions: Vec<PartitionLag>,
}

/// One partition a group committed an offset for.
#[derive(Debug, Serialize, PartialEq)]
pub struct PartitionLag {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The committed offset, -1 for none.
    pub committed: i64,
    /// The log end offset, when known.
    pub end: Option<i64>,
    /// End minus committed; unknown without either (Kafka's tool prints `-`).
    pub lag: Option<i64>,
}

/// A group as a broker listed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// Group id.
    pub group: String,
    /// State.
    pub state: String,
    /// Protocol type.
    pub protocol_type: String,
    /// The broker that listed it (its coordinator).
    pub coordinator: i32,
}

/// The lag of one partition: end minus committed when both are known, never below 0.
pub fn lag(committed: i64, end: Option<i64>) -> Option<i64> {
    match end {
        Some(end) if committed >= 0 && end >= 0 => Some((end - committed).max(0)),
        _ => None,
    }
}

/// One group's view from its committed offsets and the partitions' end offsets.
pub fn group_view(
    listed: &Listed,
    committed: Result<&Committed, &str>,
    ends: &HashMap<(String, i32), i64>,
) -> GroupView {
    let (partitions, error) = match committed {
        Ok(c) => (
            c.iter()
                .map(|((t, p), off)| {
                    let end = ends.get(&(t.clone(), *p)).copied();
                    PartitionLag {
                        topic: t.clone(),
                        partition: *p,
                        committed: *off,
                        end,
                        lag: lag(*off, end),
                    }
                })
                .collect::<Vec<_>>(),
            None,
        ),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    GroupView {
        group: listed.group.clone(),
        state: listed.state.clone(),
        protocol_type: listed.protocol_type.clone(),
        coordinator: listed.coordinator,
        total_lag: partitions.iter().filter_map(|p| p.lag).sum(),
        error,
        partitions,
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// The groups one broker coordinates.
async fn list_groups(conn: &mut KafkaConn, broker: i32) -> Result<Vec<Listed>, String> {
    let r = conn
        .call(&ListGroupsRequest::default(), LIST_GROUPS)
        .await
        .map_err(|e| e.to_string())?;
    check(r.error_code, None, "ListGroups").map_err(|e| e.to_string())?;
    Ok(r.groups
        .iter()
        .map(|g| Listed {
            group: g.group_id.0.to_string(),
            state: g.group_state.to_string(),
            protocol_type: g.protocol_type.to_string(),
            coordinator: broker,
        })
        .collect())
}

/// Every offset `group` committed.
async fn committed(conn: &mut KafkaConn, group: &str) -> Result<Committed, String> {
    let mut req = OffsetFetchRequest::default();
    req.group_id = GroupId(s(group));
    // No topics: every partition the group committed.
    req.topics = None;
    let r = conn.call(&req, OFFSET_FETCH).await.map_err(|e| e.to_string())?;
    check(r.error_code, None, &format!("offsets of group {group}")).map_err(|e| e.to_string())?;
    let mut out = BTreeMap::new();
    for t in &r.topics {
        for p in t.partitions.iter().filter(|p| p.error_code == 0) {
            out.insert((t.name.0.to_string(), p.partition_index), p.committed_offset);
        }
    }
    Ok(out)
}

/// The log end offsets of `partitions`, asked of one leader.
async fn end_offsets(addr: &str, partitions: &[(String, i32)]) -> Result<Vec<((String, i32), i64)>, String> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions {
        by_topic.entry(t).or_default().push(*p);
    }
    let mut req = ListOffsetsRequest::default();
    req.replica_id = BrokerId(-1);
    req.topics = by_topic
        .into_iter()
        .map(|(t, ps)| {
            let mut topic = ListOffsetsTopic::default();
            topic.name = TopicName(s(t));
            topic.partitions = ps
                .into_iter()
                .map(|p| {
                    let mut x = ListOffsetsPartition::default();
                    x.partition_index = p;
                    x.current_leader_epoch = -1;
                    // Kafka's "latest": the high watermark.
                    x.timestamp = -1;
                    x
                })
                .collect();
            topic
        })
        .collect();
    let mut conn = KafkaConn::connect(addr).await.map_err(|e| e.to_string())?;
    let r = conn.call(&req, LIST_OFFSETS).await.map_err(|e| e.to_string())?;
    Ok(r.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| p.error_code == 0)
                .map(move |p| ((t.name.0.to_string(), p.partition_index), p.offset))
        })
        .collect())
}

/// Gathers the groups page from every broker's Kafka listener; `leaders` names each
/// partition's leader (from DescribeTopics).
pub async fn gather(brokers: &[BrokerRegistration], leaders: &BTreeMap<(String, u32), i32>) -> GroupsView {
    let mut view = GroupsView::default();
    let mut found: Vec<(Listed, Result<Committed, String>)> = Vec::new();
    let mut sorted: Vec<&BrokerRegistration> = brokers.iter().filter(|b| !plain_endpoint(b).is_empty()).collect();
    sorted.sort_by_key(|b| b.id);
    for b in sorted {
        let mut conn = match KafkaConn::connect(plain_endpoint(b)).await {
            Ok(c) => c,
            Err(e) => {
                view.errors.push(format!("broker {}: {e}", b.id));
                continue;
            }
        };
        let listed = match list_groups(&mut conn, b.id).await {
            Ok(l) => l,
            Err(e) => {
                view.errors.push(format!("broker {}: {e}", b.id));
                continue;
            }
        };
        for g in listed {
            if found.len() >= MAX_GROUPS {
                view.truncated = true;
                break;
            }
            let c = committed(&mut conn, &g.group).await;
            found.push((g, c));
        }
    }
    // One ListOffsets per leader, for every partition any group committed.
    let mut by_leader: BTreeMap<i32, BTreeSet<(String, i32)>> = BTreeMap::new();
    for (t, p) in found.iter().filter_map(|(_, c)| c.as_ref().ok()).flat_map(|c| c.keys()) {
        let leader = u32::try_from(*p)
            .ok()
            .and_then(|p32| leaders.get(&(t.clone(), p32)))
            .copied()
            .unwrap_or(-1);
        by_leader.entry(leader).or_default().insert((t.clone(), *p));
    }
    let mut ends = HashMap::new();
    for (leader, parts) in by_leader {
        let Some(addr) = brokers
            .iter()
            .find(|b| b.id == leader && !plain_endpoint(b).is_empty())
            .map(|b| plain_endpoint(b).to_string())
        else {
            continue;
        };
        let parts: Vec<(String, i32)> = parts.into_iter().collect();
        match end_offsets(&addr, &parts).await {
            Ok(e) => ends.extend(e),
            Err(e) => view.errors.push(format!("broker {leader}: {e}")),
        }
    }
    view.groups = found
        .iter()
        .map(|(g, c)| group_view(g, c.as_ref().map_err(String::as_str), &ends))
        .collect();
    view.groups.sort_by(|a, b| a.group.cmp(&b.group));
    view
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_end_minus_committed_and_unknown_without_either() {
        assert_eq!(lag(40, Some(100)), Some(60));
        assert_eq!(lag(100, Some(100)), Some(0));
        // A committed offset past the end (the log was truncated) lags by nothing.
        assert_eq!(lag(120, Some(100)), Some(0));
        assert_eq!(lag(-1, Some(100)), None);
        assert_eq!(lag(5, None), None);
    }

    #[test]
    fn a_group_sums_the_lag_of_its_known_partitions() {
        let listed = Listed {
            group: "g".into(),
            state: "Empty".into(),
            protocol_type: "consumer".into(),
            coordinator: 2,
        };
        let committed = BTreeMap::from([
            (("t".to_string(), 0), 30),
            (("t".to_string(), 1), 10),
            (("u".to_string(), 0), 5),
        ]);
        let ends = HashMap::from([(("t".to_string(), 0), 100), (("t".to_string(), 1), 10)]);
        let v = group_view(&listed, Ok(&committed), &ends);
        assert_eq!(v.total_lag, 70);
        assert_eq!(v.coordinator, 2);
        assert_eq!(v.partitions.len(), 3);
        assert_eq!(v.partitions[0].lag, Some(70));
        assert_eq!(v.partitions[1].lag, Some(0));
        assert_eq!(v.partitions[2].end, None);
        assert_eq!(v.partitions[2].lag, None);
        let failed = group_view(&listed, Err("COORDINATOR_LOAD_IN_PROGRESS"), &ends);
        assert_eq!(failed.error.as_deref(), Some("COORDINATOR_LOAD_IN_PROGRESS"));
        assert!(failed.partitions.is_empty());
        assert_eq!(failed.total_lag, 0);
    }
}
