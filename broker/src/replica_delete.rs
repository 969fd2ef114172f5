//! Deleting a replica's folder off the reconcile path, as Kafka's `LogManager.asyncDelete` does:
//! the folder is renamed `<topic>-<p>.<32 hex digits>-delete` at once, and a thread of its own
//! removes it. Removing a folder costs an unlink per file, and on a disk that discards freed
//! blocks each unlink waits for the device; a reconcile that deleted thousands of replicas in
//! line held up every other metadata change behind it. Unlike Kafka (which waits
//! `log.segment.delete.delay.ms`, 60 s), the thread removes the folder right away, so that the
//! space comes back as soon as the disk allows. A folder left by a crash is removed at the next
//! start (`dir_move_recovery::recover`).

use std::path::{Path, PathBuf};
use std::sync::mpsc;

/// Kafka's name for a deleted replica's folder: `<folder>.<32 hex digits>-delete`.
pub fn deleted_name(folder: &str) -> String {
    format!("{folder}.{}-delete", uuid::Uuid::new_v4().simple())
}

/// Renames replica folders out of the way and removes them on a thread of its own.
#[derive(Debug)]
pub struct Deleter {
    queue: Option<mpsc::Sender<PathBuf>>,
}

impl Default for Deleter {
    fn default() -> Self {
        Self::new()
    }
}

impl Deleter {
    /// A deleter whose thread ends once the deleter is dropped and its queue is empty.
    pub fn new() -> Self {
        let (tx, rx) = mpsc::channel::<PathBuf>();
        let spawned = std::thread::Builder::new()
            .name("replica-delete".into())
            .spawn(move || {
                for path in rx {
                    remove(&path);
                }
            });
        match spawned {
            Ok(_) => Self { queue: Some(tx) },
            Err(e) => {
                // Without the thread, folders are removed in line, as before.
                tracing::warn!(error = %e, "no replica delete thread; folders are removed in line");
                Self { queue: None }
            }
        }
    }

    /// Takes `folder` away under its own name at once and removes it later. A folder that cannot
    /// be renamed is removed in line.
    pub fn delete(&self, folder: &Path) {
        let name = folder.file_name().map(|n| n.to_string_lossy().into_owned());
        let renamed = name.map(|n| folder.with_file_name(deleted_name(&n)));
        let Some(queue) = &self.queue else {
            return remove(folder);
        };
        match renamed {
            Some(to) if std::fs::rename(folder, &to).is_ok() => {
                if let Err(mpsc::SendError(path)) = queue.send(to) {
                    remove(&path);
                }
            }
            _ => remove(folder),
        }
    }
}

fn remove(path: &Path) {
    match std::fs::remove_dir_all(path) {
        Ok(()) => tracing::debug!(path = %path.display(), "removed a deleted replica's folder"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::error!(path = %path.display(), error = %e, "cannot remove a deleted replica's folder"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dir_move_recovery::ferry_name_of_kafka_folder;
    use crate::log_dirs::parse_replica_folder;

    #[test]
    fn a_deleted_folder_takes_kafkas_name_and_is_never_read_as_a_replica() {
        let name = deleted_name("my-topic-3");
        assert!(name.starts_with("my-topic-3.") && name.ends_with("-delete"), "{name}");
        assert_eq!(parse_replica_folder(&name), None);
        assert_eq!(ferry_name_of_kafka_folder(&name).as_deref(), Some("my-topic-3.delete"));
    }

    #[test]
    fn a_deleted_folder_leaves_its_name_at_once_and_the_disk_soon() {
        let root = tempfile::tempdir().unwrap();
        let folder = root.path().join("t-0");
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("00000000000000000000.log"), b"x").unwrap();
        let deleter = Deleter::new();
        deleter.delete(&folder);
        // The name is free as soon as delete returns: a replica created again gets a new folder.
        assert!(!folder.exists());
        std::fs::create_dir(&folder).unwrap();
        drop(deleter); // the thread drains its queue and ends
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let left = || {
            std::fs::read_dir(root.path())
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        while left() != ["t-0"] {
            assert!(std::time::Instant::now() < deadline, "left: {:?}", left());
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // A folder already gone is no error.
        Deleter::new().delete(&root.path().join("gone-0"));
    }
}
