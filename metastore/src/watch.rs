//! Watch streams: a client's view of every change under a prefix from a revision on, first
//! replayed from the history, then live, resynced from the history when it falls behind.

use std::sync::Arc;

use proto::metastore as pb;
use tokio::sync::{broadcast, mpsc};
use tonic::Status;

use crate::kv_pb::event_to_pb;
use crate::state_machine::{RevisionEvents, SmShared};

/// Messages a watch buffers for a slow client before it waits on it.
const WATCH_BUFFER: usize = 256;

/// The sending end of a watch stream.
type WatchSender = mpsc::Sender<Result<pb::WatchResponse, Status>>;

/// Opens a watch of the keys under `prefix` from `start_revision` (0: from the next change),
/// less the key `hide`; it ends when the client goes or `closing` turns true.
pub(crate) fn open(
    sm: Arc<SmShared>,
    prefix: String,
    start_revision: u64,
    hide: Option<&'static str>,
    closing: tokio::sync::watch::Receiver<bool>,
) -> Result<mpsc::Receiver<Result<pb::WatchResponse, Status>>, Status> {
    let (sub, backlog, next) = subscribe(&sm, start_revision)?;
    let (tx, rx) = mpsc::channel(WATCH_BUFFER);
    let watcher = Watcher {
        sm,
        prefix,
        hide,
        sub,
        backlog,
        next,
        tx,
        closing,
    };
    tokio::spawn(watcher.run());
    Ok(rx)
}

/// A live feed, the history before it, and the first revision to stream.
type Subscription = (broadcast::Receiver<Arc<RevisionEvents>>, Vec<Arc<RevisionEvents>>, u64);

/// Subscribes to live changes and copies the history from `start` under one lock, so that no
/// revision falls between the two and none is seen twice.
fn subscribe(sm: &SmShared, start: u64) -> Result<Subscription, Status> {
    let g = sm.inner.read();
    let sub = sm.events.subscribe();
    let current = g.revision();
    let next = if start == 0 { current + 1 } else { start };
    let backlog = if next > current {
        Vec::new()
    } else {
        g.history.since(next).ok_or_else(|| compacted(next, g.history.start))?
    };
    Ok((sub, backlog, next))
}

/// One open watch: what it streams, where it is in the history, and where its messages go.
struct Watcher {
    /// The state machine whose changes are streamed.
    sm: Arc<SmShared>,
    /// Only keys under this prefix are streamed.
    prefix: String,
    /// A key never streamed (the credential, to a caller without it).
    hide: Option<&'static str>,
    /// The live feed of applied revisions.
    sub: broadcast::Receiver<Arc<RevisionEvents>>,
    /// Revisions from the history, streamed before the live feed.
    backlog: Vec<Arc<RevisionEvents>>,
    /// The next revision to stream.
    next: u64,
    /// The client's stream.
    tx: WatchSender,
    /// Turns true when the node stops.
    closing: tokio::sync::watch::Receiver<bool>,
}

impl Watcher {
    /// Streams until the client goes, the node stops, or a revision it needs is compacted.
    async fn run(self) {
        let Watcher {
            sm,
            prefix,
            hide,
            mut sub,
            backlog,
            mut next,
            tx,
            mut closing,
        } = self;
        // First message: the revision the watch is synced to, so a client can resume from it.
        if tx
            .send(Ok(pb::WatchResponse {
                revision: next - 1,
                events: vec![],
            }))
            .await
            .is_err()
        {
            return;
        }
        let mut pending: std::collections::VecDeque<Arc<RevisionEvents>> = backlog.into();
        loop {
            while let Some(re) = pending.pop_front() {
                if re.revision < next {
                    continue;
                }
                if re.reset {
                    let _ = tx.send(Err(compacted(next, re.revision + 1))).await;
                    return;
                }
                let revision = re.revision;
                next = revision + 1;
                let events = if re.events.len() < HEAVY_REVISION_EVENTS {
                    revision_to_pb(&re, &prefix, hide)
                } else {
                    // A revision of a million partitions takes a second to convert: not on the
                    // runtime's threads, where Raft's tasks wait behind it.
                    let prefix = prefix.clone();
                    match tokio::task::spawn_blocking(move || revision_to_pb(&re, &prefix, hide)).await {
                        Ok(events) => events,
                        Err(e) => {
                            let _ = tx.send(Err(Status::internal(format!("watch: {e}")))).await;
                            return;
                        }
                    }
                };
                if events.is_empty() {
                    continue;
                }
                let msg = pb::WatchResponse { revision, events };
                if tx.send(Ok(msg)).await.is_err() {
                    return;
                }
            }
            tokio::select! {
                _ = tx.closed() => return,
                _ = async { let _ = closing.wait_for(|c| *c).await; } => {
                    let _ = tx.send(Err(Status::unavailable("node is shutting down"))).await;
                    return;
                }
                got = sub.recv() => match got {
                    Ok(re) => pending.push_back(re),
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        // Too slow for the live feed: catch up from the history instead.
                        match subscribe(&sm, next) {
                            Ok((s, backlog, _)) => {
                                sub = s;
                                pending.extend(backlog);
                            }
                            Err(status) => {
                                let _ = tx.send(Err(status)).await;
                                return;
                            }
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        }
    }
}

/// Events in one revision at or past which converting them runs off the runtime.
const HEAVY_REVISION_EVENTS: usize = 10_000;

/// The events of `re` under `prefix`, but `hide`, as the client receives them.
fn revision_to_pb(re: &RevisionEvents, prefix: &str, hide: Option<&str>) -> Vec<pb::WatchEvent> {
    re.events
        .iter()
        .filter(|e| e.key.starts_with(prefix) && Some(e.key.as_str()) != hide)
        .map(event_to_pb)
        .collect()
}

/// The error for a watch from a revision the history no longer holds.
fn compacted(asked: u64, oldest: u64) -> Status {
    Status::out_of_range(format!(
        "revision {asked} was compacted; the oldest revision this node can replay is {oldest}"
    ))
}
