//! DescribeQuorum (`kafka-metadata-quorum describe`): Ferry's metadata quorum is the Raft
//! quorum of the metastore, so the answer is the metastore leader's view of it
//! ([`metastore::quorum`]), under Kafka's name for the metadata log, `__cluster_metadata`
//! partition 0. Voters are named by their Raft node ids, which are their broker ids. Observers
//! are Raft learners; broker-only nodes do not copy the Raft log, so they are not listed.

use kafka_protocol::messages::describe_quorum_response::{Listener, Node, PartitionData, ReplicaState, TopicData};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use proto::errors::ErrorCode;
use proto::metastore as pb;

use super::apis::wire;

/// Kafka's name for the metadata log.
pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// The listener name the voters' quorum addresses are given under (they speak Ferry's gRPC,
/// not Kafka's protocol).
pub const QUORUM_LISTENER: &str = "RAFT";

/// Whether the request names exactly `__cluster_metadata` partition 0, as Kafka's Raft client
/// requires.
fn names_the_metadata_log(req: &DescribeQuorumRequest) -> bool {
    matches!(req.topics.as_slice(), [t] if t.topic_name.0.as_str() == METADATA_TOPIC
        && matches!(t.partitions.as_slice(), [p] if p.partition_index == 0))
}

/// Every partition the request names, each with `code` and `message` (Kafka's
/// `getPartitionLevelErrorResponse`).
fn refuse_each(req: &DescribeQuorumRequest, code: ErrorCode, message: &str) -> DescribeQuorumResponse {
    let mut r = DescribeQuorumResponse::default();
    r.topics = req
        .topics
        .iter()
        .map(|t| {
            let mut td = TopicData::default();
            td.topic_name = t.topic_name.clone();
            td.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut pd = PartitionData::default();
                    pd.partition_index = p.partition_index;
                    pd.error_code = wire(code);
                    pd.error_message = Some(StrBytes::from_string(format!(
                        "{}-{}: {message}",
                        t.topic_name.0, p.partition_index
                    )));
                    pd
                })
                .collect();
            td
        })
        .collect();
    r
}

/// One replica as Kafka lists it: ids fit Kafka's int32 (Ferry's node ids are broker ids).
fn replica(r: &pb::QuorumReplica) -> ReplicaState {
    let mut s = ReplicaState::default();
    s.replica_id = BrokerId(i32::try_from(r.id).unwrap_or(-1));
    s.log_end_offset = i64::try_from(r.log_end_offset).unwrap_or(i64::MAX);
    s.last_fetch_timestamp = r.last_fetch_ms;
    s.last_caught_up_timestamp = r.last_caught_up_ms;
    s
}

/// A member's quorum address as a Kafka node with one listener, if it parses as HOST:PORT.
fn node(r: &pb::QuorumReplica) -> Option<Node> {
    let (host, port) = r.addr.rsplit_once(':')?;
    let mut l = Listener::default();
    l.name = StrBytes::from_static_str(QUORUM_LISTENER);
    l.host = StrBytes::from_string(host.trim_matches(|c| c == '[' || c == ']').to_string());
    l.port = port.parse().ok()?;
    let mut n = Node::default();
    n.node_id = BrokerId(i32::try_from(r.id).ok()?);
    n.listeners = vec![l];
    Some(n)
}

/// The DescribeQuorum answer to `req` from the quorum leader's view (`Err`: why it could not be
/// had, answered as NOT_LEADER_OR_FOLLOWER on the partition, which Kafka's clients retry).
pub fn describe_quorum(
    req: &DescribeQuorumRequest,
    quorum: Result<&pb::QuorumResponse, &str>,
) -> DescribeQuorumResponse {
    if !names_the_metadata_log(req) {
        return refuse_each(
            req,
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            &format!("only {METADATA_TOPIC}-0 is described"),
        );
    }
    let q = match quorum {
        Ok(q) => q,
        Err(why) => {
            return refuse_each(
                req,
                ErrorCode::NOT_LEADER_OR_FOLLOWER,
                &format!("the quorum leader is not reachable: {why}"),
            )
        }
    };
    let mut p = PartitionData::default();
    p.partition_index = 0;
    p.leader_id = BrokerId(i32::try_from(q.leader_id).unwrap_or(-1));
    p.leader_epoch = i32::try_from(q.term).unwrap_or(i32::MAX);
    p.high_watermark = i64::try_from(q.high_watermark).unwrap_or(i64::MAX);
    p.current_voters = q.voters.iter().map(replica).collect();
    p.observers = q.observers.iter().map(replica).collect();
    let mut t = TopicData::default();
    t.topic_name = TopicName(StrBytes::from_static_str(METADATA_TOPIC));
    t.partitions = vec![p];
    let mut r = DescribeQuorumResponse::default();
    r.topics = vec![t];
    r.nodes = q.voters.iter().chain(&q.observers).filter_map(node).collect();
    r
}

