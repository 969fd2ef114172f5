//! The Kafka listeners' security flags, under Kafka's config names: the security protocol,
//! `sasl.enabled.mechanisms`, the authorizer, `super.users`,
//! `allow.everyone.if.no.acl.found`, `connections.max.reauth.ms` and
//! `connection.failed.authentication.delay.ms`, and the TLS certificates. Flags and FERRY_*
//! variables only (not the config file).

use std::time::Duration;

use anyhow::{anyhow, bail};
use broker::auth::{ListenerSecurity, SecurityProtocol};
use clap::Args;
use metastore::keystore::{KeystoreAccess, KeystoreType, Password};
use metastore::tls::{ClientAuth, TlsFiles};

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
    /// PEM or PKCS12: the format of --ssl-keystore-location (ssl.keystore.type). JKS is not
    /// read; `keytool -importkeystore -deststoretype PKCS12` converts it.
    #[arg(long, default_value = "PEM", env = "FERRY_SSL_KEYSTORE_TYPE")]
    pub ssl_keystore_type: String,
    /// The PKCS12 keystore's password (ssl.keystore.password). A flag's value shows in the
    /// process list: prefer the variable.
    #[arg(long, env = "FERRY_SSL_KEYSTORE_PASSWORD", hide_env_values = true)]
    pub ssl_keystore_password: Option<String>,
    /// The password of a PEM keystore's encrypted PKCS#8 private key (ssl.key.password). A
    /// flag's value shows in the process list: prefer the variable.
    #[arg(long, env = "FERRY_SSL_KEY_PASSWORD", hide_env_values = true)]
    pub ssl_key_password: Option<String>,
    /// PEM file with the CAs that sign client certificates (ssl.truststore.location).
    #[arg(long, env = "FERRY_SSL_TRUSTSTORE_LOCATION")]
    pub ssl_truststore_location: Option<std::path::PathBuf>,
    /// required, requested or none (ssl.client.auth).
    #[arg(long, default_value = "none", env = "FERRY_SSL_CLIENT_AUTH")]
    pub ssl_client_auth: String,
}

impl SecurityArgs {
    /// The protocol of the single --kafka-listen listener.
    pub fn protocol(&self) -> anyhow::Result<SecurityProtocol> {
        SecurityProtocol::parse(&self.kafka_security_protocol).map_err(|e| anyhow!("--kafka-security-protocol: {e}"))
    }

    /// The keystore's type and passwords.
    fn keystore_access(&self) -> anyhow::Result<KeystoreAccess> {
        Ok(KeystoreAccess {
            kind: KeystoreType::parse(&self.ssl_keystore_type).map_err(|e| anyhow!("--ssl-keystore-type: {e}"))?,
            keystore_password: self.ssl_keystore_password.clone().map(Password::new),
            key_password: self.ssl_key_password.clone().map(Password::new),
        })
    }

    /// The settings the Kafka `listeners` share, each bad value refused naming its flag.
    pub fn settings(&self, listeners: &[ListenerSpec]) -> anyhow::Result<ListenerSecurity> {
        let mechanisms = ListenerSecurity::parse_mechanisms(&self.sasl_enabled_mechanisms)
            .map_err(|e| anyhow!("--sasl-enabled-mechanisms: {e}"))?;
        if let Some(l) = listeners.iter().find(|l| l.protocol.sasl()) {
            if mechanisms.is_empty() {
                bail!(
                    "--sasl-enabled-mechanisms: listener {} uses SASL and needs at least one mechanism",
                    l.name
                );
            }
        }
        let super_users =
            ListenerSecurity::parse_super_users(&self.super_users).map_err(|e| anyhow!("--super-users: {e}"))?;
        let client_auth = ClientAuth::parse(&self.ssl_client_auth).map_err(|e| anyhow!("--ssl-client-auth: {e}"))?;
        let tls_listener = listeners.iter().find(|l| l.protocol.tls());
        let tls = match (&self.ssl_keystore_location, tls_listener) {
            (Some(keystore), Some(_)) => {
                let files = TlsFiles {
                    keystore: keystore.clone(),
                    keystore_access: self.keystore_access()?,
                    truststore: self.ssl_truststore_location.clone(),
                    client_auth,
                };
                // Loaded once here so that a bad file stops the node at start, naming it.
                metastore::tls::load(&files).map_err(|e| anyhow!("{e}"))?;
                Some(files)
            }
            (None, Some(l)) => bail!(
                "--ssl-keystore-location: listener {} is {} and needs a certificate",
                l.name,
                l.protocol.name()
            ),
            (Some(_), None) => bail!("--ssl-keystore-location: no Kafka listener is SSL or SASL_SSL"),
            (None, None) => None,
        };
        Ok(ListenerSecurity {
            mechanisms,
            authorizer: self.authorizer,
            super_users,
            allow_everyone_if_no_acl_found: self.allow_everyone_if_no_acl_found,
            max_reauth: (self.connections_max_reauth_ms > 0)
                .then(|| Duration::from_millis(self.connections_max_reauth_ms)),
            failed_authentication_delay: Duration::from_millis(self.connection_failed_authentication_delay_ms),
            tls,
        })
    }
}

/// TLS on the gRPC port: clients, the peers' Raft and replication traffic, and this node's own
/// channels to its peers (which show its certificate, for mutual TLS).
#[derive(Args, Debug, Clone)]
pub struct GrpcTlsArgs {
    /// PEM file with the gRPC port's certificate chain and private key; the node shows it to
    /// peers too, so it should allow client authentication. The HTTP port (metrics and the
    /// console) serves HTTPS with it. Read again when it changes.
    #[arg(long, env = "FERRY_GRPC_SSL_KEYSTORE_LOCATION")]
    pub grpc_ssl_keystore_location: Option<std::path::PathBuf>,
    /// PEM file with the CAs that sign the peers' and clients' certificates.
    #[arg(long, env = "FERRY_GRPC_SSL_TRUSTSTORE_LOCATION")]
    pub grpc_ssl_truststore_location: Option<std::path::PathBuf>,
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
        let files = TlsFiles {
            keystore: keystore.clone(),
            keystore_access: Default::default(),
            truststore: self.grpc_ssl_truststore_location.clone(),
            client_auth,
        };
        metastore::tls::load(&files).map_err(|e| anyhow!("--grpc-ssl-*: {e}"))?;
        metastore::grpc_tls::node_client(&files).map_err(|e| anyhow!("--grpc-ssl-truststore-location: {e}"))?;
        Ok(Some(files))
    }
}
