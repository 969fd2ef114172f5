//! Kafka's reassignment and topics-to-move files: parsing with the line or partition named in
//! each error, and the rollback file `--execute` prints.

use std::collections::BTreeSet;

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// One partition of a reassignment file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// Target replicas.
    pub replicas: Vec<i32>,
    /// Per replica, `"any"` or an absolute path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_dirs: Option<Vec<String>>,
    /// The cancellation proposal's original replicas; accepted and ignored on input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_replicas: Option<Vec<i32>>,
}

/// Kafka's reassignment file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReassignmentFile {
    /// Always 1.
    pub version: i32,
    /// The partitions.
    pub partitions: Vec<FileEntry>,
}

/// Kafka's topics-to-move file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicsFile {
    /// Always 1.
    pub version: i32,
    /// The topics.
    pub topics: Vec<TopicName>,
}

/// One topic of a topics-to-move file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicName {
    /// The topic.
    pub topic: String,
}

/// Files larger than this are refused before parsing.
const MAX_FILE_BYTES: u64 = 64 << 20;

/// Parses and checks a reassignment file; errors name the line or the partition.
pub fn parse_file(text: &str) -> anyhow::Result<ReassignmentFile> {
    let f: ReassignmentFile = serde_json::from_str(text).map_err(|e| anyhow::anyhow!("reassignment file: {e}"))?;
    if f.version != 1 {
        bail!("reassignment file: unknown version {}; only 1 is supported", f.version);
    }
    let mut seen = BTreeSet::new();
    for e in &f.partitions {
        let name = format!("{}-{}", e.topic, e.partition);
        if !seen.insert((e.topic.clone(), e.partition)) {
            bail!("reassignment file: partition {name} appears twice");
        }
        if e.replicas.is_empty() {
            bail!("reassignment file: partition {name}: empty replica list");
        }
        if let Some(b) = e.replicas.iter().find(|b| **b < 0) {
            bail!("reassignment file: partition {name}: broker id {b} is negative");
        }
        let mut brokers = BTreeSet::new();
        if let Some(b) = e.replicas.iter().find(|b| !brokers.insert(**b)) {
            bail!("reassignment file: partition {name}: broker {b} appears twice");
        }
        if let Some(dirs) = &e.log_dirs {
            if dirs.len() != e.replicas.len() {
                bail!(
                    "reassignment file: partition {name}: {} log_dirs for {} replicas",
                    dirs.len(),
                    e.replicas.len()
                );
            }
            if let Some(d) = dirs
                .iter()
                .find(|d| d.as_str() != "any" && !std::path::Path::new(d).is_absolute())
            {
                bail!("reassignment file: partition {name}: log dir {d:?} is neither \"any\" nor an absolute path");
            }
        }
    }
    Ok(f)
}

/// The file a flag names, refused if the flag is missing or the file is over the size cap.
pub fn read_text(path: Option<&std::path::PathBuf>, flag: &str) -> anyhow::Result<String> {
    let Some(path) = path else {
        bail!("{flag} is required for this action");
    };
    let len = std::fs::metadata(path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        .len();
    if len > MAX_FILE_BYTES {
        bail!(
            "{}: {len} bytes is larger than the {MAX_FILE_BYTES} bytes accepted",
            path.display()
        );
    }
    Ok(std::fs::read_to_string(path)?)
}

/// Kafka's reassignment JSON of `entries`, every log dir `"any"`.
pub fn assignment_json(entries: &[(String, u32, Vec<i32>)]) -> anyhow::Result<String> {
    let f = ReassignmentFile {
        version: 1,
        partitions: entries
            .iter()
            .map(|(topic, partition, replicas)| FileEntry {
                topic: topic.clone(),
                partition: *partition,
                replicas: replicas.clone(),
                log_dirs: Some(vec!["any".into(); replicas.len()]),
                original_replicas: None,
            })
            .collect(),
    };
    Ok(serde_json::to_string(&f)?)
}

/// The current assignment of every entry, or the error naming the partitions the cluster does
/// not have (Kafka's words), so that no rollback file is printed for them.
pub fn rollback_or_missing(cur: &[(FileEntry, Option<Vec<i32>>)]) -> Result<Vec<(String, u32, Vec<i32>)>, String> {
    let missing: Vec<String> = cur
        .iter()
        .filter(|(_, r)| r.is_none())
        .map(|(e, _)| format!("{}-{}", e.topic, e.partition))
        .collect();
    if !missing.is_empty() {
        return Err(format!("Unable to find partition: {}", missing.join(", ")));
    }
    Ok(cur
        .iter()
        .map(|(e, r)| (e.topic.clone(), e.partition, r.clone().unwrap_or_default()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_checked_with_the_partition_or_line_named() {
        let ok =
            r#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}"#;
        assert_eq!(parse_file(ok).unwrap().partitions[0].replicas, vec![1, 2]);
        let err = |s: &str| parse_file(s).unwrap_err().to_string();
        assert!(err(r#"{"version":1,"partitions":[{"topic":"t","#).contains("line 1"));
        assert!(
            err(r#"{"version":1,"partitions":[{"topic":"t","partition":"x","replicas":[1]}]}"#)
                .contains("invalid type")
        );
        assert!(
            err(r#"{"version":1,"partitions":[{"topic":"t","replicas":[1]}]}"#).contains("missing field `partition`")
        );
        assert!(err(r#"{"version":2,"partitions":[]}"#).contains("unknown version 2"));
        let dup = r#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}"#;
        assert!(err(dup).contains("t-0 appears twice"));
        assert!(
            err(r#"{"version":1,"partitions":[{"topic":"t","partition":1,"replicas":[-1]}]}"#)
                .contains("t-1: broker id -1 is negative")
        );
        assert!(
            err(r#"{"version":1,"partitions":[{"topic":"t","partition":1,"replicas":[1],"log_dirs":[]}]}"#)
                .contains("0 log_dirs for 1 replicas")
        );
    }

    #[test]
    fn a_rollback_needs_every_partition_to_exist() {
        let entry = |topic: &str, partition| FileEntry {
            topic: topic.into(),
            partition,
            replicas: vec![4],
            log_dirs: None,
            original_replicas: None,
        };
        let cur = vec![(entry("t", 0), Some(vec![1, 2])), (entry("t", 1), Some(vec![2, 3]))];
        assert_eq!(
            rollback_or_missing(&cur),
            Ok(vec![("t".into(), 0, vec![1, 2]), ("t".into(), 1, vec![2, 3])])
        );
        let cur = vec![
            (entry("t", 0), Some(vec![1, 2])),
            (entry("t", 9), None),
            (entry("nope", 0), None),
        ];
        assert_eq!(
            rollback_or_missing(&cur),
            Err("Unable to find partition: t-9, nope-0".to_string())
        );
    }
}
