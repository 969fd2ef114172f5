//! Who a Kafka client is and what it may do: the listener's security settings, each
//! connection's SASL session (`session`), and the credentials and ACLs this broker follows from
//! the metastore (`view`), so that no request asks the quorum who may do what.

pub mod call_identity;
pub mod grpc_guard;
pub mod grpc_rules;
pub mod session;
pub mod view;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::sasl::Mechanism;

/// The principal of a connection that has not authenticated (a PLAINTEXT listener's clients).
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// Kafka's security protocols of a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecurityProtocol {
    /// No authentication: every client is `User:ANONYMOUS`.
    #[default]
    Plaintext,
    /// SASL over plain TCP.
    SaslPlaintext,
    /// TLS; a client certificate, if any, names the principal.
    Ssl,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name for `s` (`PLAINTEXT`, `SASL_PLAINTEXT`).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(Self::Plaintext),
            "SASL_PLAINTEXT" => Ok(Self::SaslPlaintext),
            "SSL" => Ok(Self::Ssl),
            "SASL_SSL" => Ok(Self::SaslSsl),
            _ => Err(format!(
                "security protocol {s}: not one of PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL"
            )),
        }
    }

    /// Kafka's name of the protocol, as `parse` reads it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether clients must authenticate with SASL.
    pub fn sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }

    /// Whether the listener speaks TLS.
    pub fn tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }
}

/// What one listener sets for itself (Kafka's `listener.name.NAME.` settings), in place of
/// the shared ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenerOverride {
    /// Its `sasl.enabled.mechanisms`.
    pub mechanisms: Option<Vec<Mechanism>>,
    /// Its certificates, every `ssl.*` setting resolved (its own, else the shared one).
    pub tls: Option<metastore::tls::TlsFiles>,
}

/// The security settings a broker's Kafka listeners share, under Kafka's config names (each
/// listener's protocol is its own: [`crate::kafka::listeners::Listener`]), and what each
/// listener sets for itself.
#[derive(Debug, Clone)]
pub struct ListenerSecurity {
    /// `sasl.enabled.mechanisms`.
    pub mechanisms: Vec<Mechanism>,
    /// Whether ACLs are checked (`authorizer.class.name` set); when not, everything is allowed.
    pub authorizer: bool,
    /// `super.users`: principals allowed everything.
    pub super_users: BTreeSet<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_everyone_if_no_acl_found: bool,
    /// `connections.max.reauth.ms` (KIP-368); `None` for sessions that never expire.
    pub max_reauth: Option<Duration>,
    /// `connection.failed.authentication.delay.ms`: a failed login's answer waits this long.
    pub failed_authentication_delay: Duration,
    /// The certificates of the TLS listeners.
    pub tls: Option<metastore::tls::TlsFiles>,
    /// Each listener's own settings, by its name (upper case).
    pub overrides: BTreeMap<String, ListenerOverride>,
}

impl Default for ListenerSecurity {
    fn default() -> Self {
        Self {
            mechanisms: vec![Mechanism::ScramSha256, Mechanism::ScramSha512, Mechanism::Plain],
            authorizer: false,
            super_users: BTreeSet::new(),
            allow_everyone_if_no_acl_found: false,
            max_reauth: None,
            failed_authentication_delay: Duration::from_millis(100),
            tls: None,
            overrides: BTreeMap::new(),
        }
    }
}

impl ListenerSecurity {
    /// The mechanisms the listener `name` offers.
    pub fn mechanisms_of(&self, name: &str) -> &[Mechanism] {
        match self.overrides.get(name).and_then(|o| o.mechanisms.as_ref()) {
            Some(own) => own,
            None => &self.mechanisms,
        }
    }

    /// The certificates the listener `name` serves.
    pub fn tls_of(&self, name: &str) -> Option<&metastore::tls::TlsFiles> {
        match self.overrides.get(name).and_then(|o| o.tls.as_ref()) {
            Some(own) => Some(own),
            None => self.tls.as_ref(),
        }
    }

    /// Parses `super.users` as Kafka writes it: principals separated by `;`.
    pub fn parse_super_users(s: &str) -> Result<BTreeSet<String>, String> {
        s.split(';')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once(':') {
                Some((t, n)) if !t.is_empty() && !n.is_empty() => Ok(p.to_string()),
                _ => Err(format!("super.users: {p:?} is not a principal of the form User:name")),
            })
            .collect()
    }

    /// Parses `sasl.enabled.mechanisms`: names separated by `,`.
    pub fn parse_mechanisms(s: &str) -> Result<Vec<Mechanism>, String> {
        s.split(',')
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(|m| Mechanism::parse(m).map_err(|e| format!("sasl.enabled.mechanisms: {e}")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_spellings_parse_and_bad_ones_name_the_setting() {
        assert_eq!(
            SecurityProtocol::parse("sasl_plaintext"),
            Ok(SecurityProtocol::SaslPlaintext)
        );
        assert_eq!(SecurityProtocol::parse("SSL"), Ok(SecurityProtocol::Ssl));
        assert!(SecurityProtocol::parse("SSL").unwrap().tls() && SecurityProtocol::parse("sasl_ssl").unwrap().sasl());
        assert!(SecurityProtocol::parse("TLS").unwrap_err().contains("SASL_SSL"));
        let su = ListenerSecurity::parse_super_users("User:admin; User:ops").unwrap();
        assert_eq!(su.len(), 2);
        assert!(ListenerSecurity::parse_super_users("admin")
            .unwrap_err()
            .contains("super.users"));
        assert_eq!(
            ListenerSecurity::parse_mechanisms("PLAIN,SCRAM-SHA-512").unwrap(),
            vec![Mechanism::Plain, Mechanism::ScramSha512]
        );
        assert!(ListenerSecurity::parse_mechanisms("GSSAPI")
            .unwrap_err()
            .contains("sasl.enabled.mechanisms"));
    }
}
