//! Each covered API's request, encoded at its oldest and newest served versions, answered by
//! [`cluster_refused`] and read back as a client reads it.

use bytes::BytesMut;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData};
use kafka_protocol::messages::alter_partition_reassignments_request::{ReassignablePartition, ReassignableTopic};
use kafka_protocol::messages::alter_replica_log_dirs_request::{AlterReplicaLogDir, AlterReplicaLogDirTopic};
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{MetadataRequest, ResponseHeader};

use super::super::apis::SERVED;
use super::*;

const MESSAGE: &str = "principal User:eve may not Alter the cluster";
const CLUSTER: i16 = 31;
const TOPIC: i16 = 29;

fn msg() -> Option<StrBytes> {
    Some(StrBytes::from_static_str(MESSAGE))
}

fn s(x: &'static str) -> StrBytes {
    StrBytes::from_static_str(x)
}

fn topic(x: &'static str) -> TopicName {
    TopicName(s(x))
}

/// The oldest version decoded and the newest served.
fn versions(api: ApiKey) -> Vec<i16> {
    let served = SERVED.iter().find(|x| x.api == api).expect("a served API");
    let mut v = vec![served.decoded_min, served.max];
    v.dedup();
    v
}

/// Encodes `request` at `version`, has it refused, and decodes the answer as a client does.
fn refuse<Q: Encodable, A: Decodable>(api: ApiKey, version: i16, request: &Q) -> A {
    let mut out = BytesMut::new();
    request.encode(&mut out, version).expect("request encodes");
    let mut frame = out.freeze();
    let answer = cluster_refused(api, version, 7, &mut frame, MESSAGE)
        .expect("a covered API")
        .expect("an answer");
    let size = i32::from_be_bytes(answer[..4].try_into().unwrap());
    let mut buf = answer.slice(4..);
    assert_eq!(size as usize, buf.len(), "{api:?} v{version}: size prefix");
    let header = ResponseHeader::decode(&mut buf, api.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, 7);
    let decoded = A::decode(&mut buf, version).expect("answer decodes");
    assert!(buf.is_empty(), "{api:?} v{version}: bytes left over");
    decoded
}

#[test]
fn alter_partition_reassignments_refuses_the_request_and_every_partition() {
    let part = |i| ReassignablePartition::default().with_partition_index(i);
    let req = AlterPartitionReassignmentsRequest::default().with_topics(vec![
        ReassignableTopic::default()
            .with_name(topic("a"))
            .with_partitions(vec![part(0), part(1)]),
        ReassignableTopic::default()
            .with_name(topic("b"))
            .with_partitions(vec![part(4)]),
    ]);
    for v in versions(ApiKey::AlterPartitionReassignments) {
        let a: AlterPartitionReassignmentsResponse = refuse(ApiKey::AlterPartitionReassignments, v, &req);
        assert_eq!((a.error_code, a.error_message.clone()), (CLUSTER, msg()));
        let shape: Vec<(TopicName, Vec<i32>)> = a
            .responses
            .iter()
            .map(|t| (t.name.clone(), t.partitions.iter().map(|p| p.partition_index).collect()))
            .collect();
        assert_eq!(shape, vec![(topic("a"), vec![0, 1]), (topic("b"), vec![4])]);
        for p in a.responses.iter().flat_map(|t| &t.partitions) {
            assert_eq!((p.error_code, p.error_message.clone()), (CLUSTER, msg()));
        }
    }
}

#[test]
fn list_partition_reassignments_refuses_at_the_top_and_lists_nothing() {
    let req = ListPartitionReassignmentsRequest::default().with_topics(Some(vec![
        ListPartitionReassignmentsTopics::default()
            .with_name(topic("a"))
            .with_partition_indexes(vec![0, 1]),
    ]));
    for v in versions(ApiKey::ListPartitionReassignments) {
        let a: ListPartitionReassignmentsResponse = refuse(ApiKey::ListPartitionReassignments, v, &req);
        assert_eq!((a.error_code, a.error_message), (CLUSTER, msg()));
        assert!(a.topics.is_empty());
    }
}

