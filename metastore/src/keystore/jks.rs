//! Java's JKS keystore format (`ssl.keystore.type=JKS`, Kafka's default): its trusted
//! certificates, its private key entries with their chains, and Sun's key protection. Pure: the
//! caller reads the file. Every count and length is checked against the bytes that are there,
//! so a damaged file is refused, never trusted.

use pkcs8::der::asn1::OctetString;
use pkcs8::der::{Decode, Reader, SliceReader};
use pkcs8::spki::AlgorithmIdentifierOwned;
use sha1::{Digest, Sha1};

/// A JKS file's first four bytes.
pub const MAGIC: u32 = 0xFEED_FEED;
/// A JCEKS file's first four bytes (JKS with secret keys; not read).
const JCEKS_MAGIC: u32 = 0xCECE_CECE;
/// What Java mixes into the store's integrity digest after the password.
const WHITENER: &[u8] = b"Mighty Aphrodite";
/// Sun's key protection algorithm (`KeyProtector`).
const KEY_PROTECTOR_OID: &str = "1.3.6.1.4.1.42.2.17.1.1";
const DIGEST_LEN: usize = 20;
const SALT_LEN: usize = 20;

/// A private key entry: its protected key and its certificate chain, leaf first.
#[derive(Debug, Clone)]
pub struct KeyEntry {
    /// The entry's alias.
    pub alias: String,
    /// The DER `EncryptedPrivateKeyInfo` under Sun's key protection.
    pub protected_key: Vec<u8>,
    /// The DER certificates.
    pub chain: Vec<Vec<u8>>,
}

/// The entries of a JKS file.
#[derive(Debug, Clone, Default)]
pub struct Jks {
    /// The private key entries.
    pub keys: Vec<KeyEntry>,
    /// The trusted certificate entries, DER.
    pub trusted: Vec<Vec<u8>>,
}

/// Why a JKS file is not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JksError {
    /// The file is not a well-formed JKS keystore.
    #[error("{0}")]
    Format(String),
    /// Its integrity digest does not match the password.
    #[error("does not match the password (or the file is damaged)")]
    Password,
}

/// A password as Java feeds it to SHA-1: each UTF-16 unit, high byte first.
fn java_bytes(password: &str) -> Vec<u8> {
    password.encode_utf16().flat_map(u16::to_be_bytes).collect()
}

/// Reads big-endian fields off a byte slice, refusing to read past its end.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("is cut short at byte {}", self.at))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Java's `readUTF`: a 16-bit length, then (modified) UTF-8.
    fn utf(&mut self) -> Result<String, String> {
        let n = self.u16()? as usize;
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }

    /// A 32-bit length, then that many bytes.
    fn blob(&mut self) -> Result<Vec<u8>, String> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
}

/// Parses a JKS file. With `password`, its integrity digest must match, as Java checks it;
/// without, it is not checked (Java allows that for a truststore).
pub fn parse(bytes: &[u8], password: Option<&str>) -> Result<Jks, JksError> {
    let body_len = bytes
        .len()
        .checked_sub(DIGEST_LEN)
        .ok_or_else(|| JksError::Format("is too short to be a JKS keystore".into()))?;
    let (body, digest) = bytes.split_at(body_len);
    let jks = entries(body).map_err(JksError::Format)?;
    if let Some(password) = password {
        let mut md = Sha1::new();
        md.update(java_bytes(password));
        md.update(WHITENER);
        md.update(body);
        if md.finalize().as_slice() != digest {
            return Err(JksError::Password);
        }
    }
    Ok(jks)
}

/// The entries of a JKS file's body (all but its digest).
fn entries(body: &[u8]) -> Result<Jks, String> {
    let mut c = Cursor { bytes: body, at: 0 };
    match c.u32()? {
        MAGIC => {}
        JCEKS_MAGIC => return Err("is a JCEKS keystore; convert it to PKCS12 with keytool -importkeystore".into()),
        _ => return Err("is not a JKS keystore".into()),
    }
    let version = c.u32()?;
    if version != 1 && version != 2 {
        return Err(format!("has JKS version {version}, not 1 or 2"));
    }
    let count = c.u32()?;
    let cert = |c: &mut Cursor<'_>| -> Result<Vec<u8>, String> {
        if version == 2 {
            let kind = c.utf()?;
            if kind != "X.509" {
                return Err(format!("holds a {kind:?} certificate, not X.509"));
            }
        }
        c.blob()
    };
    let mut out = Jks::default();
    // No allocation by `count`: each entry must be read from bytes that are there.
    for _ in 0..count {
        let tag = c.u32()?;
        let alias = c.utf()?;
        c.take(8)?; // the entry's creation time
        match tag {
            1 => {
                let protected_key = c.blob()?;
                let n = c.u32()?;
                let mut chain = Vec::new();
                for _ in 0..n {
                    chain.push(cert(&mut c)?);
                }
                out.keys.push(KeyEntry {
                    alias,
                    protected_key,
                    chain,
                });
            }
            2 => out.trusted.push(cert(&mut c)?),
            _ => return Err(format!("has an entry of unknown kind {tag} (alias {alias:?})")),
        }
    }
    if c.at != body.len() {
        return Err("has bytes after its last entry".into());
    }
    Ok(out)
}

