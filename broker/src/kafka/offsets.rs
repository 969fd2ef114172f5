//! The offset APIs of the Kafka listener: OffsetCommit, OffsetFetch (one group before v8, many
//! from v8) and OffsetDelete, over the group coordinator.

use std::collections::BTreeSet;

use bytes::Bytes;
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    ConsumerProtocolSubscription, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use proto::errors::ErrorCode;

use super::apis::wire;
use super::groups::{on_shard, Groups};
use crate::coordinator::group::Out;
use crate::coordinator::records::OffsetValue;
use crate::coordinator::shard::{CommitItem, Committer};

/// Answers OffsetCommit: a code per partition, sent once the offsets are replicated.
pub async fn offset_commit(groups: &Groups, req: OffsetCommitRequest) -> OffsetCommitResponse {
    let group = req.group_id.0.to_string();
    let items: Vec<CommitItem> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| CommitItem {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
            })
        })
        .collect();
    let who = Committer {
        member_id: req.member_id.to_string(),
        instance_id: req.group_instance_id.as_ref().map(|i| i.to_string()),
        generation: req.generation_id_or_member_epoch,
    };
    let codes = on_shard(&groups.runtime, &group, |st, now| {
        st.shard.commit(&group, now, &who, &items)
    })
    .await
    .unwrap_or_else(|code| vec![code; items.len()]);
    let mut codes = codes.into_iter();
    let mut r = OffsetCommitResponse::default();
    r.topics = req
        .topics
        .into_iter()
        .map(|t| {
            let mut out = OffsetCommitResponseTopic::default();
            out.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut o = OffsetCommitResponsePartition::default();
                    o.partition_index = p.partition_index;
                    o.error_code = wire(codes.next().unwrap_or(ErrorCode::NONE));
                    o
                })
                .collect();
            out.name = t.name;
            out
        })
        .collect();
    r
}

/// One group's committed offsets: of the partitions named, or all.
type Fetched = Result<Vec<((String, i32), Option<OffsetValue>)>, ErrorCode>;

async fn fetch_group(groups: &Groups, group: &str, wanted: Option<Vec<(String, i32)>>) -> Fetched {
    on_shard(&groups.runtime, group, |st, _| {
        (st.shard.fetch(group, wanted.as_deref()), Out::default())
    })
    .await
}

/// `(offset, epoch, metadata)` of a partition, -1 when nothing is committed.
fn committed(v: &Option<OffsetValue>) -> (i64, i32, String) {
    match v {
        Some(v) => (v.offset, v.leader_epoch, v.metadata.clone()),
        None => (-1, -1, String::new()),
    }
}

/// A partition and its committed offset, if any.
type PartitionOffset = (i32, Option<OffsetValue>);

/// Groups fetched partitions by topic, in order of first appearance.
fn by_topic(parts: Vec<((String, i32), Option<OffsetValue>)>) -> Vec<(String, Vec<PartitionOffset>)> {
    let mut out: Vec<(String, Vec<PartitionOffset>)> = Vec::new();
    for ((topic, p), v) in parts {
        match out.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, ps)) => ps.push((p, v)),
            None => out.push((topic, vec![(p, v)])),
        }
    }
    out
}

