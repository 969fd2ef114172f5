//! Ferry's metastore: a linearizable key-value store replicated by openraft and stored in sled,
//! served over gRPC, with transactions, watches and leases. It replaces ZooKeeper for Ferry.

// openraft's storage traits fix `StorageError` (over 200 bytes) as the error type; the helpers
// that feed those traits return it too rather than boxing and unboxing at every call.
#![allow(clippy::result_large_err)]

pub mod client;
pub mod codec;
pub mod credential;
pub mod credential_ensure;
pub mod election_watch;
pub mod follow;
pub mod follower_acks;
pub mod grpc_tls;
pub mod heard;
pub mod keystore;
pub mod kv_pb;
pub mod kv_state;
pub mod leader_view;
pub mod lease;
pub mod local_node;
pub mod log_store;
pub mod metrics;
pub mod network;
pub mod node;
pub mod node_core;
pub mod node_id;
pub mod peers;
pub mod pre_vote;
pub mod proposer;
pub mod quorum;
pub mod raft_lane;
pub mod raft_peers;
pub mod read_index;
pub mod service;
pub mod snapshot_store;
pub mod staging;
pub mod state_machine;
pub mod tls;
pub mod truststore;
pub mod types;
pub mod validate;
pub mod watch;

pub use client::{Client, ClientError, LocalNode};
pub use credential::CredentialInterceptor;
pub use follow::FollowEvent;
pub use node::{start, NodeConfig, NodeHandle, RaftTuning};
pub use node_core::{MAYBE_APPLIED, NOT_APPLIED, WRITE_OUTCOME};
