//! The answers to the Kafka APIs this broker serves, built from the metadata as plain data:
//! ApiVersions and Metadata.

use std::collections::BTreeSet;
use std::str::FromStr;

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, BrokerId, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use proto::cluster_view::ClusterView;
use proto::errors::ErrorCode;

/// An API served: the versions advertised and the oldest one decoded.
pub struct Served {
    /// The API.
    pub api: ApiKey,
    /// The oldest version advertised.
    pub advertised_min: i16,
    /// The oldest version decoded; older ones advertised are answered UNSUPPORTED_VERSION
    /// (`old_versions`).
    pub decoded_min: i16,
    /// The newest version served.
    pub max: i16,
}

const fn api(api: ApiKey, advertised_min: i16, decoded_min: i16, max: i16) -> Served {
    Served {
        api,
        advertised_min,
        decoded_min,
        max,
    }
}

/// The APIs served. Clients infer the broker's features from the ranges: librdkafka (up to
/// 2.7 at least; the Debian kcat's 2.0.2 among them) enables its `MsgVer1` feature, and with it
/// gzip and snappy, only when Produce v2 and Fetch v2 are both in range. So Produce v0–2 and
/// Fetch v0–3 (the pre-2017 message formats, which Kafka 4.x dropped, KIP-896) stay advertised
/// but are not decoded: a request at one of them gets a well-formed answer with
/// UNSUPPORTED_VERSION on each partition it names (`old_versions`). Kafka 4.x advertises
/// Produce v0–2 for the same reason (KAFKA-18659) but Fetch only from v4, and closes the
/// connection on a version it does not take; Ferry answers instead. The maxima are Kafka 3.9's
/// for the data APIs (Fetch v13 and up name topics by id).
pub const SERVED: &[Served] = &[
    api(ApiKey::Produce, 0, 3, 11),
    api(ApiKey::Fetch, 0, 4, 17),
    api(ApiKey::ListOffsets, 1, 1, 9),
    api(ApiKey::Metadata, 0, 0, 12),
    api(ApiKey::OffsetForLeaderEpoch, 2, 2, 4),
    api(ApiKey::DeleteRecords, 0, 0, 2),
    api(ApiKey::FindCoordinator, 0, 0, 4),
    api(ApiKey::JoinGroup, 0, 0, 9),
    api(ApiKey::SyncGroup, 0, 0, 5),
    api(ApiKey::Heartbeat, 0, 0, 4),
    api(ApiKey::LeaveGroup, 0, 0, 5),
    api(ApiKey::OffsetCommit, 2, 2, 9),
    api(ApiKey::OffsetFetch, 1, 1, 9),
    api(ApiKey::ListGroups, 0, 0, 5),
    api(ApiKey::DescribeGroups, 0, 0, 6),
    api(ApiKey::DeleteGroups, 0, 0, 2),
    api(ApiKey::OffsetDelete, 0, 0, 0),
    api(ApiKey::ConsumerGroupHeartbeat, 0, 0, 1),
    api(ApiKey::ConsumerGroupDescribe, 0, 0, 1),
    api(ApiKey::InitProducerId, 0, 0, 4),
    api(ApiKey::ApiVersions, 0, 0, 4),
    api(ApiKey::CreateTopics, 2, 2, 7),
    api(ApiKey::DeleteTopics, 1, 1, 5),
    api(ApiKey::AlterPartitionReassignments, 0, 0, 0),
    api(ApiKey::ListPartitionReassignments, 0, 0, 0),
    api(ApiKey::DescribeCluster, 0, 0, 1),
    api(ApiKey::DescribeConfigs, 1, 1, 4),
    api(ApiKey::IncrementalAlterConfigs, 0, 0, 1),
    api(ApiKey::AlterConfigs, 0, 0, 2),
    api(ApiKey::CreatePartitions, 0, 0, 3),
    api(ApiKey::ElectLeaders, 0, 0, 2),
    api(ApiKey::DescribeLogDirs, 1, 1, 4),
    api(ApiKey::AlterReplicaLogDirs, 1, 1, 2),
    api(ApiKey::DescribeClientQuotas, 0, 0, 1),
    api(ApiKey::AlterClientQuotas, 0, 0, 1),
    api(ApiKey::DescribeUserScramCredentials, 0, 0, 0),
    api(ApiKey::AlterUserScramCredentials, 0, 0, 0),
    api(ApiKey::SaslHandshake, 0, 0, 1),
    api(ApiKey::SaslAuthenticate, 0, 0, 2),
    api(ApiKey::CreateAcls, 1, 1, 3),
    api(ApiKey::DescribeAcls, 1, 1, 3),
    api(ApiKey::DeleteAcls, 1, 1, 3),
    api(ApiKey::DescribeQuorum, 0, 0, 2),
];

