//! The folders of a log dir move (KIP-113) and how a broker finds them at start. A move fills
//! `<dest>/<topic>-<p>.move`; its swap renames the current folder `<topic>-<p>.delete` and the
//! future one `<topic>-<p>`. Crash safety comes from these names alone: [`recovery_plan`] finishes
//! a swap that stopped between its renames, removes leftover `.delete` folders, and resumes every
//! `.move` beside a current log from where it ends.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::log_dirs::{parse_replica_folder, replica_folder, TopicPartition};

/// Suffix of a future log's folder.
pub const FUTURE_SUFFIX: &str = ".move";
/// Suffix of a replaced log's folder, removed in the background.
pub const DELETE_SUFFIX: &str = ".delete";

/// Kafka's name for a folder of a dir move (`<t>-<p>.<32 hex digits>-future`, or `-delete`
/// for a replaced or deleted log), as Ferry names it (`<t>-<p>.move`, `<t>-<p>.delete`); `None`
/// for any other name. A broker renames these at start, so that a log dir a Kafka broker wrote
/// goes through the same recovery as Ferry's own.
pub fn ferry_name_of_kafka_folder(name: &str) -> Option<String> {
    let (rest, suffix) = if let Some(r) = name.strip_suffix("-future") {
        (r, FUTURE_SUFFIX)
    } else {
        (name.strip_suffix("-delete")?, DELETE_SUFFIX)
    };
    let (base, id) = rest.rsplit_once('.')?;
    let hex = id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit());
    (hex && parse_replica_folder(base).is_some()).then(|| format!("{base}{suffix}"))
}

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

/// Brings the dirs to a consistent state before any replica is opened; returns the future logs
/// to resume.
pub fn recover(dirs: &[PathBuf]) -> std::io::Result<Vec<(TopicPartition, PathBuf)>> {
    let mut found = Vec::new();
    for d in dirs {
        for entry in std::fs::read_dir(d)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                let mut name = entry.file_name().to_string_lossy().into_owned();
                if let Some(ferry) = ferry_name_of_kafka_folder(&name) {
                    if !d.join(&ferry).exists() {
                        tracing::info!(dir = %d.display(), from = %name, to = %ferry, "renaming a Kafka dir-move folder");
                        std::fs::rename(d.join(&name), d.join(&ferry))?;
                        name = ferry;
                    } else if ferry.ends_with(DELETE_SUFFIX) {
                        // One of several dropped copies of a replica (`folder_removal`).
                        tracing::info!(path = %d.join(&name).display(), "removing a leftover log folder");
                        std::fs::remove_dir_all(d.join(&name))?;
                        continue;
                    }
                }
                found.push((d.clone(), name));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_future_and_delete_folders_get_ferrys_names() {
        let id = "0123456789abcdef0123456789ABCDEF";
        assert_eq!(
            ferry_name_of_kafka_folder(&format!("my-topic-3.{id}-future")).as_deref(),
            Some("my-topic-3.move")
        );
        assert_eq!(
            ferry_name_of_kafka_folder(&format!("t-0.{id}-delete")).as_deref(),
            Some("t-0.delete")
        );
        assert_eq!(ferry_name_of_kafka_folder("t-0.move"), None);
        assert_eq!(ferry_name_of_kafka_folder("t-0.abc-future"), None);
        assert_eq!(ferry_name_of_kafka_folder(&format!("nopartition.{id}-delete")), None);
    }

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
