//! Moving a replica between the log dirs of this broker (KIP-113). A future log
//! `<dest>/<topic>-<p>.move` is filled from the current log while the replica keeps serving; once
//! it has caught up, under the log's lock, the current folder is renamed `<topic>-<p>.delete`, the
//! future folder becomes `<topic>-<p>`, and the old folder is removed in the background.
//!
//! The engine's whole input is a [`MoveHost`]: the registry of running moves, the settings, a
//! rate and a place to report a failed disk. The broker is one; a test can be another, with no
//! broker around it. The folders' names and their recovery at start are in
//! `dir_move_recovery`, the registry of running moves in `dir_moves`, the requests that start
//! them in `log_dir_requests`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use proto::errors::ErrorCode;

use crate::dir_move_recovery::{DELETE_SUFFIX, FUTURE_SUFFIX};
use crate::dir_moves::DirMoves;
use crate::future_log::FutureLog;
use crate::log_dirs::LogDirs;
use crate::partition_log::{sync_dir, LogConfig, LogError, PartitionLog};
use crate::replica::Replica;

/// What the dir-move engine needs from its broker.
pub trait MoveHost: Send + Sync + 'static {
    /// The registry of running moves.
    fn moves(&self) -> &DirMoves;
    /// The settings of a future log (its fsyncs are turned off: it is synced whole at the end).
    fn log_config(&self) -> LogConfig;
    /// `replica.alter.log.dirs.io.max.bytes.per.second`, read before each copy step.
    fn rate(&self) -> Option<u64>;
    /// Counts the bytes copied into future logs.
    fn copied(&self) -> &prometheus::IntCounter;
    /// Test hook: a pause between the swap's two renames (0 in normal use).
    fn swap_pause_ms(&self) -> u64;
    /// A copy or sync failed: a failed disk goes offline.
    fn failed(&self, e: &LogError);
}

/// Why `dir` cannot take a replica on this broker (the error code and a message), or `None`
/// when it can: it must be absolute, one of this broker's log dirs, and online.
pub fn unusable_dir(dirs: &LogDirs, broker: i32, dir: &Path) -> Option<(ErrorCode, String)> {
    if !dir.is_absolute() {
        Some((
            ErrorCode::LOG_DIR_NOT_FOUND,
            format!("log dir '{}' is not an absolute path", dir.display()),
        ))
    } else if !dirs.dirs().iter().any(|d| d == dir) {
        Some((
            ErrorCode::LOG_DIR_NOT_FOUND,
            format!("'{}' is not a log dir of broker {broker}", dir.display()),
        ))
    } else {
        dirs.offline_reason(dir).map(|why| {
            (
                ErrorCode::KAFKA_STORAGE_ERROR,
                format!("log dir '{}' is offline: {why}", dir.display()),
            )
        })
    }
}

/// Starts (or redirects) the move of a hosted replica to `dest`; moving to its current dir
/// cancels a running move. `for_reassignment` marks a move to a dir a reassignment named.
pub fn start<H: MoveHost>(
    host: &Arc<H>,
    r: &Arc<Replica>,
    dest: &Path,
    for_reassignment: bool,
) -> Result<(), LogError> {
    let tp = (r.topic.clone(), r.partition);
    let current_dir = r.log().dir().parent().map(Path::to_path_buf);
    {
        let fut = r.future();
        if fut.as_ref().is_some_and(|f| f.dest == dest) && host.moves().is_moving(&tp) {
            return Ok(());
        }
    }
    host.moves().cancel(r);
    if current_dir.as_deref() == Some(dest) {
        return Ok(());
    }
    let path = dest.join(format!("{}{FUTURE_SUFFIX}", r.name()));
    let log = PartitionLog::open(&path, future_config(host.as_ref()))?;
    tracing::info!(replica = %r.name(), dest = %dest.display(), "moving replica to another log dir");
    *r.future() = Some(Box::new(FutureLog {
        log,
        dest: dest.to_path_buf(),
        copied_bytes: 0,
        whole_files: true,
        for_reassignment,
    }));
    spawn_copy(host, r);
    Ok(())
}

/// A future log is synced whole just before it goes live, not segment by segment.
fn future_config(host: &impl MoveHost) -> LogConfig {
    LogConfig {
        fsync_on_roll: false,
        fsync_on_append: false,
        ..host.log_config()
    }
}

/// Resumes a future log found at start. One that cannot be opened (its unsynced segments were
/// cut by a power loss) is only a copy: it is removed and the move starts over.
pub fn resume<H: MoveHost>(host: &Arc<H>, r: &Arc<Replica>, future_folder: &Path) -> Result<(), LogError> {
    let log = match PartitionLog::open(future_folder, future_config(host.as_ref())) {
        Ok(log) => log,
        Err(e) => {
            tracing::warn!(replica = %r.name(), error = %e, "future log damaged; starting the move over");
            std::fs::remove_dir_all(future_folder)
                .map_err(|e| crate::partition_log::io_err("remove", future_folder, e))?;
            PartitionLog::open(future_folder, future_config(host.as_ref()))?
        }
    };
    let dest = future_folder.parent().map(Path::to_path_buf).unwrap_or_default();
    tracing::info!(replica = %r.name(), dest = %dest.display(), from = log.log_end_offset(), "resuming log dir move");
    // Whether a reassignment started it is not on disk; `named_dir` takes a move over again
    // while its reassignment still names the dir.
    *r.future() = Some(Box::new(FutureLog {
        log,
        dest,
        copied_bytes: 0,
        whole_files: true,
        for_reassignment: false,
    }));
    spawn_copy(host, r);
    Ok(())
}

