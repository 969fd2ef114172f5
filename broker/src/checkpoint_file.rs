//! The checkpoint files' format and the one read Ferry makes of them: Kafka's version 0, a
//! count, then `topic partition offset` lines; the log starts and high watermarks read back
//! when a broker opens its replicas. A leaf under the broker, so that opening a replica needs no driver.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::partition_log::{LogConfig, LogError, PartitionLog};

/// High watermarks.
pub const REPLICATION: &str = "replication-offset-checkpoint";
/// Log start offsets.
pub const LOG_START: &str = "log-start-offset-checkpoint";
/// Recovery points.
pub const RECOVERY_POINT: &str = "recovery-point-offset-checkpoint";

/// One replica's line in a checkpoint file.
pub type Entry = (String, u32, i64);

/// A checkpoint file's text: version 0, the count, one line per replica, in name order.
pub fn encode(entries: &[Entry]) -> String {
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort();
    let mut out = format!("0\n{}\n", sorted.len());
    for (topic, partition, offset) in sorted {
        out.push_str(&format!("{topic} {partition} {offset}\n"));
    }
    out
}

/// The entries of a checkpoint file's text, if it is a well-formed version 0 file.
pub fn parse(text: &str) -> Option<Vec<Entry>> {
    let mut lines = text.lines();
    if lines.next()? != "0" {
        return None;
    }
    let count: usize = lines.next()?.parse().ok()?;
    let entries: Vec<Entry> = lines
        .map(|l| {
            let mut f = l.split(' ');
            let e = (f.next()?.to_string(), f.next()?.parse().ok()?, f.next()?.parse().ok()?);
            f.next().is_none().then_some(e)
        })
        .collect::<Option<_>>()?;
    (entries.len() == count).then_some(entries)
}

/// Replaces `dir/name` with `text`: a temporary file, synced, renamed over it.
pub(crate) fn replace(dir: &Path, name: &str, text: &str) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))
}

/// The offsets that `dir`'s checkpoint file `name` remembers, by replica; none when the file is
/// missing or damaged.
fn read(dir: &Path, name: &str) -> Offsets {
    let path = dir.join(name);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %path.display(), error = %e, "reading a checkpoint file");
            }
            return HashMap::new();
        }
    };
    match parse(&text) {
        Some(entries) => entries.into_iter().map(|(t, p, o)| ((t, p), o)).collect(),
        None => {
            tracing::warn!(path = %path.display(), "a checkpoint file is damaged; not read");
            HashMap::new()
        }
    }
}

/// The log start offsets that `dir`'s checkpoint remembers, by replica; none when the file is
/// missing or damaged (the segments' own bases then stand).
pub fn log_starts(dir: &Path) -> Offsets {
    read(dir, LOG_START)
}

/// The checkpoints a broker reads back as it opens its dirs, each file read once: the log
/// starts, and the high watermarks (so that a restarted leader knows what was committed, as
/// Kafka's broker reads them).
#[derive(Debug, Default)]
pub struct OpenCheckpoints(HashMap<PathBuf, DirCheckpoints>);

/// What one dir's checkpoints remember, by replica.
#[derive(Debug)]
struct DirCheckpoints {
    log_starts: Offsets,
    high_watermarks: Offsets,
}

/// One checkpoint file's offsets, by replica.
type Offsets = HashMap<(String, u32), i64>;

impl OpenCheckpoints {
    /// Opens the replica of `topic`-`partition` in `dir` at the log start its checkpoint has;
    /// returns it with the high watermark checkpointed for it, if any.
    pub fn open(
        &mut self,
        dir: &Path,
        topic: &str,
        partition: u32,
        cfg: LogConfig,
    ) -> Result<(PartitionLog, Option<i64>), LogError> {
        let read_back = self.0.entry(dir.to_path_buf()).or_insert_with(|| DirCheckpoints {
            log_starts: log_starts(dir),
            high_watermarks: read(dir, REPLICATION),
        });
        let key = (topic.to_string(), partition);
        let mut log = PartitionLog::open(&dir.join(crate::log_dirs::replica_folder(topic, partition)), cfg)?;
        if let Some(&start) = read_back.log_starts.get(&key) {
            log.restore_log_start(start)?;
        }
        Ok((log, read_back.high_watermarks.get(&key).copied()))
    }
}
