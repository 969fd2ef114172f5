//! The broker's log dir requests: AlterReplicaLogDirs starts moves, DescribeLogDirs reports each
//! dir with its replicas and running moves.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proto::errors::ErrorCode;
use proto::ferry::{
    AlterReplicaLogDirsResponse, DescribeLogDirsResponse, LogDirDescription, LogDirReplica, PartitionResult,
    ReplicaLogDirMove,
};

use crate::log_dir_move::start;
use crate::replica::Replica;
use crate::replica_manager::BrokerCore;

/// Whether `dir` names one of the broker's cordoned dirs, however it is spelled.
fn is_cordoned(core: &BrokerCore, dir: &str) -> bool {
    let work_dir = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let wanted = proto::cordon::absolute(&work_dir, dir);
    core.dirs
        .cordoned()
        .iter()
        .any(|c| proto::cordon::absolute(&work_dir, &c.display().to_string()) == wanted)
}

/// Handles AlterReplicaLogDirs: the whole request is checked first and refused, changing
/// nothing, when a path is relative or not one of this broker's dirs, a dir is offline or cordoned, a
/// partition is unknown or named twice. Then each hosted replica starts moving; a replica not
/// hosted yet answers REPLICA_NOT_AVAILABLE and the dir is kept for when it arrives.
pub fn alter(core: &Arc<BrokerCore>, moves: &[ReplicaLogDirMove]) -> AlterReplicaLogDirsResponse {
    let result = |m: &ReplicaLogDirMove, code: ErrorCode, message: String| PartitionResult {
        topic: m.topic.clone(),
        partition: m.partition,
        error_code: code.0,
        error_message: message,
    };
    let mut seen = HashSet::new();
    let mut refused = Vec::new();
    for m in moves {
        let tp = format!("{}-{}", m.topic, m.partition);
        let error = if let Some((code, why)) = core.unusable_dir(Path::new(&m.dir)) {
            Some((code, format!("{tp}: {why}")))
        } else if is_cordoned(core, &m.dir) {
            // As Kafka 4.3 answers a move into a cordoned dir (KIP-1066).
            Some((
                ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                format!("{tp}: log dir {} is cordoned (cordoned.log.dirs)", m.dir),
            ))
        } else if core.view.read().partition(&m.topic, m.partition).is_none() {
            Some((
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                format!("{tp}: no such topic-partition"),
            ))
        } else if !seen.insert((m.topic.clone(), m.partition)) {
            Some((ErrorCode::INVALID_REQUEST, format!("{tp}: named twice in one request")))
        } else {
            None
        };
        if let Some((code, message)) = error {
            refused.push(result(m, code, message));
        }
    }
    if let Some(first) = refused.first() {
        return AlterReplicaLogDirsResponse {
            error_code: first.error_code,
            error_message: format!(
                "{} of {} moves are invalid; nothing was changed. First: {}",
                refused.len(),
                moves.len(),
                first.error_message
            ),
            results: refused,
        };
    }
    let results = moves
        .iter()
        .map(|m| {
            let tp = (m.topic.clone(), m.partition);
            let dest = PathBuf::from(&m.dir);
            let hosted = core.replicas.read().get(&tp).cloned();
            match hosted {
                Some(r) => match start(core, &r, &dest, false) {
                    Ok(()) => result(m, ErrorCode::NONE, String::new()),
                    Err(e) => result(m, ErrorCode::KAFKA_STORAGE_ERROR, format!("{}: {e}", r.name())),
                },
                None => {
                    core.moves.want(tp, dest);
                    result(
                        m,
                        ErrorCode::REPLICA_NOT_AVAILABLE,
                        format!(
                            "broker {} does not host {}-{} yet; it will be created in {}",
                            core.id, m.topic, m.partition, m.dir
                        ),
                    )
                }
            }
        })
        .collect();
    AlterReplicaLogDirsResponse {
        results,
        ..Default::default()
    }
}

/// Handles DescribeLogDirs: each dir's space and error, and the replicas (current and future)
/// in it, limited to `topics` when given.
pub fn describe(core: &BrokerCore, topics: &[String]) -> DescribeLogDirsResponse {
    let mut by_dir: BTreeMap<PathBuf, Vec<LogDirReplica>> = BTreeMap::new();
    let replicas: Vec<Arc<Replica>> = core.replicas.read().values().cloned().collect();
    for r in replicas {
        if !topics.is_empty() && !topics.contains(&r.topic) {
            continue;
        }
        let log = r.log();
        let (leo, size) = (log.log_end_offset(), log.size_bytes());
        if let Some(dir) = log.dir().parent() {
            by_dir.entry(dir.to_path_buf()).or_default().push(LogDirReplica {
                topic: r.topic.clone(),
                partition: r.partition,
                size,
                ..Default::default()
            });
        }
        let fut = r.future();
        if let Some(f) = fut.as_ref() {
            let fsize = f.log.size_bytes();
            by_dir.entry(f.dest.clone()).or_default().push(LogDirReplica {
                topic: r.topic.clone(),
                partition: r.partition,
                size: fsize,
                offset_lag: leo - f.log.log_end_offset(),
                is_future: true,
                copied_bytes: f.copied_bytes,
                remaining_bytes: size.saturating_sub(fsize),
            });
        }
    }
    let dirs = core
        .dirs
        .dirs()
        .iter()
        .map(|d| {
            let mut replicas = by_dir.remove(d).unwrap_or_default();
            replicas.sort_by(|a, b| (&a.topic, a.partition, a.is_future).cmp(&(&b.topic, b.partition, b.is_future)));
            let offline = core.dirs.offline_reason(d);
            LogDirDescription {
                path: d.to_string_lossy().into_owned(),
                error_code: if offline.is_some() {
                    ErrorCode::KAFKA_STORAGE_ERROR.0
                } else {
                    0
                },
                error_message: offline.unwrap_or_default(),
                total_bytes: fs2::total_space(d).unwrap_or(0),
                usable_bytes: fs2::available_space(d).unwrap_or(0),
                replicas,
            }
        })
        .collect();
    DescribeLogDirsResponse {
        broker_id: core.id,
        dirs,
    }
}
