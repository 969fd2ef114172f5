//! A broker's log dirs: where each replica's folder lives, and which dir a new replica gets.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Partition key: topic and partition number.
pub type TopicPartition = (String, u32);

/// The name of a replica's folder: `<topic>-<partition>`.
pub fn replica_folder(topic: &str, partition: u32) -> String {
    format!("{topic}-{partition}")
}

/// Parses `<topic>-<partition>`; topics may contain '-', so the number is after the last one.
pub fn parse_replica_folder(name: &str) -> Option<(String, u32)> {
    let (topic, p) = name.rsplit_once('-')?;
    if topic.is_empty() || p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((topic.to_string(), p.parse().ok()?))
}

/// Where each replica found on disk lives: (topic, partition) to its log dir.
pub type ReplicaDirs = BTreeMap<(String, u32), PathBuf>;

/// How long replica counts read from disk are trusted before they are read again.
const REPLICA_COUNT_TTL: std::time::Duration = std::time::Duration::from_secs(1);

/// Replicas per dir, read from disk and counted up by each pick since.
#[derive(Debug)]
struct ReplicaCounts {
    read_at: std::time::Instant,
    counts: BTreeMap<PathBuf, usize>,
}

/// The log dirs of one broker, and which of them failed.
#[derive(Debug)]
pub struct LogDirs {
    dirs: Vec<PathBuf>,
    offline: parking_lot::RwLock<BTreeMap<PathBuf, String>>,
    /// Cordoned dirs (`cordoned.log.dirs`): no new replica goes there.
    cordoned: parking_lot::RwLock<BTreeSet<PathBuf>>,
    /// Reading every dir for every new replica made creating n replicas O(n²).
    counts: parking_lot::Mutex<Option<ReplicaCounts>>,
}

impl LogDirs {
    /// Creates the dirs that do not exist yet.
    pub fn open(dirs: Vec<PathBuf>) -> std::io::Result<Self> {
        if dirs.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "no log dir given",
            ));
        }
        for d in &dirs {
            std::fs::create_dir_all(d)?;
        }
        Ok(Self {
            dirs,
            offline: Default::default(),
            cordoned: Default::default(),
            counts: Default::default(),
        })
    }

    /// Why a dir is offline, or `None` while it works.
    pub fn offline_reason(&self, dir: &Path) -> Option<String> {
        self.offline.read().get(dir).cloned()
    }

    /// Marks a dir offline; returns false when it already was.
    pub fn set_offline(&self, dir: &Path, reason: String) -> bool {
        self.offline.write().insert(dir.to_path_buf(), reason).is_none()
    }

    /// Replaces the cordoned dirs; returns whether they changed.
    pub fn set_cordoned(&self, dirs: BTreeSet<PathBuf>) -> bool {
        let mut now = self.cordoned.write();
        let changed = *now != dirs;
        *now = dirs;
        changed
    }

    /// The cordoned dirs.
    pub fn cordoned(&self) -> Vec<PathBuf> {
        self.cordoned.read().iter().cloned().collect()
    }

    /// The offline dirs.
    pub fn offline(&self) -> Vec<PathBuf> {
        self.offline.read().keys().cloned().collect()
    }

    /// The configured dir that holds `path`, if any.
    pub fn dir_of(&self, path: &Path) -> Option<&PathBuf> {
        self.dirs.iter().find(|d| path.starts_with(d))
    }

    /// The dirs, in configured order.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The replicas found on disk: (topic, partition) to the dir holding them. A replica found in
    /// two dirs keeps the first and the other is reported, so that nothing is silently dropped.
    pub fn scan(&self) -> std::io::Result<(ReplicaDirs, Vec<PathBuf>)> {
        let mut found = BTreeMap::new();
        let mut duplicates = Vec::new();
        for d in &self.dirs {
            for entry in std::fs::read_dir(d)? {
                let entry = entry?;
                if !entry.file_type()?.is_dir() {
                    continue;
                }
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(tp) = parse_replica_folder(&name) {
                    match found.entry(tp) {
                        std::collections::btree_map::Entry::Occupied(_) => duplicates.push(entry.path()),
                        std::collections::btree_map::Entry::Vacant(v) => {
                            v.insert(d.clone());
                        }
                    }
                }
            }
        }
        Ok((found, duplicates))
    }

    /// The dir for a new replica: the named one when it is one of ours, else, of the online dirs
    /// not cordoned, the one with the most free space (counted in whole GiB, so that dirs sharing
    /// a disk tie) and then the fewest replicas. A replica assigned here while every online dir
    /// is cordoned (placed before the cordon reached the controller) still gets an online dir.
    pub fn pick(&self, named: &str) -> PathBuf {
        if !named.is_empty() {
            if let Some(d) = self
                .dirs
                .iter()
                .find(|d| Path::new(named) == d.as_path() && self.offline_reason(d).is_none())
            {
                if let Some(c) = self.counts.lock().as_mut() {
                    *c.counts.entry(d.clone()).or_default() += 1;
                }
                return d.clone();
            }
        }
        let offline = self.offline.read();
        let mut online: Vec<&PathBuf> = self.dirs.iter().filter(|d| !offline.contains_key(*d)).collect();
        let cordoned = self.cordoned.read();
        if online.iter().any(|d| !cordoned.contains(*d)) {
            online.retain(|d| !cordoned.contains(*d));
        }
        let Some(first) = online.first() else {
            return self.dirs[0].clone(); // `open` refuses an empty list; every dir failed
        };
        if online.len() == 1 {
            return (*first).clone();
        }
        let mut counts = self.counts.lock();
        let counts = match &mut *counts {
            Some(c) if c.read_at.elapsed() < REPLICA_COUNT_TTL => c,
            slot => slot.insert(ReplicaCounts {
                read_at: std::time::Instant::now(),
                counts: online.iter().map(|d| ((*d).clone(), count_replicas(d))).collect(),
            }),
        };
        let mut best = (*first).clone();
        let mut best_key = (0u64, usize::MAX);
        for d in online {
            let key = (
                fs2::available_space(d).unwrap_or(0) >> 30,
                counts.counts.get(d).copied().unwrap_or(0),
            );
            if key.0 > best_key.0 || (key.0 == best_key.0 && key.1 < best_key.1) {
                best = d.clone();
                best_key = key;
            }
        }
        *counts.counts.entry(best.clone()).or_default() += 1;
        best
    }
}