/// The README's table of Kafka's APIs: each served one with the versions it takes, then the
/// ones not served. A test keeps the README equal to it.
pub fn api_table() -> String {
    let mut out = String::from("| API | key | versions served |\n| --- | --- | --- |\n");
    let mut served: Vec<&Served> = SERVED.iter().collect();
    served.sort_by_key(|s| s.api as i16);
    for s in &served {
        out.push_str(&format!(
            "| {:?} | {} | {}–{} |\n",
            s.api, s.api as i16, s.decoded_min, s.max
        ));
    }
    let not: Vec<String> = (0..=i16::MAX)
        .take_while(|k| *k < 200)
        .filter_map(|k| ApiKey::try_from(k).ok())
        .filter(|a| !SERVED.iter().any(|s| s.api == *a))
        .map(|a| format!("{a:?} ({})", a as i16))
        .collect();
    let old: Vec<String> = served
        .iter()
        .filter(|s| s.advertised_min < s.decoded_min)
        .map(|s| format!("{:?} v{}–{}", s.api, s.advertised_min, s.decoded_min - 1))
        .collect();
    out.push_str(&format!(
        "\nAdvertised but not decoded, answered with UNSUPPORTED_VERSION on every partition named \
         (librdkafka enables gzip and snappy only when Produce v2 and Fetch v2 are in range): {}.\n",
        old.join(", ")
    ));
    out.push_str(&format!(
        "\nNot served (the connection closes, as Kafka's does for an API it does not know): {}.\n",
        not.join(", ")
    ));
    out
}

/// The features Ferry finalizes, as Kafka names them, with the levels whose behaviour it
/// matches: `metadata.version` 21 (3.9-IV0: Kafka 3.9's data API versions, which Ferry serves)
/// and `group.version` 1 (KIP-848 consumer groups served). The range each supports is the
/// level alone, as Ferry does not switch behaviour by level.
pub const FEATURES: &[(&str, i16)] = &[("metadata.version", 21), ("group.version", 1)];

/// Adds the supported and finalized features to an ApiVersions answer (tagged fields from v3).
pub fn with_features(mut r: ApiVersionsResponse) -> ApiVersionsResponse {
    use kafka_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
    r.supported_features = FEATURES
        .iter()
        .map(|(name, level)| {
            let mut f = SupportedFeatureKey::default();
            f.name = StrBytes::from_static_str(name);
            f.min_version = *level;
            f.max_version = *level;
            f
        })
        .collect();
    r.finalized_features = FEATURES
        .iter()
        .map(|(name, level)| {
            let mut f = FinalizedFeatureKey::default();
            f.name = StrBytes::from_static_str(name);
            f.min_version_level = *level;
            f.max_version_level = *level;
            f
        })
        .collect();
    r.finalized_features_epoch = 0;
    r
}

/// A refusal's code as the Kafka protocol carries it: Ferry's own codes (1000 and up) do not fit
/// and go out as UNKNOWN_SERVER_ERROR (-1); the message carries the detail where a field has room.
pub fn wire(code: ErrorCode) -> i16 {
    match i16::try_from(code.0) {
        Ok(c) if c < 1000 => c,
        _ => -1,
    }
}

/// The versions of `key` this broker serves.
pub fn served(key: i16, version: i16) -> bool {
    SERVED
        .iter()
        .any(|s| s.api as i16 == key && (s.decoded_min..=s.max).contains(&version))
}

/// Whether `version` of `key` is advertised but not decoded (answered by `old_versions`).
pub fn advertised_only(key: i16, version: i16) -> bool {
    SERVED
        .iter()
        .any(|s| s.api as i16 == key && (s.advertised_min..s.decoded_min).contains(&version))
}

/// The ApiVersions answer; `error` is UNSUPPORTED_VERSION when the request's version is not
/// served (the answer then goes out as v0, which every client reads).
pub fn api_versions(error: ErrorCode) -> ApiVersionsResponse {
    let mut r = ApiVersionsResponse::default();
    r.error_code = wire(error);
    r.api_keys = SERVED
        .iter()
        .map(|s| {
            let mut v = ApiVersion::default();
            v.api_key = s.api as i16;
            v.min_version = s.advertised_min;
            v.max_version = s.max;
            v
        })
        .collect();
    r
}

