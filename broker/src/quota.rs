//! Client byte-rate quotas, after Kafka's `ClientQuotaManager`: which quota a request counts
//! against (user and client-id entities, defaults, in Kafka's order of precedence), the rate
//! measured over `quota.window.num` (11) windows of `quota.window.size.seconds` (1 s), and the
//! throttle time of a client over its quota. Pure: the time is passed in. The Kafka listener
//! records each produce and fetch here (`kafka::throttling`) from the broker's own copy of the
//! quotas, followed from the metastore.

use std::collections::HashMap;

use proto::client_quota::{self as cq, Entity, Part};

/// `quota.window.size.seconds`, in ms.
pub const WINDOW_MS: u64 = 1000;
/// `quota.window.num`.
pub const SAMPLES: usize = 11;
/// The most rates kept at once; past it, idle ones go first, then the one recorded longest ago
/// (each client id with a quota has one, and a client names its own id).
pub const MAX_SENSORS: usize = 10_000;

/// What a quota limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Bytes produced (`producer_byte_rate`).
    Produce,
    /// Bytes fetched (`consumer_byte_rate`).
    Fetch,
}

impl Kind {
    fn key(self) -> &'static str {
        match self {
            Kind::Produce => cq::PRODUCER_BYTE_RATE,
            Kind::Fetch => cq::CONSUMER_BYTE_RATE,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    start_ms: u64,
    value: f64,
}

/// Kafka's `Rate` over a windowed sum: the bytes of the samples kept, over the time they span
/// (never less than `SAMPLES - 1` windows, so a new client is not measured over a few ms).
#[derive(Debug, Clone, Default)]
pub struct Rate {
    samples: Vec<Sample>,
    current: usize,
}

impl Rate {
    /// Adds `value` at `now_ms`, in a new sample once the current one is a window old.
    pub fn record(&mut self, value: f64, now_ms: u64) {
        if self.samples.is_empty() {
            self.samples.push(Sample {
                start_ms: now_ms,
                value: 0.0,
            });
            self.current = 0;
        }
        if now_ms.saturating_sub(self.samples[self.current].start_ms) >= WINDOW_MS {
            self.current = (self.current + 1) % SAMPLES;
            let fresh = Sample {
                start_ms: now_ms,
                value: 0.0,
            };
            match self.samples.get_mut(self.current) {
                Some(s) => *s = fresh,
                None => self.samples.push(fresh),
            }
        }
        self.samples[self.current].value += value;
    }

    /// Resets samples older than every window kept, as Kafka's `purgeObsoleteSamples`.
    fn purge(&mut self, now_ms: u64) {
        for s in &mut self.samples {
            if now_ms.saturating_sub(s.start_ms) >= SAMPLES as u64 * WINDOW_MS {
                *s = Sample {
                    start_ms: now_ms,
                    value: 0.0,
                };
            }
        }
    }

    /// The time the rate is measured over, in ms (Kafka's `Rate.windowSize`).
    pub fn window_ms(&mut self, now_ms: u64) -> u64 {
        self.purge(now_ms);
        let oldest = self.samples.iter().map(|s| s.start_ms).min().unwrap_or(now_ms);
        let mut elapsed = now_ms.saturating_sub(oldest);
        let full = elapsed / WINDOW_MS;
        let min_full = SAMPLES as u64 - 1;
        if full < min_full {
            elapsed += (min_full - full) * WINDOW_MS;
        }
        elapsed.max(1)
    }

    /// The rate at `now_ms`, per second.
    pub fn measure(&mut self, now_ms: u64) -> f64 {
        self.purge(now_ms);
        let sum: f64 = self.samples.iter().map(|s| s.value).sum();
        sum / (self.window_ms(now_ms) as f64 / 1000.0)
    }

    /// When the last sample began.
    fn last_ms(&self) -> u64 {
        self.samples.get(self.current).map_or(0, |s| s.start_ms)
    }

