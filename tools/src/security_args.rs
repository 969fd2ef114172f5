//! The Kafka listeners' security flags, under Kafka's config names: the security protocol,
//! `sasl.enabled.mechanisms`, the authorizer, `super.users`,
//! `allow.everyone.if.no.acl.found`, `connections.max.reauth.ms` and
//! `connection.failed.authentication.delay.ms`, and the TLS certificates, shared by the
//! listeners or set per listener (`--listener-config`, Kafka's `listener.name.NAME.` settings).
//! Flags and FERRY_* variables only (not the config file).

use std::time::Duration;

use anyhow::{anyhow, bail};
use broker::auth::ListenerOverride;
use broker::auth::{ListenerSecurity, SecurityProtocol};
use broker::sasl::Mechanism;
use clap::Args;
use metastore::keystore::{KeystoreAccess, Password, StoreType};
use metastore::tls::{ClientAuth, TlsFiles};
use metastore::truststore::Truststore;

use crate::listener_config::{ListenerConfig, Setting};
use crate::listeners::ListenerSpec;

/// The Kafka listener's security.
#[derive(Args, Debug, Clone)]
pub struct SecurityArgs {
    /// The security protocol of the --kafka-listen listener: PLAINTEXT, SASL_PLAINTEXT, SSL or
    /// SASL_SSL (with --listeners, --listener-security-protocol-map names each one's).
    #[arg(
        long,
        default_value = "PLAINTEXT",
        env = "FERRY_KAFKA_SECURITY_PROTOCOL",
        conflicts_with = "listeners"
    )]
    pub kafka_security_protocol: String,
    /// The SASL mechanisms offered, comma-separated (sasl.enabled.mechanisms). PLAIN checks the
    /// password against the user's SCRAM credentials.
    #[arg(
        long,
        default_value = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        env = "FERRY_SASL_ENABLED_MECHANISMS"
    )]
    pub sasl_enabled_mechanisms: String,
    /// Check ACLs on every Kafka request (authorizer.class.name); without it everything is
    /// allowed.
    #[arg(long, env = "FERRY_AUTHORIZER")]
    pub authorizer: bool,
    /// Principals allowed everything, separated by `;` (super.users), e.g. `User:admin`.
    #[arg(long, default_value = "", env = "FERRY_SUPER_USERS")]
    pub super_users: String,
    /// Allow a request on a resource that no ACL names (allow.everyone.if.no.acl.found).
    #[arg(long, env = "FERRY_ALLOW_EVERYONE_IF_NO_ACL_FOUND")]
    pub allow_everyone_if_no_acl_found: bool,
    /// A SASL session must authenticate again after this long; 0 for never
    /// (connections.max.reauth.ms).
    #[arg(long, default_value_t = 0, env = "FERRY_CONNECTIONS_MAX_REAUTH_MS")]
    pub connections_max_reauth_ms: u64,
    /// A failed login's answer waits this long before the connection closes
    /// (connection.failed.authentication.delay.ms).
    #[arg(long, default_value_t = 100, env = "FERRY_CONNECTION_FAILED_AUTHENTICATION_DELAY_MS")]
    pub connection_failed_authentication_delay_ms: u64,
    /// PEM file with the listener's certificate chain and private key (ssl.keystore.location);
    /// read again when it changes.
    #[arg(long, env = "FERRY_SSL_KEYSTORE_LOCATION")]
    pub ssl_keystore_location: Option<std::path::PathBuf>,
    /// PEM, PKCS12 or JKS: the format of --ssl-keystore-location (ssl.keystore.type).
    #[arg(long, default_value = "PEM", env = "FERRY_SSL_KEYSTORE_TYPE")]
    pub ssl_keystore_type: String,
    /// The PKCS12 or JKS keystore's password (ssl.keystore.password). A flag's value shows in the
    /// process list: prefer the variable.
    #[arg(long, env = "FERRY_SSL_KEYSTORE_PASSWORD", hide_env_values = true)]
    pub ssl_keystore_password: Option<String>,
    /// The password of a PEM keystore's encrypted PKCS#8 private key, or of a JKS keystore's key
    /// when it differs from the store's (ssl.key.password). A flag's value shows in the process
    /// list: prefer the variable.
    #[arg(long, env = "FERRY_SSL_KEY_PASSWORD", hide_env_values = true)]
    pub ssl_key_password: Option<String>,
    /// The CAs that sign client certificates (ssl.truststore.location).
    #[arg(long, env = "FERRY_SSL_TRUSTSTORE_LOCATION")]
    pub ssl_truststore_location: Option<std::path::PathBuf>,
    /// PEM, PKCS12 or JKS: the format of --ssl-truststore-location (ssl.truststore.type).
    #[arg(long, default_value = "PEM", env = "FERRY_SSL_TRUSTSTORE_TYPE")]
    pub ssl_truststore_type: String,
    /// The truststore's password (ssl.truststore.password); a JKS store without one is read
    /// without its integrity check, as Java reads it.
    #[arg(long, env = "FERRY_SSL_TRUSTSTORE_PASSWORD", hide_env_values = true)]
    pub ssl_truststore_password: Option<String>,
    /// required, requested or none (ssl.client.auth).
    #[arg(long, default_value = "none", env = "FERRY_SSL_CLIENT_AUTH")]
    pub ssl_client_auth: String,
    /// One listener's own setting, as Kafka names it: `listener.name.NAME.SETTING=VALUE`, where
    /// SETTING is an ssl.* setting above or sasl.enabled.mechanisms; repeat for each. In the
    /// variable, one per line.
    #[arg(long, env = "FERRY_LISTENER_CONFIG", value_delimiter = '\n', hide_env_values = true)]
    pub listener_config: Vec<String>,
}

