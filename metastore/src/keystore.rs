//! A listener's keystore in the formats Kafka reads, under Kafka's settings:
//! `ssl.keystore.type` PEM (the certificate chain and a PKCS#8 private key, encrypted when
//! `ssl.key.password` is set, as Kafka's PEM keystores are), PKCS12 (opened with
//! `ssl.keystore.password`, as Java's `keytool` writes it) or JKS (Java's older format; its key
//! opened with `ssl.key.password`, or the store's password when that is not set, as Java does).

use std::fmt;
use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::tls::{file_error, TlsError};

const KEYSTORE: &str = "ssl.keystore.location";
const KEY_PASSWORD: &str = "ssl.key.password";
const KEYSTORE_PASSWORD: &str = "ssl.keystore.password";

pub mod jks;

/// `ssl.keystore.type` and `ssl.truststore.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreType {
    /// PEM: certificates, and for a keystore a PKCS#8 private key, in one file.
    #[default]
    Pem,
    /// PKCS#12, one password for the store and its key.
    Pkcs12,
    /// Java's JKS.
    Jks,
}

impl StoreType {
    /// Kafka's spelling, in any case: `PEM`, `PKCS12` or `JKS`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.to_ascii_uppercase().as_str() {
            "PEM" => Ok(Self::Pem),
            "PKCS12" => Ok(Self::Pkcs12),
            "JKS" => Ok(Self::Jks),
            _ => Err(format!("{s:?} is not one of PEM, PKCS12, JKS")),
        }
    }

    /// The format a store's first bytes show: JKS's magic number, PKCS#12's DER sequence, or
    /// else PEM. For a client config that names no type.
    pub fn sniff(bytes: &[u8]) -> Self {
        match bytes {
            [0xFE, 0xED, 0xFE, 0xED, ..] => Self::Jks,
            [0x30, ..] => Self::Pkcs12,
            _ => Self::Pem,
        }
    }
}

/// A password from the configuration: compared and cloned, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    /// Wraps a password.
    pub fn new(p: impl Into<String>) -> Self {
        Self(p.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(hidden)")
    }
}

/// How to open a keystore: its type and its passwords.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeystoreAccess {
    /// `ssl.keystore.type`.
    pub kind: StoreType,
    /// `ssl.keystore.password`: a PKCS12 or JKS store's.
    pub keystore_password: Option<Password>,
    /// `ssl.key.password`: a PEM store's encrypted private key's, or a JKS store's key's (the
    /// store's password when not set); a PKCS12 store's key uses the store's password, and this
    /// must equal it when set.
    pub key_password: Option<Password>,
}

/// A certificate chain, the served certificate first, and its private key.
pub type Keys = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// The chain and key of the keystore at `path`, opened as `access` says.
pub fn read(path: &Path, access: &KeystoreAccess) -> Result<Keys, TlsError> {
    let bytes = std::fs::read(path).map_err(|e| file_error(KEYSTORE, path, e))?;
    let (chain, key) = match access.kind {
        StoreType::Pem => pem(&bytes, path, access.key_password.as_ref())?,
        StoreType::Pkcs12 => pkcs12(&bytes, path, access)?,
        StoreType::Jks => jks_keys(&bytes, path, access)?,
    };
    if chain.is_empty() {
        return Err(file_error(KEYSTORE, path, "holds no certificate"));
    }
    Ok((chain, key))
}

fn pem(bytes: &[u8], path: &Path, password: Option<&Password>) -> Result<Keys, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| file_error(KEYSTORE, path, e))?;
    let key = match (encrypted_key(bytes), password) {
        (Some(block), Some(password)) => decrypt(block, password)
            .map_err(|e| file_error(KEY_PASSWORD, path, format!("does not decrypt the private key: {e}")))?,
        (Some(_), None) => {
            return Err(file_error(
                KEY_PASSWORD,
                path,
                "the private key is encrypted and no password is set",
            ))
        }
        // Kafka refuses this too: the password names a key that is not there.
        (None, Some(_)) => {
            return Err(file_error(
                KEY_PASSWORD,
                path,
                "is set but the private key is not encrypted",
            ))
        }
        (None, None) => {
            PrivateKeyDer::from_pem_slice(bytes).map_err(|e| file_error(KEYSTORE, path, format!("private key: {e}")))?
        }
    };
    Ok((chain, key))
}