    /// Whether every sample has aged out or holds nothing: dropping the rate then loses no
    /// bytes a throttle could count.
    fn idle(&self, now_ms: u64) -> bool {
        self.samples
            .iter()
            .all(|s| s.value == 0.0 || now_ms.saturating_sub(s.start_ms) >= SAMPLES as u64 * WINDOW_MS)
    }
}

/// How long a client over `bound` is throttled, as Kafka's `QuotaUtils.throttleTime`: the
/// excess over the bound, as a share of it, times the measured window (0 within the bound).
pub fn throttle_ms(rate: &mut Rate, bound: f64, now_ms: u64) -> u64 {
    let value = rate.measure(now_ms);
    if value <= bound {
        return 0;
    }
    let ms = (value - bound) / bound * rate.window_ms(now_ms) as f64;
    ms.round().min(i32::MAX as f64) as u64
}

/// The quotas of every entity, as this broker last read them.
#[derive(Debug, Clone, Default)]
pub struct QuotaConfig {
    entities: HashMap<Entity, HashMap<String, f64>>,
}

impl QuotaConfig {
    /// Applies one stored key: its record's quotas, or none when deleted. A key that names no
    /// entity is skipped (false).
    pub fn apply(&mut self, key: &str, quotas: Option<HashMap<String, f64>>) -> bool {
        let Some(e) = cq::parse_key(key) else {
            return false;
        };
        match quotas.filter(|q| !q.is_empty()) {
            Some(q) => self.entities.insert(e, q),
            None => self.entities.remove(&e),
        };
        true
    }

    /// Forgets every entity (before a full read).
    pub fn clear(&mut self) {
        self.entities.clear();
    }

    fn get(&self, kind: Kind, user: Option<Part>, client_id: Option<Part>) -> Option<f64> {
        let e = Entity { user, client_id };
        self.entities.get(&e)?.get(kind.key()).copied()
    }
}

/// A rate's identity: the quota kind and Kafka's metric tags (user, client id; empty when the
/// quota that applies does not depend on it).
pub type Tags = (Kind, String, String);

/// The quota a request of `user` and `client` counts against, if any: the rate's tags and the
/// bound in bytes per second. Kafka's order: user and client id, user and default client id,
/// user, default user and client id, default user and default client id, default user, client
/// id, default client id. A default quota gives each user or client id a rate of its own.
pub fn resolve(cfg: &QuotaConfig, kind: Kind, user: &str, client: &str) -> Option<(Tags, f64)> {
    let u = || Some(Part::Named(user.to_string()));
    let c = || Some(Part::Named(client.to_string()));
    let d = || Some(Part::Default);
    let has = |eu: Option<Part>, ec: Option<Part>| cfg.get(kind, eu, ec).is_some();
    let (tu, tc) = if has(u(), c()) || has(u(), d()) {
        (user, client)
    } else if has(u(), None) {
        (user, "")
    } else if has(d(), c()) || has(d(), d()) {
        (user, client)
    } else if has(d(), None) {
        (user, "")
    } else {
        ("", client)
    };
    let bound = match (tu.is_empty(), tc.is_empty()) {
        (false, false) => cfg
            .get(kind, u(), c())
            .or_else(|| cfg.get(kind, u(), d()))
            .or_else(|| cfg.get(kind, d(), c()))
            .or_else(|| cfg.get(kind, d(), d())),
        (false, true) => cfg.get(kind, u(), None).or_else(|| cfg.get(kind, d(), None)),
        (true, false) => cfg.get(kind, None, c()).or_else(|| cfg.get(kind, None, d())),
        (true, true) => None,
    }?;
    Some(((kind, tu.to_string(), tc.to_string()), bound))
}

/// The most bytes one fetch of a client under `bound` may return, as Kafka caps a consumer's
/// fetch: what the quota allows over all but one of the windows.
pub fn max_in_window(bound: f64) -> f64 {
    bound * (SAMPLES as u64 - 1) as f64 * WINDOW_MS as f64 / 1000.0
}

/// The rates of the clients with a quota.
#[derive(Debug, Default)]
pub struct Sensors {
    rates: HashMap<Tags, Rate>,
}

impl Sensors {
    /// Records `bytes` of a request against its quota; the throttle time in ms (0 when within
    /// it or when no quota applies).
    pub fn record(&mut self, cfg: &QuotaConfig, kind: Kind, user: &str, client: &str, bytes: f64, now_ms: u64) -> u64 {
        let Some((tags, bound)) = resolve(cfg, kind, user, client) else {
            return 0;
        };
        let rate = self.rate(tags, now_ms);
        rate.record(bytes, now_ms);
        throttle_ms(rate, bound, now_ms)
    }