/// Replica folders in `dir` (0 when it cannot be read).
fn count_replicas(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |it| {
        it.filter_map(Result::ok)
            .filter(|e| parse_replica_folder(&e.file_name().to_string_lossy()).is_some())
            .count()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_round_trip_with_dashes_in_topic() {
        assert_eq!(replica_folder("a-b", 3), "a-b-3");
        assert_eq!(parse_replica_folder("a-b-3"), Some(("a-b".into(), 3)));
        assert_eq!(parse_replica_folder("a-b-3.move"), None);
        assert_eq!(parse_replica_folder("nodash"), None);
    }

    #[test]
    fn scan_and_pick() {
        let t = tempfile::tempdir().unwrap();
        let dirs = LogDirs::open(vec![t.path().join("d1"), t.path().join("d2")]).unwrap();
        std::fs::create_dir(t.path().join("d2/t-0")).unwrap();
        let (found, dup) = dirs.scan().unwrap();
        assert_eq!(found.get(&("t".to_string(), 0)), Some(&t.path().join("d2")));
        assert!(dup.is_empty());
        assert_eq!(dirs.pick(&t.path().join("d2").to_string_lossy()), t.path().join("d2"));
        assert!(dirs.dirs().contains(&dirs.pick("")));
    }

    #[test]
    fn unnamed_picks_spread_over_dirs_on_one_disk() {
        let t = tempfile::tempdir().unwrap();
        let (d1, d2) = (t.path().join("d1"), t.path().join("d2"));
        let dirs = LogDirs::open(vec![d1.clone(), d2.clone()]).unwrap();
        std::fs::create_dir(d1.join("t-0")).unwrap();
        // Each pick's folder is made, as a broker would, so the counts agree whether they are
        // read again from disk or kept counting picks.
        let picks: Vec<PathBuf> = (0..5)
            .map(|i| {
                let d = dirs.pick("");
                std::fs::create_dir(d.join(format!("t-{}", i + 1))).unwrap();
                d
            })
            .collect();
        assert_eq!(picks.iter().filter(|p| **p == d1).count(), 2, "{picks:?}");
        assert_eq!(picks.iter().filter(|p| **p == d2).count(), 3, "{picks:?}");
        dirs.set_offline(&d2, "failed".into());
        assert_eq!(dirs.pick(""), d1);
    }

    #[test]
    fn new_replicas_skip_cordoned_dirs_while_another_is_open() {
        let t = tempfile::tempdir().unwrap();
        let (d1, d2) = (t.path().join("d1"), t.path().join("d2"));
        let dirs = LogDirs::open(vec![d1.clone(), d2.clone()]).unwrap();
        assert!(dirs.set_cordoned(BTreeSet::from([d1.clone()])));
        assert!(!dirs.set_cordoned(BTreeSet::from([d1.clone()])), "no change");
        for _ in 0..4 {
            assert_eq!(dirs.pick(""), d2);
        }
        // A dir a reassignment names is taken even when cordoned; with every dir cordoned, a
        // replica assigned here anyway still gets one.
        assert_eq!(dirs.pick(&d1.to_string_lossy()), d1);
        dirs.set_cordoned(BTreeSet::from([d1.clone(), d2.clone()]));
        assert!([d1.clone(), d2.clone()].contains(&dirs.pick("")));
        dirs.set_offline(&d2, "failed".into());
        dirs.set_cordoned(BTreeSet::from([d1.clone()]));
        assert_eq!(dirs.pick(""), d1, "the only online dir");
    }
}