/// A broker as Kafka's answers list it.
pub(crate) struct KafkaBroker {
    /// Its id.
    pub id: BrokerId,
    /// Its advertised Kafka host.
    pub host: StrBytes,
    /// Its advertised Kafka port.
    pub port: i32,
    /// Its rack, if set.
    pub rack: Option<StrBytes>,
}

/// The registered brokers that have the Kafka listener `listener`, which Metadata and
/// DescribeCluster list, each at its endpoint on that listener.
pub(crate) fn kafka_brokers<'a>(view: &'a ClusterView, listener: &'a str) -> impl Iterator<Item = KafkaBroker> + 'a {
    view.brokers.values().filter_map(move |b| {
        let (host, port) = host_port(super::listeners::endpoint_for(b, listener)?)?;
        Some(KafkaBroker {
            id: BrokerId(b.id),
            host: StrBytes::from_string(host),
            port,
            rack: (!b.rack.is_empty()).then(|| StrBytes::from_string(b.rack.clone())),
        })
    })
}

/// A broker's Kafka address split into host and port, or `None` when it has none.
fn host_port(endpoint: &str) -> Option<(String, i32)> {
    let (host, port) = endpoint.rsplit_once(':')?;
    Some((
        host.trim_matches(|c| c == '[' || c == ']').to_string(),
        port.parse().ok()?,
    ))
}

/// The Metadata answer from `view` to a request of `version` that came in on `listener`: the
/// registered brokers with that listener, and the `topics` asked for (all when `None`). An
/// unknown topic answers UNKNOWN_TOPIC_OR_PARTITION; topics are not created by a Metadata
/// request. `controller` is the broker named as controller: any broker takes admin requests.
pub fn metadata(
    view: &ClusterView,
    topics: Option<Vec<String>>,
    controller: i32,
    (listener, version): (&str, i16),
) -> MetadataResponse {
    let mut r = MetadataResponse::default();
    r.brokers = kafka_brokers(view, listener)
        .map(|b| {
            let mut m = MetadataResponseBroker::default();
            m.node_id = b.id;
            m.host = b.host;
            m.port = b.port;
            m.rack = b.rack;
            m
        })
        .collect();
    r.controller_id = BrokerId(controller);
    let names: Vec<String> = match topics {
        Some(t) => t,
        None => view.topics.keys().cloned().collect(),
    };
    // Once per request, not per topic: a Metadata request may name every topic.
    let live = view.live_brokers();
    let listed: BTreeSet<i32> = r.brokers.iter().map(|b| b.node_id.0).collect();
    // A live leader without this listener is LISTENER_NOT_FOUND from v6 on, as in Kafka; older
    // clients get LEADER_NOT_AVAILABLE, which they know.
    let unlisted = match version >= 6 {
        true => ErrorCode::LISTENER_NOT_FOUND,
        false => ErrorCode::LEADER_NOT_AVAILABLE,
    };
    r.topics = names
        .into_iter()
        .map(|name| topic(view, (&live, &listed, unlisted), name))
        .collect();
    r
}

