//! Moving a replica between the log dirs of this broker (KIP-113). A future log
//! `<dest>/<topic>-<p>.move` is filled from the current log while the replica keeps serving; once
//! it has caught up, under the log's lock, the current folder is renamed `<topic>-<p>.delete`, the
//! future folder becomes `<topic>-<p>`, and the old folder is removed in the background.
//!
//! Crash safety comes from the folder names alone: at start, [`recovery_plan`] finishes a swap
//! that stopped between its renames, removes leftover `.delete` folders, and resumes every `.move`
//! beside a current log from where it ends.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use proto::errors::ErrorCode;
use proto::ferry::{
    AlterReplicaLogDirsResponse, DescribeLogDirsResponse, LogDirDescription, LogDirReplica, PartitionResult,
    ReplicaLogDirMove,
};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::log_dirs::{parse_replica_folder, replica_folder};
use crate::partition_log::{sync_dir, LogError, PartitionLog};
use crate::replica::Replica;
use crate::replica_manager::{BrokerCore, TopicPartition};
use crate::throttle::Throttle;

/// Suffix of a future log's folder.
pub const FUTURE_SUFFIX: &str = ".move";
/// Suffix of a replaced log's folder, removed in the background.
pub const DELETE_SUFFIX: &str = ".delete";

/// What a folder found in a log dir holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Folder {
    /// `<t>-<p>`: the replica's current log.
    Current(TopicPartition),
    /// `<t>-<p>.move`: a future log being filled.
    Future(TopicPartition),
    /// `<t>-<p>.delete`: a replaced log.
    Deleting(TopicPartition),
}

/// Reads a folder name; `None` for anything that is not a replica's.
pub fn classify(name: &str) -> Option<Folder> {
    if let Some(base) = name.strip_suffix(FUTURE_SUFFIX) {
        return parse_replica_folder(base).map(Folder::Future);
    }
    if let Some(base) = name.strip_suffix(DELETE_SUFFIX) {
        return parse_replica_folder(base).map(Folder::Deleting);
    }
    parse_replica_folder(name).map(Folder::Current)
}

/// One step that brings the log dirs back to a consistent state at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecoveryStep {
    /// Rename a folder (finishing a swap).
    Rename {
        /// Folder now.
        from: PathBuf,
        /// Folder after.
        to: PathBuf,
    },
    /// Remove a folder and everything in it.
    Remove(PathBuf),
}

/// What to do at start with the folders found: `(log dir, folder name)` pairs. Returns the steps,
/// in order, and the future logs to resume: `(replica, future folder)`.
///
/// A future log without a current one was renamed into place by a swap that stopped before its
/// second rename: the swap only starts once the future has caught up and is flushed, so it is
/// complete and becomes the current log.
pub fn recovery_plan(found: &[(PathBuf, String)]) -> (Vec<RecoveryStep>, Vec<(TopicPartition, PathBuf)>) {
    #[derive(Default)]
    struct Seen {
        current: Vec<PathBuf>,
        future: Vec<PathBuf>,
        deleting: Vec<PathBuf>,
    }
    let mut by_tp: BTreeMap<TopicPartition, Seen> = BTreeMap::new();
    for (dir, name) in found {
        match classify(name) {
            Some(Folder::Current(tp)) => by_tp.entry(tp).or_default().current.push(dir.clone()),
            Some(Folder::Future(tp)) => by_tp.entry(tp).or_default().future.push(dir.clone()),
            Some(Folder::Deleting(tp)) => by_tp.entry(tp).or_default().deleting.push(dir.clone()),
            None => {}
        }
    }
    let mut steps = Vec::new();
    let mut resume = Vec::new();
    for (tp, seen) in by_tp {
        let name = replica_folder(&tp.0, tp.1);
        let future_at = |d: &Path| d.join(format!("{name}{FUTURE_SUFFIX}"));
        let mut futures = seen.future.iter();
        if let Some(current_dir) = seen.current.first() {
            // A future in the current log's own dir would collide with it at the swap.
            let keep = futures.by_ref().find(|d| *d != current_dir);
            if let Some(d) = keep {
                resume.push((tp.clone(), future_at(d)));
            }
            for d in seen.future.iter().filter(|d| Some(*d) != keep) {
                steps.push(RecoveryStep::Remove(future_at(d)));
            }
        } else if let Some(d) = futures.next() {
            steps.push(RecoveryStep::Rename {
                from: future_at(d),
                to: d.join(&name),
            });
            for d in futures {
                steps.push(RecoveryStep::Remove(future_at(d)));
            }
        }
        for d in &seen.deleting {
            steps.push(RecoveryStep::Remove(d.join(format!("{name}{DELETE_SUFFIX}"))));
        }
    }
    (steps, resume)
}

