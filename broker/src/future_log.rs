//! A replica's future log: the copy a log dir move fills in another dir.

use std::path::PathBuf;

use crate::partition_log::PartitionLog;

/// A replica's future log in another dir, being filled from the current one.
#[derive(Debug)]
pub struct FutureLog {
    /// The log in `<dest>/<t>-<p>.move`.
    pub log: PartitionLog,
    /// The destination log dir.
    pub dest: PathBuf,
    /// Bytes copied into it since the move started or resumed.
    pub copied_bytes: u64,
    /// Sealed segments are copied as whole files until that fails once.
    pub whole_files: bool,
    /// Started for a dir a reassignment named (see `named_dir`), not by hand.
    pub for_reassignment: bool,
}
