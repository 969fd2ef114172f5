//! ACL checks of the per-partition record APIs beside Produce, Fetch and ListOffsets:
//! OffsetForLeaderEpoch needs DESCRIBE on each topic (a consumer's truncation check), and
//! DeleteRecords DELETE (a change, so each decision is an audit line). A refused topic is taken
//! out of the request and answers TOPIC_AUTHORIZATION_FAILED for each of its partitions.

use kafka_protocol::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use kafka_protocol::messages::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
use kafka_protocol::messages::{
    ApiKey, DeleteRecordsRequest, DeleteRecordsResponse, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
    TopicName,
};
use proto::acl::Operation;
use proto::errors::ErrorCode;

use super::apis::wire;
use super::authz::{refuse_topics, Who};

/// Topics refused, with their partitions.
pub(super) type Denied = Vec<(TopicName, Vec<i32>)>;

/// Takes the topics the principal may not describe out of an OffsetForLeaderEpoch request.
pub(super) fn offset_for_leader_epoch(who: &Who<'_>, req: &mut OffsetForLeaderEpochRequest) -> Denied {
    refuse_topics(who, Operation::Describe, None, &mut req.topics, |t| {
        (&t.topic, t.partitions.iter().map(|p| p.partition).collect())
    })
}

/// Adds the refused topics to an OffsetForLeaderEpoch answer.
pub(super) fn offset_for_leader_epoch_denied(answer: &mut OffsetForLeaderEpochResponse, denied: Denied) {
    for (topic, partitions) in denied {
        let mut t = OffsetForLeaderTopicResult::default();
        t.topic = topic;
        t.partitions = partitions
            .into_iter()
            .map(|partition| {
                let mut p = EpochEndOffset::default();
                p.partition = partition;
                p.error_code = wire(ErrorCode::TOPIC_AUTHORIZATION_FAILED);
                p.leader_epoch = -1;
                p.end_offset = -1;
                p
            })
            .collect();
        answer.topics.push(t);
    }
}

/// Takes the topics the principal may not delete records of out of a DeleteRecords request,
/// logging each decision.
pub(super) fn delete_records(who: &Who<'_>, req: &mut DeleteRecordsRequest) -> Denied {
    refuse_topics(
        who,
        Operation::Delete,
        Some(ApiKey::DeleteRecords),
        &mut req.topics,
        |t| (&t.name, t.partitions.iter().map(|p| p.partition_index).collect()),
    )
}

/// Adds the refused topics to a DeleteRecords answer.
pub(super) fn delete_records_denied(answer: &mut DeleteRecordsResponse, denied: Denied) {
    for (name, partitions) in denied {
        let mut t = DeleteRecordsTopicResult::default();
        t.name = name;
        t.partitions = partitions
            .into_iter()
            .map(|partition_index| {
                let mut p = DeleteRecordsPartitionResult::default();
                p.partition_index = partition_index;
                p.error_code = wire(ErrorCode::TOPIC_AUTHORIZATION_FAILED);
                p.low_watermark = -1;
                p
            })
            .collect();
        answer.topics.push(t);
    }
}
