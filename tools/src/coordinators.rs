//! Which broker coordinates how many consumer groups, for `ferry reassign --progress`: the
//! `__consumer_offsets` partitions each broker leads (from the cluster's metadata) and the
//! groups it holds (ListGroups sent to its Kafka listener, as Kafka's tools count them).

use std::collections::BTreeMap;

use broker::ClusterClient;
use kafka_protocol::messages::ListGroupsRequest;

use crate::kafka_client::responses::LIST_GROUPS;
use crate::kafka_client::{check, KafkaConn};

/// Kafka's group metadata topic.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// What one broker coordinates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coordinated {
    /// The broker.
    pub broker: i32,
    /// `__consumer_offsets` partitions it leads.
    pub partitions: usize,
    /// Groups it holds, or why they could not be counted.
    pub groups: Result<usize, String>,
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// One line per broker, in broker order.
pub fn lines(brokers: &[Coordinated]) -> Vec<String> {
    let mut sorted: Vec<&Coordinated> = brokers.iter().collect();
    sorted.sort_by_key(|c| c.broker);
    sorted
        .into_iter()
        .map(|c| {
            let groups = match &c.groups {
                Ok(n) => plural(*n, "group", "groups"),
                Err(why) => format!("groups unknown ({why})"),
            };
            format!(
                "coordinator: broker {} leads {} {OFFSETS_TOPIC} {}, {groups}",
                c.broker,
                c.partitions,
                if c.partitions == 1 { "partition" } else { "partitions" },
            )
        })
        .collect()
}

/// The `__consumer_offsets` partitions each broker leads; none when the topic does not exist yet.
pub fn leaders(partition_leaders: impl IntoIterator<Item = i32>) -> BTreeMap<i32, usize> {
    let mut out = BTreeMap::new();
    for l in partition_leaders.into_iter().filter(|l| *l >= 0) {
        *out.entry(l).or_insert(0) += 1;
    }
    out
}

async fn count_groups(kafka_endpoint: &str) -> Result<usize, String> {
    if kafka_endpoint.is_empty() {
        return Err("no Kafka listener".into());
    }
    let mut conn = KafkaConn::connect(kafka_endpoint).await.map_err(|e| e.to_string())?;
    let r = conn
        .call(&ListGroupsRequest::default(), LIST_GROUPS)
        .await
        .map_err(|e| e.to_string())?;
    check(r.error_code, None, "ListGroups").map_err(|e| e.to_string())?;
    Ok(r.groups.len())
}

/// What every registered broker coordinates.
pub async fn gather(c: &ClusterClient) -> anyhow::Result<Vec<Coordinated>> {
    let brokers = c.brokers().await?;
    let led = match c.refresh(OFFSETS_TOPIC).await {
        Ok(t) => leaders(t.partitions.iter().filter_map(|p| p.state.as_ref().map(|s| s.leader))),
        // No group has been used yet: the topic is created by the first FindCoordinator.
        Err(e) if e.code() == Some(proto::errors::ErrorCode::UNKNOWN_TOPIC_OR_PARTITION) => BTreeMap::new(),
        Err(e) => return Err(e.into()),
    };
    let counts = futures::future::join_all(
        brokers
            .iter()
            .map(|b| count_groups(broker::kafka::listeners::plain_endpoint(b))),
    )
    .await;
    Ok(brokers
        .iter()
        .zip(counts)
        .map(|(b, groups)| Coordinated {
            broker: b.id,
            partitions: led.get(&b.id).copied().unwrap_or(0),
            groups,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_counted_by_leader_and_leaderless_ones_left_out() {
        let l = leaders([2, 1, 2, -1, 3, 2]);
        assert_eq!(l, BTreeMap::from([(1, 1), (2, 3), (3, 1)]));
    }

    #[test]
    fn a_line_per_broker_in_order_with_its_partitions_and_groups() {
        let got = lines(&[
            Coordinated {
                broker: 2,
                partitions: 17,
                groups: Ok(3),
            },
            Coordinated {
                broker: 1,
                partitions: 1,
                groups: Ok(1),
            },
            Coordinated {
                broker: 3,
                partitions: 0,
                groups: Err("no Kafka listener".into()),
            },
        ]);
        assert_eq!(
            got,
            vec![
                "coordinator: broker 1 leads 1 __consumer_offsets partition, 1 group",
                "coordinator: broker 2 leads 17 __consumer_offsets partitions, 3 groups",
                "coordinator: broker 3 leads 0 __consumer_offsets partitions, groups unknown (no Kafka listener)",
            ]
        );
    }
}
