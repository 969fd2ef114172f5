//! Kafka's framing, checked before anything is decoded: a 4-byte size, then the request. The
//! size is bounded by `socket.request.max.bytes`, and the request's key and version are read
//! by hand, so that an unknown API or a version this broker does not serve is refused before
//! the protocol crate sees it (`walk` then proves the body's counts).

/// Why a frame is refused; each closes the connection, as a Kafka broker does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The size prefix is negative or over the limit.
    #[error("request of {size} bytes is over socket.request.max.bytes {max}")]
    TooLarge {
        /// The claimed size.
        size: i64,
        /// `socket.request.max.bytes`.
        max: usize,
    },
    /// Too short to hold a request header.
    #[error("request of {0} bytes is too short for a header")]
    TooShort(usize),
    /// The header or body does not decode.
    #[error("malformed request: {0}")]
    Malformed(String),
}

/// Checks a frame's size prefix against `max` (`socket.request.max.bytes`).
pub fn check_size(size: i32, max: usize) -> Result<usize, FrameError> {
    match usize::try_from(size) {
        Ok(n) if n <= max => Ok(n),
        _ => Err(FrameError::TooLarge { size: size as i64, max }),
    }
}

/// The API key and version at the start of a request.
pub fn key_and_version(frame: &[u8]) -> Result<(i16, i16), FrameError> {
    if frame.len() < 8 {
        return Err(FrameError::TooShort(frame.len()));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    Ok((key, version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_over_the_limit_or_negative_are_refused() {
        assert_eq!(check_size(100, 100), Ok(100));
        assert!(matches!(
            check_size(101, 100),
            Err(FrameError::TooLarge { size: 101, .. })
        ));
        assert!(matches!(
            check_size(-1, 100),
            Err(FrameError::TooLarge { size: -1, .. })
        ));
    }

    #[test]
    fn a_header_needs_its_key_version_and_correlation_id() {
        assert_eq!(key_and_version(&[0, 3, 0, 9, 0, 0, 0, 1]), Ok((3, 9)));
        assert_eq!(key_and_version(&[0, 3, 0]), Err(FrameError::TooShort(3)));
    }
}