    /// Takes back bytes recorded for a fetch that was answered empty because it was throttled.
    pub fn unrecord(&mut self, cfg: &QuotaConfig, kind: Kind, user: &str, client: &str, bytes: f64, now_ms: u64) {
        if let Some((tags, _)) = resolve(cfg, kind, user, client) {
            self.rate(tags, now_ms).record(-bytes, now_ms);
        }
    }

    /// How many rates are kept.
    pub fn len(&self) -> usize {
        self.rates.len()
    }

    /// Whether no rate is kept.
    pub fn is_empty(&self) -> bool {
        self.rates.is_empty()
    }

    fn rate(&mut self, tags: Tags, now_ms: u64) -> &mut Rate {
        if !self.rates.contains_key(&tags) && self.rates.len() >= MAX_SENSORS {
            self.rates.retain(|_, r| !r.idle(now_ms));
            if self.rates.len() >= MAX_SENSORS {
                let oldest = self
                    .rates
                    .iter()
                    .min_by_key(|(_, r)| r.last_ms())
                    .map(|(t, _)| t.clone());
                if let Some(t) = oldest {
                    self.rates.remove(&t);
                }
            }
        }
        self.rates.entry(tags).or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(entries: &[(Entity, &str, f64)]) -> QuotaConfig {
        let mut cfg = QuotaConfig::default();
        for (e, k, v) in entries {
            let mut q = cfg.entities.get(e).cloned().unwrap_or_default();
            q.insert(k.to_string(), *v);
            assert!(cfg.apply(&e.key(), Some(q)));
        }
        cfg
    }

    fn entity(user: Option<Part>, client_id: Option<Part>) -> Entity {
        Entity { user, client_id }
    }

    fn named(s: &str) -> Option<Part> {
        Some(Part::Named(s.into()))
    }

    #[test]
    fn a_new_client_is_measured_over_ten_windows_at_least() {
        let mut r = Rate::default();
        r.record(10_000.0, 1_000);
        // 10,000 bytes over the minimum 10 s: 1,000 bytes/s.
        assert_eq!(r.window_ms(1_000), 10_000);
        assert_eq!(r.measure(1_000), 1_000.0);
        // Past the 11 windows kept, the bytes age out.
        assert_eq!(r.measure(12_500), 0.0);
        assert!(r.idle(12_500));
    }

    #[test]
    fn the_rate_spans_the_windows_kept() {
        let mut r = Rate::default();
        for s in 0..15u64 {
            r.record(500.0, s * WINDOW_MS);
        }
        // Eleven samples of 500 bytes, from 4 s to 14 s: 5,500 bytes over 10 s.
        assert_eq!(r.window_ms(14_000), 10_000);
        assert_eq!(r.measure(14_000), 550.0);
    }

    #[test]
    fn the_throttle_time_is_the_excess_share_of_the_window() {
        let mut r = Rate::default();
        r.record(20_480.0, 0);
        // 2,048 bytes/s against 1,024: 100% over, for the 10 s window.
        assert_eq!(throttle_ms(&mut r, 1_024.0, 0), 10_000);
        let mut r = Rate::default();
        r.record(10_240.0, 0);
        assert_eq!(throttle_ms(&mut r, 1_024.0, 0), 0, "at the bound, no throttle");
        r.record(1_024.0, 0);
        assert_eq!(throttle_ms(&mut r, 1_024.0, 0), 1_000);
    }

    #[test]
    fn a_client_id_quota_throttles_only_that_client() {
        let cfg = config(&[(entity(None, named("c1")), cq::PRODUCER_BYTE_RATE, 1_024.0)]);
        let mut s = Sensors::default();
        let mut throttled = 0;
        for i in 0..20 {
            throttled += s.record(&cfg, Kind::Produce, "ANONYMOUS", "c1", 2_000.0, i * 100);
        }
        assert!(throttled > 0, "c1 sent 40,000 bytes in 2 s against 1,024 bytes/s");
        for i in 0..20 {
            assert_eq!(s.record(&cfg, Kind::Produce, "ANONYMOUS", "c2", 2_000.0, i * 100), 0);
        }
        assert_eq!(
            s.record(&cfg, Kind::Fetch, "ANONYMOUS", "c1", 1e9, 0),
            0,
            "no consumer quota"
        );
        assert_eq!(s.len(), 1, "only quota'd clients keep a rate");
    }

    #[test]
    fn precedence_and_tags_follow_kafka() {
        let p = cq::PRODUCER_BYTE_RATE;
        let cfg = config(&[
            (entity(None, Some(Part::Default)), p, 100.0),
            (entity(None, named("c1")), p, 200.0),
            (entity(Some(Part::Default), None), p, 300.0),
            (entity(named("alice"), named("c1")), p, 400.0),
        ]);
        let r = |u: &str, c: &str| resolve(&cfg, Kind::Produce, u, c).unwrap();
        // A user quota (the default user's) comes before any client-id quota.
        assert_eq!(r("bob", "c1"), ((Kind::Produce, "bob".into(), String::new()), 300.0));
        assert_eq!(r("alice", "c1"), ((Kind::Produce, "alice".into(), "c1".into()), 400.0));
        let only_clients = config(&[
            (entity(None, Some(Part::Default)), p, 100.0),
            (entity(None, named("c1")), p, 200.0),
        ]);
        let r = |c: &str| resolve(&only_clients, Kind::Produce, "ANONYMOUS", c).unwrap();
        assert_eq!(r("c1"), ((Kind::Produce, String::new(), "c1".into()), 200.0));
        // The default client id quota gives each client id its own rate.
        assert_eq!(r("c9"), ((Kind::Produce, String::new(), "c9".into()), 100.0));
        assert_eq!(resolve(&QuotaConfig::default(), Kind::Produce, "u", "c"), None);
    }

    #[test]
    fn a_throttled_fetch_takes_its_bytes_back() {
        let cfg = config(&[(entity(None, named("c")), cq::CONSUMER_BYTE_RATE, 100.0)]);
        let mut s = Sensors::default();
        assert!(s.record(&cfg, Kind::Fetch, "ANONYMOUS", "c", 5_000.0, 0) > 0);
        s.unrecord(&cfg, Kind::Fetch, "ANONYMOUS", "c", 5_000.0, 0);
        assert_eq!(s.record(&cfg, Kind::Fetch, "ANONYMOUS", "c", 500.0, 0), 0);
        assert_eq!(max_in_window(100.0), 1_000.0);
    }

    #[test]
    fn rates_are_bounded_in_number() {
        let cfg = config(&[(entity(None, Some(Part::Default)), cq::PRODUCER_BYTE_RATE, 1e6)]);
        let mut s = Sensors::default();
        for i in 0..MAX_SENSORS as u64 + 10 {
            s.record(&cfg, Kind::Produce, "ANONYMOUS", &format!("c{i}"), 1.0, i);
        }
        assert_eq!(s.len(), MAX_SENSORS);
        // Once the old ones are idle, a new one clears them out.
        s.record(&cfg, Kind::Produce, "ANONYMOUS", "late", 1.0, 1_000_000);
        assert_eq!(s.len(), 1);
    }
}