/// A replica's future log in another dir, being filled from the current one.
#[derive(Debug)]
pub struct FutureLog {
    /// The log in `<dest>/<t>-<p>.move`.
    pub log: PartitionLog,
    /// The destination log dir.
    pub dest: PathBuf,
    /// Bytes copied into it since the move started or resumed.
    pub copied_bytes: u64,
    /// Sealed segments are copied as whole files until that fails once.
    pub whole_files: bool,
    /// Started for a dir a reassignment named (see `named_dir`), not by hand.
    pub for_reassignment: bool,
}

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

    /// Stops every copy task (at shutdown).
    pub fn stop_all(&self) {
        for (_, h) in self.tasks.lock().drain() {
            h.abort();
        }
    }
}

/// Brings the dirs to a consistent state before any replica is opened; returns the future logs
/// to resume.
pub fn recover(dirs: &[PathBuf]) -> std::io::Result<Vec<(TopicPartition, PathBuf)>> {
    let mut found = Vec::new();
    for d in dirs {
        for entry in std::fs::read_dir(d)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                found.push((d.clone(), entry.file_name().to_string_lossy().into_owned()));
            }
        }
    }
    let (steps, resume) = recovery_plan(&found);
    for step in steps {
        match step {
            RecoveryStep::Rename { from, to } => {
                tracing::info!(from = %from.display(), to = %to.display(), "finishing an interrupted log dir swap");
                std::fs::rename(&from, &to)?;
                if let Some(parent) = to.parent() {
                    std::fs::File::open(parent)?.sync_all()?;
                }
            }
            RecoveryStep::Remove(path) => {
                tracing::info!(path = %path.display(), "removing a leftover log folder");
                std::fs::remove_dir_all(&path)?;
            }
        }
    }
    Ok(resume)
}

/// Why `dir` cannot take a replica on this broker (the error code and a message), or `None`
/// when it can: it must be absolute, one of this broker's log dirs, and online.
pub fn unusable_dir(core: &BrokerCore, dir: &Path) -> Option<(ErrorCode, String)> {
    if !dir.is_absolute() {
        Some((
            ErrorCode::LOG_DIR_NOT_FOUND,
            format!("log dir '{}' is not an absolute path", dir.display()),
        ))
    } else if !core.dirs.dirs().iter().any(|d| d == dir) {
        Some((
            ErrorCode::LOG_DIR_NOT_FOUND,
            format!("'{}' is not a log dir of broker {}", dir.display(), core.id),
        ))
    } else {
        core.dirs.offline_reason(dir).map(|why| {
            (
                ErrorCode::KAFKA_STORAGE_ERROR,
                format!("log dir '{}' is offline: {why}", dir.display()),
            )
        })
    }
}

/// Starts (or redirects) the move of a hosted replica to `dest`; moving to its current dir
/// cancels a running move. `for_reassignment` marks a move to a dir a reassignment named.
pub fn start(core: &Arc<BrokerCore>, r: &Arc<Replica>, dest: &Path, for_reassignment: bool) -> Result<(), LogError> {
    let tp = (r.topic.clone(), r.partition);
    let current_dir = r.log.lock().dir().parent().map(Path::to_path_buf);
    {
        let fut = r.future.lock();
        if fut.as_ref().is_some_and(|f| f.dest == dest) && core.moves.is_moving(&tp) {
            return Ok(());
        }
    }
    cancel(core, r);
    if current_dir.as_deref() == Some(dest) {
        return Ok(());
    }
    let path = dest.join(format!("{}{FUTURE_SUFFIX}", r.name()));
    let log = PartitionLog::open(&path, future_config(core))?;
    tracing::info!(replica = %r.name(), dest = %dest.display(), "moving replica to another log dir");
    *r.future.lock() = Some(FutureLog {
        log,
        dest: dest.to_path_buf(),
        copied_bytes: 0,
        whole_files: true,
        for_reassignment,
    });
    spawn_copy(core, r);
    Ok(())
}

