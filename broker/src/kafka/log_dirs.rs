//! DescribeLogDirs and AlterReplicaLogDirs, answered by this broker about its own dirs, as a
//! Kafka broker answers them (the same code as the gRPC calls, `crate::log_dir_requests`).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use proto::errors::ErrorCode;
use proto::ferry as pb;

use super::apis::wire;
use crate::replica_manager::BrokerCore;

/// DescribeLogDirs: every dir with the replicas of the topics asked for (all when null).
pub async fn describe_log_dirs(
    core: &Arc<BrokerCore>,
    req: DescribeLogDirsRequest,
    version: i16,
) -> DescribeLogDirsResponse {
    let wanted: Option<Vec<(String, Vec<i32>)>> = req
        .topics
        .map(|ts| ts.into_iter().map(|t| (t.topic.0.to_string(), t.partitions)).collect());
    let topics: Vec<String> = wanted.iter().flatten().map(|(t, _)| t.clone()).collect();
    let core2 = core.clone();
    // Sizing replicas reads the file system: off the async workers.
    let answer = tokio::task::spawn_blocking(move || crate::log_dir_requests::describe(&core2, &topics)).await;
    let mut resp = DescribeLogDirsResponse::default();
    let Ok(answer) = answer else {
        resp.error_code = wire(ErrorCode::KAFKA_STORAGE_ERROR);
        return resp;
    };
    resp.results = answer
        .dirs
        .into_iter()
        .map(|d| {
            let mut by_topic: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
            for r in d.replicas {
                let asked = wanted.as_ref().is_none_or(|w| {
                    w.iter()
                        .any(|(t, ps)| *t == r.topic && ps.contains(&(r.partition as i32)))
                });
                if !asked {
                    continue;
                }
                let mut p = DescribeLogDirsPartition::default();
                p.partition_index = r.partition as i32;
                p.partition_size = r.size as i64;
                p.offset_lag = r.offset_lag;
                p.is_future_key = r.is_future;
                by_topic.entry(r.topic).or_default().push(p);
            }
            let mut out = DescribeLogDirsResult::default();
            out.error_code = wire(ErrorCode(d.error_code));
            out.log_dir = StrBytes::from_string(d.path);
            if version >= 4 {
                out.total_bytes = d.total_bytes as i64;
                out.usable_bytes = d.usable_bytes as i64;
            }
            out.topics = by_topic
                .into_iter()
                .map(|(t, partitions)| {
                    let mut o = DescribeLogDirsTopic::default();
                    o.name = TopicName(StrBytes::from_string(t));
                    o.partitions = partitions;
                    o
                })
                .collect();
            out
        })
        .collect();
    resp
}

/// AlterReplicaLogDirs: moves each named replica into the dir named for it.
pub async fn alter_replica_log_dirs(
    core: &Arc<BrokerCore>,
    req: AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    let mut moves = Vec::new();
    let mut asked: Vec<(String, i32)> = Vec::new();
    for d in &req.dirs {
        for t in &d.topics {
            for p in &t.partitions {
                asked.push((t.name.0.to_string(), *p));
                if let Ok(partition) = u32::try_from(*p) {
                    moves.push(pb::ReplicaLogDirMove {
                        topic: t.name.0.to_string(),
                        partition,
                        dir: d.path.to_string(),
                    });
                }
            }
        }
    }
    let core2 = core.clone();
    // Starting a move creates folders and files: off the async workers.
    let answer = tokio::task::spawn_blocking(move || crate::log_dir_requests::alter(&core2, &moves)).await;
    let mut by_topic: BTreeMap<String, Vec<AlterReplicaLogDirPartitionResult>> = BTreeMap::new();
    for (topic, p) in asked {
        let code = match &answer {
            Err(_) => wire(ErrorCode::KAFKA_STORAGE_ERROR),
            Ok(_) if p < 0 => wire(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
            Ok(a) => a
                .results
                .iter()
                .find(|r| r.topic == topic && i64::from(r.partition) == i64::from(p))
                .map_or(wire(ErrorCode(a.error_code)), |r| wire(ErrorCode(r.error_code))),
        };
        let mut o = AlterReplicaLogDirPartitionResult::default();
        o.partition_index = p;
        o.error_code = code;
        by_topic.entry(topic).or_default().push(o);
    }
    let mut resp = AlterReplicaLogDirsResponse::default();
    resp.results = by_topic
        .into_iter()
        .map(|(t, partitions)| {
            let mut o = AlterReplicaLogDirTopicResult::default();
            o.topic_name = TopicName(StrBytes::from_string(t));
            o.partitions = partitions;
            o
        })
        .collect();
    resp
}
