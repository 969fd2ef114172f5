//! The broker's Prometheus metrics: replication bytes in and out (throttled or not), dir-move
//! bytes, and gauges read from the broker's state when scraped: reassigning and
//! under-replicated partitions it leads, and offline log dirs.

use std::sync::{Arc, Weak};

use prometheus::{PullingGauge, Registry};
use proto::cluster_view::ClusterView;
use proto::ferry::PartitionState;

use crate::replica_manager::BrokerCore;

/// Partitions led by one broker, by state.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LedPartitions {
    /// With a reassignment under way (adding or removing replicas).
    pub reassigning: usize,
    /// With fewer in-sync replicas than the target replica count, as Kafka counts them: during
    /// a reassignment the replicas being removed do not count.
    pub under_replicated: usize,
}

/// Whether a partition has fewer in-sync replicas than its target replica count.
pub fn is_under_replicated(p: &PartitionState) -> bool {
    p.isr.len() < p.replicas.len().saturating_sub(p.removing.len())
}

/// Counts the partitions `broker` leads in `view`.
pub fn led_partitions(view: &ClusterView, broker: i32) -> LedPartitions {
    let mut n = LedPartitions::default();
    let led = view
        .topics
        .values()
        .flat_map(|t| t.partitions.values())
        .map(|p| &p.state)
        .filter(|p| p.leader == broker);
    for p in led {
        if !p.adding.is_empty() || !p.removing.is_empty() {
            n.reassigning += 1;
        }
        if is_under_replicated(p) {
            n.under_replicated += 1;
        }
    }
    n
}

/// A gauge computed from the broker's state when scraped (0 once the broker is gone).
fn pulling(
    core: &Arc<BrokerCore>,
    name: &str,
    help: &str,
    f: impl Fn(&BrokerCore) -> usize + Send + Sync + 'static,
) -> prometheus::Result<PullingGauge> {
    let core: Weak<BrokerCore> = Arc::downgrade(core);
    PullingGauge::new(
        name,
        help,
        Box::new(move || core.upgrade().map_or(0.0, |c| f(&c) as f64)),
    )
}

/// Registers the broker's counters and its scrape-time gauges in `registry`.
pub fn register(core: &Arc<BrokerCore>, registry: &Registry) -> prometheus::Result<()> {
    let m = &core.metrics;
    registry.register(Box::new(m.replication_bytes_in.family().clone()))?;
    registry.register(Box::new(m.replication_bytes_out.family().clone()))?;
    registry.register(Box::new(m.dir_move_bytes.clone()))?;
    registry.register(Box::new(m.authentication_failures.clone()))?;
    registry.register(Box::new(m.authorization_denials.clone()))?;
    let gauges = [
        pulling(
            core,
            "ferry_reassigning_partitions",
            "Partitions this broker leads with a reassignment under way.",
            |c| led_partitions(&c.view.read(), c.id).reassigning,
        )?,
        pulling(
            core,
            "ferry_under_replicated_partitions",
            "Partitions this broker leads with fewer in-sync replicas than target replicas.",
            |c| led_partitions(&c.view.read(), c.id).under_replicated,
        )?,
        pulling(
            core,
            "ferry_replica_fetch_sessions",
            "Leaders this broker copies from, each over one replication stream whatever the partitions.",
            |c| c.fetch_sessions.open(),
        )?,
        pulling(
            core,
            "ferry_group_coordinator_partitions",
            "__consumer_offsets partitions whose groups this broker coordinates (it leads them).",
            |c| c.coordinator.partitions.load(std::sync::atomic::Ordering::Relaxed),
        )?,
        pulling(
            core,
            "ferry_group_coordinator_groups",
            "Consumer groups this broker coordinates.",
            |c| c.coordinator.groups.load(std::sync::atomic::Ordering::Relaxed),
        )?,
        pulling(
            core,
            "ferry_offline_log_dirs",
            "Log dirs of this broker that failed and are offline.",
            |c| c.dirs.offline().len(),
        )?,
    ];
    for g in gauges {
        registry.register(Box::new(g))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::byte_counters::BrokerMetrics;
    use prost::Message;
    use proto::ferry::TopicRecord;

    fn state(replicas: &[i32], adding: &[i32], removing: &[i32], leader: i32, isr: &[i32]) -> PartitionState {
        PartitionState {
            replicas: replicas.to_vec(),
            adding: adding.to_vec(),
            removing: removing.to_vec(),
            leader,
            isr: isr.to_vec(),
            ..Default::default()
        }
    }

    fn view(parts: &[PartitionState]) -> ClusterView {
        let mut v = ClusterView::default();
        let topic = TopicRecord {
            partitions: parts.len() as u32,
            ..Default::default()
        };
        v.apply("/brokers/topics/t", Some(&topic.encode_to_vec()), 1);
        for (i, p) in parts.iter().enumerate() {
            v.apply(
                &format!("/brokers/topics/t/partitions/{i}"),
                Some(&p.encode_to_vec()),
                2,
            );
        }
        v
    }

    #[test]
    fn only_led_partitions_count() {
        let v = view(&[
            // Led by 1, in sync.
            state(&[1, 2, 3], &[], &[], 1, &[1, 2, 3]),
            // Led by 1, a follower out of sync.
            state(&[1, 2, 3], &[], &[], 1, &[1, 2]),
            // Led by 1, moving 3 to 4: 4 not in sync yet, 3 being removed.
            state(&[1, 2, 4, 3], &[4], &[3], 1, &[1, 2, 3]),
            // Led by 1, adding 4 to [1, 2]: the target has 3 replicas, 2 in sync.
            state(&[1, 2, 4], &[4], &[], 1, &[1, 2]),
            // Led by 2, out of sync and moving.
            state(&[2, 3, 4], &[4], &[], 2, &[2]),
            // No leader.
            state(&[1], &[], &[], -1, &[]),
        ]);
        assert_eq!(
            led_partitions(&v, 1),
            LedPartitions {
                reassigning: 2,
                under_replicated: 2
            }
        );
        assert_eq!(
            led_partitions(&v, 2),
            LedPartitions {
                reassigning: 1,
                under_replicated: 1
            }
        );
        assert_eq!(led_partitions(&v, 9), LedPartitions::default());
    }

    #[test]
    fn counters_split_by_throttle_and_register() {
        let m = BrokerMetrics::new();
        m.replication_bytes_out.add(true, 10);
        m.replication_bytes_out.add(false, 3);
        m.replication_bytes_out.add(true, 5);
        assert_eq!(
            (m.replication_bytes_out.get(true), m.replication_bytes_out.get(false)),
            (15, 3)
        );
        let r = Registry::new();
        r.register(Box::new(m.replication_bytes_out.family().clone())).unwrap();
        r.register(Box::new(m.replication_bytes_in.family().clone())).unwrap();
        r.register(Box::new(m.dir_move_bytes.clone())).unwrap();
        let text = prometheus::TextEncoder::new().encode_to_string(&r.gather()).unwrap();
        assert!(
            text.contains("ferry_replication_bytes_out_total{throttled=\"true\"} 15\n"),
            "{text}"
        );
        assert!(
            text.contains("ferry_replication_bytes_in_total{throttled=\"false\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("ferry_dir_move_bytes_total 0\n"), "{text}");
    }
}
