//! Kafka's framing, checked before anything is decoded: a 4-byte size, then the request. The
//! size is bounded by `socket.request.max.bytes`, and the request's key and version are read
//! by hand, so that an unknown API, a version this broker does not serve, or a claimed array
//! count larger than the frame is refused before the protocol crate allocates for it.

use bytes::{Buf, Bytes};

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

/// Reads an array count at the front of `body` (Int32 before `flexible`, else an unsigned
/// varint holding count + 1) without consuming it, and checks that the rest of the body could
/// hold that many elements of at least `min_element` bytes each. The protocol crate reserves
/// memory for the claimed count before it reads the elements.
pub fn check_array_count(body: &Bytes, flexible: bool, min_element: usize) -> Result<(), FrameError> {
    let mut b = body.clone();
    let count: i64 = if flexible {
        let mut v: u64 = 0;
        let mut shift = 0;
        loop {
            if !b.has_remaining() || shift > 28 {
                return Err(FrameError::Malformed("bad array length".into()));
            }
            let byte = b.get_u8();
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        v as i64 - 1
    } else {
        if b.remaining() < 4 {
            return Err(FrameError::Malformed("no array length".into()));
        }
        b.get_i32() as i64
    };
    let room = b.remaining() / min_element.max(1);
    if count > room as i64 {
        return Err(FrameError::Malformed(format!(
            "an array claims {count} elements; the request has room for {room}"
        )));
    }
    Ok(())
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

    #[test]
    fn an_array_count_larger_than_the_frame_is_refused_before_decoding() {
        // Int32 count of 2 with 4 bytes left: room for 2 elements of 2 bytes.
        let ok = Bytes::from_static(&[0, 0, 0, 2, 0, 1, 0, 1]);
        assert!(check_array_count(&ok, false, 2).is_ok());
        let huge = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 1]);
        assert!(check_array_count(&huge, false, 2).is_err());
        // Compact: varint 0 is null, 1 is empty; a multi-byte varint claiming millions fails.
        assert!(check_array_count(&Bytes::from_static(&[0]), true, 18).is_ok());
        assert!(check_array_count(&Bytes::from_static(&[0xff, 0xff, 0x7f]), true, 18).is_err());
        assert!(check_array_count(&Bytes::from_static(&[0xff, 0xff]), true, 18).is_err());
    }
}
