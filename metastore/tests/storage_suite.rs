//! openraft's own storage test suite, run on the sled log store and the state machine.

use metastore::log_store::LogStore;
use metastore::state_machine::{StateMachine, DEFAULT_HISTORY_EVENTS};
use metastore::types::{StorageError, TypeConfig};
use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageIOError;

struct SledBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, tempfile::TempDir> for SledBuilder {
    async fn build(&self) -> Result<(tempfile::TempDir, LogStore, StateMachine), StorageError> {
        let dir = tempfile::tempdir().map_err(|e| StorageIOError::write(&e))?;
        let db = sled::Config::new()
            .path(dir.path().join("raft"))
            .open()
            .map_err(|e| StorageIOError::write(&e))?;
        let log = LogStore::open(db).map_err(|e| StorageIOError::write(&e))?;
        let sm = StateMachine::open(&dir.path().join("snapshots"), DEFAULT_HISTORY_EVENTS)?;
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    if let Err(e) = Suite::test_all(SledBuilder) {
        panic!("openraft storage suite failed: {e}");
    }
}