/// The `ENCRYPTED PRIVATE KEY` block of a PEM file, markers included, if it has one.
fn encrypted_key(bytes: &[u8]) -> Option<&[u8]> {
    const BEGIN: &[u8] = b"-----BEGIN ENCRYPTED PRIVATE KEY-----";
    const END: &[u8] = b"-----END ENCRYPTED PRIVATE KEY-----";
    let start = bytes.windows(BEGIN.len()).position(|w| w == BEGIN)?;
    let len = bytes[start..].windows(END.len()).position(|w| w == END)?;
    Some(&bytes[start..start + len + END.len()])
}

/// The PKCS#8 key inside an encrypted PKCS#8 block (PBES2, as `openssl pkcs8 -topk8` and Kafka's
/// tools write it).
fn decrypt(block: &[u8], password: &Password) -> Result<PrivateKeyDer<'static>, String> {
    let (_, der) = pkcs8::der::pem::decode_vec(block).map_err(|e| e.to_string())?;
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice()).map_err(|e| e.to_string())?;
    let plain = info
        .decrypt(password.expose().as_bytes())
        .map_err(|_| "wrong password, or a cipher that is not PBES2".to_string())?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        plain.as_bytes().to_vec(),
    )))
}

fn pkcs12(bytes: &[u8], path: &Path, access: &KeystoreAccess) -> Result<Keys, TlsError> {
    let password = access
        .keystore_password
        .as_ref()
        .ok_or_else(|| file_error(KEYSTORE_PASSWORD, path, "a PKCS12 keystore needs its password"))?;
    if access.key_password.as_ref().is_some_and(|k| k != password) {
        return Err(file_error(
            KEY_PASSWORD,
            path,
            "differs from ssl.keystore.password; a PKCS12 keystore's key is read with the store's password",
        ));
    }
    let store = p12_keystore::KeyStore::from_pkcs12(bytes, password.expose())
        .map_err(|e| file_error(KEYSTORE_PASSWORD, path, format!("does not open it as PKCS12: {e}")))?;
    let (_, entry) = store
        .private_key_chain()
        .ok_or_else(|| file_error(KEYSTORE, path, "holds no private key entry"))?;
    let chain = entry
        .chain()
        .iter()
        .map(|c| CertificateDer::from(c.as_der().to_vec()))
        .collect();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(entry.key().to_vec()));
    Ok((chain, key))
}

/// The first private key entry of a JKS store, and its chain.
fn jks_keys(bytes: &[u8], path: &Path, access: &KeystoreAccess) -> Result<Keys, TlsError> {
    let password = access
        .keystore_password
        .as_ref()
        .ok_or_else(|| file_error(KEYSTORE_PASSWORD, path, "a JKS keystore needs its password"))?;
    let store = jks::parse(bytes, Some(password.expose())).map_err(|e| match e {
        jks::JksError::Password => file_error(KEYSTORE_PASSWORD, path, e),
        jks::JksError::Format(_) => file_error(KEYSTORE, path, e),
    })?;
    let entry = store
        .keys
        .first()
        .ok_or_else(|| file_error(KEYSTORE, path, "holds no private key entry"))?;
    let (setting, key_password) = match &access.key_password {
        Some(k) => (KEY_PASSWORD, k),
        None => (KEYSTORE_PASSWORD, password),
    };
    let key = jks::decrypt_key(&entry.protected_key, key_password.expose())
        .map_err(|e| file_error(setting, path, format!("does not open the key {:?}: {e}", entry.alias)))?;
    let chain = entry.chain.iter().map(|c| CertificateDer::from(c.clone())).collect();
    Ok((chain, PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key))))
}

#[cfg(test)]
mod tests;
