//! TLS for a listener (the Kafka listener's SSL and SASL_SSL, and the gRPC port), with Kafka's
//! settings: a keystore (`ssl.keystore.location`: the certificate chain and its private key, in
//! a format `keystore.rs` reads), a truststore (`ssl.truststore.location`: the CAs that sign
//! client certificates, in a format `truststore.rs` reads) and `ssl.client.auth`.
//! The files are read again when they change, so a renewed certificate is served without a
//! restart; a change that does not load is logged and the old one is kept.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;

use crate::keystore::{self, KeystoreAccess};
use crate::truststore::Truststore;

/// How often a listener looks for renewed certificate files.
pub const RELOAD_EVERY: Duration = Duration::from_secs(5);

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// Clients present no certificate.
    #[default]
    None,
    /// A client may present one; it must then be trusted.
    Requested,
    /// Every client must present a trusted certificate.
    Required,
}

impl ClientAuth {
    /// Kafka's spelling: `required`, `requested` or `none`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Self::None),
            "requested" => Ok(Self::Requested),
            "required" => Ok(Self::Required),
            _ => Err(format!(
                "ssl.client.auth: {s:?} is not one of required, requested, none"
            )),
        }
    }
}

/// Where the listener's certificates are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `ssl.keystore.location`: the certificate chain and the private key.
    pub keystore: PathBuf,
    /// `ssl.keystore.type` and the keystore's passwords (PEM without any by default).
    pub keystore_access: KeystoreAccess,
    /// `ssl.truststore.*`: the CAs for client certificates.
    pub truststore: Option<Truststore>,
    /// `ssl.client.auth`.
    pub client_auth: ClientAuth,
}

impl TlsFiles {
    /// The same certificate, asking callers for none (the HTTP port's: browsers and scrapers
    /// show none).
    pub fn certificate_only(&self) -> Self {
        Self {
            keystore: self.keystore.clone(),
            keystore_access: self.keystore_access.clone(),
            truststore: None,
            client_auth: ClientAuth::None,
        }
    }
}

/// Why the certificates cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file cannot be read or holds no usable PEM.
    #[error("{setting} {path}: {reason}")]
    File {
        /// Kafka's name of the setting.
        setting: &'static str,
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// rustls refused the combination.
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
}

