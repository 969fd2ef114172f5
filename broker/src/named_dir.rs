//! The log dir a reassignment names for a replica (`log_dirs` in the reassignment file, stored
//! with the target in the partition's state): the broker moves its replica there, and reports
//! when it is there, since the reassignment completes only then. A pure decision, a small step
//! that carries it out, and the driver that runs it twice a second and sends the reports in
//! batches (a bulk move's replicas reach their dirs together).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use proto::errors::ErrorCode;
use proto::ferry::{AssignReplicaDirRequest, AssignReplicaDirsRequest, PartitionState};

use crate::controller_channels::{ControllerChannels, REPORT_BATCHES_IN_FLIGHT};
use crate::log_dirs::TopicPartition;

use crate::dir_choice::pending_dir;
use crate::log_dir_move;
use crate::replica::Replica;
use crate::replica_manager::BrokerCore;

/// What a broker does about the dir named for one of its replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamedDirAction {
    /// Nothing to do.
    Nothing,
    /// Move the replica to this dir.
    Move(PathBuf),
    /// Stop the move a reassignment started: it was cancelled or no longer names a dir.
    CancelMove,
    /// Tell the controller the replica is in this dir.
    Report(PathBuf),
}

/// A replica's running dir move: its destination, and whether a reassignment started it.
#[derive(Debug, Clone, Copy)]
pub struct RunningMove<'a> {
    /// Where the future log is.
    pub dest: &'a Path,
    /// Started for a named dir, not by hand.
    pub for_reassignment: bool,
}

/// Decides the next step for broker `me`'s replica, in `current` dir, given the partition's
/// state and its running move.
pub fn next_action(me: i32, meta: &PartitionState, current: &Path, running: Option<RunningMove<'_>>) -> NamedDirAction {
    match pending_dir(me, meta) {
        Some(named) if Path::new(named) == current => NamedDirAction::Report(current.to_path_buf()),
        Some(named) if running.is_some_and(|m| m.dest == Path::new(named)) => NamedDirAction::Nothing,
        Some(named) => NamedDirAction::Move(PathBuf::from(named)),
        None if running.is_some_and(|m| m.for_reassignment) => NamedDirAction::CancelMove,
        None => NamedDirAction::Nothing,
    }
}

/// Carries out the next step for one hosted replica; returns the report to send, if any. A
/// named dir this broker cannot use (unknown, offline) is logged and left: the operator cancels.
pub fn step(core: &Arc<BrokerCore>, r: &Arc<Replica>) -> Option<AssignReplicaDirRequest> {
    // The common case is decided without copying the state or touching the log: this runs for
    // every hosted replica twice a second.
    let named = pending_dir(core.id, &r.state().meta).is_some();
    if !named && r.future().is_none() {
        return None;
    }
    let meta = r.state().meta.clone();
    let current = r.log().dir().parent().map(Path::to_path_buf)?;
    let action = {
        let mut fut = r.future();
        // A move resumed after a restart does not know who started it: one to the dir still
        // named is the reassignment's, so that a cancel stops it.
        if let (Some(named), Some(f)) = (pending_dir(core.id, &meta), fut.as_mut()) {
            if f.dest == Path::new(named) {
                f.for_reassignment = true;
            }
        }
        let running = fut.as_ref().map(|f| RunningMove {
            dest: &f.dest,
            for_reassignment: f.for_reassignment,
        });
        next_action(core.id, &meta, &current, running)
    };
    match action {
        NamedDirAction::Nothing => None,
        NamedDirAction::CancelMove => {
            tracing::info!(replica = %r.name(), "the reassignment no longer names a log dir; stopping its move");
            core.moves.cancel(r);
            None
        }
        NamedDirAction::Move(dest) => {
            if let Some((_, why)) = core.unusable_dir(&dest) {
                tracing::warn!(replica = %r.name(), dir = %dest.display(), why, "cannot move to the named log dir");
                return None;
            }
            if let Err(e) = log_dir_move::start(core, r, &dest, true) {
                tracing::warn!(replica = %r.name(), error = %e, "cannot start the move to the named log dir");
            }
            None
        }
        NamedDirAction::Report(dir) => Some(AssignReplicaDirRequest {
            topic: r.topic.clone(),
            partition: r.partition,
            broker: core.id,
            log_dir: dir.to_string_lossy().into_owned(),
        }),
    }
}