/// A future log is synced whole just before it goes live, not segment by segment.
fn future_config(core: &BrokerCore) -> crate::partition_log::LogConfig {
    crate::partition_log::LogConfig {
        fsync_on_roll: false,
        fsync_on_append: false,
        ..core.config.log.clone()
    }
}

/// Resumes a future log found at start. One that cannot be opened (its unsynced segments were
/// cut by a power loss) is only a copy: it is removed and the move starts over.
pub fn resume(core: &Arc<BrokerCore>, r: &Arc<Replica>, future_folder: &Path) -> Result<(), LogError> {
    let log = match PartitionLog::open(future_folder, future_config(core)) {
        Ok(log) => log,
        Err(e) => {
            tracing::warn!(replica = %r.name(), error = %e, "future log damaged; starting the move over");
            std::fs::remove_dir_all(future_folder)
                .map_err(|e| crate::partition_log::io_err("remove", future_folder, e))?;
            PartitionLog::open(future_folder, future_config(core))?
        }
    };
    let dest = future_folder.parent().map(Path::to_path_buf).unwrap_or_default();
    tracing::info!(replica = %r.name(), dest = %dest.display(), from = log.log_end_offset(), "resuming log dir move");
    // Whether a reassignment started it is not on disk; `named_dir` takes a move over again
    // while its reassignment still names the dir.
    *r.future.lock() = Some(FutureLog {
        log,
        dest,
        copied_bytes: 0,
        whole_files: true,
        for_reassignment: false,
    });
    spawn_copy(core, r);
    Ok(())
}

/// Stops a replica's move, if any, and removes its future folder.
pub fn cancel(core: &BrokerCore, r: &Replica) {
    if let Some(h) = core.moves.tasks.lock().remove(&(r.topic.clone(), r.partition)) {
        h.abort();
    }
    let future = r.future.lock().take();
    if let Some(f) = future {
        let path = f.log.dir().to_path_buf();
        drop(f);
        match std::fs::remove_dir_all(&path) {
            Ok(()) => tracing::info!(replica = %r.name(), "cancelled log dir move"),
            Err(e) => tracing::warn!(replica = %r.name(), error = %e, "cannot remove future log"),
        }
    }
}

fn spawn_copy(core: &Arc<BrokerCore>, r: &Arc<Replica>) {
    let tp = (r.topic.clone(), r.partition);
    let handle = tokio::spawn(copy_until_swapped(core.clone(), r.clone()));
    if let Some(old) = core.moves.tasks.lock().insert(tp, handle) {
        old.abort();
    }
}

/// What one copy step did.
enum Step {
    Copied(usize),
    CaughtUp,
    NoFuture,
}

/// Gives a move up after a failed copy or sync: a failed disk goes offline, the future goes.
fn abandon(core: &BrokerCore, r: &Replica, e: &LogError) {
    tracing::error!(replica = %r.name(), error = %e, "log dir move failed; abandoned");
    core.report_log_error(e);
    cancel(core, r);
}