/// A store type, a bad one refused naming `flag`.
fn store_type(flag: &str, kind: &str) -> anyhow::Result<StoreType> {
    StoreType::parse(kind).map_err(|e| anyhow!("{flag}: {e}"))
}

/// A keystore's type and passwords from a flag group (the gRPC or the HTTP port's).
fn keystore_access(
    type_flag: &str,
    kind: &str,
    keystore_password: &Option<String>,
    key_password: &Option<String>,
) -> anyhow::Result<KeystoreAccess> {
    Ok(KeystoreAccess {
        kind: store_type(type_flag, kind)?,
        keystore_password: keystore_password.clone().map(Password::new),
        key_password: key_password.clone().map(Password::new),
    })
}

/// Where a listener's settings come from: its own (`--listener-config`), else the shared flags.
struct Lookup<'a> {
    args: &'a SecurityArgs,
    own: Option<(&'a str, &'a std::collections::BTreeMap<Setting, String>)>,
}

impl Lookup<'_> {
    /// The value of `setting` and the name an error about it uses.
    fn get(&self, setting: Setting) -> (Option<String>, String) {
        if let Some((listener, own)) = self.own {
            if let Some(v) = own.get(&setting) {
                return (Some(v.clone()), setting.prefixed(listener));
            }
        }
        let a = self.args;
        let path = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let value = match setting {
            Setting::KeystoreLocation => path(&a.ssl_keystore_location),
            Setting::KeystoreType => Some(a.ssl_keystore_type.clone()),
            Setting::KeystorePassword => a.ssl_keystore_password.clone(),
            Setting::KeyPassword => a.ssl_key_password.clone(),
            Setting::TruststoreLocation => path(&a.ssl_truststore_location),
            Setting::TruststoreType => Some(a.ssl_truststore_type.clone()),
            Setting::TruststorePassword => a.ssl_truststore_password.clone(),
            Setting::ClientAuth => Some(a.ssl_client_auth.clone()),
            Setting::Mechanisms => Some(a.sasl_enabled_mechanisms.clone()),
        };
        (value, setting.flag())
    }

    /// Whether the listener sets any TLS setting of its own.
    fn own_tls(&self) -> bool {
        self.own
            .is_some_and(|(_, own)| own.keys().any(|s| *s != Setting::Mechanisms))
    }

    fn mechanisms(&self) -> anyhow::Result<Vec<Mechanism>> {
        let (v, name) = self.get(Setting::Mechanisms);
        ListenerSecurity::parse_mechanisms(&v.unwrap_or_default()).map_err(|e| anyhow!("{name}: {e}"))
    }

    /// The certificates these settings name, checked to load; none without a keystore.
    fn tls(&self) -> anyhow::Result<Option<TlsFiles>> {
        let (Some(keystore), _) = self.get(Setting::KeystoreLocation) else {
            return Ok(None);
        };
        let parsed = |s: Setting| -> anyhow::Result<StoreType> {
            let (v, name) = self.get(s);
            store_type(&name, &v.unwrap_or_default())
        };
        let password = |s: Setting| self.get(s).0.map(Password::new);
        let (auth, auth_name) = self.get(Setting::ClientAuth);
        let client_auth = ClientAuth::parse(&auth.unwrap_or_default()).map_err(|e| anyhow!("{auth_name}: {e}"))?;
        let truststore = match self.get(Setting::TruststoreLocation).0 {
            Some(location) => Some(Truststore {
                location: location.into(),
                kind: parsed(Setting::TruststoreType)?,
                password: password(Setting::TruststorePassword),
            }),
            None => None,
        };
        let files = TlsFiles {
            keystore: keystore.into(),
            keystore_access: KeystoreAccess {
                kind: parsed(Setting::KeystoreType)?,
                keystore_password: password(Setting::KeystorePassword),
                key_password: password(Setting::KeyPassword),
            },
            truststore,
            client_auth,
        };
        // Loaded once here so that a bad file stops the node at start, naming it.
        metastore::tls::load(&files).map_err(|e| match self.own {
            Some((listener, _)) => anyhow!("listener {listener}: {e}"),
            None => anyhow!("{e}"),
        })?;
        Ok(Some(files))
    }
}