#[test]
fn elect_leaders_refuses_each_partition_named_once() {
    let tp = |t, p: Vec<i32>| TopicPartitions::default().with_topic(topic(t)).with_partitions(p);
    let req = ElectLeadersRequest::default().with_topic_partitions(Some(vec![
        tp("a", vec![0, 1]),
        tp("b", vec![3]),
        tp("a", vec![1, 2]),
    ]));
    for v in versions(ApiKey::ElectLeaders) {
        let a: ElectLeadersResponse = refuse(ApiKey::ElectLeaders, v, &req);
        // v0 has no top-level code: the partitions carry it alone.
        assert_eq!(a.error_code, if v >= 1 { CLUSTER } else { 0 }, "v{v}");
        let shape: Vec<(TopicName, Vec<i32>)> = a
            .replica_election_results
            .iter()
            .map(|t| {
                (
                    t.topic.clone(),
                    t.partition_result.iter().map(|p| p.partition_id).collect(),
                )
            })
            .collect();
        assert_eq!(shape, vec![(topic("a"), vec![0, 1, 2]), (topic("b"), vec![3])]);
        for p in a.replica_election_results.iter().flat_map(|t| &t.partition_result) {
            assert_eq!((p.error_code, p.error_message.clone()), (CLUSTER, msg()));
        }
    }
}

#[test]
fn elect_leaders_for_every_partition_answers_no_partition() {
    let req = ElectLeadersRequest::default().with_topic_partitions(None);
    for v in versions(ApiKey::ElectLeaders) {
        let a: ElectLeadersResponse = refuse(ApiKey::ElectLeaders, v, &req);
        assert!(a.replica_election_results.is_empty());
        assert_eq!(a.error_code, if v >= 1 { CLUSTER } else { 0 });
    }
}

#[test]
fn alter_replica_log_dirs_refuses_each_partition_grouped_by_topic() {
    let t = |n, p: Vec<i32>| {
        AlterReplicaLogDirTopic::default()
            .with_name(topic(n))
            .with_partitions(p)
    };
    let req = AlterReplicaLogDirsRequest::default().with_dirs(vec![
        AlterReplicaLogDir::default()
            .with_path(s("/d1"))
            .with_topics(vec![t("a", vec![0, 1])]),
        AlterReplicaLogDir::default()
            .with_path(s("/d2"))
            .with_topics(vec![t("b", vec![0]), t("a", vec![2])]),
    ]);
    for v in versions(ApiKey::AlterReplicaLogDirs) {
        let a: AlterReplicaLogDirsResponse = refuse(ApiKey::AlterReplicaLogDirs, v, &req);
        let shape: Vec<(TopicName, Vec<i32>)> = a
            .results
            .iter()
            .map(|t| {
                (
                    t.topic_name.clone(),
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                )
            })
            .collect();
        assert_eq!(shape, vec![(topic("a"), vec![0, 1, 2]), (topic("b"), vec![0])]);
        assert!(a
            .results
            .iter()
            .flat_map(|t| &t.partitions)
            .all(|p| p.error_code == CLUSTER));
    }
}

#[test]
fn describe_log_dirs_refuses_from_v3_and_describes_no_dir() {
    let req = DescribeLogDirsRequest::default().with_topics(None);
    for v in versions(ApiKey::DescribeLogDirs) {
        let a: DescribeLogDirsResponse = refuse(ApiKey::DescribeLogDirs, v, &req);
        assert_eq!(a.error_code, if v >= 3 { CLUSTER } else { 0 }, "v{v}");
        assert!(a.results.is_empty());
    }
}

#[test]
fn describe_quorum_refuses_at_the_top() {
    let req = DescribeQuorumRequest::default();
    for v in versions(ApiKey::DescribeQuorum) {
        let a: DescribeQuorumResponse = refuse(ApiKey::DescribeQuorum, v, &req);
        assert_eq!(a.error_code, CLUSTER);
        if v >= 2 {
            assert_eq!(a.error_message, msg());
        }
        assert!(a.topics.is_empty() && a.nodes.is_empty());
    }
}

#[test]
fn create_acls_refuses_each_creation() {
    let acl = |p| {
        AclCreation::default()
            .with_resource_type(2)
            .with_resource_name(s("t"))
            .with_resource_pattern_type(3)
            .with_principal(s(p))
            .with_host(s("*"))
            .with_operation(3)
            .with_permission_type(3)
    };
    let req = CreateAclsRequest::default().with_creations(vec![acl("User:a"), acl("User:b"), acl("User:c")]);
    for v in versions(ApiKey::CreateAcls) {
        let a: CreateAclsResponse = refuse(ApiKey::CreateAcls, v, &req);
        assert_eq!(a.results.len(), 3);
        for r in &a.results {
            assert_eq!((r.error_code, r.error_message.clone()), (CLUSTER, msg()));
        }
    }
}

