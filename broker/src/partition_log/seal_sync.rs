//! The fsync of a sealed segment, run beside the log. A roll used to fsync the segment it sealed
//! before the next append: a follower copying 1 GiB stopped 16 times, 55-120 ms each, about a
//! third of the copy (Kafka flushes a rolled segment in the background too). At most one such
//! sync runs per log: the next roll, a truncation, a flush and `sync_all` wait for it first. A
//! crash while it ran may leave that segment, the last sealed one, with a torn or missing tail,
//! which opening the log cuts as it would the active segment's (`open.rs`).

use std::fs::File;
use std::path::PathBuf;
use std::sync::{mpsc, Arc};

use super::{io_err, LogError};

/// A sealed segment's fsync, running on a thread of its own.
#[derive(Debug)]
pub(super) struct SealSync {
    base: i64,
    log_path: PathBuf,
    done: mpsc::Receiver<Result<(), LogError>>,
}

impl SealSync {
    /// Starts fsyncing `files`, the open files of the segment at `base`, on a thread of its own;
    /// if no thread can be started, syncs them here and returns `None`.
    pub fn start(base: i64, files: Vec<(PathBuf, File)>) -> Result<Option<Self>, LogError> {
        let Some(log_path) = files.first().map(|(p, _)| p.clone()) else {
            return Ok(None); // nothing was ever opened, so nothing is unsynced
        };
        let files = Arc::new(files);
        let (tx, done) = mpsc::sync_channel(1);
        let theirs = files.clone();
        let spawned = std::thread::Builder::new().name("segment-sync".into()).spawn(move || {
            // The receiver may be gone (the log dropped): nobody waits then.
            let _ = tx.send(sync_files(&theirs));
        });
        match spawned {
            Ok(_) => Ok(Some(SealSync { base, log_path, done })),
            Err(e) => {
                tracing::warn!(error = %e, "no thread for a segment's fsync; syncing it inline");
                sync_files(&files).map(|()| None)
            }
        }
    }

    /// The base offset of the segment being synced.
    pub fn base(&self) -> i64 {
        self.base
    }

    /// Waits for the fsync to end; its error, if it failed.
    pub fn finish(self) -> Result<(), LogError> {
        self.done.recv().unwrap_or_else(|_| {
            Err(io_err(
                "fsync",
                &self.log_path,
                std::io::Error::other("the segment's sync thread ended without an answer"),
            ))
        })
    }
}

fn sync_files(files: &[(PathBuf, File)]) -> Result<(), LogError> {
    for (path, f) in files {
        f.sync_data().map_err(|e| io_err("fsync", path, e))?;
    }
    Ok(())
}
