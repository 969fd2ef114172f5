//! Which log dir a replica of this broker belongs in: the one rule behind where a new replica is
//! created and where a reassignment's named dir sends an existing one. [`LogDirs::pick`] then
//! turns "any dir" into the emptiest one.
//!
//! [`LogDirs::pick`]: crate::log_dirs::LogDirs::pick

use std::path::Path;

use proto::ferry::PartitionState;

/// The dir named for broker `me`'s replica by a running reassignment, while the controller still
/// waits for the replica to get there.
pub fn pending_dir(me: i32, meta: &PartitionState) -> Option<&str> {
    if !meta.dir_pending.contains(&me) {
        return None;
    }
    let i = meta.replicas.iter().position(|r| *r == me)?;
    meta.log_dirs.get(i).map(String::as_str).filter(|d| !d.is_empty())
}

/// The dir for a new replica of broker `me` ("" for any): the dir its reassignment names, else
/// the one an operator asked for before it arrived (`wanted`), else where the partition's state
/// last put it.
pub fn choose_dir(me: i32, state: &PartitionState, wanted: Option<&Path>) -> String {
    if let Some(named) = pending_dir(me, state) {
        return named.to_string();
    }
    if let Some(w) = wanted {
        return w.to_string_lossy().into_owned();
    }
    let stored = state
        .replicas
        .iter()
        .position(|r| *r == me)
        .and_then(|i| state.log_dirs.get(i));
    stored.cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(dirs: &[&str], pending: &[i32]) -> PartitionState {
        PartitionState {
            replicas: vec![1, 2],
            log_dirs: dirs.iter().map(|d| d.to_string()).collect(),
            dir_pending: pending.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn a_named_dir_wins_then_the_operators_then_the_stored_one() {
        let wanted = Path::new("/w");
        assert_eq!(choose_dir(2, &state(&["/a", "/b"], &[2]), Some(wanted)), "/b");
        assert_eq!(choose_dir(2, &state(&["/a", "/b"], &[]), Some(wanted)), "/w");
        assert_eq!(choose_dir(2, &state(&["/a", "/b"], &[]), None), "/b");
        assert_eq!(choose_dir(2, &state(&[], &[]), None), "");
        assert_eq!(choose_dir(3, &state(&["/a", "/b"], &[3]), None), "");
    }

    #[test]
    fn a_dir_is_pending_only_while_named_and_waited_for() {
        assert_eq!(pending_dir(1, &state(&["/a", "/b"], &[1])), Some("/a"));
        assert_eq!(pending_dir(1, &state(&["/a", "/b"], &[2])), None);
        assert_eq!(pending_dir(1, &state(&["", "/b"], &[1])), None);
    }
}
