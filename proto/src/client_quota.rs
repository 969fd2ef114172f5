//! Client quotas as Kafka names them: entity types, quota keys, the checks on a value, and the
//! metastore key of each entity (`/config/clients/<c>`, `/config/users/<u>`,
//! `/config/users/<u>/clients/<c>`, ZooKeeper's layout), spelled once for controller and broker.

/// Kafka's entity type of a user principal.
pub const USER: &str = "user";
/// Kafka's entity type of a client id.
pub const CLIENT_ID: &str = "client-id";
/// Kafka's entity type of a client address (connection rate quotas, not served by Ferry).
pub const IP: &str = "ip";

/// Bytes a producer may send per second.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// Bytes a consumer may fetch per second.
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// Share of request handler time (Kafka's request quota; not enforced by Ferry).
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
/// Partition mutations per second (Kafka's controller quota; not enforced by Ferry).
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";

use crate::keys::{CLIENT_QUOTAS as CLIENTS, USER_QUOTAS as USERS};

/// The name of a default entity in a key, as in ZooKeeper.
pub const DEFAULT_NAME: &str = "<default>";
/// The longest entity name, once encoded for its key: two of them and the prefixes stay within
/// the metastore's 4096-byte keys.
pub const MAX_ENCODED_NAME: usize = 2000;

/// One part of an entity: its default, or a name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    /// The default entity of the type (a null name in Kafka's requests).
    Default,
    /// A named entity.
    Named(String),
}

impl Part {
    /// From Kafka's nullable name.
    pub fn of(name: Option<&str>) -> Self {
        name.map_or(Part::Default, |n| Part::Named(n.to_string()))
    }

    /// Kafka's nullable name.
    pub fn name(&self) -> Option<&str> {
        match self {
            Part::Default => None,
            Part::Named(n) => Some(n),
        }
    }

    fn encoded(&self) -> String {
        match self {
            Part::Default => DEFAULT_NAME.to_string(),
            Part::Named(n) => sanitize(n),
        }
    }
}

/// A quota entity: a user, a client id, or both; at least one is present.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Entity {
    /// The user part.
    pub user: Option<Part>,
    /// The client-id part.
    pub client_id: Option<Part>,
}

impl Entity {
    /// The metastore key of the entity's quotas.
    pub fn key(&self) -> String {
        match (&self.user, &self.client_id) {
            (Some(u), Some(c)) => format!("{USERS}{}/clients/{}", u.encoded(), c.encoded()),
            (Some(u), None) => format!("{USERS}{}", u.encoded()),
            (None, Some(c)) => format!("{CLIENTS}{}", c.encoded()),
            // Not an entity: no key can name it, and none is parsed into it.
            (None, None) => format!("{USERS}/"),
        }
    }

    /// The parts as Kafka lists them: (entity type, nullable name), user first.
    pub fn parts(&self) -> Vec<(&'static str, Option<&str>)> {
        let user = self.user.as_ref().map(|u| (USER, u.name()));
        let client = self.client_id.as_ref().map(|c| (CLIENT_ID, c.name()));
        user.into_iter().chain(client).collect()
    }
}

/// The entity a metastore key names, or `None` for a key that names none.
pub fn parse_key(key: &str) -> Option<Entity> {
    if let Some(c) = key.strip_prefix(CLIENTS) {
        return Some(Entity {
            user: None,
            client_id: Some(parse_part(c)?),
        });
    }
    let rest = key.strip_prefix(USERS)?;
    let (u, client_id) = match rest.split_once('/') {
        None => (rest, None),
        Some((u, tail)) => (u, Some(parse_part(tail.strip_prefix("clients/")?)?)),
    };
    Some(Entity {
        user: Some(parse_part(u)?),
        client_id,
    })
}

fn parse_part(s: &str) -> Option<Part> {
    if s == DEFAULT_NAME {
        return Some(Part::Default);
    }
    let name = desanitize(s)?;
    (!name.is_empty()).then_some(Part::Named(name))
}

pub use crate::keys::{desanitize, sanitize};

/// The entity a request names by (entity type, nullable name) pairs, or why it names none.
pub fn entity_of(parts: &[(&str, Option<&str>)]) -> Result<Entity, String> {
    if parts.is_empty() {
        return Err("Invalid empty client quota entity".into());
    }
    let mut e = Entity {
        user: None,
        client_id: None,
    };
    for (kind, name) in parts {
        if name.is_some_and(str::is_empty) {
            return Err(format!("the {kind} name is empty; a default entity has a null name"));
        }
        if let Some(n) = name {
            let len = sanitize(n).len();
            if len > MAX_ENCODED_NAME {
                return Err(format!(
                    "the {kind} name is {len} bytes once encoded, over {MAX_ENCODED_NAME}"
                ));
            }
        }
        let slot = match *kind {
            USER => &mut e.user,
            CLIENT_ID => &mut e.client_id,
            IP => return Err("ip quota entities are not supported by Ferry".into()),
            other => return Err(format!("Unhandled client quota entity type: {other}")),
        };
        if slot.is_some() {
            return Err(format!("Duplicate {kind} entity in the client quota entity"));
        }
        *slot = Some(Part::of(*name));
    }
    Ok(e)
}