#[test]
fn describe_acls_refuses_at_the_top() {
    let req = DescribeAclsRequest::default().with_resource_type_filter(1);
    for v in versions(ApiKey::DescribeAcls) {
        let a: DescribeAclsResponse = refuse(ApiKey::DescribeAcls, v, &req);
        assert_eq!((a.error_code, a.error_message), (CLUSTER, msg()));
        assert!(a.resources.is_empty());
    }
}

#[test]
fn delete_acls_refuses_each_filter_and_deletes_nothing() {
    let filter = || DeleteAclsFilter::default().with_resource_type_filter(1);
    let req = DeleteAclsRequest::default().with_filters(vec![filter(), filter()]);
    for v in versions(ApiKey::DeleteAcls) {
        let a: DeleteAclsResponse = refuse(ApiKey::DeleteAcls, v, &req);
        assert_eq!(a.filter_results.len(), 2);
        for r in &a.filter_results {
            assert_eq!((r.error_code, r.error_message.clone()), (CLUSTER, msg()));
            assert!(r.matching_acls.is_empty());
        }
    }
}

#[test]
fn alter_user_scram_credentials_refuses_each_user_once_in_order_of_mention() {
    let del = |n| ScramCredentialDeletion::default().with_name(s(n)).with_mechanism(1);
    let up = |n| {
        ScramCredentialUpsertion::default()
            .with_name(s(n))
            .with_mechanism(2)
            .with_iterations(8192)
    };
    let req = AlterUserScramCredentialsRequest::default()
        .with_deletions(vec![del("alice"), del("bob"), del("alice")])
        .with_upsertions(vec![up("carol"), up("alice")]);
    for v in versions(ApiKey::AlterUserScramCredentials) {
        let a: AlterUserScramCredentialsResponse = refuse(ApiKey::AlterUserScramCredentials, v, &req);
        let users: Vec<String> = a.results.iter().map(|r| r.user.to_string()).collect();
        assert_eq!(users, ["alice", "bob", "carol"]);
        for r in &a.results {
            assert_eq!((r.error_code, r.error_message.clone()), (CLUSTER, msg()));
        }
    }
}

#[test]
fn describe_user_scram_credentials_refuses_at_the_top() {
    let user = |n| UserName::default().with_name(s(n));
    let req = DescribeUserScramCredentialsRequest::default().with_users(Some(vec![user("a"), user("b")]));
    for v in versions(ApiKey::DescribeUserScramCredentials) {
        let a: DescribeUserScramCredentialsResponse = refuse(ApiKey::DescribeUserScramCredentials, v, &req);
        assert_eq!((a.error_code, a.error_message), (CLUSTER, msg()));
        assert!(a.results.is_empty());
    }
}

#[test]
fn describe_client_quotas_refuses_at_the_top_with_no_entries() {
    let req = DescribeClientQuotasRequest::default().with_strict(true);
    for v in versions(ApiKey::DescribeClientQuotas) {
        let a: DescribeClientQuotasResponse = refuse(ApiKey::DescribeClientQuotas, v, &req);
        assert_eq!((a.error_code, a.error_message), (CLUSTER, msg()));
        assert_eq!(a.entries, None);
    }
}

#[test]
fn alter_client_quotas_refuses_each_entry_naming_its_entity() {
    let entity = |t, n: Option<&'static str>| EntityData::default().with_entity_type(s(t)).with_entity_name(n.map(s));
    let req = AlterClientQuotasRequest::default().with_entries(vec![
        EntryData::default().with_entity(vec![entity("user", Some("alice")), entity("client-id", None)]),
        EntryData::default().with_entity(vec![entity("user", None)]),
    ]);
    for v in versions(ApiKey::AlterClientQuotas) {
        let a: AlterClientQuotasResponse = refuse(ApiKey::AlterClientQuotas, v, &req);
        assert_eq!(a.entries.len(), 2);
        let entities: Vec<Vec<(String, Option<String>)>> = a
            .entries
            .iter()
            .map(|e| {
                e.entity
                    .iter()
                    .map(|d| (d.entity_type.to_string(), d.entity_name.as_ref().map(|n| n.to_string())))
                    .collect()
            })
            .collect();
        let want = vec![
            vec![("user".into(), Some("alice".into())), ("client-id".into(), None)],
            vec![("user".into(), None)],
        ];
        assert_eq!(entities, want);
        for e in &a.entries {
            assert_eq!((e.error_code, e.error_message.clone()), (CLUSTER, msg()));
        }
    }
}

