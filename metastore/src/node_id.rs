//! How a metastore node is named: a leaf, so that the snapshot store and the Raft types can both
//! use it.

/// Node ids are plain numbers, as Kafka's broker ids are.
pub type NodeId = u64;
/// A node's address as stored in the membership.
pub type Node = openraft::BasicNode;