/// Twice a second, replicas whose reassignment names a log dir are moved there, and those that
/// are there are reported to the controller, in AssignReplicaDirs batches. A refused or failed
/// report waits a second.
pub async fn run(core: Arc<BrokerCore>, controller: Option<ControllerChannels>) {
    let Some(controller) = controller else {
        return;
    };
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut retry_after: HashMap<TopicPartition, tokio::time::Instant> = HashMap::new();
    loop {
        tick.tick().await;
        let core2 = core.clone();
        // Starting a move opens files: off the async workers.
        let reports = tokio::task::spawn_blocking(move || {
            let replicas: Vec<_> = core2.replicas.read().values().cloned().collect();
            replicas
                .iter()
                .filter_map(|r| step(&core2, r).map(|req| (r.clone(), req)))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        let now = tokio::time::Instant::now();
        retry_after.retain(|_, t| *t > now);
        let mut due = reports
            .into_iter()
            .filter(|(r, _)| !retry_after.contains_key(&(r.topic.clone(), r.partition)))
            .peekable();
        let batches = std::iter::from_fn(|| {
            due.peek()?;
            Some(due.by_ref().take(proto::MAX_REPORT_BATCH).collect::<Vec<_>>())
        });
        let answered: Vec<_> = futures::stream::iter(batches)
            .map(|batch| send(controller.clone(), batch))
            .buffer_unordered(REPORT_BATCHES_IN_FLIGHT)
            .collect()
            .await;
        for (r, answer) in answered.into_iter().flatten() {
            let refused = match answer {
                Some(resp) if resp.error_code != 0 => {
                    tracing::info!(replica = %r.name(), code = %ErrorCode(resp.error_code), message = resp.error_message, "log dir report refused");
                    true
                }
                // The answer's state is left to the metadata watch: a report that completes the
                // move may change the leader, and the watch is what restarts fetchers. Until it
                // arrives, a repeated report is answered with no change.
                Some(_) => false,
                None => true,
            };
            if refused {
                retry_after.insert((r.topic.clone(), r.partition), now + Duration::from_secs(1));
            }
        }
    }
}

/// Sends one batch of reports; each replica with its answer (`None`: the call failed).
async fn send(
    controller: ControllerChannels,
    batch: Vec<(Arc<Replica>, AssignReplicaDirRequest)>,
) -> Vec<(Arc<Replica>, Option<proto::ferry::AssignReplicaDirResponse>)> {
    let items: Vec<_> = batch.iter().map(|(_, req)| req.clone()).collect();
    let answers = controller
        .send_batch(
            "log dir reports",
            &items,
            |mut admin, items| async move {
                let resp = admin.assign_replica_dirs(AssignReplicaDirsRequest { items }).await?;
                Ok(resp.into_inner().results)
            },
            |mut admin, req| async move { Ok(admin.assign_replica_dir(req).await?.into_inner()) },
        )
        .await;
    batch.into_iter().map(|(r, _)| r).zip(answers).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(pending: &[i32], dirs: &[&str]) -> PartitionState {
        PartitionState {
            replicas: vec![1, 2],
            log_dirs: dirs.iter().map(|d| d.to_string()).collect(),
            dir_pending: pending.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn a_pending_replica_moves_then_reports() {
        let m = meta(&[1], &["/b", ""]);
        let here = Path::new("/a");
        assert_eq!(next_action(1, &m, here, None), NamedDirAction::Move("/b".into()));
        let to_b = RunningMove {
            dest: Path::new("/b"),
            for_reassignment: true,
        };
        assert_eq!(next_action(1, &m, here, Some(to_b)), NamedDirAction::Nothing);
        let by_hand_elsewhere = RunningMove {
            dest: Path::new("/c"),
            for_reassignment: false,
        };
        assert_eq!(
            next_action(1, &m, here, Some(by_hand_elsewhere)),
            NamedDirAction::Move("/b".into()),
            "the named dir wins over a move by hand while the reassignment runs"
        );
        assert_eq!(
            next_action(1, &m, Path::new("/b"), None),
            NamedDirAction::Report("/b".into())
        );
        assert_eq!(
            next_action(2, &m, here, None),
            NamedDirAction::Nothing,
            "no dir named for 2"
        );
    }

    #[test]
    fn a_move_for_a_cancelled_reassignment_stops_and_one_by_hand_goes_on() {
        let quiet = meta(&[], &["/b", ""]);
        let ours = RunningMove {
            dest: Path::new("/b"),
            for_reassignment: true,
        };
        let by_hand = RunningMove {
            dest: Path::new("/b"),
            for_reassignment: false,
        };
        assert_eq!(
            next_action(1, &quiet, Path::new("/a"), Some(ours)),
            NamedDirAction::CancelMove
        );
        assert_eq!(
            next_action(1, &quiet, Path::new("/a"), Some(by_hand)),
            NamedDirAction::Nothing
        );
    }
}
