//! Limits on the work one admin request may ask for. A request's work (partition records,
//! replica lists, metastore operations) must not grow faster than the request itself: a small
//! request asking for 10^8 partitions would otherwise make the node build 10^8 records before any
//! check. Every check here looks only at counts the request states, so it runs before anything
//! proportional to those counts is allocated. Pure functions; the admin service calls them first.

use proto::errors::ErrorCode;
use proto::ferry::{AlterPartitionReassignmentsRequest, CreatePartitionsRequest, CreateTopicsRequest, NewTopic};

use proto::errors::Refusal;

/// `max.partitions.per.topic`.
pub const MAX_PARTITIONS_PER_TOPIC: &str = "max.partitions.per.topic";
/// `max.partitions.per.request`.
pub const MAX_PARTITIONS_PER_REQUEST: &str = "max.partitions.per.request";
/// `max.replicas.per.partition`.
pub const MAX_REPLICAS_PER_PARTITION: &str = "max.replicas.per.partition";
/// `max.items.per.request`.
pub const MAX_ITEMS_PER_REQUEST: &str = "max.items.per.request";
/// `socket.request.max.bytes`, as Kafka names its request size limit.
pub const SOCKET_REQUEST_MAX_BYTES: &str = "socket.request.max.bytes";

/// The limits of one node's admin (and broker) services.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// `max.partitions.per.topic`: most partitions a topic may have (create, or raise the count).
    pub max_partitions_per_topic: u32,
    /// `max.partitions.per.request`: most partitions one request may create, move or name.
    pub max_partitions_per_request: u32,
    /// `max.replicas.per.partition`: the largest replication factor or replica list.
    pub max_replicas_per_partition: u32,
    /// `max.items.per.request`: most topics, config resources, config keys, brokers or throttles
    /// in one list-like request.
    pub max_items_per_request: u32,
    /// `socket.request.max.bytes`: the largest request message, in bytes.
    pub max_request_bytes: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self {
            // The reassignment benchmarks create and move topics of 1,000,000 partitions in one
            // request each.
            max_partitions_per_topic: 1_000_000,
            max_partitions_per_request: 1_000_000,
            // Replicas must be distinct registered brokers anyway; this bounds the work of a
            // request on a cluster of many brokers (Kafka topics rarely go beyond 5).
            max_replicas_per_partition: 16,
            max_items_per_request: 10_000,
            // Kafka's default. A 1,000,000-partition reassignment with topic names of 50 bytes
            // is about 60 MB.
            max_request_bytes: 100 << 20,
        }
    }
}

fn over(code: ErrorCode, what: impl std::fmt::Display, name: &str, limit: impl std::fmt::Display) -> Refusal {
    Refusal {
        code,
        message: format!("{what} is over {name} ({limit})"),
    }
}

/// A claimed count as u64; a negative one (refused elsewhere, by the checks that name it) is 0.
fn non_negative(n: i32) -> u64 {
    n.max(0) as u64
}

impl RequestLimits {
    /// A list of `n` items (`field` names it) in one request.
    pub fn items(&self, field: &str, n: usize) -> Result<(), Refusal> {
        if n as u64 > self.max_items_per_request as u64 {
            return Err(over(
                ErrorCode::INVALID_REQUEST,
                format!("{field}: {n} in one request"),
                MAX_ITEMS_PER_REQUEST,
                self.max_items_per_request,
            ));
        }
        Ok(())
    }

    /// `n` partitions named, created or moved by one request.
    pub fn partitions_in_request(&self, field: &str, n: u64) -> Result<(), Refusal> {
        if n > self.max_partitions_per_request as u64 {
            return Err(over(
                ErrorCode::INVALID_REQUEST,
                format!("{field}: {n} partitions in one request"),
                MAX_PARTITIONS_PER_REQUEST,
                self.max_partitions_per_request,
            ));
        }
        Ok(())
    }

    /// A topic of `n` partitions.
    pub fn partitions_of_topic(&self, n: u64) -> Result<(), Refusal> {
        if n > self.max_partitions_per_topic as u64 {
            return Err(over(
                ErrorCode::POLICY_VIOLATION,
                format!("partitions: {n}"),
                MAX_PARTITIONS_PER_TOPIC,
                self.max_partitions_per_topic,
            ));
        }
        Ok(())
    }

