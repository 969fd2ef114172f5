//! Each Kafka listener's own security settings, as Kafka names them in `server.properties`:
//! `listener.name.NAME.SETTING=VALUE` (the listener's name in any case). Each setting a listener
//! gives replaces the shared one for that listener alone; the others stay shared, as Kafka
//! resolves them. Pure: the flags' values in, the settings by listener out.

use std::collections::BTreeMap;

use broker::auth::SecurityProtocol;

/// A setting that a listener may give for itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Setting {
    /// `ssl.keystore.location`.
    KeystoreLocation,
    /// `ssl.keystore.type`.
    KeystoreType,
    /// `ssl.keystore.password`.
    KeystorePassword,
    /// `ssl.key.password`.
    KeyPassword,
    /// `ssl.truststore.location`.
    TruststoreLocation,
    /// `ssl.truststore.type`.
    TruststoreType,
    /// `ssl.truststore.password`.
    TruststorePassword,
    /// `ssl.client.auth`.
    ClientAuth,
    /// `sasl.enabled.mechanisms`.
    Mechanisms,
}

const ALL: [Setting; 9] = [
    Setting::KeystoreLocation,
    Setting::KeystoreType,
    Setting::KeystorePassword,
    Setting::KeyPassword,
    Setting::TruststoreLocation,
    Setting::TruststoreType,
    Setting::TruststorePassword,
    Setting::ClientAuth,
    Setting::Mechanisms,
];

impl Setting {
    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::KeystoreLocation => "ssl.keystore.location",
            Self::KeystoreType => "ssl.keystore.type",
            Self::KeystorePassword => "ssl.keystore.password",
            Self::KeyPassword => "ssl.key.password",
            Self::TruststoreLocation => "ssl.truststore.location",
            Self::TruststoreType => "ssl.truststore.type",
            Self::TruststorePassword => "ssl.truststore.password",
            Self::ClientAuth => "ssl.client.auth",
            Self::Mechanisms => "sasl.enabled.mechanisms",
        }
    }

    /// The shared flag: `--ssl-keystore-location` for `ssl.keystore.location`.
    pub fn flag(self) -> String {
        format!("--{}", self.name().replace('.', "-"))
    }

    /// The name as listener `listener` gives it: `listener.name.external.ssl.keystore.location`.
    pub fn prefixed(self, listener: &str) -> String {
        format!("listener.name.{}.{}", listener.to_ascii_lowercase(), self.name())
    }

    /// Whether a listener of `protocol` uses this setting.
    pub fn applies_to(self, protocol: SecurityProtocol) -> bool {
        match self {
            Self::Mechanisms => protocol.sasl(),
            _ => protocol.tls(),
        }
    }
}

/// The settings each listener gives for itself.
#[derive(Debug, Default)]
pub struct ListenerConfig {
    by_listener: BTreeMap<String, BTreeMap<Setting, String>>,
}

impl ListenerConfig {
    /// Reads `entries` (`listener.name.NAME.SETTING=VALUE`) for the listeners `names` (upper
    /// case). An entry for no listener, an unknown setting or one given twice is refused,
    /// naming the entry (never its value, which may be a password).
    pub fn parse(entries: &[String], names: &[&str]) -> Result<Self, String> {
        let mut by_listener: BTreeMap<String, BTreeMap<Setting, String>> = BTreeMap::new();
        for entry in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            let Some((key, value)) = entry.split_once('=') else {
                return Err(format!(
                    "an entry starting {:?} is not listener.name.NAME.SETTING=VALUE",
                    entry.chars().take(24).collect::<String>()
                ));
            };
            let key = key.trim();
            let Some((listener, setting)) = key.strip_prefix("listener.name.").and_then(|rest| rest.split_once('.'))
            else {
                return Err(format!("{key}: not of the form listener.name.NAME.SETTING"));
            };
            let listener = listener.to_ascii_uppercase();
            if !names.contains(&listener.as_str()) {
                return Err(format!(
                    "{key}: {listener} is not a listener (the listeners are {})",
                    names.join(", ")
                ));
            }
            let Some(setting) = ALL.iter().copied().find(|s| s.name() == setting) else {
                let known: Vec<_> = ALL.iter().map(|s| s.name()).collect();
                return Err(format!("{key}: {setting} is not one of {}", known.join(", ")));
            };
            let own = by_listener.entry(listener).or_default();
            if own.insert(setting, value.trim().to_string()).is_some() {
                return Err(format!("{key} is given twice"));
            }
        }
        Ok(Self { by_listener })
    }

    /// The settings listener `name` gives for itself, if any.
    pub fn of(&self, name: &str) -> Option<&BTreeMap<Setting, String>> {
        self.by_listener.get(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(entries: &[&str]) -> Result<ListenerConfig, String> {
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        ListenerConfig::parse(&entries, &["INTERNAL", "EXTERNAL"])
    }

    #[test]
    fn each_listener_gets_its_own_settings_by_kafkas_names() {
        let c = parse(&[
            "listener.name.external.ssl.keystore.location=/etc/ext.pem",
            " listener.name.EXTERNAL.ssl.keystore.password = a=b ",
            "listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512",
        ])
        .unwrap();
        let ext = c.of("EXTERNAL").unwrap();
        assert_eq!(ext[&Setting::KeystoreLocation], "/etc/ext.pem");
        // Only the first `=` splits: a password may hold one.
        assert_eq!(ext[&Setting::KeystorePassword], "a=b");
        assert_eq!(c.of("INTERNAL").unwrap()[&Setting::Mechanisms], "SCRAM-SHA-512");
        assert_eq!(Setting::KeyPassword.flag(), "--ssl-key-password");
        assert_eq!(
            Setting::ClientAuth.prefixed("EXTERNAL"),
            "listener.name.external.ssl.client.auth"
        );
        assert!(Setting::Mechanisms.applies_to(SecurityProtocol::SaslPlaintext));
        assert!(!Setting::ClientAuth.applies_to(SecurityProtocol::SaslPlaintext));
    }

    #[test]
    fn bad_entries_name_the_entry_and_never_the_value() {
        let err = |e: &[&str]| parse(e).unwrap_err();
        assert!(err(&["listener.name.other.ssl.client.auth=none"]).contains("OTHER is not a listener"));
        assert!(err(&["listener.name.external.ssl.cipher.suites=x"]).contains("ssl.cipher.suites is not one of"));
        assert!(err(&["ssl.keystore.location=/x"]).contains("not of the form"));
        let e = err(&["listener.name.external.ssl.keystore.password"]);
        assert!(e.contains("is not listener.name.NAME.SETTING=VALUE"), "{e}");
        let e = err(&[
            "listener.name.external.ssl.keystore.password=hunter2",
            "listener.name.EXTERNAL.ssl.keystore.password=hunter3",
        ]);
        assert!(e.contains("given twice") && !e.contains("hunter"), "{e}");
    }
}