impl SecurityArgs {
    /// The protocol of the single --kafka-listen listener.
    pub fn protocol(&self) -> anyhow::Result<SecurityProtocol> {
        SecurityProtocol::parse(&self.kafka_security_protocol).map_err(|e| anyhow!("--kafka-security-protocol: {e}"))
    }

    /// The settings of the Kafka `listeners`, shared and each one's own, each bad value refused
    /// naming its flag or setting.
    pub fn settings(&self, listeners: &[ListenerSpec]) -> anyhow::Result<ListenerSecurity> {
        let names: Vec<&str> = listeners.iter().map(|l| l.name.as_str()).collect();
        let config =
            ListenerConfig::parse(&self.listener_config, &names).map_err(|e| anyhow!("--listener-config: {e}"))?;
        let shared = Lookup { args: self, own: None };
        let mechanisms = shared.mechanisms()?;
        let tls_listeners = listeners.iter().filter(|l| l.protocol.tls()).count();
        let tls = match tls_listeners {
            0 if self.ssl_keystore_location.is_some() => {
                bail!("--ssl-keystore-location: no Kafka listener is SSL or SASL_SSL")
            }
            0 => None,
            _ => shared.tls()?,
        };
        let mut overrides = std::collections::BTreeMap::new();
        for l in listeners {
            let own = config.of(&l.name);
            let lookup = Lookup {
                args: self,
                own: own.map(|o| (l.name.as_str(), o)),
            };
            if let Some(setting) = own.and_then(|o| o.keys().find(|s| !s.applies_to(l.protocol))) {
                bail!(
                    "--listener-config: {}: listener {} is {} and does not use it",
                    setting.prefixed(&l.name),
                    l.name,
                    l.protocol.name()
                );
            }
            let o = ListenerOverride {
                mechanisms: own
                    .filter(|o| o.contains_key(&Setting::Mechanisms))
                    .map(|_| lookup.mechanisms())
                    .transpose()?,
                tls: if lookup.own_tls() { lookup.tls()? } else { None },
            };
            let offered = o.mechanisms.as_deref().unwrap_or(&mechanisms);
            if l.protocol.sasl() && offered.is_empty() {
                bail!(
                    "{}: listener {} uses SASL and needs at least one mechanism",
                    lookup.get(Setting::Mechanisms).1,
                    l.name
                );
            }
            if l.protocol.tls() && o.tls.is_none() && tls.is_none() {
                bail!(
                    "--ssl-keystore-location: listener {} is {} and needs a certificate",
                    l.name,
                    l.protocol.name()
                );
            }
            if o != ListenerOverride::default() {
                overrides.insert(l.name.clone(), o);
            }
        }
        let super_users =
            ListenerSecurity::parse_super_users(&self.super_users).map_err(|e| anyhow!("--super-users: {e}"))?;
        Ok(ListenerSecurity {
            mechanisms,
            authorizer: self.authorizer,
            super_users,
            allow_everyone_if_no_acl_found: self.allow_everyone_if_no_acl_found,
            max_reauth: (self.connections_max_reauth_ms > 0)
                .then(|| Duration::from_millis(self.connections_max_reauth_ms)),
            failed_authentication_delay: Duration::from_millis(self.connection_failed_authentication_delay_ms),
            tls,
            overrides,
        })
    }
}

