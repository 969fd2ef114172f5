//! Removing the folder of a replica no longer assigned here, as Kafka does: the folder is
//! renamed at once to Kafka's `<topic>-<partition>.<32 hex digits>-delete`, which no scan takes
//! for a replica, and removed after `file.delete.delay.ms` on a blocking thread. The pass that
//! dropped the replica then pays one rename, not a removal of every file: a drain that drops
//! 100,000 replicas removed them while the brokers it fed were creating theirs on the same disk.
//! A folder left by a stop before its removal is removed at the next start
//! (`dir_move_recovery`).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Renames `folder` out of the way; returns its new path.
pub fn retire(folder: &Path) -> std::io::Result<PathBuf> {
    let mut name = folder.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}-delete", uuid::Uuid::new_v4().simple()));
    let to = folder.with_file_name(name);
    std::fs::rename(folder, &to)?;
    Ok(to)
}

/// Removes `folders` after `delay` on a blocking thread, or at once when no runtime runs.
pub fn remove_later(folders: Vec<PathBuf>, delay: Duration) {
    if folders.is_empty() {
        return;
    }
    let remove = move || {
        for f in &folders {
            match std::fs::remove_dir_all(f) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    tracing::error!(path = %f.display(), error = %e, "cannot remove a dropped replica's folder");
                }
                _ => {}
            }
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn(async move {
                tokio::time::sleep(delay).await;
                if let Err(e) = tokio::task::spawn_blocking(remove).await {
                    tracing::error!(error = %e, "removing dropped replicas' folders failed");
                }
            });
        }
        Err(_) => remove(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retired_folder_gets_kafkas_name_and_no_scan_takes_it_for_a_replica() {
        let root = tempfile::tempdir().unwrap();
        let folder = root.path().join("t-1-7");
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("00000000000000000000.log"), b"").unwrap();
        let to = retire(&folder).unwrap();
        assert!(!folder.exists() && to.join("00000000000000000000.log").exists());
        let name = to.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            crate::dir_move_recovery::ferry_name_of_kafka_folder(&name).as_deref(),
            Some("t-1-7.delete"),
            "{name}"
        );
        assert_eq!(crate::log_dirs::parse_replica_folder(&name), None);
        // Retired twice (dropped, made again, dropped): two names, no clash.
        std::fs::create_dir(&folder).unwrap();
        assert_ne!(retire(&folder).unwrap(), to);
        remove_later(vec![to.clone()], Duration::ZERO);
        assert!(!to.exists());
    }

    #[test]
    fn folders_a_stop_left_are_removed_at_the_next_start() {
        let root = tempfile::tempdir().unwrap();
        let folder = root.path().join("t-0");
        let mut retired = Vec::new();
        for _ in 0..2 {
            std::fs::create_dir(&folder).unwrap();
            retired.push(retire(&folder).unwrap());
        }
        std::fs::create_dir(&folder).unwrap();
        crate::dir_move_recovery::recover(&[root.path().to_path_buf()]).unwrap();
        let left: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, vec!["t-0".to_string()]);
    }

    #[tokio::test]
    async fn removal_waits_for_the_delay() {
        let root = tempfile::tempdir().unwrap();
        let folder = root.path().join("t-0");
        std::fs::create_dir(&folder).unwrap();
        let to = retire(&folder).unwrap();
        remove_later(vec![to.clone()], Duration::from_millis(300));
        assert!(to.exists(), "removed before the delay");
        tokio::time::timeout(Duration::from_secs(30), async {
            while to.exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("removed after the delay");
    }
}
