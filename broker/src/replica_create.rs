//! Creating the replicas assigned to this broker: their logs opened or made, the new folders
//! made durable together, and each folder's `partition.metadata` written.

use std::path::PathBuf;
use std::sync::Arc;

use proto::ferry::PartitionState;

use crate::dir_choice::choose_dir;
use crate::log_dirs::{replica_folder, TopicPartition};
use crate::partition_log::PartitionLog;
use crate::replica::Replica;
use crate::replica_manager::BrokerCore;

impl BrokerCore {
    /// Opens or creates every assigned replica, with the folder syncs of the new ones done
    /// together after; a new one whose folder did not sync is left out.
    pub(crate) fn ensure_replicas<'a>(
        &self,
        assigned: &[(&'a TopicPartition, &'a PartitionState)],
    ) -> Vec<(&'a TopicPartition, &'a PartitionState, Arc<Replica>)> {
        let mut syncs = crate::partition_log::PendingDirSyncs::default();
        let mut ready = Vec::with_capacity(assigned.len());
        for &(tp, state) in assigned {
            match self.ensure_replica(tp, state, &mut syncs) {
                Ok((r, new)) => ready.push((tp, state, r, new)),
                Err(e) => {
                    tracing::error!(replica = %replica_folder(&tp.0, tp.1), error = %e, "cannot create replica");
                }
            }
        }
        let failed: Vec<PathBuf> = syncs
            .sync()
            .into_iter()
            .map(|(dir, e)| {
                tracing::error!(error = %e, "cannot sync new replicas' folders");
                self.report_log_error(&e);
                dir
            })
            .collect();
        if !failed.is_empty() {
            // A new replica whose folder may not survive a crash is not used: it would lead or
            // acknowledge records. The next pass creates it again (or its dir is offline).
            let mut hosted = self.replicas.write();
            ready.retain(|(tp, _, r, new)| {
                let unsynced = *new && {
                    let dir = r.log().dir().to_path_buf();
                    failed.iter().any(|f| dir.starts_with(f))
                };
                if unsynced && hosted.get(*tp).is_some_and(|h| Arc::ptr_eq(h, r)) {
                    hosted.remove(*tp);
                }
                !unsynced
            });
        }
        self.record_topic_ids(ready.iter().map(|(tp, _, r, _)| (*tp, r)));
        ready.into_iter().map(|(tp, state, r, _)| (tp, state, r)).collect()
    }

    /// Writes `partition.metadata` into each replica's folder once per folder it lives in (a
    /// dir move gives it a new one). A file naming another topic is reported, not replaced.
    fn record_topic_ids<'a>(&self, replicas: impl Iterator<Item = (&'a TopicPartition, &'a Arc<Replica>)>) {
        let view = self.view.read();
        let mut recorded = self.topic_ids_recorded.lock();
        for (tp, r) in replicas {
            let dir = r.log().dir().to_path_buf();
            if recorded.get(tp) == Some(&dir) {
                continue;
            }
            let Some(id) = view
                .topics
                .get(&tp.0)
                .and_then(|e| e.record.as_ref())
                .and_then(|t| uuid::Uuid::parse_str(&t.topic_id).ok())
            else {
                continue;
            };
            if let Err(e) = crate::partition_log::partition_metadata::ensure(&dir, id) {
                tracing::error!(replica = %r.name(), error = %e, "partition.metadata");
            }
            recorded.insert(tp.clone(), dir);
        }
    }

    fn ensure_replica(
        &self,
        tp: &TopicPartition,
        state: &PartitionState,
        syncs: &mut crate::partition_log::PendingDirSyncs,
    ) -> Result<(Arc<Replica>, bool), crate::partition_log::LogError> {
        if let Some(r) = self.replicas.read().get(tp) {
            return Ok((r.clone(), false));
        }
        if self.offline_replicas.read().contains(tp) {
            return Err(crate::partition_log::LogError::InvalidConfig(format!(
                "{} is in an offline log dir; it is not recreated before a restart",
                replica_folder(&tp.0, tp.1)
            )));
        }
        let dir = choose_dir(self.id, state, self.moves.take_wanted(tp).as_deref());
        let path = self.dirs.pick(&dir).join(replica_folder(&tp.0, tp.1));
        let cfg = {
            let view = self.view.read();
            let config = view
                .topics
                .get(&tp.0)
                .and_then(|t| t.record.as_ref())
                .map(|r| &r.config);
            crate::retention_config::log_config(&self.config.log, config, &self.config.retention)
        };
        let log = PartitionLog::open_deferring_syncs(&path, cfg, syncs)?;
        tracing::info!(replica = %replica_folder(&tp.0, tp.1), path = %path.display(), "created replica");
        let r = Arc::new(Replica::new(
            tp.0.clone(),
            tp.1,
            self.id,
            log,
            self.config.clock.clone(),
        ));
        Ok((self.replicas.write().entry(tp.clone()).or_insert(r).clone(), true))
    }
}
