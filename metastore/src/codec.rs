//! Encoding of Raft entries, RPCs and snapshots: a format-version byte, then bincode over serde.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The one format this build writes and reads.
pub const FORMAT_VERSION: u8 = 1;

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

/// Decodes what [`encode`] wrote, checking the version byte.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    let (&version, rest) = bytes.split_first().ok_or(CodecError::Empty)?;
    if version != FORMAT_VERSION {
        return Err(CodecError::UnknownVersion(version));
    }
    let (value, _) =
        bincode::serde::decode_from_slice(rest, config()).map_err(|e| CodecError::Malformed(e.to_string()))?;
    Ok(value)
}

/// Decodes from a reader; the version byte must already be consumed.
pub fn decode_from_reader<T: DeserializeOwned, R: std::io::Read>(r: &mut R) -> Result<T, CodecError> {
    bincode::serde::decode_from_std_read(r, config()).map_err(|e| CodecError::Malformed(e.to_string()))
}
