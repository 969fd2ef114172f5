//! `cleaner-offset-checkpoint`, Kafka's record of how far each compacted log of a log dir was
//! cleaned: the same layout as the dir's other checkpoints (`dir_checkpoints.rs`), read back at
//! start so that a restart does not take every log for dirty.

use std::collections::HashMap;
use std::path::Path;

use crate::dir_checkpoints::{self, Entry};
use crate::log_dirs::TopicPartition;

/// The file's name, Kafka's.
pub const FILE: &str = "cleaner-offset-checkpoint";

/// The cleaned points in `dir`'s file; none when it is missing or unreadable (everything is
/// then dirty, which costs a clean, not data).
pub fn load(dir: &Path) -> HashMap<TopicPartition, i64> {
    let path = dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return HashMap::new(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the cleaner checkpoint; every compacted log there is dirty");
            return HashMap::new();
        }
    };
    match dir_checkpoints::parse(&text) {
        Some(entries) => entries.into_iter().map(|(t, p, o)| ((t, p), o)).collect(),
        None => {
            tracing::warn!(path = %path.display(), "the cleaner checkpoint is not well formed; every compacted log there is dirty");
            HashMap::new()
        }
    }
}

/// Replaces `dir`'s file with `entries`, atomically.
pub fn write(dir: &Path, entries: &[Entry]) -> std::io::Result<()> {
    crate::checkpoint_file::replace(dir, FILE, &dir_checkpoints::encode(entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_reads_back_and_a_missing_or_damaged_one_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path()).is_empty());
        write(dir.path(), &[("t".into(), 1, 40), ("__consumer_offsets".into(), 7, 3)]).unwrap();
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert_eq!(text, "0\n2\n__consumer_offsets 7 3\nt 1 40\n");
        let back = load(dir.path());
        assert_eq!(back.get(&("t".to_string(), 1)), Some(&40));
        assert_eq!(back.len(), 2);
        std::fs::write(dir.path().join(FILE), "0\n5\nt 1 40\n").unwrap();
        assert!(load(dir.path()).is_empty());
    }
}
