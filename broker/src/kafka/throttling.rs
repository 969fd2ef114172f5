//! Client quotas on the Kafka listener, as Kafka enforces them (KIP-219): each produce and fetch
//! is recorded against its client's quota (`crate::quota`) from this broker's own copy of the
//! quotas (followed from the metastore, no quorum call per request); an answer over the quota
//! carries `throttle_time_ms` and goes out at once, and the connection is not read again until
//! that time has passed. Clients too old to throttle themselves (Produce before v6, Fetch before
//! v8) get their answer that much later instead. A throttled fetch is answered empty and its bytes
//! are not counted, as in Kafka. The user of a quota is the connection's principal's name: the
//! SASL user, the certificate's name, or `ANONYMOUS` on a listener without authentication.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, FetchResponse};
use kafka_protocol::protocol::Encodable;
use prost::Message;
use proto::clock::Clock;
use proto::ferry::ClientQuotaRecord;
use tokio::time::Instant;

use crate::quota::{self, Kind, QuotaConfig, Sensors};

/// The user a quota names for `principal` (`User:alice` is `alice`), as Kafka's quotas take the
/// principal's name.
pub fn quota_user(principal: &str) -> &str {
    principal.split_once(':').map_or(principal, |(_, name)| name)
}

/// The quotas this broker enforces and the rates of the clients under them.
pub struct Quotas {
    config: parking_lot::RwLock<QuotaConfig>,
    sensors: parking_lot::Mutex<Sensors>,
    clock: Clock,
}

impl Quotas {
    /// No quotas yet; rates are timed by `clock`.
    pub fn new(clock: Clock) -> Self {
        Self {
            config: Default::default(),
            sensors: Default::default(),
            clock,
        }
    }

    fn record(&self, kind: Kind, principal: &str, client: &str, bytes: usize) -> i32 {
        let cfg = self.config.read();
        let now = self.clock.mono_ms();
        let ms = self
            .sensors
            .lock()
            .record(&cfg, kind, quota_user(principal), client, bytes as f64, now);
        // Bounded by the quota module to i32::MAX.
        i32::try_from(ms).unwrap_or(i32::MAX)
    }

    /// Records a produce request of `bytes` from `principal`'s `client`; its throttle time in
    /// ms, with the connection muted that long.
    pub fn produce(&self, mute: &Mute, principal: &str, client: &str, bytes: usize) -> i32 {
        let ms = self.record(Kind::Produce, principal, client, bytes);
        mute.extend(ms);
        ms
    }

    /// Lowers a fetch's `max_bytes` to what `principal`'s `client`'s quota allows in its windows.
    pub fn cap_fetch(&self, principal: &str, client: &str, max_bytes: &mut i32) {
        let cfg = self.config.read();
        if let Some((_, bound)) = quota::resolve(&cfg, Kind::Fetch, quota_user(principal), client) {
            let cap = quota::max_in_window(bound).min(i32::MAX as f64) as i32;
            *max_bytes = (*max_bytes).min(cap.max(1));
        }
    }

    /// Records a fetch answer's size for `principal`'s `client`; over the quota, the answer is
    /// emptied (its bytes taken back), carries the throttle time, and the connection is muted
    /// that long.
    pub fn fetched(&self, mute: &Mute, principal: &str, client: &str, answer: &mut FetchResponse, version: i16) -> i32 {
        let bytes = answer.compute_size(version).unwrap_or(0);
        let ms = self.record(Kind::Fetch, principal, client, bytes);
        if ms > 0 {
            let cfg = self.config.read();
            let now = self.clock.mono_ms();
            self.sensors
                .lock()
                .unrecord(&cfg, Kind::Fetch, quota_user(principal), client, bytes as f64, now);
            answer.responses.clear();
            answer.throttle_time_ms = ms;
            mute.extend(ms);
        }
        ms
    }

    /// Applies a full read (`reset`) or the changes of the keys under `/config/`.
    pub fn apply<'a>(&self, reset: bool, changes: impl IntoIterator<Item = (&'a str, Option<&'a [u8]>)>) {
        let mut cfg = self.config.write();
        if reset {
            cfg.clear();
        }
        for (key, value) in changes {
            let quotas: Option<HashMap<String, f64>> = match value.map(ClientQuotaRecord::decode) {
                None => None,
                Some(Ok(r)) => Some(r.quotas),
                Some(Err(e)) => {
                    tracing::warn!(key, error = %e, "an undecodable client quota record is not enforced");
                    None
                }
            };
            cfg.apply(key, quotas);
        }
    }
}

/// Follows the quotas in the metastore into `quotas` until the task is aborted.
pub async fn follow(client: metastore::Client, quotas: Arc<Quotas>) {
    let mut events = client.follow("/config/");
    while let Some(ev) = events.recv().await {
        let changes = ev.changes();
        let ours = changes
            .iter()
            .filter(|(k, _, _)| k.starts_with(proto::keys::CLIENT_QUOTAS) || k.starts_with(proto::keys::USER_QUOTAS))
            .map(|(k, v, _)| (*k, *v));
        quotas.apply(ev.is_reset(), ours);
    }
}

