//! A broker's effective configs, as Kafka resolves them: the broker's own dynamic value
//! (`/config/brokers/<id>`) over the cluster-wide dynamic default (`/config/brokers/<default>`,
//! Kafka's resource name ""), over the node's static config (its flags or config file), over
//! Kafka's default. DescribeConfigs reports each value's source and, on request, its synonyms: the
//! value at every level that sets it, in that order.

use std::collections::HashMap;

use crate::topic_config::{Known, BROKER_CONFIGS};

/// Where a config's value comes from, with Kafka's `ConfigSource` codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Set on this broker at run time (`DYNAMIC_BROKER_CONFIG`).
    DynamicBroker = 2,
    /// Set on the cluster-wide default at run time (`DYNAMIC_DEFAULT_BROKER_CONFIG`).
    DynamicDefault = 3,
    /// Set in the node's static config (`STATIC_BROKER_CONFIG`).
    Static = 4,
    /// Kafka's default (`DEFAULT_CONFIG`).
    Default = 5,
}

impl Source {
    /// Kafka's code of the source.
    pub fn code(self) -> i8 {
        self as i8
    }
}

/// The configs set at each level of one broker.
#[derive(Debug, Clone, Copy)]
pub struct Layers<'a> {
    /// The broker's own dynamic configs; `None` when the cluster default itself is described
    /// (Kafka leaves the broker level out of the default's synonyms).
    pub broker: Option<&'a HashMap<String, String>>,
    /// The cluster-wide dynamic default.
    pub default: &'a HashMap<String, String>,
    /// The node's static config.
    pub static_: &'a HashMap<String, String>,
}

/// One config resolved: its value and source (the first synonym's), and the synonyms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The config's name.
    pub name: String,
    /// Its effective value.
    pub value: String,
    /// Where the value comes from.
    pub source: Source,
    /// Its value at each level that sets it, highest first.
    pub synonyms: Vec<(Source, String)>,
    /// Kafka's type code, 0 when Ferry does not know the config.
    pub kafka_type: i8,
}

fn known(name: &str) -> Option<&'static Known> {
    BROKER_CONFIGS.iter().find(|k| k.name == name)
}

/// Resolves `name` over `layers`; `None` when no level sets it and Ferry knows no default.
pub fn resolve(name: &str, layers: Layers<'_>) -> Option<Resolved> {
    let mut synonyms = Vec::new();
    let levels = [
        (Source::DynamicBroker, layers.broker),
        (Source::DynamicDefault, Some(layers.default)),
        (Source::Static, Some(layers.static_)),
    ];
    for (source, level) in levels {
        if let Some(v) = level.and_then(|l| l.get(name)) {
            synonyms.push((source, v.clone()));
        }
    }
    let k = known(name);
    if let Some(k) = k {
        synonyms.push((Source::Default, k.default.to_string()));
    }
    let (source, value) = synonyms.first().cloned()?;
    Some(Resolved {
        name: name.to_string(),
        value,
        source,
        synonyms,
        kafka_type: k.map_or(0, |k| k.kafka_type),
    })
}

/// The effective value of `name` on a broker with `layers`.
pub fn effective(name: &str, layers: Layers<'_>) -> Option<String> {
    resolve(name, layers).map(|r| r.value)
}

/// Every config of one broker, as DescribeConfigs lists them: each one Ferry knows, then any
/// other set at a dynamic level (imported, say), in name order.
pub fn describe_broker(layers: Layers<'_>) -> Vec<Resolved> {
    let mut names: Vec<&str> = BROKER_CONFIGS.iter().map(|k| k.name).collect();
    for level in [layers.broker, Some(layers.default)].into_iter().flatten() {
        names.extend(level.keys().map(String::as_str));
    }
    names.sort_unstable();
    names.dedup();
    names.into_iter().filter_map(|n| resolve(n, layers)).collect()
}

/// The cluster-wide default as DescribeConfigs lists it (Kafka's resource name ""): only the
/// configs set on it, each with the levels below it as synonyms.
pub fn describe_default(default: &HashMap<String, String>, static_: &HashMap<String, String>) -> Vec<Resolved> {
    let layers = Layers {
        broker: None,
        default,
        static_,
    };
    let mut names: Vec<&str> = default.keys().map(String::as_str).collect();
    names.sort_unstable();
    names.into_iter().filter_map(|n| resolve(n, layers)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topic_config::LEADER_THROTTLED_RATE;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_broker_beats_the_default_beats_static_beats_kafkas_default() {
        let broker = map(&[(LEADER_THROTTLED_RATE, "1")]);
        let default = map(&[(LEADER_THROTTLED_RATE, "2")]);
        let static_ = map(&[(LEADER_THROTTLED_RATE, "3")]);
        let none = HashMap::new();
        let at = |b: &HashMap<String, String>, d: &HashMap<String, String>, s: &HashMap<String, String>| {
            resolve(
                LEADER_THROTTLED_RATE,
                Layers {
                    broker: Some(b),
                    default: d,
                    static_: s,
                },
            )
            .unwrap()
        };
        let r = at(&broker, &default, &static_);
        assert_eq!((r.value.as_str(), r.source), ("1", Source::DynamicBroker));
        assert_eq!(
            r.synonyms,
            vec![
                (Source::DynamicBroker, "1".to_string()),
                (Source::DynamicDefault, "2".to_string()),
                (Source::Static, "3".to_string()),
                (Source::Default, "9223372036854775807".to_string()),
            ]
        );
        let r = at(&none, &default, &static_);
        assert_eq!((r.value.as_str(), r.source), ("2", Source::DynamicDefault));
        let r = at(&none, &none, &static_);
        assert_eq!((r.value.as_str(), r.source), ("3", Source::Static));
        let r = at(&none, &none, &none);
        assert_eq!((r.source, r.synonyms.len()), (Source::Default, 1));
        assert_eq!(r.kafka_type, 5);
    }

    #[test]
    fn the_default_lists_what_it_sets_without_the_broker_level() {
        let default = map(&[(LEADER_THROTTLED_RATE, "2")]);
        let static_ = map(&[(LEADER_THROTTLED_RATE, "3")]);
        let d = describe_default(&default, &static_);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].source, Source::DynamicDefault);
        assert_eq!(
            d[0].synonyms.iter().map(|s| s.0).collect::<Vec<_>>(),
            [Source::DynamicDefault, Source::Static, Source::Default]
        );
        assert!(describe_default(&HashMap::new(), &static_).is_empty());
    }

    #[test]
    fn a_broker_lists_every_known_config_and_any_other_set() {
        let broker = map(&[("imported.only", "x")]);
        let none = HashMap::new();
        let d = describe_broker(Layers {
            broker: Some(&broker),
            default: &none,
            static_: &none,
        });
        assert_eq!(d.len(), BROKER_CONFIGS.len() + 1);
        assert!(d.windows(2).all(|w| w[0].name < w[1].name));
        let imported = d.iter().find(|r| r.name == "imported.only").unwrap();
        assert_eq!((imported.source, imported.kafka_type), (Source::DynamicBroker, 0));
        assert_eq!(
            effective(
                "absent",
                Layers {
                    broker: Some(&none),
                    default: &none,
                    static_: &none
                }
            ),
            None
        );
    }
}
