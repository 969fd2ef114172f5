//! The broker's byte counters, counted where the bytes move: replication in and out (throttled
//! or not) and dir-move copies. Registered for scraping, with the gauges, by `metrics`.

use prometheus::{IntCounter, IntCounterVec, Opts};

/// A byte counter split by `throttled="true|false"`.
#[derive(Clone)]
pub struct ByThrottle {
    vec: IntCounterVec,
    plain: IntCounter,
    throttled: IntCounter,
}

impl ByThrottle {
    fn new(name: &str, help: &str) -> Self {
        // A constant valid name and label: construction cannot fail (the unit test builds it).
        let vec = IntCounterVec::new(Opts::new(name, help), &["throttled"]).expect("valid counter");
        Self {
            plain: vec.with_label_values(&["false"]),
            throttled: vec.with_label_values(&["true"]),
            vec,
        }
    }

    /// Counts `bytes`, throttled or not.
    pub fn add(&self, throttled: bool, bytes: usize) {
        let c = if throttled { &self.throttled } else { &self.plain };
        c.inc_by(bytes as u64);
    }

    /// The counter family, for registering.
    pub fn family(&self) -> &IntCounterVec {
        &self.vec
    }

    /// The count so far.
    pub fn get(&self, throttled: bool) -> u64 {
        if throttled {
            self.throttled.get()
        } else {
            self.plain.get()
        }
    }
}

/// One broker's counters; the gauges are added by `metrics::register`.
#[derive(Clone)]
pub struct BrokerMetrics {
    /// `ferry_replication_bytes_in_total`: bytes this broker appended as a follower.
    pub replication_bytes_in: ByThrottle,
    /// `ferry_replication_bytes_out_total`: bytes this broker sent to followers as a leader.
    pub replication_bytes_out: ByThrottle,
    /// `ferry_dir_move_bytes_total`: bytes copied into future logs by log dir moves.
    pub dir_move_bytes: IntCounter,
    /// `ferry_authentication_failures_total`: Kafka logins refused.
    pub authentication_failures: IntCounter,
    /// `ferry_authorization_denials_total`: requests (or parts of them) an ACL refused.
    pub authorization_denials: IntCounter,
}

impl Default for BrokerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl BrokerMetrics {
    /// Fresh counters at zero, registered nowhere yet.
    pub fn new() -> Self {
        Self {
            replication_bytes_in: ByThrottle::new(
                "ferry_replication_bytes_in_total",
                "Record bytes appended from partition leaders; throttled when the leader held them back.",
            ),
            replication_bytes_out: ByThrottle::new(
                "ferry_replication_bytes_out_total",
                "Record bytes sent to followers; throttled when the replication throttle applied.",
            ),
            // A constant valid name: construction cannot fail (the unit test builds it).
            dir_move_bytes: IntCounter::new(
                "ferry_dir_move_bytes_total",
                "Bytes copied into future logs by moves between this broker's log dirs.",
            )
            .expect("valid counter"),
            authentication_failures: IntCounter::new(
                "ferry_authentication_failures_total",
                "Kafka client logins refused (a wrong password, a bad proof, a message out of turn).",
            )
            .expect("valid counter"),
            authorization_denials: IntCounter::new(
                "ferry_authorization_denials_total",
                "Kafka requests, or topics or groups in them, that the ACLs refused.",
            )
            .expect("valid counter"),
        }
    }
}
