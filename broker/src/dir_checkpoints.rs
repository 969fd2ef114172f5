//! The checkpoint files Kafka keeps at the top of each log dir, written the same way here:
//! `replication-offset-checkpoint` (high watermarks), `log-start-offset-checkpoint` and
//! `recovery-point-offset-checkpoint` (the offset below which the log is synced). Each is
//! version `0`, a count, then `topic partition offset` lines, replaced atomically every
//! [`INTERVAL`] when it changed (Kafka's `replica.high.watermark.checkpoint.interval.ms`).
//! Ferry recovers from the segments themselves and reads back the log start offsets (a start
//! DeleteRecords put inside a segment has no other record; [`log_starts`] at open, and
//! [`write_log_starts_now`] before DeleteRecords answers) and the high watermarks (a restarted
//! leader then knows what was committed); the recovery points are there so that a log dir reads
//! as a Kafka broker's, for Kafka's tools and for a move back to Kafka.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::replica_manager::BrokerCore;

/// How often the files are brought up to date.
pub const INTERVAL: Duration = Duration::from_secs(5);
use crate::checkpoint_file::replace;
pub use crate::checkpoint_file::{
    encode, log_starts, parse, Entry, OpenCheckpoints, LOG_START, RECOVERY_POINT, REPLICATION,
};

/// One writer at a time (the timer's and DeleteRecords'), each gathering under it: an older
/// text never replaces a newer one.
static WRITING: parking_lot::Mutex<()> = parking_lot::const_mutex(());

/// One replica's offsets: high watermark, log start, recovery point.
struct Row {
    topic: String,
    partition: u32,
    offsets: [i64; 3],
}

/// The files, each with the index of its offset in a [`Row`].
const FILES: [(&str, usize); 3] = [(REPLICATION, 0), (LOG_START, 1), (RECOVERY_POINT, 2)];

/// The offsets of every replica hosted, by the log dir that holds it (every dir, empty too).
fn gather(core: &BrokerCore) -> BTreeMap<PathBuf, Vec<Row>> {
    let replicas: Vec<_> = core.replicas.read().values().cloned().collect();
    let mut by_dir: BTreeMap<PathBuf, Vec<Row>> = core.dirs.dirs().iter().map(|d| (d.clone(), Vec::new())).collect();
    for r in replicas {
        let hw = r.state().high_watermark;
        let (folder, start, recovery) = {
            let log = r.log();
            (log.dir().to_path_buf(), log.log_start_offset(), log.recovery_point())
        };
        if let Some(rows) = core.dirs.dir_of(&folder).and_then(|d| by_dir.get_mut(d)) {
            rows.push(Row {
                topic: r.topic.clone(),
                partition: r.partition,
                offsets: [hw, start, recovery],
            });
        }
    }
    by_dir
}

/// Writes `dir`'s log start checkpoint now, synced (DeleteRecords answers after it).
pub fn write_log_starts_now(core: &BrokerCore, dir: &Path) -> std::io::Result<()> {
    let _one = WRITING.lock();
    let rows = gather(core).remove(dir).unwrap_or_default();
    let entries: Vec<Entry> = rows
        .iter()
        .map(|r| (r.topic.clone(), r.partition, r.offsets[1]))
        .collect();
    replace(dir, LOG_START, &encode(&entries))
}

/// Writes every file whose text changed since `last`; a dir that is offline is skipped.
fn write_changed(core: &BrokerCore, last: &mut HashMap<PathBuf, String>) {
    let _one = WRITING.lock();
    for (dir, rows) in gather(core) {
        if core.dirs.offline_reason(&dir).is_some() {
            continue;
        }
        for (name, i) in FILES {
            let entries: Vec<Entry> = rows
                .iter()
                .map(|r| (r.topic.clone(), r.partition, r.offsets[i]))
                .collect();
            let text = encode(&entries);
            let path = dir.join(name);
            if last.get(&path) == Some(&text) {
                continue;
            }
            match replace(&dir, name, &text) {
                Ok(()) => {
                    last.insert(path, text);
                }
                Err(e) => tracing::warn!(path = %path.display(), error = %e, "writing a checkpoint file"),
            }
        }
    }
}