/// Whether a client of this API version throttles itself on `throttle_time_ms` (KIP-219), so
/// that the answer goes out at once.
pub fn client_throttles(api: ApiKey, version: i16) -> bool {
    match api {
        ApiKey::Produce => version >= 6,
        ApiKey::Fetch => version >= 8,
        _ => true,
    }
}

/// Holds an answer of `ms` throttle for a client too old to throttle itself.
pub async fn hold(api: ApiKey, version: i16, ms: i32) {
    if ms > 0 && !client_throttles(api, version) {
        tokio::time::sleep(Duration::from_millis(ms as u64)).await;
    }
}

/// A connection's mute: until when its requests are not read.
#[derive(Debug, Default)]
pub struct Mute(parking_lot::Mutex<Option<Instant>>);

impl Mute {
    /// Mutes for `ms` from now, unless already muted for longer.
    pub fn extend(&self, ms: i32) {
        if ms <= 0 {
            return;
        }
        let until = Instant::now() + Duration::from_millis(ms as u64);
        let mut m = self.0.lock();
        if m.is_none_or(|t| t < until) {
            *m = Some(until);
        }
    }

    /// When the mute ends, if it has not yet.
    pub fn until(&self) -> Option<Instant> {
        let mut m = self.0.lock();
        if m.is_some_and(|t| t <= Instant::now()) {
            *m = None;
        }
        *m
    }

    /// Waits until the connection is not muted.
    pub async fn wait(&self) {
        while let Some(t) = self.until() {
            tokio::time::sleep_until(t).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::client_quota::{Entity, Part};

    #[test]
    fn a_client_over_its_quota_is_muted_and_answered_with_the_throttle() {
        let q = Quotas::new(Clock::manual(0));
        let key = Entity {
            user: None,
            client_id: Some(Part::Named("c1".into())),
        }
        .key();
        let rec = ClientQuotaRecord {
            quotas: [(proto::client_quota::PRODUCER_BYTE_RATE.to_string(), 1024.0)].into(),
        };
        q.apply(true, [(key.as_str(), Some(rec.encode_to_vec().as_slice()))]);
        let mute = Mute::default();
        assert_eq!(q.produce(&mute, "User:ANONYMOUS", "c1", 10_240), 0);
        assert!(mute.until().is_none());
        // 11,264 bytes over the 10 s minimum window: 10% over, a tenth of 10 s.
        assert_eq!(q.produce(&mute, "User:ANONYMOUS", "c1", 1_024), 1_000);
        assert!(mute.until().is_some());
        assert_eq!(
            q.produce(&Mute::default(), "User:ANONYMOUS", "c2", 1 << 20),
            0,
            "no quota for c2"
        );
        // Deleted: no longer enforced.
        q.apply(false, [(key.as_str(), None)]);
        assert_eq!(q.produce(&Mute::default(), "User:ANONYMOUS", "c1", 1 << 20), 0);
    }

    #[test]
    fn a_user_quota_holds_the_user_a_connection_logged_in_as() {
        let q = Quotas::new(Clock::manual(0));
        let key = Entity {
            user: Some(Part::Named("alice".into())),
            client_id: None,
        }
        .key();
        let rec = ClientQuotaRecord {
            quotas: [(proto::client_quota::PRODUCER_BYTE_RATE.to_string(), 1024.0)].into(),
        };
        q.apply(true, [(key.as_str(), Some(rec.encode_to_vec().as_slice()))]);
        assert_eq!(q.produce(&Mute::default(), "User:alice", "c", 10_240), 0);
        assert_eq!(
            q.produce(&Mute::default(), "User:alice", "c", 1_024),
            1_000,
            "alice is over"
        );
        assert_eq!(
            q.produce(&Mute::default(), "User:bob", "c", 1 << 20),
            0,
            "bob has no quota"
        );
        assert_eq!(q.produce(&Mute::default(), "User:ANONYMOUS", "c", 1 << 20), 0);
    }

    #[test]
    fn a_throttled_fetch_is_answered_empty() {
        use kafka_protocol::messages::fetch_response::FetchableTopicResponse;
        let q = Quotas::new(Clock::manual(0));
        let key = Entity {
            user: Some(Part::Default),
            client_id: None,
        }
        .key();
        let rec = ClientQuotaRecord {
            quotas: [(proto::client_quota::CONSUMER_BYTE_RATE.to_string(), 1.0)].into(),
        };
        q.apply(true, [(key.as_str(), Some(rec.encode_to_vec().as_slice()))]);
        let mut max = i32::MAX;
        q.cap_fetch("User:ANONYMOUS", "any", &mut max);
        assert_eq!(max, 10, "the default user's quota applies to ANONYMOUS");
        assert_eq!(quota_user("User:alice"), "alice");
        let mut answer = FetchResponse::default();
        answer.responses = vec![FetchableTopicResponse::default(); 20];
        let ms = q.fetched(&Mute::default(), "User:ANONYMOUS", "any", &mut answer, 12);
        assert!(ms > 0 && answer.responses.is_empty() && answer.throttle_time_ms == ms);
        assert!(client_throttles(ApiKey::Fetch, 8) && !client_throttles(ApiKey::Produce, 5));
    }
}
