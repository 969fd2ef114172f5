//! How stored keys and their changes appear in the `Metastore` service's messages.

use proto::metastore as pb;

use crate::kv_state::{Event, KvEntry};

/// The message form of the entry stored at `key`.
pub(crate) fn to_pb(key: &str, e: &KvEntry) -> pb::KeyValue {
    pb::KeyValue {
        key: key.to_string(),
        value: e.value.clone(),
        create_revision: e.create_revision,
        mod_revision: e.mod_revision,
        version: e.version,
        lease: e.lease,
    }
}

/// The message form of one change: a put carries the new entry, a delete the key and revision.
pub(crate) fn event_to_pb(ev: &Event) -> pb::WatchEvent {
    match &ev.entry {
        Some(e) => pb::WatchEvent {
            kind: pb::watch_event::Kind::Put as i32,
            kv: Some(to_pb(&ev.key, e)),
        },
        None => pb::WatchEvent {
            kind: pb::watch_event::Kind::Delete as i32,
            kv: Some(pb::KeyValue {
                key: ev.key.clone(),
                mod_revision: ev.revision,
                ..Default::default()
            }),
        },
    }
}