async fn copy_until_swapped(core: Arc<BrokerCore>, r: Arc<Replica>) {
    let Ok(_slot) = core.moves.slots.clone().acquire_owned().await else {
        return; // the semaphore is never closed
    };
    loop {
        let rate = core.alter_log_dirs_rate();
        let chunk = crate::throttle::chunk_bytes(rate);
        let r2 = r.clone();
        // Whole files only unthrottled: a throttled copy goes in pieces at its rate.
        let whole_files = rate.is_none();
        let step = tokio::task::spawn_blocking(move || copy_step(&r2, chunk, whole_files)).await;
        match step {
            Ok(Ok(Step::Copied(n))) => {
                core.metrics.dir_move_bytes.inc_by(n as u64);
                // Charged after the copy and waited for at once, so the last piece is paid
                // for before the swap too.
                if let Some(rate) = rate {
                    core.moves.throttle.charge(n);
                    core.moves.throttle.acquire(rate).await;
                }
            }
            Ok(Ok(Step::CaughtUp)) => {
                // Write the copy back before the swap takes the log's lock, so that produce
                // waits only for what came in since.
                let r2 = r.clone();
                let synced = tokio::task::spawn_blocking(move || match r2.future.lock().as_mut() {
                    Some(f) => f.log.sync_all(),
                    None => Ok(()),
                })
                .await;
                if let Ok(Err(e)) = synced {
                    abandon(&core, &r, &e);
                    return;
                }
                let r2 = r.clone();
                let counted = core.metrics.dir_move_bytes.clone();
                let pause_ms = core.config.swap_pause_ms;
                match tokio::task::spawn_blocking(move || swap(&r2, &counted, pause_ms)).await {
                    Ok(Ok(Some(old))) => {
                        tracing::info!(replica = %r.name(), "log dir move done");
                        r.notify();
                        tokio::task::spawn_blocking(move || {
                            if let Err(e) = std::fs::remove_dir_all(&old) {
                                tracing::warn!(path = %old.display(), error = %e, "cannot remove replaced log");
                            }
                        });
                    }
                    Ok(Ok(None)) => {}
                    Ok(Err(e)) => tracing::error!(replica = %r.name(), error = %e, "log dir swap failed"),
                    Err(e) => tracing::error!(replica = %r.name(), error = %e, "log dir swap task failed"),
                }
                break;
            }
            Ok(Ok(Step::NoFuture)) => break,
            Ok(Err(e)) => {
                abandon(&core, &r, &e);
                return;
            }
            Err(e) => {
                tracing::error!(replica = %r.name(), error = %e, "log dir copy task failed");
                break;
            }
        }
    }
    core.moves.tasks.lock().remove(&(r.topic.clone(), r.partition));
}

/// Copies the next piece of the current log into the future log. The current log's lock is held
/// only for the read; the future's lock is taken before it is released, so that a truncation
/// (which takes both, in that order) cannot slip between the read and the append.
///
/// A sealed segment, when unthrottled, is copied as whole files without the current log's lock:
/// sealed segments change only by truncation, which bumps `truncations` first, so an unchanged
/// count after the copy (checked while the future's lock still holds a truncation back) proves
/// the copy whole.
fn copy_step(r: &Replica, chunk: usize, whole_files: bool) -> Result<Step, LogError> {
    let log = r.log.lock();
    let mut fut = r.future.lock();
    let Some(f) = fut.as_mut() else {
        return Ok(Step::NoFuture);
    };
    let from = f.log.log_end_offset();
    if from >= log.log_end_offset() {
        return Ok(Step::CaughtUp);
    }
    if whole_files && f.whole_files {
        if let Some(seg) = log.sealed_segment_at(from) {
            let before = r.truncations.load(std::sync::atomic::Ordering::SeqCst);
            drop(log);
            match f.log.adopt_segment_copy(&seg) {
                Ok(()) if r.truncations.load(std::sync::atomic::Ordering::SeqCst) == before => {
                    f.copied_bytes += seg.size;
                    return Ok(Step::Copied(seg.size as usize));
                }
                Ok(()) => {
                    // Truncated meanwhile: drop the copy; the next step starts again from here.
                    f.log.truncate_to(from)?;
                    return Ok(Step::Copied(0));
                }
                Err(e) => {
                    tracing::warn!(replica = %r.name(), error = %e, "whole-file segment copy failed; copying batch by batch");
                    f.whole_files = false;
                    return Ok(Step::Copied(0));
                }
            }
        }
    }
    let bytes = log.read(from, chunk, i64::MAX)?;
    drop(log);
    f.log.append_replicated(&bytes)?;
    f.copied_bytes += bytes.len() as u64;
    Ok(Step::Copied(bytes.len()))
}

