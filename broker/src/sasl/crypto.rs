//! The hash, HMAC and PBKDF2 of each SCRAM mechanism, and a constant-time compare. Plain
//! functions over bytes; the mechanism picks the hash.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

use super::{Mechanism, SaslError};

/// The hash under a SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScramHash {
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl ScramHash {
    /// The hash of a SCRAM mechanism; PLAIN has none.
    pub(crate) fn of(mechanism: Mechanism) -> Result<Self, SaslError> {
        match mechanism {
            Mechanism::ScramSha256 => Ok(Self::Sha256),
            Mechanism::ScramSha512 => Ok(Self::Sha512),
            Mechanism::Plain => Err(SaslError::NotScram(mechanism)),
        }
    }

    /// Output length in bytes: the length of every key and proof under this hash.
    pub(crate) fn len(self) -> usize {
        match self {
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }

    /// H(data).
    pub(crate) fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha256 => Sha256::digest(data).to_vec(),
            Self::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// HMAC(key, data).
    pub(crate) fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC accepts a key of any length (a long one is hashed first), so `new_from_slice`
        // cannot fail here.
        match self {
            Self::Sha256 => {
                let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            Self::Sha512 => {
                let mut mac = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes a key of any length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
        }
    }

    /// Hi(password, salt, i) of RFC 5802: PBKDF2 with this HMAC, one block of output.
    pub(crate) fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.len()];
        match self {
            Self::Sha256 => pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out),
            Self::Sha512 => pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out),
        }
        out
    }
}

/// Equality whose time depends only on the lengths (public: they are hash sizes), not on where
/// the bytes differ.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // Keeps the optimiser from turning the fold into an early-exit compare.
    std::hint::black_box(diff) == 0
}

/// `a XOR b`, byte by byte, for equal lengths (callers check them).
pub(crate) fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}
