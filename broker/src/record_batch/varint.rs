//! Kafka's zig-zag varints, read with bounds: a record's fields are varints, and a record from
//! a client may claim any length.

/// Reads a zig-zag varint of at most `max_bytes` bytes at `*pos`, advancing it.
fn read(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Option<i64> {
    let mut v: u64 = 0;
    for i in 0..max_bytes {
        let b = *buf.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some(((v >> 1) as i64) ^ -((v & 1) as i64));
        }
    }
    None
}

/// A 32-bit zig-zag varint.
pub fn read_i32(buf: &[u8], pos: &mut usize) -> Option<i32> {
    read(buf, pos, 5).and_then(|v| i32::try_from(v).ok())
}

/// A 64-bit zig-zag varint.
pub fn read_i64(buf: &[u8], pos: &mut usize) -> Option<i64> {
    read(buf, pos, 10)
}

/// Appends `v` as a zig-zag varint.
pub fn write(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let b = (z & 0x7f) as u8;
        z >>= 7;
        if z == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Bytes `write` takes for `v`.
pub fn len(v: i64) -> usize {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    let mut n = 1;
    while z >= 0x80 {
        z >>= 7;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_lengths() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            300,
            -300,
            i32::MAX as i64,
            i32::MIN as i64,
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = Vec::new();
            write(&mut out, v);
            assert_eq!(out.len(), len(v), "{v}");
            let mut pos = 0;
            assert_eq!(read_i64(&out, &mut pos), Some(v));
            assert_eq!(pos, out.len());
        }
        // Kafka's own encodings: 1 is 0x02, -1 is 0x01.
        let mut out = Vec::new();
        write(&mut out, 1);
        write(&mut out, -1);
        assert_eq!(out, [2, 1]);
    }

    #[test]
    fn truncated_or_too_long_is_none() {
        let mut pos = 0;
        assert_eq!(read_i32(&[0x80], &mut pos), None);
        let mut pos = 0;
        assert_eq!(read_i32(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01], &mut pos), None);
        let mut pos = 0;
        assert_eq!(read_i64(&[0xff; 11], &mut pos), None);
    }
}