    /// A replica list (or replication factor) of `n`; `what` names it.
    pub fn replicas(&self, what: impl std::fmt::Display, n: u64) -> Result<(), Refusal> {
        if n > self.max_replicas_per_partition as u64 {
            return Err(over(
                ErrorCode::POLICY_VIOLATION,
                format!("{what}: {n}"),
                MAX_REPLICAS_PER_PARTITION,
                self.max_replicas_per_partition,
            ));
        }
        Ok(())
    }

    /// One new topic: its partition count, replication factor, assignment and configs.
    pub fn new_topic(&self, t: &NewTopic) -> Result<(), Refusal> {
        self.partitions_of_topic(non_negative(t.partitions).max(t.assignment.len() as u64))?;
        self.replicas("replication factor", non_negative(t.replication_factor))?;
        if let Some((p, r)) = t
            .assignment
            .iter()
            .enumerate()
            .find(|(_, r)| r.brokers.len() as u64 > self.max_replicas_per_partition as u64)
        {
            self.replicas(format!("assignment: partition {p} replicas"), r.brokers.len() as u64)?;
        }
        self.items("config", t.config.len())
    }

    /// A CreateTopics request as a whole: how many topics, and how many partitions they add up
    /// to. Each topic's own limits are checked per topic, by [`Self::new_topic`]; a topic over
    /// them creates nothing, so it does not count here (its own refusal says more).
    pub fn create_topics(&self, req: &CreateTopicsRequest) -> Result<(), Refusal> {
        self.items("topics", req.topics.len())?;
        let partitions: u64 = req
            .topics
            .iter()
            .map(|t| non_negative(t.partitions).max(t.assignment.len() as u64))
            .filter(|n| *n <= self.max_partitions_per_topic as u64)
            .sum();
        self.partitions_in_request("topics", partitions)
    }

    /// A CreatePartitions request as a whole: how many topics, the new totals and the replica
    /// lists given. The partitions it adds are checked once the current counts are read
    /// ([`Self::partitions_in_request`]).
    pub fn create_partitions(&self, req: &CreatePartitionsRequest) -> Result<(), Refusal> {
        self.items("topics", req.topics.len())?;
        let mut assigned = 0u64;
        for t in &req.topics {
            self.partitions_of_topic(non_negative(t.count)).map_err(|e| Refusal {
                message: format!("{}: {}", t.topic, e.message),
                ..e
            })?;
            assigned += t.assignment.len() as u64;
            if let Some((i, r)) = t
                .assignment
                .iter()
                .enumerate()
                .find(|(_, r)| r.brokers.len() as u64 > self.max_replicas_per_partition as u64)
            {
                self.replicas(format!("{}: assignment {i} replicas", t.topic), r.brokers.len() as u64)?;
            }
        }
        self.partitions_in_request("assignment", assigned)
    }

