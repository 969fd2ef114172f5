//! The runtime's handle on this broker's `__consumer_offsets` replicas: leadership, reads and
//! appends, and nothing else of the broker.

use std::sync::Arc;

use proto::topic_config;

use super::runtime::{OffsetsLog, Replicated};
use super::OFFSETS_TOPIC;
use crate::replica::Role;
use crate::replica_manager::BrokerCore;

/// `__consumer_offsets` as this broker hosts it.
pub struct BrokerOffsetsLog(pub Arc<BrokerCore>);

impl OffsetsLog for BrokerOffsetsLog {
    fn partitions(&self) -> Option<u32> {
        let view = self.0.view.read();
        let t = view.topics.get(OFFSETS_TOPIC)?;
        let r = t.record.as_ref().filter(|r| !r.deleting)?;
        Some(r.partitions).filter(|n| *n > 0)
    }

    fn leads(&self, partition: u32) -> Option<u32> {
        let r = self.0.replica(OFFSETS_TOPIC, partition).ok()?;
        let st = r.state();
        match st.role {
            Role::Leader { epoch } => Some(epoch),
            _ => None,
        }
    }

    fn read(&self, partition: u32, offset: i64, max: usize) -> Result<(Vec<u8>, i64, i64), String> {
        let r = self.0.replica(OFFSETS_TOPIC, partition).map_err(|e| e.message)?;
        let log = r.log();
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        if offset < start || offset >= end {
            return Ok((Vec::new(), start, end));
        }
        let raw = log.read(offset, max, end).map_err(|e| e.to_string())?;
        Ok((raw, start, end))
    }

    fn append(&self, partition: u32, epoch: u32, batch: Vec<u8>) -> Result<Replicated, String> {
        let r = self.0.replica(OFFSETS_TOPIC, partition).map_err(|e| e.message)?;
        let wait = crate::produce::append_internal(&self.0, r, epoch, batch).map_err(|e| e.message)?;
        Ok(Box::pin(async move { wait.await.map_err(|e| e.message) }))
    }

    fn max_batch(&self) -> usize {
        let view = self.0.view.read();
        let config = view
            .topics
            .get(OFFSETS_TOPIC)
            .and_then(|t| t.record.as_ref())
            .map(|r| r.config.clone())
            .unwrap_or_default();
        topic_config::max_message_bytes(&config) as usize
    }

    fn now_ms(&self) -> i64 {
        self.0.config.clock.wall_ms() as i64
    }

    fn publish(&self, partitions: usize, groups: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        self.0.coordinator.partitions.store(partitions, Relaxed);
        self.0.coordinator.groups.store(groups, Relaxed);
    }
}