/// Answers OffsetFetch.
pub async fn offset_fetch(groups: &Groups, req: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    let mut r = OffsetFetchResponse::default();
    if version < 8 {
        let wanted = req.topics.as_ref().map(|ts| {
            ts.iter()
                .flat_map(|t| t.partition_indexes.iter().map(move |p| (t.name.0.to_string(), *p)))
                .collect()
        });
        match fetch_group(groups, &req.group_id.0, wanted).await {
            Ok(parts) => {
                r.topics = by_topic(parts)
                    .into_iter()
                    .map(|(topic, ps)| {
                        let mut t = OffsetFetchResponseTopic::default();
                        t.name = TopicName(StrBytes::from_string(topic));
                        t.partitions = ps
                            .into_iter()
                            .map(|(p, v)| {
                                let (offset, epoch, metadata) = committed(&v);
                                let mut o = OffsetFetchResponsePartition::default();
                                o.partition_index = p;
                                o.committed_offset = offset;
                                if version >= 5 {
                                    o.committed_leader_epoch = epoch;
                                }
                                o.metadata = Some(StrBytes::from_string(metadata));
                                o
                            })
                            .collect();
                        t
                    })
                    .collect();
            }
            Err(code) => {
                if version >= 2 {
                    r.error_code = wire(code);
                }
            }
        }
        return r;
    }
    for g in req.groups {
        let wanted = g.topics.as_ref().map(|ts| {
            ts.iter()
                .flat_map(|t| t.partition_indexes.iter().map(move |p| (t.name.0.to_string(), *p)))
                .collect()
        });
        let mut out = OffsetFetchResponseGroup::default();
        match fetch_group(groups, &g.group_id.0, wanted).await {
            Ok(parts) => {
                out.topics = by_topic(parts)
                    .into_iter()
                    .map(|(topic, ps)| {
                        let mut t = OffsetFetchResponseTopics::default();
                        t.name = TopicName(StrBytes::from_string(topic));
                        t.partitions = ps
                            .into_iter()
                            .map(|(p, v)| {
                                let (offset, epoch, metadata) = committed(&v);
                                let mut o = OffsetFetchResponsePartitions::default();
                                o.partition_index = p;
                                o.committed_offset = offset;
                                o.committed_leader_epoch = epoch;
                                o.metadata = Some(StrBytes::from_string(metadata));
                                o
                            })
                            .collect();
                        t
                    })
                    .collect();
            }
            Err(code) => out.error_code = wire(code),
        }
        out.group_id = g.group_id;
        r.groups.push(out);
    }
    r
}

/// The topics a consumer group's members subscribe to, from their consumer-protocol metadata
/// (a version, then `ConsumerProtocolSubscription`); unreadable metadata subscribes to nothing.
pub fn subscribed_topics<'a>(metadata: impl Iterator<Item = &'a [u8]>) -> BTreeSet<String> {
    let mut topics = BTreeSet::new();
    for m in metadata {
        if m.len() < 2 {
            continue;
        }
        // Newer versions than the crate knows are read as its newest: later fields are tagged.
        let version = i16::from_be_bytes([m[0], m[1]]).clamp(0, 3);
        let mut buf = Bytes::copy_from_slice(&m[2..]);
        if let Ok(sub) = ConsumerProtocolSubscription::decode(&mut buf, version) {
            topics.extend(sub.topics.iter().map(|t| t.to_string()));
        }
    }
    topics
}

/// Answers OffsetDelete: offsets of topics the group's members consume stay.
pub async fn offset_delete(groups: &Groups, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let group = req.group_id.0.to_string();
    let parts: Vec<(String, i32)> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.to_string(), p.partition_index))
        })
        .collect();
    let result = on_shard(&groups.runtime, &group, |st, _| {
        let subscribed = match st.shard.describe(&group) {
            Some(d) if d.protocol_type == "consumer" => {
                subscribed_topics(d.members.iter().map(|m| m.metadata.as_slice()))
            }
            _ => BTreeSet::new(),
        };
        match st.shard.delete_offsets(&group, &parts, &subscribed) {
            Ok((codes, out)) => (Ok(codes), out),
            Err(code) => (Err(code), Out::default()),
        }
    })
    .await;
    let mut r = OffsetDeleteResponse::default();
    let codes = match result {
        Ok(Ok(codes)) => codes,
        Ok(Err(code)) | Err(code) => {
            r.error_code = wire(code);
            return r;
        }
    };
    let mut codes = codes.into_iter();
    r.topics = req
        .topics
        .into_iter()
        .map(|t| {
            let mut out = OffsetDeleteResponseTopic::default();
            out.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut o = OffsetDeleteResponsePartition::default();
                    o.partition_index = p.partition_index;
                    o.error_code = wire(codes.next().unwrap_or(ErrorCode::NONE));
                    o
                })
                .collect();
            out.name = t.name;
            out
        })
        .collect();
    r
}
