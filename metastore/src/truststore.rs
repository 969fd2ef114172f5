//! A truststore (`ssl.truststore.location`): the CAs that a listener trusts for client
//! certificates, or a client for servers, in the formats Kafka reads: `ssl.truststore.type`
//! PEM, PKCS12 or JKS, with `ssl.truststore.password`. As in Java, a store's trusted
//! certificate entries are trusted, and so is the certificate of each of its private key
//! entries; a PKCS12 certificate that is not marked trusted (as `openssl pkcs12 -export
//! -nokeys` writes them) is not, as Java ignores it. A JKS store without a password is read
//! without its integrity check, as Java does.

use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::RootCertStore;

use crate::keystore::{jks, Password, StoreType};
use crate::tls::{file_error, TlsError};

const LOCATION: &str = "ssl.truststore.location";
const PASSWORD: &str = "ssl.truststore.password";

/// Where a truststore is and how to open it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truststore {
    /// `ssl.truststore.location`.
    pub location: PathBuf,
    /// `ssl.truststore.type`.
    pub kind: StoreType,
    /// `ssl.truststore.password`.
    pub password: Option<Password>,
}

impl Truststore {
    /// A PEM truststore at `location`.
    pub fn pem(location: impl Into<PathBuf>) -> Self {
        Self {
            location: location.into(),
            kind: StoreType::Pem,
            password: None,
        }
    }
}

/// The CAs of a truststore.
pub fn read(t: &Truststore) -> Result<RootCertStore, TlsError> {
    let path = t.location.as_path();
    let bytes = std::fs::read(path).map_err(|e| file_error(LOCATION, path, e))?;
    let certs = match t.kind {
        StoreType::Pem => CertificateDer::pem_slice_iter(&bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| file_error(LOCATION, path, e))?,
        StoreType::Pkcs12 => pkcs12(&bytes, path, t.password.as_ref())?,
        StoreType::Jks => {
            let store = jks::parse(&bytes, t.password.as_ref().map(Password::expose)).map_err(|e| match e {
                jks::JksError::Password => file_error(PASSWORD, path, e),
                jks::JksError::Format(_) => file_error(LOCATION, path, e),
            })?;
            let keys = store.keys.into_iter().filter_map(|k| k.chain.into_iter().next());
            store
                .trusted
                .into_iter()
                .chain(keys)
                .map(CertificateDer::from)
                .collect()
        }
    };
    let mut roots = RootCertStore::empty();
    for c in certs {
        roots.add(c).map_err(|e| file_error(LOCATION, path, e))?;
    }
    if roots.is_empty() {
        return Err(file_error(LOCATION, path, "holds no certificate"));
    }
    Ok(roots)
}

/// The certificates of a PKCS#12 truststore: its certificate entries and its keys' own.
fn pkcs12(bytes: &[u8], path: &Path, password: Option<&Password>) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let store =
        p12_keystore::KeyStore::from_pkcs12(bytes, password.map(Password::expose).unwrap_or("")).map_err(|e| {
            match password {
                Some(_) => file_error(PASSWORD, path, format!("does not open it as PKCS12: {e}")),
                None => file_error(
                    PASSWORD,
                    path,
                    format!("is not set, and the PKCS12 store does not open without it: {e}"),
                ),
            }
        })?;
    let mut out = Vec::new();
    for (_, entry) in store.entries() {
        let der = match entry {
            p12_keystore::KeyStoreEntry::Certificate(c) => c.as_der(),
            p12_keystore::KeyStoreEntry::PrivateKeyChain(k) => match k.chain().first() {
                Some(c) => c.as_der(),
                None => continue,
            },
            _ => continue,
        };
        out.push(CertificateDer::from(der.to_vec()));
    }
    Ok(out)
}
