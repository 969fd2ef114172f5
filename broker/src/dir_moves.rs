//! The broker's running log dir moves: how many copy at once, their shared throttle, the dirs
//! asked for replicas not hosted yet, and the copy tasks. Starting and driving a move is in
//! `log_dir_move`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::log_dirs::TopicPartition;
use crate::replica::Replica;
use crate::throttle::Throttle;

/// The broker's dir moves: a limit on how many copy at once, their shared throttle, the dirs
/// wanted for replicas not hosted yet, and the copy tasks.
pub struct DirMoves {
    slots: Arc<Semaphore>,
    throttle: Throttle,
    wanted: Mutex<HashMap<TopicPartition, PathBuf>>,
    tasks: Mutex<HashMap<TopicPartition, JoinHandle<()>>>,
}

impl DirMoves {
    /// At most `parallel` moves copy at once.
    pub fn new(parallel: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(parallel.max(1))),
            // Little idle credit: a move's rate is judged over the whole move.
            throttle: Throttle::with_burst(0.05),
            wanted: Mutex::new(HashMap::new()),
            tasks: Mutex::new(HashMap::new()),
        }
    }

    /// The dir an operator asked for before the replica arrived, taken once.
    pub fn take_wanted(&self, tp: &TopicPartition) -> Option<PathBuf> {
        self.wanted.lock().remove(tp)
    }

    /// Whether a copy task runs for the replica.
    pub fn is_moving(&self, tp: &TopicPartition) -> bool {
        self.tasks.lock().get(tp).is_some_and(|h| !h.is_finished())
    }

    /// Keeps the dir an operator asked for a replica not hosted yet, for when it arrives.
    pub fn want(&self, tp: TopicPartition, dir: PathBuf) {
        self.wanted.lock().insert(tp, dir);
    }

    /// The slots that bound how many moves copy at once.
    pub fn slots(&self) -> Arc<Semaphore> {
        self.slots.clone()
    }

    /// The throttle all moves share.
    pub fn throttle(&self) -> &Throttle {
        &self.throttle
    }

    /// Records the copy task of a replica's move, stopping one it replaces.
    pub fn track(&self, tp: TopicPartition, task: JoinHandle<()>) {
        if let Some(old) = self.tasks.lock().insert(tp, task) {
            old.abort();
        }
    }

    /// Forgets a copy task that ended by itself.
    pub fn finished(&self, tp: &TopicPartition) {
        self.tasks.lock().remove(tp);
    }

    /// Stops a replica's move, if any, and removes its future folder.
    pub fn cancel(&self, r: &Replica) {
        if let Some(h) = self.tasks.lock().remove(&(r.topic.clone(), r.partition)) {
            h.abort();
        }
        let future = r.future().take();
        if let Some(f) = future {
            let path = f.log.dir().to_path_buf();
            drop(f);
            match std::fs::remove_dir_all(&path) {
                Ok(()) => tracing::info!(replica = %r.name(), "cancelled log dir move"),
                Err(e) => tracing::warn!(replica = %r.name(), error = %e, "cannot remove future log"),
            }
        }
    }

    /// Stops every copy task (at shutdown).
    pub fn stop_all(&self) {
        for (_, h) in self.tasks.lock().drain() {
            h.abort();
        }
    }
}
