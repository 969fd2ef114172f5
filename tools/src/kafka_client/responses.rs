//! The shapes of the answers this client reads, at the versions it asks for, for the broker's
//! `walk` (which the broker runs over requests): taken from Kafka's message specs.

use broker::kafka::walk::{Field, I16, I32, I64, UUID};
use kafka_protocol::messages::ApiKey;

/// FindCoordinator's version asked.
pub const FIND_COORDINATOR: i16 = 4;
/// ConsumerGroupHeartbeat's version asked (v0: the coordinator names a joining member).
pub const CONSUMER_GROUP_HEARTBEAT: i16 = 0;
/// OffsetCommit's version asked (v9 takes a KIP-848 member's epoch).
pub const OFFSET_COMMIT: i16 = 9;
/// OffsetFetch's version asked (v7: one group, flexible).
pub const OFFSET_FETCH: i16 = 7;
/// ListGroups' version asked (v4 answers each group's state).
pub const LIST_GROUPS: i16 = 4;
/// ListOffsets' version asked (v7: flexible, with the leader epoch).
pub const LIST_OFFSETS: i16 = 7;

fn arr(fields: Vec<Field>) -> Field {
    Field::Array(fields)
}

/// The body schema of `api`'s answer at `version`, and whether that version is flexible;
/// `None` for an answer this client never asks for.
pub fn schema(api: ApiKey, version: i16) -> Option<(Vec<Field>, bool)> {
    let fields = match (api, version) {
        (ApiKey::FindCoordinator, FIND_COORDINATOR) => {
            vec![I32, arr(vec![Field::Str, I32, Field::Str, I32, I16, Field::Str])]
        }
        (ApiKey::ConsumerGroupHeartbeat, CONSUMER_GROUP_HEARTBEAT) => vec![
            I32,
            I16,
            Field::Str,
            Field::Str,
            I32,
            I32,
            Field::Nullable(vec![arr(vec![UUID, Field::Ints(4)])]),
        ],
        (ApiKey::OffsetCommit, OFFSET_COMMIT) => vec![I32, arr(vec![Field::Str, arr(vec![I32, I16])])],
        (ApiKey::OffsetFetch, OFFSET_FETCH) => vec![
            I32,
            arr(vec![Field::Str, arr(vec![I32, I64, I32, Field::Str, I16])]),
            I16,
        ],
        (ApiKey::ListGroups, LIST_GROUPS) => vec![I32, I16, arr(vec![Field::Str, Field::Str, Field::Str])],
        (ApiKey::ListOffsets, LIST_OFFSETS) => vec![I32, arr(vec![Field::Str, arr(vec![I32, I16, I64, I64, I32])])],
        _ => return None,
    };
    // Every version asked for is flexible.
    Some((fields, true))
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
    use kafka_protocol::messages::find_coordinator_response::Coordinator;
    use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
    use kafka_protocol::messages::offset_fetch_response::{OffsetFetchResponsePartition, OffsetFetchResponseTopic};
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    use super::*;

    /// Walks `m` encoded at `v` with its schema, whole and cut short by one byte.
    fn walks<M: Encodable>(m: &M, api: ApiKey, v: i16) {
        let mut b = BytesMut::new();
        m.encode(&mut b, v).unwrap();
        let (s, flexible) = schema(api, v).unwrap();
        broker::kafka::walk::walk(&b, &s, flexible).unwrap_or_else(|e| panic!("{api:?} v{v}: {e}"));
        assert!(
            broker::kafka::walk::walk(&b[..b.len() - 1], &s, flexible).is_err(),
            "{api:?} v{v} cut short"
        );
    }

    fn s(v: &str) -> StrBytes {
        StrBytes::from_string(v.to_string())
    }

    #[test]
    fn every_answer_asked_for_walks_clean_with_its_schema() {
        let mut c = Coordinator::default();
        c.key = s("g");
        c.host = s("localhost");
        c.error_message = Some(s("none"));
        let mut fc = FindCoordinatorResponse::default();
        fc.coordinators = vec![c.clone(), c];
        walks(&fc, ApiKey::FindCoordinator, FIND_COORDINATOR);

        let mut tp = TopicPartitions::default();
        tp.topic_id = uuid::Uuid::new_v4();
        tp.partitions = vec![0, 3];
        let mut a = Assignment::default();
        a.topic_partitions = vec![tp.clone(), tp];
        let mut hb = ConsumerGroupHeartbeatResponse::default();
        hb.member_id = Some(s("m"));
        walks(&hb, ApiKey::ConsumerGroupHeartbeat, CONSUMER_GROUP_HEARTBEAT);
        hb.assignment = Some(a);
        walks(&hb, ApiKey::ConsumerGroupHeartbeat, CONSUMER_GROUP_HEARTBEAT);

        let mut ct = OffsetCommitResponseTopic::default();
        ct.name = TopicName(s("t"));
        ct.partitions = vec![OffsetCommitResponsePartition::default(); 2];
        let mut oc = OffsetCommitResponse::default();
        oc.topics = vec![ct];
        walks(&oc, ApiKey::OffsetCommit, OFFSET_COMMIT);

        let mut fp = OffsetFetchResponsePartition::default();
        fp.metadata = Some(s("meta"));
        let mut ft = OffsetFetchResponseTopic::default();
        ft.name = TopicName(s("t"));
        ft.partitions = vec![fp.clone(), fp];
        let mut of = OffsetFetchResponse::default();
        of.topics = vec![ft];
        walks(&of, ApiKey::OffsetFetch, OFFSET_FETCH);

        let mut g = list_groups_response::ListedGroup::default();
        g.group_id = GroupId(s("g"));
        g.protocol_type = s("consumer");
        g.group_state = s("Stable");
        let mut lg = ListGroupsResponse::default();
        lg.groups = vec![g.clone(), g];
        walks(&lg, ApiKey::ListGroups, LIST_GROUPS);

        let mut lt = list_offsets_response::ListOffsetsTopicResponse::default();
        lt.name = TopicName(s("t"));
        lt.partitions = vec![list_offsets_response::ListOffsetsPartitionResponse::default(); 2];
        let mut lo = ListOffsetsResponse::default();
        lo.topics = vec![lt];
        walks(&lo, ApiKey::ListOffsets, LIST_OFFSETS);
    }

    #[test]
    fn an_answer_at_a_version_not_asked_for_has_no_schema() {
        assert!(schema(ApiKey::ListGroups, 3).is_none());
        assert!(schema(ApiKey::Fetch, 12).is_none());
    }
}
