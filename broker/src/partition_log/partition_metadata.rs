//! `partition.metadata`: the file in which Kafka records a partition folder's topic id, so that
//! a folder left from a deleted topic is never taken for a new topic of the same name.
//!
//! Format (Kafka's `PartitionMetadataFile`): `version: 0` then `topic_id: <id>`, one per line,
//! the id as Kafka prints a Uuid (URL-safe base64, no padding).

use std::fs;
use std::path::Path;

use super::{io_err, LogError};

/// The file's name in a partition folder.
pub const FILE: &str = "partition.metadata";

/// The file's text for `topic_id`.
pub fn encode(topic_id: uuid::Uuid) -> String {
    format!("version: 0\ntopic_id: {}\n", proto::kafka_uuid::encode(topic_id))
}

/// The topic id in a file's text, if it is one Kafka or Ferry wrote.
pub fn parse(text: &str) -> Option<uuid::Uuid> {
    let mut lines = text.lines();
    if lines.next()?.trim() != "version: 0" {
        return None;
    }
    proto::kafka_uuid::decode(lines.next()?.trim().strip_prefix("topic_id:")?)
}

/// Makes `dir`'s file name `topic_id`. A file naming another topic is refused, as Kafka refuses
/// to load such a partition; a missing or unreadable one is written. It is not synced: lost in
/// a crash, it is written again when the broker next opens the replica.
pub fn ensure(dir: &Path, topic_id: uuid::Uuid) -> Result<(), LogError> {
    let path = dir.join(FILE);
    if let Some(found) = fs::read_to_string(&path).ok().as_deref().and_then(parse) {
        if found == topic_id {
            return Ok(());
        }
        return Err(LogError::Corrupt {
            path,
            detail: format!(
                "the folder belongs to topic id {found}, not to this topic's {topic_id}: \
                 it is left from a deleted topic of the same name; move it away"
            ),
        });
    }
    // Written in place, not renamed over: a torn file does not parse and is written again, and
    // a rename doubled the cost of a new replica's file creations.
    fs::write(&path, encode(topic_id)).map_err(|e| io_err("write", &path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_reads_back_and_matches_kafkas_layout() {
        let id = uuid::Uuid::from_u128(0x6f1c6c1e_1d3c_4c39_9d52_5b0d5d0e2f11);
        let text = encode(id);
        // Kafka's Uuid prints 22 URL-safe characters.
        assert_eq!(text, "version: 0\ntopic_id: bxxsHh08TDmdUlsNXQ4vEQ\n");
        assert_eq!(parse(&text), Some(id));
        assert_eq!(parse("version: 1\ntopic_id: bxxsHh08TDmdUlsNXQ4vEQ\n"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn ensure_writes_keeps_and_refuses_another_topics_file() {
        let dir = tempfile::tempdir().unwrap();
        let id = uuid::Uuid::new_v4();
        ensure(dir.path(), id).unwrap();
        assert_eq!(parse(&fs::read_to_string(dir.path().join(FILE)).unwrap()), Some(id));
        ensure(dir.path(), id).unwrap();
        let other = uuid::Uuid::new_v4();
        let e = ensure(dir.path(), other).unwrap_err().to_string();
        assert!(e.contains(&id.to_string()) && e.contains("deleted topic"), "{e}");
        // A torn file is written again.
        fs::write(dir.path().join(FILE), "").unwrap();
        ensure(dir.path(), other).unwrap();
        assert_eq!(parse(&fs::read_to_string(dir.path().join(FILE)).unwrap()), Some(other));
    }
}
