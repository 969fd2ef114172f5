//! The partition admin APIs of the Kafka listener: CreatePartitions grows topics and
//! ElectLeaders moves leadership back to the preferred replica (or, unclean, to any live one).
//! Both become the Admin service's calls, with Kafka's codes per topic and partition.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, ElectLeadersRequest, ElectLeadersResponse,
};
use proto::errors::ErrorCode;
use proto::ferry as pb;

use super::admin::{call, name, results_by_topic, text};
use super::apis::wire;
use crate::controller_channels::ControllerChannels;

/// CreatePartitions: each topic's new total, with replicas for the new partitions when given.
pub async fn create_partitions(ch: &ControllerChannels, req: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let grpc = pb::CreatePartitionsRequest {
        topics: req
            .topics
            .iter()
            .map(|t| pb::PartitionCount {
                topic: t.name.0.to_string(),
                count: t.count,
                assignment: t
                    .assignments
                    .iter()
                    .flatten()
                    .map(|a| pb::Replicas {
                        brokers: a.broker_ids.iter().map(|b| b.0).collect(),
                    })
                    .collect(),
            })
            .collect(),
        validate_only: req.validate_only,
    };
    let answer = call(ch, |mut c| async move { c.create_partitions(grpc).await }).await;
    let by_topic = results_by_topic(answer.as_ref().map(|r| (&r.results, r.error_code, &r.error_message)));
    let mut resp = CreatePartitionsResponse::default();
    resp.results = req
        .topics
        .iter()
        .map(|t| {
            let mut out = CreatePartitionsTopicResult::default();
            out.name = t.name.clone();
            let (code, message) = by_topic(&t.name.0);
            out.error_code = code;
            out.error_message = text(&message);
            out
        })
        .collect();
    resp
}

/// Kafka's election types.
const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;

/// ElectLeaders: the partitions named, or every partition when none are. A partition whose
/// leader is already the one to elect answers ELECTION_NOT_NEEDED, as in Kafka.
pub async fn elect_leaders(ch: &ControllerChannels, req: ElectLeadersRequest, version: i16) -> ElectLeadersResponse {
    let mut resp = ElectLeadersResponse::default();
    match elect(ch, &req, version).await {
        Err((code, message)) => {
            resp.error_code = code;
            resp.replica_election_results = refuse_all(&req, code, &message);
        }
        Ok(results) => {
            let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
            for r in results {
                let mut p = PartitionResult::default();
                p.partition_id = r.partition as i32;
                p.error_code = wire(ErrorCode(r.error_code));
                p.error_message = text(&r.error_message);
                by_topic.entry(r.topic).or_default().push(p);
            }
            resp.replica_election_results = by_topic
                .into_iter()
                .map(|(t, partition_result)| {
                    let mut o = ReplicaElectionResult::default();
                    o.topic = name(&t);
                    o.partition_result = partition_result;
                    o
                })
                .collect();
        }
    }
    resp
}

/// The controller's per-partition results, or why the request as a whole was refused.
async fn elect(
    ch: &ControllerChannels,
    req: &ElectLeadersRequest,
    version: i16,
) -> Result<Vec<pb::PartitionResult>, (i16, String)> {
    let invalid = |why: String| (wire(ErrorCode::INVALID_REQUEST), why);
    // v0 has no election type: it is preferred.
    let unclean = match req.election_type {
        PREFERRED => false,
        UNCLEAN if version >= 1 => true,
        t => {
            return Err(invalid(format!(
                "election type {t} is unknown (0 preferred, 1 unclean)"
            )))
        }
    };
    let mut partitions = Vec::new();
    for t in req.topic_partitions.iter().flatten() {
        for p in &t.partitions {
            let partition = u32::try_from(*p)
                .map_err(|_| invalid(format!("partition {}-{p}: a partition index is negative", t.topic.0)))?;
            partitions.push(pb::TopicPartition {
                topic: t.topic.0.to_string(),
                partition,
            });
        }
    }
    let grpc = pb::ElectLeadersRequest { partitions, unclean };
    let r = call(ch, |mut c| async move { c.elect_leaders(grpc).await }).await?;
    if r.error_code != 0 {
        return Err((wire(ErrorCode(r.error_code)), r.error_message));
    }
    Ok(r.results)
}