/// TLS on the gRPC port: clients, the peers' Raft and replication traffic, and this node's own
/// channels to its peers (which show its certificate, for mutual TLS).
#[derive(Args, Debug, Clone)]
pub struct GrpcTlsArgs {
    /// The gRPC port's certificate chain and private key; the node shows it to peers too, so
    /// it should allow client authentication. The HTTP port (metrics and the console) serves
    /// HTTPS with it. Read again when it changes.
    #[arg(long, env = "FERRY_GRPC_SSL_KEYSTORE_LOCATION")]
    pub grpc_ssl_keystore_location: Option<std::path::PathBuf>,
    /// PEM, PKCS12 or JKS: the format of --grpc-ssl-keystore-location.
    #[arg(long, default_value = "PEM", env = "FERRY_GRPC_SSL_KEYSTORE_TYPE")]
    pub grpc_ssl_keystore_type: String,
    /// The gRPC keystore's password (PKCS12 or JKS).
    #[arg(long, env = "FERRY_GRPC_SSL_KEYSTORE_PASSWORD", hide_env_values = true)]
    pub grpc_ssl_keystore_password: Option<String>,
    /// The gRPC keystore's private key's password (an encrypted PEM key, or a JKS key's own).
    #[arg(long, env = "FERRY_GRPC_SSL_KEY_PASSWORD", hide_env_values = true)]
    pub grpc_ssl_key_password: Option<String>,
    /// The CAs that sign the peers' and clients' certificates.
    #[arg(long, env = "FERRY_GRPC_SSL_TRUSTSTORE_LOCATION")]
    pub grpc_ssl_truststore_location: Option<std::path::PathBuf>,
    /// PEM, PKCS12 or JKS: the format of --grpc-ssl-truststore-location.
    #[arg(long, default_value = "PEM", env = "FERRY_GRPC_SSL_TRUSTSTORE_TYPE")]
    pub grpc_ssl_truststore_type: String,
    /// The gRPC truststore's password.
    #[arg(long, env = "FERRY_GRPC_SSL_TRUSTSTORE_PASSWORD", hide_env_values = true)]
    pub grpc_ssl_truststore_password: Option<String>,
    /// required, requested or none: whether callers of the gRPC port show a certificate.
    #[arg(long, default_value = "requested", env = "FERRY_GRPC_SSL_CLIENT_AUTH")]
    pub grpc_ssl_client_auth: String,
}

