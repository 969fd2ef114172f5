//! Kafka's `meta.properties` in a log dir: which cluster and broker wrote the dir. Ferry does not
//! write it; a dir that has one was a Kafka broker's. Such a dir is only taken over by a broker
//! with the same id, in a metastore that holds an import of the same cluster (`ferry migrate-zk`
//! writes `/cluster/id`): otherwise the broker would find every replica in it unassigned and
//! delete them.

use std::path::{Path, PathBuf};

/// The file's name in each log dir.
pub const FILE: &str = "meta.properties";

/// What a Kafka broker wrote about itself in a log dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    /// `cluster.id`.
    pub cluster_id: Option<String>,
    /// `broker.id` (ZooKeeper mode) or `node.id` (KRaft).
    pub broker_id: Option<i32>,
}

/// Parses Java properties text as Kafka writes the file (`key=value` lines, `#` comments).
pub fn parse(text: &str) -> MetaProperties {
    let mut m = MetaProperties {
        cluster_id: None,
        broker_id: None,
    };
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else { continue };
        match k.trim() {
            "cluster.id" => m.cluster_id = Some(v.trim().to_string()),
            "broker.id" | "node.id" => m.broker_id = v.trim().parse().ok(),
            _ => {}
        }
    }
    m
}

/// The `meta.properties` of each dir that has one (a file over 64 KiB is not Kafka's and is
/// read as empty).
pub fn read(dirs: &[PathBuf]) -> Vec<(PathBuf, MetaProperties)> {
    dirs.iter()
        .filter_map(|d| {
            let path = d.join(FILE);
            let small = std::fs::metadata(&path).ok()?.len() <= 64 << 10;
            let text = if small {
                std::fs::read_to_string(&path).ok()?
            } else {
                String::new()
            };
            Some((d.clone(), parse(&text)))
        })
        .collect()
}

/// Checks that no dir Kafka wrote belongs to another broker than `id` (no metastore needed).
pub fn check_broker_id(found: &[(PathBuf, MetaProperties)], id: i32) -> Result<(), String> {
    for (dir, m) in found {
        if let Some(b) = m.broker_id.filter(|b| *b != id) {
            return Err(format!(
                "log dir {} belongs to Kafka broker {b} ({FILE}), not to broker {id}: start the broker with --id {b}, or give it another dir",
                Path::new(dir).display()
            ));
        }
    }
    Ok(())
}

/// Checks that broker `id` may take over the dirs Kafka wrote, given the cluster id the
/// metastore holds (`None`: no import). The error names the dir and what to do.
pub fn check(found: &[(PathBuf, MetaProperties)], id: i32, imported: Option<&str>) -> Result<(), String> {
    check_broker_id(found, id)?;
    for (dir, m) in found {
        let dir = Path::new(dir).display();
        let Some(c) = &m.cluster_id else { continue };
        match imported {
            Some(i) if i == c => {}
            Some(i) => {
                return Err(format!(
                    "log dir {dir} belongs to Kafka cluster {c} ({FILE}), but the metastore holds cluster {i}; nothing was changed"
                ))
            }
            None => {
                return Err(format!(
                    "log dir {dir} belongs to Kafka cluster {c} ({FILE}), and the metastore holds no import of it: run `ferry migrate-zk` first, so that its replicas are not taken as unassigned; nothing was changed"
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_file_parses_and_only_the_same_broker_of_the_imported_cluster_passes() {
        let m = parse("#\n#Wed Dec 02 20:05:26 UTC 2026\nbroker.id=1\nversion=0\ncluster.id=Yy5Q9zAURHixjrbtDMy24Q\n");
        assert_eq!(
            m,
            MetaProperties {
                cluster_id: Some("Yy5Q9zAURHixjrbtDMy24Q".into()),
                broker_id: Some(1),
            }
        );
        assert_eq!(parse("node.id=3\n").broker_id, Some(3));
        let found = vec![(PathBuf::from("/d"), m)];
        assert!(check(&found, 1, Some("Yy5Q9zAURHixjrbtDMy24Q")).is_ok());
        let e = check(&found, 2, Some("Yy5Q9zAURHixjrbtDMy24Q")).unwrap_err();
        assert!(e.contains("belongs to Kafka broker 1") && e.contains("--id 1"), "{e}");
        let e = check(&found, 1, None).unwrap_err();
        assert!(e.contains("run `ferry migrate-zk` first"), "{e}");
        let e = check(&found, 1, Some("other")).unwrap_err();
        assert!(e.contains("holds cluster other"), "{e}");
        assert!(check(&[], 1, None).is_ok(), "no Kafka dir, nothing to check");
    }
}
