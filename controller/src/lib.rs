//! The controller: topic administration, leader election and reassignment. A pure core
//! (placement, partition changes) and thin drivers (the `Admin` service, the active controller).

pub mod active;
pub mod admin;
pub mod configs;
pub mod leader_hint;
pub mod limits;
pub mod log_dirs;
pub mod partition_change;
pub mod partition_change_builder;
pub mod placement;
pub mod reassign_admin;
pub mod reassign_cancel;
pub mod reassign_progress;
pub mod reassignment;
pub mod store;
pub mod throttles;
pub mod topic_name;
pub mod topics_admin;
pub mod write_runner;

/// Runs `f` on a blocking thread: decoding, planning and encoding a million-partition request
/// takes seconds of CPU, which on a runtime thread would hold up the Raft tasks queued there
/// (heartbeats missed, elections). A panic in `f` resumes here.
pub(crate) async fn off_runtime<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(f).await {
        Ok(v) => v,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Only a runtime that is shutting down cancels a blocking task.
        Err(e) => panic!("blocking task cancelled: {e}"),
    }
}
