//! Which `__consumer_offsets` partition holds a group: Kafka's own rule, so that the groups of a
//! migrated cluster land where their offsets already are.

/// Java's `String.hashCode`: over UTF-16 code units, with 32-bit overflow.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// Kafka's `Utils.abs`: `|n|`, and 0 for `i32::MIN`, whose absolute value does not fit.
fn kafka_abs(n: i32) -> i32 {
    if n == i32::MIN {
        0
    } else {
        n.abs()
    }
}

/// The partition of a topic of `partitions` partitions that coordinates `id`.
pub fn partition_for(id: &str, partitions: u32) -> u32 {
    debug_assert!(partitions > 0, "a coordinator topic has partitions");
    kafka_abs(java_string_hash(id)) as u32 % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_match_java() {
        // Values Java's String.hashCode gives.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash("console-consumer-12345"), 158_455_506);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        // A character outside the basic plane counts as two UTF-16 units.
        assert_eq!(java_string_hash("😀"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn min_int_maps_to_partition_zero_as_kafka_does() {
        assert_eq!(kafka_abs(i32::MIN), 0);
        assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("console-consumer-12345", 50), 6);
    }
}
