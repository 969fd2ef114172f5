//! The server-side assignors of KIP-848 consumer groups, by Kafka's names: `uniform` (the
//! default: every subscribed partition to the member with the fewest, which balances a group
//! whose members subscribe alike) and `range` (each topic's partitions split into contiguous
//! ranges over its members, in member order).

use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use super::consumer_records::TopicPartitions;

/// The assignors served.
pub const ASSIGNORS: &[&str] = &["uniform", "range"];

/// How the assignors find a topic by name: its id and partition count, or `None` when it does
/// not exist (yet). A lookup, so that a heartbeat does not copy the cluster's every topic.
pub type Topics<'a> = &'a dyn Fn(&str) -> Option<TopicMeta>;

/// A topic as the assignors see it: its id and partition count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicMeta {
    /// Its id.
    pub id: Uuid,
    /// Its partition count.
    pub partitions: u32,
}

/// Assigns the partitions of the topics each member subscribes to (topics not in `topics` are
/// skipped: they do not exist yet).
pub fn assign(
    assignor: &str,
    members: &BTreeMap<String, Vec<String>>,
    topics: Topics<'_>,
) -> BTreeMap<String, TopicPartitions> {
    let mut out: BTreeMap<String, TopicPartitions> =
        members.keys().map(|m| (m.clone(), TopicPartitions::new())).collect();
    let mut by_topic: BTreeMap<&str, (TopicMeta, Vec<&str>)> = BTreeMap::new();
    for (m, subs) in members {
        for t in subs {
            if let Some(meta) = topics(t) {
                by_topic
                    .entry(t.as_str())
                    .or_insert((meta, Vec::new()))
                    .1
                    .push(m.as_str());
            }
        }
    }
    let mut load: HashMap<&str, usize> = members.keys().map(|m| (m.as_str(), 0)).collect();
    for (meta, mut subscribers) in by_topic.into_values() {
        subscribers.sort_unstable();
        subscribers.dedup();
        let n = meta.partitions as usize;
        let owners: Vec<&str> = if assignor == "range" {
            let (each, extra) = (n / subscribers.len(), n % subscribers.len());
            subscribers
                .iter()
                .enumerate()
                .flat_map(|(i, m)| std::iter::repeat_n(*m, each + usize::from(i < extra)))
                .collect()
        } else {
            (0..n)
                .map(|_| {
                    // Every subscriber is in `load`: it came from `members`.
                    let m = *subscribers
                        .iter()
                        .min_by_key(|m| (load.get(*m).copied().unwrap_or(0), **m))
                        .unwrap_or(&subscribers[0]);
                    *load.entry(m).or_default() += 1;
                    m
                })
                .collect()
        };
        for (p, m) in owners.into_iter().enumerate() {
            if let Some(a) = out.get_mut(m) {
                a.entry(meta.id).or_default().push(p as i32);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics() -> HashMap<String, TopicMeta> {
        [
            (
                "a".to_string(),
                TopicMeta {
                    id: Uuid::from_u128(1),
                    partitions: 6,
                },
            ),
            (
                "b".to_string(),
                TopicMeta {
                    id: Uuid::from_u128(2),
                    partitions: 1,
                },
            ),
        ]
        .into_iter()
        .collect()
    }

    fn members(n: usize) -> BTreeMap<String, Vec<String>> {
        (0..n)
            .map(|i| {
                (
                    format!("m{i}"),
                    vec!["a".to_string(), "b".to_string(), "nope".to_string()],
                )
            })
            .collect()
    }

    fn total(a: &BTreeMap<String, TopicPartitions>) -> usize {
        a.values().flat_map(|t| t.values()).map(Vec::len).sum()
    }

    #[test]
    fn every_partition_goes_to_exactly_one_member_and_uniform_balances() {
        let t = topics();
        let a = assign("uniform", &members(3), &|n| t.get(n).copied());
        assert_eq!(total(&a), 7);
        let counts: Vec<usize> = a.values().map(|t| t.values().map(Vec::len).sum()).collect();
        assert!(
            counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
            "{counts:?}"
        );
        let mut seen: Vec<(Uuid, i32)> = a
            .values()
            .flat_map(|t| t.iter().flat_map(|(id, ps)| ps.iter().map(move |p| (*id, *p))))
            .collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 7);
    }

    #[test]
    fn range_gives_contiguous_ranges_in_member_order() {
        let t = topics();
        let a = assign("range", &members(4), &|n| t.get(n).copied());
        let id = Uuid::from_u128(1);
        assert_eq!(a["m0"][&id], vec![0, 1]);
        assert_eq!(a["m1"][&id], vec![2, 3]);
        assert_eq!(a["m2"][&id], vec![4]);
        assert_eq!(a["m3"][&id], vec![5]);
        assert_eq!(a["m0"][&Uuid::from_u128(2)], vec![0]);
        assert_eq!(total(&a), 7);
    }
}