    /// An AlterPartitionReassignments request: how many partitions, and each target's replica
    /// and log dir lists.
    pub fn reassignments(&self, req: &AlterPartitionReassignmentsRequest) -> Result<(), Refusal> {
        self.partitions_in_request("partitions", req.partitions.len() as u64)?;
        for t in &req.partitions {
            let name = || format!("{}-{}", t.topic, t.partition);
            if let Some(r) = &t.replicas {
                self.replicas(format!("{}: replicas", name()), r.brokers.len() as u64)?;
            }
            self.replicas(format!("{}: log_dirs", name()), t.log_dirs.len() as u64)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::ferry::{PartitionCount, ReassignmentTarget, Replicas};

    fn small() -> RequestLimits {
        RequestLimits {
            max_partitions_per_topic: 100,
            max_partitions_per_request: 150,
            max_replicas_per_partition: 3,
            max_items_per_request: 4,
            max_request_bytes: 1 << 20,
        }
    }

    fn topic(name: &str, partitions: i32, rf: i32) -> NewTopic {
        NewTopic {
            topic: name.into(),
            partitions,
            replication_factor: rf,
            ..Default::default()
        }
    }

    #[test]
    fn a_topic_over_a_limit_is_refused_naming_the_limit_and_its_value() {
        let l = small();
        assert!(l.new_topic(&topic("t", 100, 3)).is_ok());
        let e = l.new_topic(&topic("t", 100_000_000, 3)).unwrap_err();
        assert_eq!(e.code, ErrorCode::POLICY_VIOLATION);
        assert_eq!(
            e.message,
            "partitions: 100000000 is over max.partitions.per.topic (100)"
        );
        let e = l.new_topic(&topic("t", 1, 4)).unwrap_err();
        assert_eq!(
            e.message,
            "replication factor: 4 is over max.replicas.per.partition (3)"
        );
        // Negative counts are left to the checks that name them (INVALID_PARTITIONS).
        assert!(l.new_topic(&topic("t", -1, -1)).is_ok());
        let mut t = topic("t", -1, -1);
        t.assignment = vec![Replicas { brokers: vec![1] }; 101];
        assert!(l
            .new_topic(&t)
            .unwrap_err()
            .message
            .contains("101 is over max.partitions.per.topic"));
        t.assignment = vec![
            Replicas { brokers: vec![1] },
            Replicas {
                brokers: vec![1, 2, 3, 4],
            },
        ];
        assert_eq!(
            l.new_topic(&t).unwrap_err().message,
            "assignment: partition 1 replicas: 4 is over max.replicas.per.partition (3)"
        );
        let mut t = topic("t", 1, 1);
        t.config = (0..5).map(|i| (format!("k{i}"), String::new())).collect();
        assert_eq!(l.new_topic(&t).unwrap_err().code, ErrorCode::INVALID_REQUEST);
    }

    #[test]
    fn a_request_over_its_totals_is_refused_whole() {
        let l = small();
        let req = |topics| CreateTopicsRequest {
            topics,
            validate_only: false,
        };
        assert!(l
            .create_topics(&req(vec![topic("a", 100, 1), topic("b", 50, 1)]))
            .is_ok());
        let e = l
            .create_topics(&req(vec![topic("a", 100, 1), topic("b", 51, 1)]))
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_REQUEST);
        assert_eq!(
            e.message,
            "topics: 151 partitions in one request is over max.partitions.per.request (150)"
        );
        let e = l.create_topics(&req(vec![topic("a", 1, 1); 5])).unwrap_err();
        assert_eq!(e.message, "topics: 5 in one request is over max.items.per.request (4)");
        // A topic over its own limit is left to its own refusal.
        assert!(l.create_topics(&req(vec![topic("a", i32::MAX, 1); 4])).is_ok());
        let l = RequestLimits {
            max_partitions_per_topic: u32::MAX,
            ..l
        };
        // i32::MAX partitions in every topic adds up without wrapping.
        let e = l.create_topics(&req(vec![topic("a", i32::MAX, 1); 4])).unwrap_err();
        assert!(e.message.starts_with("topics: 8589934588 partitions"), "{}", e.message);
    }

    #[test]
    fn create_partitions_and_reassignments_are_bounded() {
        let l = small();
        let count = |count, assignment: Vec<Replicas>| CreatePartitionsRequest {
            topics: vec![PartitionCount {
                topic: "t".into(),
                count,
                assignment,
            }],
            validate_only: false,
        };
        assert!(l.create_partitions(&count(100, vec![])).is_ok());
        let e = l.create_partitions(&count(1_000_000_000, vec![])).unwrap_err();
        assert_eq!(
            e.message,
            "t: partitions: 1000000000 is over max.partitions.per.topic (100)"
        );
        let e = l
            .create_partitions(&count(10, vec![Replicas { brokers: vec![1; 4] }]))
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::POLICY_VIOLATION);
        let target = |p, brokers: usize, dirs: usize| ReassignmentTarget {
            topic: "t".into(),
            partition: p,
            replicas: Some(Replicas {
                brokers: (1..=brokers as i32).collect(),
            }),
            log_dirs: vec![String::new(); dirs],
        };
        let req = |partitions| AlterPartitionReassignmentsRequest {
            partitions,
            throttle_rate: None,
            validate_only: false,
        };
        assert!(l
            .reassignments(&req((0..150).map(|p| target(p, 3, 3)).collect()))
            .is_ok());
        let e = l
            .reassignments(&req((0..151).map(|p| target(p, 3, 0)).collect()))
            .unwrap_err();
        assert_eq!(
            e.message,
            "partitions: 151 partitions in one request is over max.partitions.per.request (150)"
        );
        let e = l.reassignments(&req(vec![target(7, 4, 0)])).unwrap_err();
        assert_eq!(e.message, "t-7: replicas: 4 is over max.replicas.per.partition (3)");
        let e = l.reassignments(&req(vec![target(7, 1, 4)])).unwrap_err();
        assert_eq!(e.message, "t-7: log_dirs: 4 is over max.replicas.per.partition (3)");
    }

    #[test]
    fn the_defaults_admit_the_million_partition_reassignment() {
        let l = RequestLimits::default();
        assert!(l.partitions_of_topic(1_000_000).is_ok());
        assert!(l.partitions_in_request("partitions", 1_000_000).is_ok());
        assert!(l.partitions_of_topic(1_000_001).is_err());
    }
}