/// A [`TlsError::File`] naming `setting` and `path`.
pub(crate) fn file_error(setting: &'static str, path: &Path, reason: impl ToString) -> TlsError {
    TlsError::File {
        setting,
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

// ring rather than aws-lc-rs: no cmake, a much shorter build; it lacks only the post-quantum
// key exchange that rustls marks it deprecated for.
#[allow(deprecated)]
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The server config the files make, offering no application protocol (Kafka's).
pub fn load(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    load_with_alpn(files, Vec::new())
}

/// The server config the files make, offering the application protocols `alpn` (gRPC's `h2`:
/// grpc-go and grpc-java clients require it).
pub fn load_with_alpn(files: &TlsFiles, alpn: Vec<Vec<u8>>) -> Result<Arc<ServerConfig>, TlsError> {
    let (chain, key) = keystore::read(&files.keystore, &files.keystore_access)?;
    let builder = ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let builder = match (files.client_auth, &files.truststore) {
        (ClientAuth::None, _) => builder.with_no_client_auth(),
        (_, None) => {
            return Err(file_error(
                "ssl.truststore.location",
                Path::new(""),
                "ssl.client.auth requested or required needs a truststore",
            ))
        }
        (auth, Some(ts)) => {
            let roots = crate::truststore::read(ts)?;
            let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
            let v = if auth == ClientAuth::Requested {
                v.allow_unauthenticated()
            } else {
                v
            };
            let v = v
                .build()
                .map_err(|e| file_error("ssl.truststore.location", &ts.location, e))?;
            builder.with_client_cert_verifier(v)
        }
    };
    let mut config = builder.with_single_cert(chain, key)?;
    config.alpn_protocols = alpn;
    Ok(Arc::new(config))
}

/// The principal a client certificate names, as Kafka's default mapping makes it: `User:`
/// and the subject's distinguished name as RFC 2253 writes it (Java's `X500Principal`): the
/// RDNs last first, the attributes of one RDN joined by `+`, special characters escaped, and
/// an attribute without a short name (or a value that is not a string) as `OID=#hex` of its
/// value's bytes (Java writes the whole encoding there), so that no two subjects map to one
/// principal.
pub fn principal_of(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let mut rdns: Vec<String> = parsed
        .subject()
        .iter_rdn()
        .map(|rdn| {
            rdn.iter()
                .map(|a| {
                    let oid = a.attr_type();
                    match (short_name(oid), a.as_str()) {
                        (Some(name), Ok(v)) => format!("{name}={}", escape_rdn_value(v)),
                        _ => {
                            let hex: String = a.attr_value().data.iter().map(|b| format!("{b:02x}")).collect();
                            format!("{}=#{hex}", oid.to_id_string())
                        }
                    }
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    rdns.reverse();
    Some(format!("User:{}", rdns.join(",")))
}

/// RFC 2253's escapes: `,+"\<>;` anywhere, `#` or a space first, a space last.
fn escape_rdn_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Whether a certificate may authenticate a TLS client: it names no extended key usage, or
/// names client authentication among them.
pub fn allows_client_auth(cert: &CertificateDer<'_>) -> bool {
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(cert.as_ref()) else {
        return false;
    };
    match parsed.extended_key_usage() {
        Ok(Some(eku)) => eku.value.client_auth || eku.value.any,
        Ok(None) => true,
        Err(_) => false,
    }
}

fn short_name(oid: &x509_parser::der_parser::oid::Oid<'_>) -> Option<&'static str> {
    let known: &[(&str, &str)] = &[
        ("2.5.4.3", "CN"),
        ("2.5.4.6", "C"),
        ("2.5.4.7", "L"),
        ("2.5.4.8", "ST"),
        ("2.5.4.10", "O"),
        ("2.5.4.11", "OU"),
        ("2.5.4.9", "STREET"),
        ("0.9.2342.19200300.100.1.25", "DC"),
        ("0.9.2342.19200300.100.1.1", "UID"),
    ];
    let s = oid.to_id_string();
    known.iter().find(|(id, _)| *id == s).map(|(_, n)| *n)
}

/// What each file held when last read (`None`: unreadable).
type Contents = Vec<Option<Vec<u8>>>;

/// The served config, swapped when the files change.
pub struct Reloading {
    files: TlsFiles,
    alpn: Vec<Vec<u8>>,
    current: parking_lot::RwLock<(Arc<ServerConfig>, Contents)>,
}

/// The files' bytes. Compared rather than their times: a file read while it was being written
/// fails to load, and the rest of the write may leave its time unchanged (the kernel's clock
/// for file times is coarse), where its bytes do change.
fn stamps(files: &TlsFiles) -> Contents {
    std::iter::once(&files.keystore)
        .chain(files.truststore.iter().map(|t| &t.location))
        .map(|p| std::fs::read(p).ok())
        .collect()
}

impl Reloading {
    /// Loads the files once; an error here stops the listener from starting.
    pub fn new(files: TlsFiles) -> Result<Self, TlsError> {
        Self::with_alpn(files, Vec::new())
    }

    /// Like [`Reloading::new`], offering the application protocols `alpn`.
    pub fn with_alpn(files: TlsFiles, alpn: Vec<Vec<u8>>) -> Result<Self, TlsError> {
        let config = load_with_alpn(&files, alpn.clone())?;
        let when = stamps(&files);
        Ok(Self {
            files,
            alpn,
            current: parking_lot::RwLock::new((config, when)),
        })
    }

    /// The config to accept the next connection with.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.current.read().0.clone()
    }

    /// Loads the files again if they changed since the last load.
    pub fn reload_if_changed(&self) {
        let now = stamps(&self.files);
        if now == self.current.read().1 {
            return;
        }
        match load_with_alpn(&self.files, self.alpn.clone()) {
            Ok(c) => {
                tracing::info!(keystore = %self.files.keystore.display(), "TLS certificates reloaded");
                *self.current.write() = (c, now);
            }
            Err(e) => {
                tracing::warn!(error = %e, "TLS certificates changed but do not load; the old ones are served");
                self.current.write().1 = now;
            }
        }
    }

    /// Checks the files every `every` until the task is aborted.
    pub async fn watch(self: Arc<Self>, every: Duration) {
        loop {
            tokio::time::sleep(every).await;
            self.reload_if_changed();
        }
    }
}