/// A topic's answer. A leader not among the brokers `listed` (its registration is gone and the
/// controller has not moved the leadership yet, or it lacks the listener) is answered as no
/// leader, as Kafka's metadata cache does: a client must never be sent to a broker id the same
/// answer does not list.
fn topic(
    view: &ClusterView,
    (live, listed, unlisted): (&BTreeSet<i32>, &BTreeSet<i32>, ErrorCode),
    name: String,
) -> MetadataResponseTopic {
    let mut t = MetadataResponseTopic::default();
    let entry = view
        .topics
        .get(&name)
        .filter(|e| e.record.as_ref().is_some_and(|r| !r.deleting));
    t.is_internal = name == crate::coordinator::OFFSETS_TOPIC;
    t.name = Some(TopicName(StrBytes::from_string(name)));
    let Some(entry) = entry else {
        t.error_code = wire(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
        return t;
    };
    if let Some(id) = entry
        .record
        .as_ref()
        .and_then(|r| uuid::Uuid::from_str(&r.topic_id).ok())
    {
        t.topic_id = id;
    }
    t.partitions = entry
        .partitions
        .iter()
        .map(|(p, e)| {
            let s = &e.state;
            let mut m = MetadataResponsePartition::default();
            m.partition_index = *p as i32;
            let leader = if listed.contains(&s.leader) { s.leader } else { -1 };
            m.leader_id = BrokerId(leader);
            m.leader_epoch = s.leader_epoch as i32;
            m.replica_nodes = s.replicas.iter().map(|b| BrokerId(*b)).collect();
            m.isr_nodes = s.isr.iter().map(|b| BrokerId(*b)).collect();
            m.offline_replicas = s
                .replicas
                .iter()
                .filter(|b| !live.contains(b))
                .map(|b| BrokerId(*b))
                .collect();
            if leader < 0 {
                m.error_code = wire(if live.contains(&s.leader) {
                    unlisted
                } else {
                    ErrorCode::LEADER_NOT_AVAILABLE
                });
            }
            m
        })
        .collect();
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use proto::ferry::{BrokerRegistration, PartitionState, TopicRecord};

    fn view() -> ClusterView {
        let mut v = ClusterView::default();
        for id in [1, 2] {
            let b = BrokerRegistration {
                id,
                endpoint: format!("127.0.0.1:{}", 7000 + id),
                kafka_endpoint: if id == 1 {
                    "127.0.0.1:9092".into()
                } else {
                    String::new()
                },
                ..Default::default()
            };
            v.apply(&proto::keys::broker(id), Some(&b.encode_to_vec()), 1);
        }
        let rec = TopicRecord {
            topic_id: "6f1c6c1e-1d3c-4c39-9d52-5b0d5d0e2f11".into(),
            partitions: 2,
            ..Default::default()
        };
        v.apply(&proto::keys::topic("t"), Some(&rec.encode_to_vec()), 1);
        for (p, leader) in [(0, 1), (1, -1)] {
            let s = PartitionState {
                replicas: vec![1, 2],
                isr: vec![1],
                leader,
                leader_epoch: 3,
                ..Default::default()
            };
            v.apply(&proto::keys::partition("t", p), Some(&s.encode_to_vec()), 1);
        }
        v
    }

    #[test]
    fn metadata_lists_kafka_listeners_topics_and_partition_states() {
        let r = metadata(&view(), None, 1, ("PLAINTEXT", 12));
        assert_eq!(r.brokers.len(), 1, "only broker 1 has a Kafka listener");
        assert_eq!((r.brokers[0].node_id.0, r.brokers[0].port), (1, 9092));
        assert_eq!(r.controller_id.0, 1);
        let t = &r.topics[0];
        assert_eq!(t.error_code, 0);
        assert_eq!(t.topic_id.to_string(), "6f1c6c1e-1d3c-4c39-9d52-5b0d5d0e2f11");
        assert_eq!(t.partitions.len(), 2);
        let p0 = &t.partitions[0];
        assert_eq!((p0.leader_id.0, p0.leader_epoch, p0.error_code), (1, 3, 0));
        assert_eq!(p0.replica_nodes, vec![BrokerId(1), BrokerId(2)]);
        assert_eq!(p0.isr_nodes, vec![BrokerId(1)]);
        assert_eq!(t.partitions[1].error_code, wire(ErrorCode::LEADER_NOT_AVAILABLE));
    }

    #[test]
    fn a_leader_the_answer_does_not_list_is_answered_as_no_leader() {
        let mut v = view();
        // Broker 2 has no Kafka listener, so it is not listed; it leads partition 1.
        let s = PartitionState {
            replicas: vec![1, 2],
            isr: vec![2],
            leader: 2,
            leader_epoch: 4,
            ..Default::default()
        };
        v.apply(&proto::keys::partition("t", 1), Some(&s.encode_to_vec()), 2);
        let r = metadata(&v, None, 1, ("PLAINTEXT", 5));
        let p1 = &r.topics[0].partitions[1];
        assert_eq!(p1.leader_id.0, -1);
        assert_eq!(p1.error_code, wire(ErrorCode::LEADER_NOT_AVAILABLE));
        assert_eq!(p1.replica_nodes, vec![BrokerId(1), BrokerId(2)]);
        // From v6 a live leader without the listener is named as such, as Kafka does.
        let r = metadata(&v, None, 1, ("PLAINTEXT", 6));
        assert_eq!(
            r.topics[0].partitions[1].error_code,
            wire(ErrorCode::LISTENER_NOT_FOUND)
        );
        // A leader whose registration is gone is still no leader.
        v.apply(&proto::keys::broker(2), None, 3);
        let r = metadata(&v, None, 1, ("PLAINTEXT", 12));
        assert_eq!(
            r.topics[0].partitions[1].error_code,
            wire(ErrorCode::LEADER_NOT_AVAILABLE)
        );
    }

    #[test]
    fn each_listener_is_answered_with_its_own_endpoints() {
        use proto::ferry::KafkaListenerEndpoint;
        let mut v = view();
        let named = |name: &str, port: u32| KafkaListenerEndpoint {
            name: name.into(),
            endpoint: format!("10.0.0.2:{port}"),
            security_protocol: "PLAINTEXT".into(),
        };
        let b = BrokerRegistration {
            id: 2,
            kafka_endpoint: "10.0.0.2:9092".into(),
            kafka_listeners: vec![named("INTERNAL", 9092), named("EXTERNAL", 19092)],
            ..Default::default()
        };
        v.apply(&proto::keys::broker(2), Some(&b.encode_to_vec()), 2);
        let ports = |listener| {
            let r = metadata(&v, None, 1, (listener, 12));
            r.brokers.iter().map(|b| (b.node_id.0, b.port)).collect::<Vec<_>>()
        };
        // Broker 1 registered one endpoint without a name: it serves every listener.
        assert_eq!(ports("EXTERNAL"), vec![(1, 9092), (2, 19092)]);
        assert_eq!(ports("INTERNAL"), vec![(1, 9092), (2, 9092)]);
        assert_eq!(ports("OTHER"), vec![(1, 9092)]);
    }

    #[test]
    fn an_unknown_topic_is_named_with_its_error_and_not_created() {
        let r = metadata(&view(), Some(vec!["nope".into()]), 1, ("PLAINTEXT", 12));
        assert_eq!(r.topics.len(), 1);
        assert_eq!(r.topics[0].error_code, wire(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION));
        assert_eq!(wire(ErrorCode::INVALID_THROTTLE), -1);
        assert!(r.topics[0].partitions.is_empty());
    }

    #[test]
    fn a_fetch_from_v13_finds_its_topics_by_id_and_names_an_unknown_id() {
        use kafka_protocol::messages::fetch_request::FetchTopic;
        let id = uuid::Uuid::from_str("6f1c6c1e-1d3c-4c39-9d52-5b0d5d0e2f11").unwrap();
        let other = uuid::Uuid::from_u128(7);
        let mut by_id = FetchTopic::default();
        by_id.topic_id = id;
        let mut unknown = FetchTopic::default();
        unknown.topic_id = other;
        let mut by_name = FetchTopic::default();
        by_name.topic = TopicName(StrBytes::from_static_str("t"));
        let got = super::super::data::fetch_topics(&view(), &[by_id.clone(), unknown.clone()], 13);
        assert_eq!(got[0].0.as_ref().map(|n| n.0.as_str()), Some("t"));
        assert_eq!((got[1].0.clone(), got[1].1), (None, other));
        // Before v13 the names are taken as given.
        let got = super::super::data::fetch_topics(&view(), &[by_name], 12);
        assert_eq!(got[0].0.as_ref().map(|n| n.0.as_str()), Some("t"));
    }

    #[test]
    fn the_readme_lists_every_api_as_served() {
        let readme = include_str!("../../../README.md");
        let (start, end) = ("<!-- kafka-apis -->\n", "<!-- /kafka-apis -->");
        let table = readme
            .split_once(start)
            .and_then(|(_, rest)| rest.split_once(end))
            .map(|(t, _)| t)
            .expect("the README's kafka-apis section");
        let want = api_table();
        if table != want {
            let path = std::env::temp_dir().join("ferry-kafka-apis.md");
            let _ = std::fs::write(&path, &want);
            panic!(
                "README.md's API table is out of date: the table is in {}",
                path.display()
            );
        }
    }

    #[test]
    fn served_versions_and_the_api_versions_answer_agree() {
        assert!(served(ApiKey::Metadata as i16, 12));
        assert!(served(ApiKey::Fetch as i16, 17) && !served(ApiKey::Fetch as i16, 18));
        assert!(served(ApiKey::ListOffsets as i16, 9) && !served(ApiKey::ListOffsets as i16, 10));
        assert!(!served(ApiKey::Metadata as i16, 13));
        assert!(!served(ApiKey::Produce as i16, 0));
        assert!(served(ApiKey::DescribeQuorum as i16, 2));
        // Advertised, not decoded: answered by old_versions, never dropped.
        assert!(advertised_only(ApiKey::Produce as i16, 2) && !advertised_only(ApiKey::Produce as i16, 3));
        assert!(advertised_only(ApiKey::Fetch as i16, 3) && !advertised_only(ApiKey::Fetch as i16, 4));
        assert!(!advertised_only(ApiKey::Metadata as i16, 0));
        let r = api_versions(ErrorCode::NONE);
        assert_eq!(r.api_keys.len(), SERVED.len());
    }
}
