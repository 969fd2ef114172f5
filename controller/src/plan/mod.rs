//! Plans the controller runs: the pure core. A plan is a list of partition moves with caps on
//! how many run at once; the planners write plans (drain a broker or a dir, balance brokers,
//! balance a broker's dirs, undrain), and the scheduler decides which moves start, end or roll
//! back, from the cluster as observed. No I/O here: a driver reads the cluster, calls these,
//! and writes the results.

pub mod balance;
pub mod balance_dirs;
pub mod bounds;
pub mod caps;
pub mod cluster;
pub mod drain;
pub mod error;
pub mod loads;
pub mod model;
pub mod schedule;
pub mod summary;

#[cfg(test)]
mod testkit;

pub use balance::{balance, Balanced};
pub use balance_dirs::balance_dirs;
pub use caps::{Caps, CapsRequest};
pub use cluster::{ClusterBuilder, ClusterModel, Cordons};
pub use drain::{drain_broker, drain_dir, undrain};
pub use error::PlanError;
pub use model::{DirId, Load, Move, MoveState, Names, PartitionRef, Plan, PlanKind, PlanState, Reason, Replica};
pub use schedule::{cancel, next_moves, pause, resume, MoveStart, Observed, Step};
pub use summary::{Planned, Summary};