/// Swaps the caught-up future log in under the log's lock; returns the replaced folder, to be
/// removed in the background. The bytes copied on the way count into `copied`.
fn swap(r: &Replica, copied: &prometheus::IntCounter, pause_ms: u64) -> Result<Option<PathBuf>, LogError> {
    let mut log = r.log.lock();
    let mut fut = r.future.lock();
    let Some(f) = fut.as_mut() else {
        return Ok(None);
    };
    // Appends that came after the last copy step.
    loop {
        let from = f.log.log_end_offset();
        if from >= log.log_end_offset() {
            break;
        }
        let bytes = log.read(from, 8 << 20, i64::MAX)?;
        f.log.append_replicated(&bytes)?;
        f.copied_bytes += bytes.len() as u64;
        copied.inc_by(bytes.len() as u64);
    }
    f.log.sync_all()?;
    log.flush()?;
    let Some(f) = fut.take() else {
        return Ok(None); // checked above, under the same lock
    };
    // The new current log syncs its segments as they seal, as every live log does.
    let cfg = log.config().clone();
    let current = log.dir().to_path_buf();
    let future = f.log.dir().to_path_buf();
    drop(f);
    let name = r.name();
    let replaced = current.with_file_name(format!("{name}{DELETE_SUFFIX}"));
    let target = future.with_file_name(&name);
    if replaced.exists() {
        std::fs::remove_dir_all(&replaced).map_err(|e| crate::partition_log::io_err("remove", &replaced, e))?;
    }
    rename_durably(&current, &replaced)?;
    if pause_ms > 0 {
        tracing::warn!(replica = %name, pause_ms, "test hook: pausing between the swap's renames");
        std::thread::sleep(std::time::Duration::from_millis(pause_ms));
    }
    rename_durably(&future, &target)?;
    let opened = PartitionLog::open(&target, cfg)?;
    // The old log's open files point into the renamed folder; they close here.
    *log = opened;
    Ok(Some(replaced))
}

fn rename_durably(from: &Path, to: &Path) -> Result<(), LogError> {
    std::fs::rename(from, to).map_err(|e| crate::partition_log::io_err("rename", from, e))?;
    match to.parent() {
        Some(parent) => sync_dir(parent),
        None => Ok(()),
    }
}

/// Handles AlterReplicaLogDirs: the whole request is checked first and refused, changing
/// nothing, when a path is relative or not one of this broker's dirs, a dir is offline, a
/// partition is unknown or named twice. Then each hosted replica starts moving; a replica not
/// hosted yet answers REPLICA_NOT_AVAILABLE and the dir is kept for when it arrives.
pub fn alter(core: &Arc<BrokerCore>, moves: &[ReplicaLogDirMove]) -> AlterReplicaLogDirsResponse {
    let result = |m: &ReplicaLogDirMove, code: ErrorCode, message: String| PartitionResult {
        topic: m.topic.clone(),
        partition: m.partition,
        error_code: code.0,
        error_message: message,
    };
    let mut seen = std::collections::HashSet::new();
    let mut refused = Vec::new();
    for m in moves {
        let tp = format!("{}-{}", m.topic, m.partition);
        let error = if let Some((code, why)) = unusable_dir(core, Path::new(&m.dir)) {
            Some((code, format!("{tp}: {why}")))
        } else if core.view.read().partition(&m.topic, m.partition).is_none() {
            Some((
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                format!("{tp}: no such topic-partition"),
            ))
        } else if !seen.insert((m.topic.clone(), m.partition)) {
            Some((ErrorCode::INVALID_REQUEST, format!("{tp}: named twice in one request")))
        } else {
            None
        };
        if let Some((code, message)) = error {
            refused.push(result(m, code, message));
        }
    }
    if let Some(first) = refused.first() {
        return AlterReplicaLogDirsResponse {
            error_code: first.error_code,
            error_message: format!(
                "{} of {} moves are invalid; nothing was changed. First: {}",
                refused.len(),
                moves.len(),
                first.error_message
            ),
            results: refused,
        };
    }
    let results = moves
        .iter()
        .map(|m| {
            let tp = (m.topic.clone(), m.partition);
            let dest = PathBuf::from(&m.dir);
            let hosted = core.replicas.read().get(&tp).cloned();
            match hosted {
                Some(r) => match start(core, &r, &dest, false) {
                    Ok(()) => result(m, ErrorCode::NONE, String::new()),
                    Err(e) => result(m, ErrorCode::KAFKA_STORAGE_ERROR, format!("{}: {e}", r.name())),
                },
                None => {
                    core.moves.wanted.lock().insert(tp, dest);
                    result(
                        m,
                        ErrorCode::REPLICA_NOT_AVAILABLE,
                        format!(
                            "broker {} does not host {}-{} yet; it will be created in {}",
                            core.id, m.topic, m.partition, m.dir
                        ),
                    )
                }
            }
        })
        .collect();
    AlterReplicaLogDirsResponse {
        results,
        ..Default::default()
    }
}

