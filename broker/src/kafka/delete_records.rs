//! DeleteRecords (Kafka's API key 21, `kafka-delete-records` and the admin client's
//! `deleteRecords`): the leader moves its log start offset up to the offset asked (-1: the high
//! watermark), never past the high watermark, and answers the new start as the low watermark.
//! The answer comes once the leader's start is durable (its dir's `log-start-offset-checkpoint`
//! written and synced), not once every follower's has followed: followers take the leader's
//! start from their next fetch answer. The segments wholly below it go with the next retention
//! pass (`crate::retention`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use kafka_protocol::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use proto::errors::ErrorCode;

use super::apis::wire;
use crate::replica::ReplicaError;
use crate::replica_manager::BrokerCore;

/// The offset that means "the high watermark".
const HIGH_WATERMARK: i64 = -1;

/// The log start a request for `offset` sets, given the high watermark: -1 stands for it, and
/// nothing past it (or below 0) is accepted.
pub fn target(offset: i64, high_watermark: i64) -> Result<i64, ReplicaError> {
    let t = if offset == HIGH_WATERMARK {
        high_watermark
    } else {
        offset
    };
    if t < 0 || t > high_watermark {
        return Err(ReplicaError::new(
            ErrorCode::OFFSET_OUT_OF_RANGE,
            format!("offset {offset} is not between 0 and the high watermark {high_watermark}"),
        ));
    }
    Ok(t)
}

