//! Tests of the sled log store.
use super::*;
use crate::types::Proposal;
use openraft::{CommittedLeaderId, EntryPayload};

fn entry(index: u64, bytes: usize) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(Proposal {
            segments: vec![vec![index as u8; bytes].into()],
        }),
    }
}

fn open(dir: &std::path::Path) -> (sled::Db, LogStore) {
    // A closed store's flusher thread lets go of the files a moment after the store is gone.
    let mut tries = 0;
    let db = loop {
        match sled::Config::new().path(dir.join("raft")).open() {
            Ok(db) => break db,
            Err(_) if tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) => panic!("open sled: {e}"),
        }
    };
    let log = LogStore::open(db.clone()).expect("open log");
    (db, log)
}

fn files_under(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

#[tokio::test]
async fn large_entries_round_trip_without_unsynced_blob_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, mut log) = open(dir.path());
    let sizes = [0, 10, PIECE_BYTES, PIECE_BYTES + 1, 3 << 20];
    for (i, n) in sizes.iter().enumerate() {
        log.insert_entry(&entry(i as u64 + 1, *n)).expect("insert");
    }
    db.flush().expect("flush");
    // sled keeps values and nodes over its blob threshold in files that flush never syncs.
    assert_eq!(files_under(&dir.path().join("raft").join("blobs")), 0);
    let read = log.try_get_log_entries(1..=5).await.expect("read");
    let expected: Vec<_> = sizes.iter().enumerate().map(|(i, n)| entry(i as u64 + 1, *n)).collect();
    assert_eq!(read, expected);
    assert_eq!(log.try_get_log_entries(2..4).await.expect("read"), expected[1..3]);
    let state = log.get_log_state().await.expect("state");
    assert_eq!(state.last_log_id.map(|l| l.index), Some(5));
}

#[tokio::test]
async fn a_format_1_log_is_rewritten_on_open() {
    use crate::types::{Command, CommandKind, Op, Txn};
    let dir = tempfile::tempdir().expect("tempdir");
    let cmd = Command {
        request_id: Some("r1".into()),
        kind: CommandKind::Txn(Txn {
            guards: vec![],
            ops: vec![Op::Delete { key: "/a".into() }],
        }),
    };
    {
        let db = sled::Config::new()
            .path(dir.path().join("raft"))
            .open()
            .expect("open sled");
        let logs = db.open_tree("raft_log").expect("tree");
        let old = |index: u64, payload| openraft::Entry::<format1::TypeConfig> {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload,
        };
        let entries = [
            old(1, EntryPayload::Blank),
            old(
                2,
                EntryPayload::Normal(format1::Proposal {
                    commands: vec![cmd.clone()],
                }),
            ),
        ];
        for e in entries {
            let mut v = vec![codec::FORMAT_1];
            codec::encode_into(&e, &mut v);
            logs.insert(e.log_id.index.to_be_bytes(), v).expect("insert");
        }
        db.flush().expect("flush");
    }
    let (_db, mut log) = open(dir.path());
    let read = log.try_get_log_entries(1..).await.expect("read");
    assert_eq!(read.len(), 2);
    assert_eq!(read[0].payload, EntryPayload::Blank);
    let EntryPayload::Normal(p) = &read[1].payload else {
        panic!("entry 2 is not a proposal: {:?}", read[1].payload);
    };
    let segments: Vec<_> = p
        .segments
        .iter()
        .map(|s| crate::types::decode_segment(s).expect("decodes"))
        .collect();
    assert_eq!(segments, vec![vec![cmd]]);
    assert!(log.logs.iter().keys().all(|k| k.expect("key").len() == 12));
}

#[tokio::test]
async fn an_entry_whose_append_was_cut_short_is_removed_on_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (db, log) = open(dir.path());
        log.insert_entry(&entry(1, 100)).expect("insert");
        log.insert_entry(&entry(2, 5 * PIECE_BYTES)).expect("insert");
        // A crash after the first pieces of entry 2 were written.
        log.logs.remove(piece_key(2, 5)).expect("remove");
        db.flush().expect("flush");
    }
    let (_db, mut log) = open(dir.path());
    let state = log.get_log_state().await.expect("state");
    assert_eq!(state.last_log_id.map(|l| l.index), Some(1));
    assert_eq!(log.try_get_log_entries(1..).await.expect("read"), vec![entry(1, 100)]);
    assert!(log.logs.range(piece_key(2, 0)..).next().is_none());
}

#[tokio::test]
async fn a_long_range_reads_the_same_off_the_calling_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_db, mut log) = open(dir.path());
    let n = INLINE_READ_ENTRIES * 3;
    for i in 1..=n {
        log.insert_entry(&entry(i, 100)).expect("insert");
    }
    let expected: Vec<_> = (1..=n).map(|i| entry(i, 100)).collect();
    // Over the inline limit: read on a blocking thread, with every bound kind.
    assert_eq!(log.try_get_log_entries(1..=n).await.expect("read"), expected);
    assert_eq!(log.try_get_log_entries(..).await.expect("read"), expected);
    assert_eq!(
        log.try_get_log_entries(2..n).await.expect("read"),
        expected[1..n as usize - 1]
    );
    // At the limit: inline.
    let short = 1..=INLINE_READ_ENTRIES;
    assert_eq!(
        span(&(short.start_bound().cloned(), short.end_bound().cloned())),
        INLINE_READ_ENTRIES
    );
    assert_eq!(
        log.try_get_log_entries(short).await.expect("read"),
        expected[..INLINE_READ_ENTRIES as usize]
    );
    assert_eq!(span(&(Bound::Excluded(u64::MAX), Bound::Unbounded)), 0);
    assert_eq!(span(&(Bound::Included(5), Bound::Excluded(3))), 0);
}
