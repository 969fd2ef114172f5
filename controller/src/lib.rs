//! The controller: topic administration, leader election and reassignment. A pure core
//! (placement, partition changes) and thin drivers (the `Admin` service, the active controller).

pub mod active;
pub mod admin;
pub mod configs;
pub mod leader_hint;
pub mod limits;
pub mod log_dirs;
pub mod partition_change;
pub mod placement;
pub mod reassign_admin;
pub mod reassign_progress;
pub mod reassignment;
pub mod throttles;
pub mod topic_name;
pub mod topics_admin;