/// Moves one partition's log start; its new start and the log dir whose checkpoint holds it.
fn delete_partition(
    core: &BrokerCore,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<(i64, PathBuf), ReplicaError> {
    let p = u32::try_from(partition).map_err(|_| {
        ReplicaError::new(
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            format!("{topic}-{partition}: no such partition"),
        )
    })?;
    let r = core.replica(topic, p)?;
    r.leader_epoch()?;
    let delete = core
        .view
        .read()
        .topics
        .get(topic)
        .and_then(|t| t.config(proto::topic_config::CLEANUP_POLICY).map(String::from))
        .is_none_or(|p| p.split(',').any(|p| p.trim() == "delete"));
    if !delete {
        return Err(ReplicaError::new(
            ErrorCode::POLICY_VIOLATION,
            format!(
                "Records of partition {} can not be deleted due to the configured policy",
                r.name()
            ),
        ));
    }
    let hw = r.state().high_watermark;
    let to = target(offset, hw)?;
    let mut log = r.log();
    log.increment_log_start(to)
        .map_err(|e| crate::produce::storage_error(core, &r, e))?;
    let start = log.log_start_offset();
    let folder = log.dir().to_path_buf();
    drop(log);
    r.notify();
    let dir = core.dirs.dir_of(&folder).cloned().ok_or_else(|| {
        ReplicaError::new(
            ErrorCode::KAFKA_STORAGE_ERROR,
            format!("{}: its folder is in no log dir", r.name()),
        )
    })?;
    Ok((start, dir))
}

/// Each topic's partitions with their low watermark or error, in the request's order.
type Answers = Vec<(String, Vec<(i32, Result<i64, ReplicaError>)>)>;

/// Every partition's answer: its low watermark, or an error; the checkpoints of the dirs that
/// changed are written before any is answered.
fn delete_all(core: &BrokerCore, asked: Vec<(String, Vec<(i32, i64)>)>) -> Answers {
    let mut dirs: BTreeMap<PathBuf, Vec<(usize, usize)>> = BTreeMap::new();
    let mut out: Answers = Vec::new();
    for (ti, (topic, parts)) in asked.into_iter().enumerate() {
        let mut answers = Vec::new();
        for (pi, (p, offset)) in parts.into_iter().enumerate() {
            let result = delete_partition(core, &topic, p, offset).map(|(start, dir)| {
                dirs.entry(dir).or_default().push((ti, pi));
                start
            });
            answers.push((p, result));
        }
        out.push((topic, answers));
    }
    for (dir, members) in dirs {
        if let Err(e) = crate::dir_checkpoints::write_log_starts_now(core, &dir) {
            tracing::error!(dir = %dir.display(), error = %e, "writing the log start checkpoint");
            core.fail_dir(&dir, format!("log start checkpoint: {e}"));
            for (ti, pi) in members {
                out[ti].1[pi].1 = Err(ReplicaError::new(
                    ErrorCode::KAFKA_STORAGE_ERROR,
                    format!("the log start could not be made durable in {}: {e}", dir.display()),
                ));
            }
        }
    }
    out
}

/// Answers DeleteRecords.
pub async fn delete_records(core: &Arc<BrokerCore>, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let asked: Vec<(String, Vec<(i32, i64)>)> = req
        .topics
        .iter()
        .map(|t| {
            let parts = t.partitions.iter().map(|p| (p.partition_index, p.offset)).collect();
            (t.name.0.to_string(), parts)
        })
        .collect();
    let c = core.clone();
    // Epoch checkpoints and the dir's checkpoint are synced writes: off the async workers.
    let answered = tokio::task::spawn_blocking(move || delete_all(&c, asked)).await;
    let mut resp = DeleteRecordsResponse::default();
    resp.topics = req
        .topics
        .into_iter()
        .enumerate()
        .map(|(ti, t)| {
            let mut out = DeleteRecordsTopicResult::default();
            out.partitions = t
                .partitions
                .iter()
                .enumerate()
                .map(|(pi, p)| {
                    let mut o = DeleteRecordsPartitionResult::default();
                    o.partition_index = p.partition_index;
                    let result = match &answered {
                        Ok(a) => a[ti].1[pi].1.clone(),
                        Err(e) => Err(ReplicaError::new(ErrorCode::KAFKA_STORAGE_ERROR, e.to_string())),
                    };
                    match result {
                        Ok(low) => o.low_watermark = low,
                        Err(e) => {
                            o.low_watermark = -1;
                            o.error_code = wire(e.code);
                        }
                    }
                    o
                })
                .collect();
            out.name = t.name;
            out
        })
        .collect();
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    use bytes::BytesMut;
    use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
    use kafka_protocol::messages::{ApiKey, TopicName};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    #[test]
    fn the_walk_proves_every_version_and_refuses_a_count_that_lies() {
        let mut req = DeleteRecordsRequest::default();
        req.timeout_ms = 30_000;
        req.topics = ["a", "b"]
            .into_iter()
            .map(|name| {
                let mut t = DeleteRecordsTopic::default();
                t.name = TopicName(StrBytes::from_static_str(name));
                t.partitions = (0..3)
                    .map(|i| {
                        let mut p = DeleteRecordsPartition::default();
                        p.partition_index = i;
                        p.offset = i64::from(i) * 10 - 1;
                        p
                    })
                    .collect();
                t
            })
            .collect();
        for v in 0..=2 {
            let (fields, flexible) = crate::kafka::schemas::schema(ApiKey::DeleteRecords, v).unwrap();
            let mut b = BytesMut::new();
            req.encode(&mut b, v).unwrap();
            crate::kafka::walk::walk(&b, &fields, flexible).unwrap();
            assert_eq!(DeleteRecordsRequest::decode(&mut b.clone().freeze(), v).unwrap(), req);
            // The topic count claims far more topics than follow.
            let mut lying = b.to_vec();
            if flexible {
                lying[0] = 100;
            } else {
                lying[..4].copy_from_slice(&1_000_000i32.to_be_bytes());
            }
            assert!(crate::kafka::walk::walk(&lying, &fields, flexible).is_err(), "v{v}");
        }
    }

    #[test]
    fn the_target_is_the_offset_asked_or_the_high_watermark_and_never_past_it() {
        assert_eq!(target(5, 10).unwrap(), 5);
        assert_eq!(target(10, 10).unwrap(), 10);
        assert_eq!(target(-1, 10).unwrap(), 10, "-1 is the high watermark");
        assert_eq!(target(11, 10).unwrap_err().code, ErrorCode::OFFSET_OUT_OF_RANGE);
        assert_eq!(target(-2, 10).unwrap_err().code, ErrorCode::OFFSET_OUT_OF_RANGE);
    }
}
