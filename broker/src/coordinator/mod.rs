//! The group coordinator: consumer groups and their committed offsets, kept as records in the
//! internal topic `__consumer_offsets` in Kafka's own schemas. A group's coordinator is the
//! leader of its hashed partition (`hash`), so groups move and fail over with partition
//! leadership. The pure parts: the record schemas (`records`), a group (`group`), the classic
//! rebalance protocol (`membership`), KIP-848 consumer groups (`consumer`, `assignor`,
//! `consumer_records`, `shard_consumer`) and a partition's state machine (`shard`). The driver:
//! `runtime`, over the narrow handle `broker_log`.

pub mod assignor;
pub mod broker_log;
pub mod consumer;
pub mod consumer_records;
pub mod group;
pub mod hash;
pub mod membership;
pub mod records;
pub mod runtime;
pub mod shard;
pub mod shard_consumer;

#[cfg(test)]
mod consumer_tests;
#[cfg(test)]
mod tests;

/// The internal topic of groups and offsets.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// `offsets.topic.num.partitions`.
pub const DEFAULT_OFFSETS_PARTITIONS: i32 = 50;
/// `offsets.topic.replication.factor` (capped at the live brokers).
pub const DEFAULT_OFFSETS_REPLICATION: i16 = 3;
/// `offsets.topic.segment.bytes`.
pub const OFFSETS_SEGMENT_BYTES: &str = "104857600";

/// What the coordinator holds on this broker, published each tick for the metrics.
#[derive(Debug, Default)]
pub struct Stats {
    /// `__consumer_offsets` partitions loaded here.
    pub partitions: std::sync::atomic::AtomicUsize,
    /// Groups coordinated here.
    pub groups: std::sync::atomic::AtomicUsize,
}
