//! Ferry's wire types: protobuf messages and gRPC services, generated at build time, with the
//! metadata keyspace and Kafka's error codes.

/// The metastore's client API.
pub mod metastore {
    tonic::include_proto!("ferry.metastore.v1");
}

/// Internal Raft traffic between metastore nodes.
pub mod raft {
    tonic::include_proto!("ferry.raft.v1");
}

/// Cluster metadata, the broker's data service and the admin service.
pub mod ferry {
    tonic::include_proto!("ferry.v1");
}

pub mod acl;
pub mod broker_config;
pub mod client_quota;
pub mod clock;
pub mod cluster_view;
pub mod config_ops;
pub mod cordon;
pub mod errors;
pub mod kafka_uuid;
pub mod keys;
pub mod partition_invariants;
pub mod topic_config;

/// Admin response metadata: a node that does not lead names the Raft leader's address in its
/// answers, so that a client sends its next requests there directly.
pub const LEADER_HINT: &str = "x-ferry-leader";

/// Most items in one batch of a broker's reports to the controller (AlterPartitions,
/// AssignReplicaDirs): the controller refuses more, and brokers send no more.
pub const MAX_REPORT_BATCH: usize = 1024;

/// The encoded file descriptor set, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("descriptor");