/// Handles DescribeLogDirs: each dir's space and error, and the replicas (current and future)
/// in it, limited to `topics` when given.
pub fn describe(core: &BrokerCore, topics: &[String]) -> DescribeLogDirsResponse {
    let mut by_dir: BTreeMap<PathBuf, Vec<LogDirReplica>> = BTreeMap::new();
    let replicas: Vec<Arc<Replica>> = core.replicas.read().values().cloned().collect();
    for r in replicas {
        if !topics.is_empty() && !topics.contains(&r.topic) {
            continue;
        }
        let log = r.log.lock();
        let (leo, size) = (log.log_end_offset(), log.size_bytes());
        if let Some(dir) = log.dir().parent() {
            by_dir.entry(dir.to_path_buf()).or_default().push(LogDirReplica {
                topic: r.topic.clone(),
                partition: r.partition,
                size,
                ..Default::default()
            });
        }
        let fut = r.future.lock();
        if let Some(f) = fut.as_ref() {
            let fsize = f.log.size_bytes();
            by_dir.entry(f.dest.clone()).or_default().push(LogDirReplica {
                topic: r.topic.clone(),
                partition: r.partition,
                size: fsize,
                offset_lag: leo - f.log.log_end_offset(),
                is_future: true,
                copied_bytes: f.copied_bytes,
                remaining_bytes: size.saturating_sub(fsize),
            });
        }
    }
    let dirs = core
        .dirs
        .dirs()
        .iter()
        .map(|d| {
            let mut replicas = by_dir.remove(d).unwrap_or_default();
            replicas.sort_by(|a, b| (&a.topic, a.partition, a.is_future).cmp(&(&b.topic, b.partition, b.is_future)));
            let offline = core.dirs.offline_reason(d);
            LogDirDescription {
                path: d.to_string_lossy().into_owned(),
                error_code: if offline.is_some() {
                    ErrorCode::KAFKA_STORAGE_ERROR.0
                } else {
                    0
                },
                error_message: offline.unwrap_or_default(),
                total_bytes: fs2::total_space(d).unwrap_or(0),
                usable_bytes: fs2::available_space(d).unwrap_or(0),
                replicas,
            }
        })
        .collect();
    DescribeLogDirsResponse {
        broker_id: core.id,
        dirs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(t: &str, p: u32) -> TopicPartition {
        (t.to_string(), p)
    }

    #[test]
    fn folders_are_classified_by_suffix() {
        assert_eq!(classify("a-b-3"), Some(Folder::Current(tp("a-b", 3))));
        assert_eq!(classify("a-b-3.move"), Some(Folder::Future(tp("a-b", 3))));
        assert_eq!(classify("a-3.delete"), Some(Folder::Deleting(tp("a", 3))));
        assert_eq!(classify("a.move"), None);
        assert_eq!(classify("lost+found"), None);
    }

    #[test]
    fn a_move_beside_its_current_log_resumes_and_leftovers_go() {
        let (a, b) = (PathBuf::from("/a"), PathBuf::from("/b"));
        let found = vec![
            (a.clone(), "t-0".to_string()),
            (b.clone(), "t-0.move".to_string()),
            (a.clone(), "t-0.delete".to_string()),
        ];
        let (steps, resume) = recovery_plan(&found);
        assert_eq!(resume, vec![(tp("t", 0), b.join("t-0.move"))]);
        assert_eq!(steps, vec![RecoveryStep::Remove(a.join("t-0.delete"))]);
    }

    #[test]
    fn a_swap_stopped_between_its_renames_is_finished() {
        let (a, b) = (PathBuf::from("/a"), PathBuf::from("/b"));
        let found = vec![
            (a.clone(), "t-0.delete".to_string()),
            (b.clone(), "t-0.move".to_string()),
        ];
        let (steps, resume) = recovery_plan(&found);
        assert!(resume.is_empty());
        assert_eq!(
            steps,
            vec![
                RecoveryStep::Rename {
                    from: b.join("t-0.move"),
                    to: b.join("t-0"),
                },
                RecoveryStep::Remove(a.join("t-0.delete")),
            ]
        );
    }

    #[test]
    fn a_move_into_the_current_dir_is_dropped() {
        let a = PathBuf::from("/a");
        let found = vec![(a.clone(), "t-0".to_string()), (a.clone(), "t-0.move".to_string())];
        let (steps, resume) = recovery_plan(&found);
        assert!(resume.is_empty());
        assert_eq!(steps, vec![RecoveryStep::Remove(a.join("t-0.move"))]);
    }
}
