//! A broker's named Kafka listeners (Kafka's `listeners`, `advertised.listeners` and
//! `listener.security.protocol.map`): each bound socket with its name and security protocol,
//! and which of a broker's advertised endpoints a client is given. As in Kafka, a client is
//! given the endpoints of the listener it came in on, so an internal and an external network
//! each see addresses they can reach.

use std::sync::Arc;

use proto::ferry::{BrokerRegistration, KafkaListenerEndpoint};
use tokio::net::TcpListener;

use crate::auth::SecurityProtocol;

/// One bound Kafka listener.
pub struct Listener {
    /// Its name (`PLAINTEXT`, `INTERNAL`, ...).
    pub name: String,
    /// Its security protocol.
    pub protocol: SecurityProtocol,
    /// The bound socket.
    pub socket: TcpListener,
    /// HOST:PORT that clients are told to reach it at.
    pub advertised: String,
}

/// What a connection knows of the listener it came in on.
#[derive(Debug, Clone)]
pub struct Via {
    /// The listener's name.
    pub name: Arc<str>,
    /// Its security protocol.
    pub protocol: SecurityProtocol,
}

impl Via {
    /// The listener named `name` with `protocol`.
    pub fn new(name: &str, protocol: SecurityProtocol) -> Self {
        Self {
            name: name.into(),
            protocol,
        }
    }
}

/// The listeners as the broker's registration advertises them.
pub fn advertised(listeners: &[Listener]) -> Vec<KafkaListenerEndpoint> {
    listeners
        .iter()
        .map(|l| KafkaListenerEndpoint {
            name: l.name.clone(),
            endpoint: l.advertised.clone(),
            security_protocol: l.protocol.name().into(),
        })
        .collect()
}

/// The endpoint `reg` advertises on the listener `name`, or `None` when it has no such
/// listener. A registration that names no listener (written before listeners had names) has
/// one endpoint, given on every listener.
pub fn endpoint_for<'a>(reg: &'a BrokerRegistration, name: &str) -> Option<&'a str> {
    if reg.kafka_listeners.is_empty() {
        return (!reg.kafka_endpoint.is_empty()).then_some(reg.kafka_endpoint.as_str());
    }
    reg.kafka_listeners
        .iter()
        .find(|l| l.name == name)
        .map(|l| l.endpoint.as_str())
}

/// The endpoint of `reg` that a tool inside the cluster reaches without a login: its first
/// PLAINTEXT listener, else its first listener.
pub fn plain_endpoint(reg: &BrokerRegistration) -> &str {
    reg.kafka_listeners
        .iter()
        .find(|l| l.security_protocol == SecurityProtocol::Plaintext.name())
        .map_or(reg.kafka_endpoint.as_str(), |l| l.endpoint.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(listeners: &[(&str, &str, &str)]) -> BrokerRegistration {
        BrokerRegistration {
            kafka_endpoint: listeners.first().map(|l| l.1.to_string()).unwrap_or_default(),
            kafka_listeners: listeners
                .iter()
                .map(|(n, e, p)| KafkaListenerEndpoint {
                    name: n.to_string(),
                    endpoint: e.to_string(),
                    security_protocol: p.to_string(),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_client_is_given_the_endpoint_of_its_own_listener() {
        let r = reg(&[
            ("EXTERNAL", "kafka.example:9093", "SASL_SSL"),
            ("INTERNAL", "10.0.0.1:9092", "PLAINTEXT"),
        ]);
        assert_eq!(endpoint_for(&r, "INTERNAL"), Some("10.0.0.1:9092"));
        assert_eq!(endpoint_for(&r, "EXTERNAL"), Some("kafka.example:9093"));
        assert_eq!(endpoint_for(&r, "REPLICATION"), None);
        assert_eq!(plain_endpoint(&r), "10.0.0.1:9092");
    }

    #[test]
    fn a_registration_without_names_serves_every_listener() {
        let mut old = reg(&[]);
        old.kafka_endpoint = "127.0.0.1:9092".into();
        assert_eq!(endpoint_for(&old, "ANY"), Some("127.0.0.1:9092"));
        assert_eq!(plain_endpoint(&old), "127.0.0.1:9092");
        assert_eq!(endpoint_for(&reg(&[]), "PLAINTEXT"), None);
        let tls_only = reg(&[("SSL", "h:9093", "SSL")]);
        assert_eq!(plain_endpoint(&tls_only), "h:9093");
    }
}
