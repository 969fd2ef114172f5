//! The controller: topic administration, leader election and reassignment. A pure core
//! (placement, partition changes) and thin drivers (the `Admin` service, the active controller).

pub mod acl_admin;
pub mod active;
pub mod admin;
pub mod batch;
pub mod client_quotas;
pub mod configs;
pub mod elect_leaders;
pub mod isr_admin;
pub mod leader_hint;
pub mod limits;
pub mod log_dirs;
pub mod partition_change;
pub mod partition_change_builder;
pub mod placement;
pub mod plan;
pub mod plan_admin;
pub mod plan_create;
pub mod plan_driver;
pub mod plan_info;
pub mod plan_metrics;
pub mod plan_step;
pub mod plan_store;
pub mod plan_view;
pub mod reassign_admin;
pub mod reassign_cancel;
pub mod reassign_dir;
pub mod reassign_progress;
pub mod reassignment;
pub mod scram_admin;
pub mod security_service;
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

/// Maps `items` in order with `f`, over every core when there are at least `2 * min_chunk` of
/// them (a thread costs more than it saves on fewer). For the pure planning of a request over a
/// million partitions, which nothing else competes with for the cores. A panic in `f` resumes
/// here.
pub(crate) fn par_map<T: Sync, R: Send>(items: &[T], min_chunk: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = items.len().div_ceil(threads).max(min_chunk.max(1));
    if items.len() <= chunk {
        return items.iter().map(f).collect();
    }
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|c| s.spawn(move || c.iter().map(f).collect::<Vec<R>>()))
            .collect();
        let mut out = Vec::with_capacity(items.len());
        for h in handles {
            out.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        out
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn par_map_keeps_the_order_whatever_the_chunking() {
        let items: Vec<u32> = (0..1000).collect();
        for min_chunk in [0, 1, 7, 500, 2000] {
            assert_eq!(
                super::par_map(&items, min_chunk, |x| x * 2),
                (0..1000).map(|x| x * 2).collect::<Vec<_>>()
            );
        }
        assert!(super::par_map(&[] as &[u32], 1, |x| *x).is_empty());
    }
}