/// Every partition named in `req` refused with the request-wide `code` and `message`, as Kafka
/// answers (v0 has no top-level error).
fn refuse_all(req: &ElectLeadersRequest, code: i16, message: &str) -> Vec<ReplicaElectionResult> {
    req.topic_partitions
        .iter()
        .flatten()
        .map(|t| {
            let mut o = ReplicaElectionResult::default();
            o.topic = t.topic.clone();
            o.partition_result = t
                .partitions
                .iter()
                .map(|p| {
                    let mut r = PartitionResult::default();
                    r.partition_id = *p;
                    r.error_code = code;
                    r.error_message = text(message);
                    r
                })
                .collect();
            o
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    use kafka_protocol::messages::create_partitions_request::{CreatePartitionsAssignment, CreatePartitionsTopic};
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    use kafka_protocol::messages::{AlterConfigsRequest, ApiKey, BrokerId};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    use super::*;
    use crate::kafka::{schemas::schema, walk::walk};

    /// Encodes `m` at every version in `versions`, walks it with the schema and decodes it back.
    fn walks_clean<M: Encodable + Decodable + PartialEq + std::fmt::Debug>(
        api: ApiKey,
        m: &M,
        versions: std::ops::RangeInclusive<i16>,
    ) {
        for v in versions {
            let mut b = BytesMut::new();
            m.encode(&mut b, v).unwrap();
            let (s, flexible) = schema(api, v).unwrap();
            walk(&b, &s, flexible).unwrap_or_else(|e| panic!("{api:?} v{v}: {e}"));
            let mut bytes = b.freeze();
            let back = M::decode(&mut bytes, v).unwrap();
            assert!(bytes.is_empty(), "{api:?} v{v}: bytes left over");
            assert_eq!(&back, m, "{api:?} v{v}");
        }
    }

    #[test]
    fn the_partition_and_config_requests_walk_clean_in_every_version_served() {
        let mut a = CreatePartitionsAssignment::default();
        a.broker_ids = vec![BrokerId(1), BrokerId(2)];
        let mut t = CreatePartitionsTopic::default();
        t.name = name("t");
        t.count = 4;
        t.assignments = Some(vec![a.clone(), a]);
        let mut grow = CreatePartitionsRequest::default();
        grow.topics = vec![t.clone(), {
            let mut u = t;
            u.assignments = None;
            u
        }];
        grow.timeout_ms = 1000;
        walks_clean(ApiKey::CreatePartitions, &grow, 0..=3);

        let mut tp = TopicPartitions::default();
        tp.topic = name("t");
        tp.partitions = vec![0, 3];
        let mut elect = ElectLeadersRequest::default();
        elect.topic_partitions = Some(vec![tp]);
        walks_clean(ApiKey::ElectLeaders, &elect, 0..=2);
        elect.election_type = UNCLEAN;
        walks_clean(ApiKey::ElectLeaders, &elect, 1..=2);
        elect.topic_partitions = None;
        walks_clean(ApiKey::ElectLeaders, &elect, 2..=2);

        let mut c = AlterableConfig::default();
        c.name = StrBytes::from_static_str("retention.ms");
        c.value = Some(StrBytes::from_static_str("1000"));
        let mut r = AlterConfigsResource::default();
        r.resource_type = 2;
        r.resource_name = StrBytes::from_static_str("t");
        r.configs = vec![c.clone(), {
            let mut d = c;
            d.value = None;
            d
        }];
        let mut alter = AlterConfigsRequest::default();
        alter.resources = vec![r];
        walks_clean(ApiKey::AlterConfigs, &alter, 0..=2);
    }

    #[test]
    fn a_request_refused_whole_gives_each_partition_the_top_level_code() {
        let mut t = TopicPartitions::default();
        t.topic = kafka_protocol::messages::TopicName(StrBytes::from_static_str("t"));
        t.partitions = vec![0, 3];
        let mut req = ElectLeadersRequest::default();
        req.topic_partitions = Some(vec![t]);
        let code = wire(ErrorCode::REQUEST_TIMED_OUT);
        let out = refuse_all(&req, code, "the controller did not answer");
        let codes: Vec<(i32, i16)> = out[0]
            .partition_result
            .iter()
            .map(|p| (p.partition_id, p.error_code))
            .collect();
        assert_eq!(codes, vec![(0, code), (3, code)]);
    }
}
