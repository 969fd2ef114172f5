//! The one fetch engine, for every edge that reads partitions: Kafka's Fetch
//! (`kafka/data.rs`), the gRPC Fetch (`service.rs`) and the leader's answer to a follower
//! (`follower.rs`). `plan` holds Kafka's rules (byte budget, per-partition maximum, whole first
//! batch, answer or wait), `engine` the one long poll, `log_read` the one read of a partition;
//! each edge keeps only its own translation of requests and answers.

mod engine;
pub mod follower;
mod log_read;
pub mod plan;

pub use engine::{long_poll, Partitions};
pub use log_read::{read_log, LogRead};
pub use plan::{Found, Isolation, Limits, ReadLimit};
