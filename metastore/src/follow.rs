//! Following a prefix: a full read, then its changes in order, read again whenever the watch
//! cannot resume, so a follower never misses a change.

use std::time::Duration;

use proto::metastore as pb;
use tokio::sync::mpsc;

use crate::client::Client;

/// What [`Client::follow`] delivers.
#[derive(Debug, Clone)]
pub enum FollowEvent {
    /// Every key under the prefix as of `revision`; replaces whatever the follower held.
    Reset {
        /// The keys.
        kvs: Vec<pb::KeyValue>,
        /// The revision they were read at.
        revision: u64,
    },
    /// The changes of one revision.
    Changes(pb::WatchResponse),
}

impl Client {
    /// Mirrors a prefix: a full read, then its changes in order. When the watch cannot resume
    /// (the node is gone long enough, or history was compacted), it reads everything again and
    /// sends a new [`FollowEvent::Reset`], so a follower never misses a change. Ends when the
    /// receiver is dropped.
    pub fn follow(&self, prefix: &str) -> mpsc::Receiver<FollowEvent> {
        let (tx, rx) = mpsc::channel(1024);
        let client = self.clone();
        let prefix = prefix.to_string();
        tokio::spawn(async move {
            loop {
                let req = pb::RangeRequest {
                    prefix: prefix.clone(),
                    ..Default::default()
                };
                let resp = match client.range_req(req).await {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::debug!(error = %e, prefix, "follow: read failed, retrying");
                        if tx.is_closed() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                };
                let revision = resp.header.map_or(0, |h| h.revision);
                if tx
                    .send(FollowEvent::Reset {
                        kvs: resp.kvs,
                        revision,
                    })
                    .await
                    .is_err()
                {
                    return;
                }
                let mut watch = client.watch(&prefix, revision + 1);
                loop {
                    match watch.recv().await {
                        Some(Ok(w)) => {
                            if tx.send(FollowEvent::Changes(w)).await.is_err() {
                                return;
                            }
                        }
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, prefix, "follow: watch lost, reading again");
                            break;
                        }
                        None => break,
                    }
                }
            }
        });
        rx
    }
}

impl FollowEvent {
    /// Whether the follower must drop what it held before applying [`FollowEvent::changes`].
    pub fn is_reset(&self) -> bool {
        matches!(self, FollowEvent::Reset { .. })
    }

    /// The keys changed, as (key, new value or `None` for a delete, revision).
    pub fn changes(&self) -> Vec<(&str, Option<&[u8]>, u64)> {
        match self {
            FollowEvent::Reset { kvs, .. } => kvs
                .iter()
                .map(|kv| (kv.key.as_str(), Some(kv.value.as_ref()), kv.mod_revision))
                .collect(),
            FollowEvent::Changes(w) => w
                .events
                .iter()
                .filter_map(|e| {
                    let kv = e.kv.as_ref()?;
                    let deleted = e.kind == pb::watch_event::Kind::Delete as i32;
                    Some((
                        kv.key.as_str(),
                        (!deleted).then_some(kv.value.as_ref()),
                        kv.mod_revision,
                    ))
                })
                .collect(),
        }
    }
}