/// Checks a value set for a quota key, as Kafka's controller does; the message names the key.
pub fn check_value(key: &str, value: f64) -> Result<(), String> {
    match key {
        PRODUCER_BYTE_RATE | CONSUMER_BYTE_RATE => {}
        REQUEST_PERCENTAGE | CONTROLLER_MUTATION_RATE => {
            return Err(format!(
                "{key} is not supported by Ferry: only {PRODUCER_BYTE_RATE} and {CONSUMER_BYTE_RATE} are enforced"
            ))
        }
        _ => return Err(format!("Invalid configuration key {key}")),
    }
    if !value.is_finite() {
        return Err(format!("Quota {key} must be a finite number"));
    }
    if value <= 0.0 {
        return Err(format!("Quota {key} must be greater than 0"));
    }
    // Kafka's byte rates are LONGs.
    if value >= i64::MAX as f64 {
        return Err(format!("Proposed value for {key} is too large for a LONG."));
    }
    if (value % 1.0).abs() > 1e-6 {
        return Err(format!("{key} cannot be a fractional value."));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(s: &str) -> Option<Part> {
        Some(Part::Named(s.into()))
    }

    #[test]
    fn keys_are_zookeepers_and_parse_back() {
        let cases = [
            (
                Entity {
                    user: None,
                    client_id: named("c1"),
                },
                "/config/clients/c1",
            ),
            (
                Entity {
                    user: None,
                    client_id: Some(Part::Default),
                },
                "/config/clients/<default>",
            ),
            (
                Entity {
                    user: named("alice"),
                    client_id: None,
                },
                "/config/users/alice",
            ),
            (
                Entity {
                    user: Some(Part::Default),
                    client_id: named("a/b c*"),
                },
                "/config/users/<default>/clients/a%2Fb%20c%2A",
            ),
            (
                Entity {
                    user: named("<default>"),
                    client_id: None,
                },
                "/config/users/%3Cdefault%3E",
            ),
        ];
        for (e, key) in cases {
            assert_eq!(e.key(), key);
            assert_eq!(parse_key(key), Some(e));
        }
        assert_eq!(parse_key("/config/brokers/1"), None);
        assert_eq!(parse_key("/config/users/u/other/c"), None);
        assert_eq!(parse_key("/config/clients/a/b"), None, "an encoded name holds no slash");
        assert_eq!(parse_key("/config/clients/%zz"), None);
    }

    #[test]
    fn sanitize_round_trips_any_name() {
        for n in ["plain", "with space", "ünïcødé", "*", "%41", "a+b", "~x"] {
            assert_eq!(desanitize(&sanitize(n)).as_deref(), Some(n));
        }
        assert_eq!(sanitize("a b*"), "a%20b%2A");
    }

    #[test]
    fn entities_are_checked_as_kafka_does() {
        let e = entity_of(&[(USER, None), (CLIENT_ID, Some("c"))]).unwrap();
        assert_eq!((e.user, e.client_id), (Some(Part::Default), named("c")));
        assert!(entity_of(&[]).unwrap_err().contains("empty"));
        assert!(entity_of(&[(USER, Some("a")), (USER, Some("b"))])
            .unwrap_err()
            .contains("Duplicate user"));
        assert!(entity_of(&[(IP, Some("1.2.3.4"))])
            .unwrap_err()
            .contains("not supported"));
        assert!(entity_of(&[("group", Some("g"))]).unwrap_err().contains("group"));
        assert!(entity_of(&[(CLIENT_ID, Some(""))]).unwrap_err().contains("empty"));
        let long = "/".repeat(700);
        assert!(entity_of(&[(CLIENT_ID, Some(long.as_str()))])
            .unwrap_err()
            .contains("over 2000"));
    }

    #[test]
    fn values_are_checked_naming_the_key() {
        assert_eq!(check_value(PRODUCER_BYTE_RATE, 1024.0), Ok(()));
        for (key, v, why) in [
            (PRODUCER_BYTE_RATE, 0.0, "producer_byte_rate must be greater than 0"),
            (CONSUMER_BYTE_RATE, -5.0, "consumer_byte_rate must be greater than 0"),
            (
                CONSUMER_BYTE_RATE,
                1.5,
                "consumer_byte_rate cannot be a fractional value",
            ),
            (PRODUCER_BYTE_RATE, f64::NAN, "producer_byte_rate must be a finite"),
            (PRODUCER_BYTE_RATE, 1e300, "producer_byte_rate is too large"),
            (REQUEST_PERCENTAGE, 50.0, "request_percentage is not supported"),
            ("bogus_rate", 1.0, "Invalid configuration key bogus_rate"),
        ] {
            let err = check_value(key, v).unwrap_err();
            assert!(err.contains(why), "{key}={v}: {err}");
        }
    }
}
