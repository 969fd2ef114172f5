//! What every partition state must satisfy, checked where states are built (the controller's
//! partition changes) and where they are applied (a broker taking its metadata). A violation is a
//! bug in the code that built the state or a damaged record; either way it names the rule.

use std::collections::BTreeSet;

use crate::ferry::PartitionState;

/// The leader of a partition that has none.
const NO_LEADER: i32 = -1;

fn distinct(what: &str, list: &[i32]) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    match list.iter().find(|b| !seen.insert(**b)) {
        Some(b) => Err(format!("{what} {list:?} names broker {b} twice")),
        None => Ok(()),
    }
}

fn within(what: &str, list: &[i32], replicas: &[i32]) -> Result<(), String> {
    match list.iter().find(|b| !replicas.contains(b)) {
        Some(b) => Err(format!("{what} member {b} is not a replica of {replicas:?}")),
        None => Ok(()),
    }
}

impl PartitionState {
    /// The rules every stored state holds: distinct replicas, an ISR within them that is never
    /// empty, a leader in the ISR (or none), adding and removing replicas within the replica set
    /// and apart, one log dir per replica (or none recorded), pending dirs only of replicas.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.replicas.is_empty() {
            return Err("the replica set is empty".into());
        }
        distinct("the replica set", &self.replicas)?;
        distinct("the ISR", &self.isr)?;
        if self.isr.is_empty() {
            return Err("the ISR is empty".into());
        }
        within("ISR", &self.isr, &self.replicas)?;
        if self.leader != NO_LEADER && !self.isr.contains(&self.leader) {
            return Err(format!("leader {} is not in the ISR {:?}", self.leader, self.isr));
        }
        within("adding", &self.adding, &self.replicas)?;
        within("removing", &self.removing, &self.replicas)?;
        if let Some(b) = self.adding.iter().find(|b| self.removing.contains(b)) {
            return Err(format!("broker {b} is both adding and removing"));
        }
        within("dir_pending", &self.dir_pending, &self.replicas)?;
        if !self.log_dirs.is_empty() && self.log_dirs.len() != self.replicas.len() {
            return Err(format!(
                "{} log dirs for {} replicas",
                self.log_dirs.len(),
                self.replicas.len()
            ));
        }
        Ok(())
    }

    /// Whether a reassignment is under way: replicas to add or remove, or named log dirs not
    /// reached yet.
    pub fn is_moving(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty() || !self.dir_pending.is_empty()
    }

    /// The controller's own rule: the reassignment record is there exactly while the partition
    /// moves (replicas to add or remove, or named dirs not reached). Not part of
    /// [`Self::check_invariants`]: a broker acts on replicas and leaders, never on the record.
    pub fn check_record(&self) -> Result<(), String> {
        match (self.is_moving(), self.reassignment.is_some()) {
            (true, false) => Err("a moving partition has no reassignment record".into()),
            (false, true) => Err("a partition that does not move keeps a reassignment record".into()),
            _ => Ok(()),
        }
    }

    /// The rules `next` holds as the state after `self`: its own invariants, and epochs that
    /// only go forward (the partition epoch by exactly one, the leader epoch whenever the
    /// leader changes).
    pub fn check_step(&self, next: &PartitionState) -> Result<(), String> {
        next.check_invariants()?;
        next.check_record()?;
        if next.partition_epoch != self.partition_epoch + 1 {
            return Err(format!(
                "partition epoch {} follows {}",
                next.partition_epoch, self.partition_epoch
            ));
        }
        if next.leader_epoch < self.leader_epoch
            || (next.leader != self.leader && next.leader_epoch == self.leader_epoch)
        {
            return Err(format!(
                "leader {} at epoch {} follows leader {} at epoch {}",
                next.leader, next.leader_epoch, self.leader, self.leader_epoch
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionState {
        PartitionState {
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            leader,
            ..Default::default()
        }
    }

    #[test]
    fn a_sound_state_passes_and_each_broken_rule_is_named() {
        assert_eq!(state(&[1, 2, 3], &[1, 2], 1).check_invariants(), Ok(()));
        assert_eq!(state(&[1, 2], &[2], NO_LEADER).check_invariants(), Ok(()));
        let broken = [
            (state(&[], &[1], 1), "replica set is empty"),
            (state(&[1, 1], &[1], 1), "names broker 1 twice"),
            (state(&[1, 2], &[], NO_LEADER), "ISR is empty"),
            (state(&[1, 2], &[1, 3], 1), "ISR member 3 is not a replica"),
            (state(&[1, 2], &[2], 1), "leader 1 is not in the ISR"),
            (
                PartitionState {
                    adding: vec![2],
                    removing: vec![2],
                    ..state(&[1, 2], &[1], 1)
                },
                "both adding and removing",
            ),
            (
                PartitionState {
                    log_dirs: vec!["/a".into()],
                    ..state(&[1, 2], &[1], 1)
                },
                "1 log dirs for 2 replicas",
            ),
            (
                PartitionState {
                    dir_pending: vec![4],
                    ..state(&[1, 2], &[1], 1)
                },
                "dir_pending member 4",
            ),
        ];
        for (s, rule) in broken {
            let e = s.check_invariants().unwrap_err();
            assert!(e.contains(rule), "{s:?}: {e}");
        }
    }

    #[test]
    fn the_record_is_there_exactly_while_the_partition_moves() {
        let quiet = state(&[1, 2], &[1, 2], 1);
        let moving = PartitionState {
            adding: vec![2],
            ..quiet.clone()
        };
        let record = Some(Box::default());
        assert_eq!(quiet.check_record(), Ok(()));
        assert!(moving.check_record().unwrap_err().contains("no reassignment record"));
        let kept = PartitionState {
            reassignment: record.clone(),
            ..quiet.clone()
        };
        assert!(kept.check_record().unwrap_err().contains("keeps a reassignment record"));
        let sound = PartitionState {
            reassignment: record,
            ..moving
        };
        assert_eq!(sound.check_record(), Ok(()));
        assert!(quiet
            .check_step(&PartitionState {
                partition_epoch: 1,
                ..kept
            })
            .is_err());
    }

    #[test]
    fn epochs_only_go_forward() {
        let old = PartitionState {
            partition_epoch: 4,
            leader_epoch: 2,
            ..state(&[1, 2], &[1, 2], 1)
        };
        let moved = |leader: i32, leader_epoch: u32, partition_epoch: u32| PartitionState {
            leader,
            leader_epoch,
            partition_epoch,
            ..old.clone()
        };
        assert_eq!(old.check_step(&moved(1, 2, 5)), Ok(()));
        assert_eq!(old.check_step(&moved(2, 3, 5)), Ok(()));
        assert!(old
            .check_step(&moved(1, 2, 4))
            .unwrap_err()
            .contains("partition epoch 4 follows 4"));
        assert!(old
            .check_step(&moved(2, 2, 5))
            .unwrap_err()
            .contains("leader 2 at epoch 2"));
        assert!(old.check_step(&moved(1, 1, 5)).is_err());
    }
}
