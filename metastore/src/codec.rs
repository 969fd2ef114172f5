//! Encoding of Raft entries, RPCs and snapshots: a format-version byte, then bincode over serde.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The one format this build writes and reads (2: log entries carry encoded command segments).
pub const FORMAT_VERSION: u8 = 2;

/// Errors from [`decode`].
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The input is empty.
    #[error("empty input")]
    Empty,
    /// Written by a format this build does not know.
    #[error("unknown format version {0}")]
    UnknownVersion(u8),
    /// The bytes do not decode.
    #[error("malformed: {0}")]
    Malformed(String),
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// Most memory one decode may claim. Without a limit, bincode allocates whatever a length prefix
/// claims before reading the bytes, so a bad prefix from the network would abort the process;
/// no value this store handles comes near it.
const DECODE_LIMIT: usize = 1 << 32;

/// Encodes a value behind the format-version byte.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = vec![FORMAT_VERSION];
    encode_into(value, &mut out);
    out
}

/// Appends the encoding of a value (without version byte) to `out`.
pub fn encode_into<T: Serialize>(value: &T, out: &mut Vec<u8>) {
    // Serializing our own types into a Vec cannot fail: every type has a serde derive
    // without custom error paths, and a Vec writer never errors.
    bincode::serde::encode_into_std_write(value, out, config())
        .expect("bincode encoding into a Vec is infallible for derived types");
}

/// Writes a value behind the format-version byte to `out`, without building it in memory first
/// (snapshots of millions of keys).
pub fn encode_to<T: Serialize, W: std::io::Write>(value: &T, out: &mut W) -> std::io::Result<()> {
    out.write_all(&[FORMAT_VERSION])?;
    bincode::serde::encode_into_std_write(value, out, config()).map_err(|e| match e {
        bincode::error::EncodeError::Io { inner, .. } => inner,
        other => std::io::Error::other(other.to_string()),
    })?;
    Ok(())
}

/// Reads a stored value of `size` bytes that [`encode_to`] wrote (or a [`FORMAT_1`] one), as it
/// comes. bincode's limit is a running total that counts each integer at its width in memory, so
/// a snapshot of millions of keys claims more than [`DECODE_LIMIT`]; the limit here grows with
/// `size` instead, so that what a bad length prefix can claim stays bounded by what is on disk.
pub fn decode_stored_from<T: DeserializeOwned, R: std::io::Read>(input: &mut R, size: u64) -> Result<T, CodecError> {
    let mut version = [0u8];
    input.read_exact(&mut version).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => CodecError::Empty,
        _ => CodecError::Malformed(e.to_string()),
    })?;
    if !STORED_VERSIONS.contains(&version[0]) {
        return Err(CodecError::UnknownVersion(version[0]));
    }
    // Decoding our stored types claims at most about 4 bytes per byte read (empty values
    // under short keys); 8 leaves room.
    let budget = size.saturating_mul(8);
    macro_rules! first_limit_above {
        ($($bits:literal),+) => {
            $(if budget <= 1u64 << $bits {
                return decode_read_limited::<T, R, { 1usize << $bits }>(input);
            })+
        };
    }
    first_limit_above!(32, 33, 34, 35, 36, 37, 38, 39, 40);
    Err(CodecError::Malformed(format!(
        "{size} bytes is more than one stored value may hold"
    )))
}

fn decode_read_limited<T: DeserializeOwned, R: std::io::Read, const LIMIT: usize>(
    input: &mut R,
) -> Result<T, CodecError> {
    bincode::serde::decode_from_std_read(input, config().with_limit::<LIMIT>())
        .map_err(|e| CodecError::Malformed(e.to_string()))
}

/// The format before log entries carried encoded command segments; every other stored value
/// (vote, purge point, snapshot) kept its layout in version 2.
pub const FORMAT_1: u8 = 1;

/// The formats a stored value (as opposed to an RPC or a log entry) may be read from.
const STORED_VERSIONS: [u8; 2] = [FORMAT_VERSION, FORMAT_1];

/// Decodes what [`encode`] wrote, checking the version byte: RPCs and log entries.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    decode_versions(bytes, &[FORMAT_VERSION])
}

/// Decodes a stored value whose layout is the same in [`FORMAT_1`] and this format, so that a
/// data dir written before version 2 still opens.
pub fn decode_stored<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    decode_versions(bytes, &STORED_VERSIONS)
}

/// Decodes a value written in one of `versions`.
pub fn decode_versions<T: DeserializeOwned>(bytes: &[u8], versions: &[u8]) -> Result<T, CodecError> {
    let (&version, rest) = bytes.split_first().ok_or(CodecError::Empty)?;
    if !versions.contains(&version) {
        return Err(CodecError::UnknownVersion(version));
    }
    let (value, _) = bincode::serde::decode_from_slice(rest, config().with_limit::<DECODE_LIMIT>())
        .map_err(|e| CodecError::Malformed(e.to_string()))?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_length_prefix_is_an_error_not_an_allocation() {
        // A String claiming 2^60 bytes: varint marker 0xFD then a u64.
        let mut bytes = vec![FORMAT_VERSION, 0xFD];
        bytes.extend_from_slice(&(1u64 << 60).to_le_bytes());
        assert!(matches!(decode::<String>(&bytes), Err(CodecError::Malformed(_))));
        assert_eq!(decode::<String>(&encode(&"ok".to_string())).expect("decodes"), "ok");
    }

    #[test]
    fn a_streamed_encoding_reads_back_both_ways() {
        let value = vec!["a".to_string(), "b".repeat(1000)];
        let mut out = Vec::new();
        encode_to(&value, &mut out).expect("encodes");
        assert_eq!(out, encode(&value));
        let back: Vec<String> = decode_stored_from(&mut out.as_slice(), out.len() as u64).expect("decodes");
        assert_eq!(back, value);
        let mut cut = &out[..out.len() - 1];
        assert!(matches!(
            decode_stored_from::<Vec<String>, _>(&mut cut, out.len() as u64 - 1),
            Err(CodecError::Malformed(_))
        ));
        let mut huge = vec![FORMAT_VERSION, 0xFD];
        huge.extend_from_slice(&(1u64 << 60).to_le_bytes());
        assert!(matches!(
            decode_stored_from::<String, _>(&mut huge.as_slice(), huge.len() as u64),
            Err(CodecError::Malformed(_))
        ));
    }
}