impl GrpcTlsArgs {
    /// The files, checked to load; none without a keystore.
    pub fn files(&self) -> anyhow::Result<Option<TlsFiles>> {
        let Some(keystore) = &self.grpc_ssl_keystore_location else {
            if self.grpc_ssl_truststore_location.is_some() {
                bail!("--grpc-ssl-truststore-location: TLS on the gRPC port needs --grpc-ssl-keystore-location");
            }
            return Ok(None);
        };
        let client_auth =
            ClientAuth::parse(&self.grpc_ssl_client_auth).map_err(|e| anyhow!("--grpc-ssl-client-auth: {e}"))?;
        let truststore = match &self.grpc_ssl_truststore_location {
            Some(location) => Some(Truststore {
                location: location.clone(),
                kind: store_type("--grpc-ssl-truststore-type", &self.grpc_ssl_truststore_type)?,
                password: self.grpc_ssl_truststore_password.clone().map(Password::new),
            }),
            None => None,
        };
        let files = TlsFiles {
            keystore: keystore.clone(),
            keystore_access: keystore_access(
                "--grpc-ssl-keystore-type",
                &self.grpc_ssl_keystore_type,
                &self.grpc_ssl_keystore_password,
                &self.grpc_ssl_key_password,
            )?,
            truststore,
            client_auth,
        };
        metastore::tls::load(&files).map_err(|e| anyhow!("--grpc-ssl-*: {e}"))?;
        metastore::grpc_tls::node_client(&files).map_err(|e| anyhow!("--grpc-ssl-truststore-location: {e}"))?;
        Ok(Some(files))
    }
}

/// TLS on the HTTP port (metrics and the console) with a certificate of its own; without it,
/// the port shows the gRPC port's certificate when that has one.
#[derive(Args, Debug, Clone)]
pub struct HttpTlsArgs {
    /// The HTTP port's certificate chain and private key (PEM, PKCS12 or JKS). Read again when
    /// it changes.
    #[arg(long, env = "FERRY_HTTP_SSL_KEYSTORE_LOCATION")]
    pub http_ssl_keystore_location: Option<std::path::PathBuf>,
    /// PEM, PKCS12 or JKS: the format of --http-ssl-keystore-location.
    #[arg(long, default_value = "PEM", env = "FERRY_HTTP_SSL_KEYSTORE_TYPE")]
    pub http_ssl_keystore_type: String,
    /// The HTTP keystore's password (PKCS12 or JKS).
    #[arg(long, env = "FERRY_HTTP_SSL_KEYSTORE_PASSWORD", hide_env_values = true)]
    pub http_ssl_keystore_password: Option<String>,
    /// The HTTP keystore's private key's password (an encrypted PEM key, or a JKS key's own).
    #[arg(long, env = "FERRY_HTTP_SSL_KEY_PASSWORD", hide_env_values = true)]
    pub http_ssl_key_password: Option<String>,
}

impl HttpTlsArgs {
    /// The HTTP port's certificate, checked to load: its own, else the gRPC port's (`grpc`).
    /// Browsers and scrapers show none, so it asks for none.
    pub fn files(&self, grpc: Option<&TlsFiles>) -> anyhow::Result<Option<TlsFiles>> {
        let Some(keystore) = &self.http_ssl_keystore_location else {
            return Ok(grpc.map(TlsFiles::certificate_only));
        };
        let files = TlsFiles {
            keystore: keystore.clone(),
            keystore_access: keystore_access(
                "--http-ssl-keystore-type",
                &self.http_ssl_keystore_type,
                &self.http_ssl_keystore_password,
                &self.http_ssl_key_password,
            )?,
            truststore: None,
            client_auth: ClientAuth::None,
        };
        metastore::tls::load(&files).map_err(|e| anyhow!("--http-ssl-*: {e}"))?;
        Ok(Some(files))
    }
}