fn spawn_copy<H: MoveHost>(host: &Arc<H>, r: &Arc<Replica>) {
    let tp = (r.topic.clone(), r.partition);
    host.moves()
        .track(tp, tokio::spawn(copy_until_swapped(host.clone(), r.clone())));
}

/// What one copy step did.
enum Step {
    Copied(usize),
    CaughtUp,
    NoFuture,
}

/// Gives a move up after a failed copy or sync: a failed disk goes offline, the future goes.
fn abandon(host: &impl MoveHost, r: &Replica, e: &LogError) {
    tracing::error!(replica = %r.name(), error = %e, "log dir move failed; abandoned");
    host.failed(e);
    host.moves().cancel(r);
}

async fn copy_until_swapped<H: MoveHost>(host: Arc<H>, r: Arc<Replica>) {
    let Ok(_slot) = host.moves().slots().acquire_owned().await else {
        return; // the semaphore is never closed
    };
    loop {
        let rate = host.rate();
        let chunk = crate::throttle::chunk_bytes(rate);
        let r2 = r.clone();
        // Whole files only unthrottled: a throttled copy goes in pieces at its rate.
        let whole_files = rate.is_none();
        let step = tokio::task::spawn_blocking(move || copy_step(&r2, chunk, whole_files)).await;
        match step {
            Ok(Ok(Step::Copied(n))) => {
                host.copied().inc_by(n as u64);
                // Charged after the copy and waited for at once, so the last piece is paid
                // for before the swap too.
                if let Some(rate) = rate {
                    host.moves().throttle().charge(n);
                    host.moves().throttle().acquire(rate).await;
                }
            }
            Ok(Ok(Step::CaughtUp)) => {
                // Write the copy back before the swap takes the log's lock, so that produce
                // waits only for what came in since.
                let r2 = r.clone();
                let synced = tokio::task::spawn_blocking(move || match r2.future().as_mut() {
                    Some(f) => f.log.sync_all(),
                    None => Ok(()),
                })
                .await;
                if let Ok(Err(e)) = synced {
                    abandon(host.as_ref(), &r, &e);
                    return;
                }
                let r2 = r.clone();
                let counted = host.copied().clone();
                let pause_ms = host.swap_pause_ms();
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
                abandon(host.as_ref(), &r, &e);
                return;
            }
            Err(e) => {
                tracing::error!(replica = %r.name(), error = %e, "log dir copy task failed");
                break;
            }
        }
    }
    host.moves().finished(&(r.topic.clone(), r.partition));
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
    let log = r.log();
    let mut fut = r.future();
    let Some(f) = fut.as_mut() else {
        return Ok(Step::NoFuture);
    };
    let from = f.log.log_end_offset();
    if from < log.log_start_offset() {
        // Retention or DeleteRecords went past all the copy holds: it starts over at the start.
        f.log.reset_to(log.log_start_offset())?;
        return Ok(Step::Copied(0));
    }
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
    let mut log = r.log();
    let mut fut = r.future();
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
    let start = log.log_start_offset();
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
    let mut opened = PartitionLog::open(&target, cfg)?;
    // A start inside a segment (DeleteRecords) is not in the files; the checkpoint of the new
    // dir has it from its next write on.
    opened.restore_log_start(start)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> LogConfig {
        LogConfig {
            segment_bytes: 300,
            ..LogConfig::default()
        }
    }

    /// Copies until the future log has caught up; its log end offset.
    fn copy_all(r: &Replica, whole_files: bool) -> i64 {
        for _ in 0..1000 {
            if let Step::CaughtUp = copy_step(r, 1 << 20, whole_files).unwrap() {
                return r.future().as_ref().unwrap().log.log_end_offset();
            }
        }
        panic!("the copy never caught up");
    }

    #[test]
    fn a_copy_below_a_log_start_that_moved_starts_over_there() {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = PartitionLog::open(&tmp.path().join("a/t-0"), small()).unwrap();
        for o in 0..30 {
            log.append_as_leader(&[format!("record {o:04}")], 1, o).unwrap();
        }
        let r = Replica::new("t".into(), 0, 1, log, proto::clock::Clock::system());
        let future = PartitionLog::open(&tmp.path().join("b/t-0.move"), small()).unwrap();
        *r.future() = Some(Box::new(FutureLog {
            log: future,
            dest: tmp.path().join("b"),
            copied_bytes: 0,
            whole_files: true,
            for_reassignment: false,
        }));
        copy_step(&r, 1 << 20, true).unwrap();
        // Retention deletes past what the copy holds, then DeleteRecords moves the start
        // inside a segment: the copy starts over at the start, whole files and batches alike.
        let start = {
            let mut log = r.log();
            log.delete_oldest_segments(3).unwrap();
            let inside = log.log_start_offset() + 1;
            log.increment_log_start(inside).unwrap();
            inside
        };
        assert_eq!(copy_all(&r, true), 30);
        let want = r.log().read_records(start, 1 << 20, 30).unwrap();
        let fut = r.future();
        let f = &fut.as_ref().unwrap().log;
        assert!(f.log_start_offset() <= start);
        assert_eq!(f.read_records(start, 1 << 20, 30).unwrap(), want);
    }
}