/// Answers `req` with the quorum leader's view, asked of the metastore.
pub async fn describe(metastore: &metastore::Client, req: &DescribeQuorumRequest) -> DescribeQuorumResponse {
    match metastore.quorum().await {
        Ok(q) => describe_quorum(req, Ok(&q)),
        Err(e) => describe_quorum(req, Err(&e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::describe_quorum_request::{PartitionData as ReqPartition, TopicData as ReqTopic};

    fn request(topic: &str, partitions: &[i32]) -> DescribeQuorumRequest {
        let mut t = ReqTopic::default();
        t.topic_name = TopicName(StrBytes::from_string(topic.to_string()));
        t.partitions = partitions
            .iter()
            .map(|p| {
                let mut d = ReqPartition::default();
                d.partition_index = *p;
                d
            })
            .collect();
        let mut r = DescribeQuorumRequest::default();
        r.topics = vec![t];
        r
    }

    fn member(id: u64, end: u64, fetch: i64) -> pb::QuorumReplica {
        pb::QuorumReplica {
            id,
            addr: format!("127.0.0.1:{}", 7000 + id),
            log_end_offset: end,
            last_fetch_ms: fetch,
            last_caught_up_ms: fetch - 1,
        }
    }

    fn quorum() -> pb::QuorumResponse {
        pb::QuorumResponse {
            header: None,
            leader_id: 2,
            term: 7,
            high_watermark: 40,
            voters: vec![member(1, 40, 900), member(2, 41, 1_000), member(3, 12, -1)],
            observers: vec![member(4, 0, -1)],
        }
    }

    #[test]
    fn the_metadata_log_is_described_with_the_leaders_term_watermark_and_members() {
        let r = describe_quorum(&request(METADATA_TOPIC, &[0]), Ok(&quorum()));
        assert_eq!(r.topics.len(), 1);
        assert_eq!(r.topics[0].topic_name.0.as_str(), METADATA_TOPIC);
        let p = &r.topics[0].partitions[0];
        assert_eq!(
            (p.error_code, p.leader_id.0, p.leader_epoch, p.high_watermark),
            (0, 2, 7, 40)
        );
        let voters: Vec<(i32, i64, i64)> = p
            .current_voters
            .iter()
            .map(|v| (v.replica_id.0, v.log_end_offset, v.last_fetch_timestamp))
            .collect();
        assert_eq!(voters, vec![(1, 40, 900), (2, 41, 1_000), (3, 12, -1)]);
        assert_eq!(p.current_voters[0].last_caught_up_timestamp, 899);
        assert_eq!(p.observers.len(), 1);
        assert_eq!(p.observers[0].replica_id.0, 4);
        // Every member's quorum address, under the Raft listener.
        assert_eq!(r.nodes.len(), 4);
        let n = &r.nodes[1];
        assert_eq!((n.node_id.0, n.listeners[0].port), (2, 7002));
        assert_eq!(n.listeners[0].name.as_str(), QUORUM_LISTENER);
        assert_eq!(n.listeners[0].host.as_str(), "127.0.0.1");
    }

    #[test]
    fn another_topic_or_partition_is_refused_by_name() {
        for req in [
            request("t", &[0]),
            request(METADATA_TOPIC, &[1]),
            request(METADATA_TOPIC, &[0, 1]),
        ] {
            let r = describe_quorum(&req, Ok(&quorum()));
            let ps = &r.topics[0].partitions;
            assert_eq!(ps.len(), req.topics[0].partitions.len());
            for p in ps {
                assert_eq!(p.error_code, wire(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION));
                let msg = p.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default();
                assert!(
                    msg.starts_with(&format!("{}-{}", req.topics[0].topic_name.0, p.partition_index)),
                    "{msg}"
                );
            }
            assert!(r.nodes.is_empty());
        }
    }

    #[test]
    fn an_unreachable_quorum_answers_not_leader_with_the_reason() {
        let r = describe_quorum(&request(METADATA_TOPIC, &[0]), Err("no leader elected"));
        let p = &r.topics[0].partitions[0];
        assert_eq!(p.error_code, wire(ErrorCode::NOT_LEADER_OR_FOLLOWER));
        assert!(p.error_message.as_ref().unwrap().contains("no leader elected"));
    }
}