/// The PKCS#8 private key inside a JKS key entry, opened with `password`.
pub fn decrypt_key(protected_key: &[u8], password: &str) -> Result<Vec<u8>, String> {
    let (algorithm, data) = SliceReader::new(protected_key)
        .and_then(|mut r| {
            r.sequence(|s| {
                let algorithm = AlgorithmIdentifierOwned::decode(s)?;
                let data = OctetString::decode(s)?;
                Ok((algorithm, data))
            })
        })
        .map_err(|e| format!("the protected key is not DER: {e}"))?;
    if algorithm.oid.to_string() != KEY_PROTECTOR_OID {
        return Err(format!(
            "the key is protected with {}, not Sun's JKS algorithm",
            algorithm.oid
        ));
    }
    let protected = data.as_bytes();
    let encrypted_len = protected
        .len()
        .checked_sub(SALT_LEN + DIGEST_LEN)
        .ok_or("the protected key is too short")?;
    let (salt, rest) = protected.split_at(SALT_LEN);
    let (encrypted, check) = rest.split_at(encrypted_len);
    let password = java_bytes(password);
    let plain = key_stream_xor(&password, salt, encrypted);
    let digest = Sha1::new().chain_update(&password).chain_update(&plain).finalize();
    if digest.as_slice() != check {
        return Err("wrong password".into());
    }
    Ok(plain)
}

/// `data` XORed with Sun's key stream (which protects and opens alike): SHA-1 over the
/// password and the previous block, starting from the salt.
fn key_stream_xor(password: &[u8], salt: &[u8], data: &[u8]) -> Vec<u8> {
    let mut block = salt.to_vec();
    let mut out = Vec::with_capacity(data.len());
    for chunk in data.chunks(DIGEST_LEN) {
        block = Sha1::new()
            .chain_update(password)
            .chain_update(&block)
            .finalize()
            .to_vec();
        out.extend(chunk.iter().zip(&block).map(|(d, k)| d ^ k));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A JKS file of `entries`, sealed with `password` as Java seals it.
    fn store(entries: &[u8], count: u32, password: &str) -> Vec<u8> {
        let mut b = MAGIC.to_be_bytes().to_vec();
        b.extend(2u32.to_be_bytes());
        b.extend(count.to_be_bytes());
        b.extend(entries);
        let digest = Sha1::new()
            .chain_update(java_bytes(password))
            .chain_update(WHITENER)
            .chain_update(&b)
            .finalize();
        b.extend(digest);
        b
    }

    fn trusted_entry(der: &[u8]) -> Vec<u8> {
        let mut e = 2u32.to_be_bytes().to_vec();
        e.extend(2u16.to_be_bytes());
        e.extend(b"ca");
        e.extend(0u64.to_be_bytes());
        e.extend(5u16.to_be_bytes());
        e.extend(b"X.509");
        e.extend((der.len() as u32).to_be_bytes());
        e.extend(der);
        e
    }

    #[test]
    fn trusted_entries_read_and_the_digest_checks_the_password() {
        let f = store(&trusted_entry(b"cert-der"), 1, "changeit");
        assert_eq!(parse(&f, Some("changeit")).unwrap().trusted, vec![b"cert-der".to_vec()]);
        assert_eq!(parse(&f, None).unwrap().trusted.len(), 1);
        assert_eq!(parse(&f, Some("wrong")).unwrap_err(), JksError::Password);
    }

    #[test]
    fn damaged_files_are_refused_not_read_past_their_end() {
        let f = store(&trusted_entry(b"cert-der"), 1, "p");
        // A count larger than the entries there, a length past the end, and a cut file.
        let more = store(&trusted_entry(b"cert-der"), u32::MAX, "p");
        assert!(parse(&more, None).unwrap_err().to_string().contains("cut short"));
        let mut long = trusted_entry(b"cert-der");
        let at = long.len() - 8 - 4;
        long[at..at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(parse(&store(&long, 1, "p"), None)
            .unwrap_err()
            .to_string()
            .contains("cut short"));
        for n in 0..f.len() - 1 {
            assert!(parse(&f[..n], None).is_err(), "{n} bytes");
        }
        assert!(parse(b"not a keystore at all, really", None)
            .unwrap_err()
            .to_string()
            .contains("not a JKS"));
        let mut jceks = f.clone();
        jceks[..4].copy_from_slice(&JCEKS_MAGIC.to_be_bytes());
        assert!(parse(&jceks, None).unwrap_err().to_string().contains("JCEKS"));
    }

    #[test]
    fn sun_key_protection_round_trips_and_refuses_a_wrong_password() {
        // Protect a key as Sun's KeyProtector does, then open it.
        let key: Vec<u8> = (0u8..45).collect();
        let password = java_bytes("key-pass");
        let salt = [7u8; SALT_LEN];
        let encrypted = key_stream_xor(&password, &salt, &key);
        let check = Sha1::new().chain_update(&password).chain_update(&key).finalize();
        let data = [&salt[..], &encrypted, &check].concat();
        let der = der_info(&data);
        assert_eq!(decrypt_key(&der, "key-pass").unwrap(), key);
        assert_eq!(decrypt_key(&der, "other").unwrap_err(), "wrong password");
        assert!(decrypt_key(&der[..der.len() - 3], "key-pass").is_err());
    }

    /// An `EncryptedPrivateKeyInfo` under Sun's OID holding `data`.
    fn der_info(data: &[u8]) -> Vec<u8> {
        // SEQUENCE { SEQUENCE { OID 1.3.6.1.4.1.42.2.17.1.1, NULL }, OCTET STRING }
        let oid = [0x06, 0x0a, 0x2b, 0x06, 0x01, 0x04, 0x01, 0x2a, 0x02, 0x11, 0x01, 0x01];
        let alg = [&[0x30, (oid.len() + 2) as u8][..], &oid, &[0x05, 0x00]].concat();
        let octets = [&[0x04, data.len() as u8][..], data].concat();
        let body = [alg, octets].concat();
        [&[0x30, body.len() as u8][..], &body].concat()
    }
}