/// Keeps the files up to date until the task is aborted.
pub async fn run(core: Arc<BrokerCore>) {
    let mut last = HashMap::new();
    let mut tick = tokio::time::interval(INTERVAL);
    loop {
        tick.tick().await;
        let c = core.clone();
        // Thousands of replicas mean megabytes of text and an fsync per file: off the runtime.
        // A panicked pass leaves nothing known written: the next one writes every file.
        last = tokio::task::spawn_blocking(move || {
            write_changed(&c, &mut last);
            last
        })
        .await
        .unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_file_reads_back_in_kafkas_layout() {
        let entries = vec![
            ("b".to_string(), 1, 7),
            ("a".to_string(), 10, 0),
            ("a".to_string(), 2, 42),
        ];
        let text = encode(&entries);
        assert_eq!(text, "0\n3\na 2 42\na 10 0\nb 1 7\n");
        let mut back = parse(&text).unwrap();
        back.sort();
        let mut want = entries;
        want.sort();
        assert_eq!(back, want);
        assert_eq!(encode(&[]), "0\n0\n");
        assert_eq!(parse("0\n0\n"), Some(vec![]));
    }

    #[test]
    fn a_broker_opens_its_replicas_at_the_log_starts_it_checkpointed() {
        use crate::partition_log::{LogConfig, PartitionLog};
        use crate::replica_manager::DataConfig;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap().join("d1");
        {
            let mut log = PartitionLog::open(&dir.join("t-0"), LogConfig::default()).unwrap();
            log.append_as_leader(&["a", "b", "c", "d", "e", "f"], 1, 0).unwrap();
            PartitionLog::open(&dir.join("u-0"), LogConfig::default()).unwrap();
        }
        let start_of = |core: &BrokerCore, t: &str| core.replicas.read()[&(t.to_string(), 0)].log().log_start_offset();
        let core = BrokerCore::open(1, vec![dir.clone()], DataConfig::default()).unwrap();
        assert_eq!(start_of(&core, "t"), 0, "no checkpoint yet");
        // DeleteRecords moves a start inside the segment and checkpoints it before answering.
        core.replicas.read()[&("t".to_string(), 0)]
            .log()
            .increment_log_start(4)
            .unwrap();
        write_log_starts_now(&core, &dir).unwrap();
        assert_eq!(log_starts(&dir)[&("t".to_string(), 0)], 4);
        core.close();
        drop(core);
        let core = BrokerCore::open(1, vec![dir.clone()], DataConfig::default()).unwrap();
        assert_eq!((start_of(&core, "t"), start_of(&core, "u")), (4, 0));
        // A damaged file is not read: the segments' bases stand.
        core.close();
        drop(core);
        std::fs::write(dir.join(LOG_START), "0\n5\nt 0 4\n").unwrap();
        let core = BrokerCore::open(1, vec![dir], DataConfig::default()).unwrap();
        assert_eq!(start_of(&core, "t"), 0);
    }

    #[test]
    fn a_broker_opens_its_replicas_at_the_high_watermarks_it_checkpointed() {
        use crate::partition_log::{LogConfig, PartitionLog};
        use crate::replica_manager::DataConfig;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap().join("d1");
        {
            let mut log = PartitionLog::open(&dir.join("t-0"), LogConfig::default()).unwrap();
            log.append_as_leader(&["a", "b", "c", "d"], 1, 0).unwrap();
            PartitionLog::open(&dir.join("u-0"), LogConfig::default()).unwrap();
        }
        // u's checkpoint is past its (empty) log: it is held to the log end.
        let text = encode(&[("t".into(), 0, 3), ("u".into(), 0, 9)]);
        crate::checkpoint_file::replace(&dir, REPLICATION, &text).unwrap();
        let core = BrokerCore::open(1, vec![dir], DataConfig::default()).unwrap();
        let hw = |t: &str| core.replicas.read()[&(t.to_string(), 0)].state().high_watermark;
        assert_eq!((hw("t"), hw("u")), (3, 0));
    }

    #[test]
    fn a_file_that_lies_about_its_count_or_lines_is_not_read() {
        assert_eq!(parse("1\n0\n"), None, "another version");
        assert_eq!(parse("0\n2\na 0 1\n"), None, "a count that lies");
        assert_eq!(parse("0\n1\na 0\n"), None, "a short line");
        assert_eq!(parse("0\n1\na 0 1 2\n"), None, "a long line");
        assert_eq!(parse("0\n1\na x 1\n"), None);
    }
}