#[test]
fn create_topics_refuses_each_topic_as_not_authorized_on_it() {
    let t = |n| {
        CreatableTopic::default()
            .with_name(topic(n))
            .with_num_partitions(3)
            .with_replication_factor(2)
    };
    let req = CreateTopicsRequest::default().with_topics(vec![t("a"), t("b"), t("c")]);
    for v in versions(ApiKey::CreateTopics) {
        let a: CreateTopicsResponse = refuse(ApiKey::CreateTopics, v, &req);
        let names: Vec<TopicName> = a.topics.iter().map(|t| t.name.clone()).collect();
        assert_eq!(names, [topic("a"), topic("b"), topic("c")]);
        for r in &a.topics {
            assert_eq!((r.error_code, r.error_message.clone()), (TOPIC, msg()), "v{v}");
            if v >= 5 {
                assert_eq!((r.num_partitions, r.replication_factor), (-1, -1));
            }
        }
    }
}

#[test]
fn delete_topics_refuses_each_topic_named() {
    let req = DeleteTopicsRequest::default().with_topic_names(vec![topic("a"), topic("b")]);
    for v in versions(ApiKey::DeleteTopics) {
        let a: DeleteTopicsResponse = refuse(ApiKey::DeleteTopics, v, &req);
        let names: Vec<Option<TopicName>> = a.responses.iter().map(|r| r.name.clone()).collect();
        assert_eq!(names, [Some(topic("a")), Some(topic("b"))]);
        for r in &a.responses {
            assert_eq!(r.error_code, TOPIC);
            if v >= 5 {
                assert_eq!(r.error_message, msg());
            }
        }
    }
}

#[test]
fn delete_topics_v6_refuses_topics_by_name_and_by_id() {
    let id = uuid::Uuid::from_u128(42);
    let req = DeleteTopicsRequest::default().with_topics(vec![
        DeleteTopicState::default().with_name(Some(topic("a"))),
        DeleteTopicState::default().with_name(None).with_topic_id(id),
    ]);
    let a: DeleteTopicsResponse = refuse(ApiKey::DeleteTopics, 6, &req);
    let named: Vec<(Option<TopicName>, uuid::Uuid)> =
        a.responses.iter().map(|r| (r.name.clone(), r.topic_id)).collect();
    assert_eq!(named, [(Some(topic("a")), uuid::Uuid::nil()), (None, id)]);
    assert!(a
        .responses
        .iter()
        .all(|r| r.error_code == TOPIC && r.error_message == msg()));
}

#[test]
fn create_partitions_refuses_each_topic() {
    let t = |n| CreatePartitionsTopic::default().with_name(topic(n)).with_count(6);
    let req = CreatePartitionsRequest::default().with_topics(vec![t("a"), t("b")]);
    for v in versions(ApiKey::CreatePartitions) {
        let a: CreatePartitionsResponse = refuse(ApiKey::CreatePartitions, v, &req);
        let names: Vec<TopicName> = a.results.iter().map(|r| r.name.clone()).collect();
        assert_eq!(names, [topic("a"), topic("b")]);
        for r in &a.results {
            assert_eq!((r.error_code, r.error_message.clone()), (TOPIC, msg()));
        }
    }
}

#[test]
fn an_api_not_covered_is_left_to_the_caller() {
    let mut out = BytesMut::new();
    MetadataRequest::default().encode(&mut out, 12).unwrap();
    let mut frame = out.freeze();
    assert!(cluster_refused(ApiKey::Metadata, 12, 1, &mut frame, MESSAGE).is_none());
}

#[test]
fn a_malformed_request_is_an_error_not_an_answer() {
    let mut frame = Bytes::from_static(&[0xff, 0xff, 0xff]);
    let got = cluster_refused(ApiKey::CreateAcls, 3, 1, &mut frame, MESSAGE);
    assert!(matches!(got, Some(Err(_))));
}

#[test]
fn an_empty_message_is_answered_as_null() {
    let mut out = BytesMut::new();
    DescribeAclsRequest::default().encode(&mut out, 3).unwrap();
    let mut frame = out.freeze();
    let answer = cluster_refused(ApiKey::DescribeAcls, 3, 1, &mut frame, "")
        .unwrap()
        .unwrap();
    let mut buf = answer.slice(4..);
    ResponseHeader::decode(&mut buf, ApiKey::DescribeAcls.response_header_version(3)).unwrap();
    let a = DescribeAclsResponse::decode(&mut buf, 3).unwrap();
    assert_eq!((a.error_code, a.error_message), (CLUSTER, None));
}
