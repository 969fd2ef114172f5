//! A segment's time index, Kafka's `.timeindex`: 12-byte big-endian entries of (the largest
//! timestamp in the segment so far, the offset relative to the segment's base where it was
//! reached). An entry is added with each offset-index entry and when the segment is sealed, and
//! only when the largest timestamp grew, so timestamps strictly increase. A lookup by time then
//! skips the segments that end too early and starts its scan near the batch it wants.
//!
//! Pure: the segment does the file I/O.

use crate::record_batch::BatchHeader;

/// Bytes per entry: timestamp i64 + relative offset u32.
pub(super) const TIME_ENTRY_LEN: usize = 12;

/// One entry: every record up to `base + rel` has a timestamp of at most `ts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TimeEntry {
    pub ts: i64,
    pub rel: u32,
}

impl TimeEntry {
    /// The entry's bytes, as Kafka writes them.
    pub fn encode(&self) -> [u8; TIME_ENTRY_LEN] {
        let mut b = [0u8; TIME_ENTRY_LEN];
        b[..8].copy_from_slice(&self.ts.to_be_bytes());
        b[8..].copy_from_slice(&self.rel.to_be_bytes());
        b
    }
}

/// The in-memory time index of one segment, and the largest timestamp seen in it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct TimeIndex {
    entries: Vec<TimeEntry>,
    /// The largest batch timestamp so far and the last offset of its batch (relative).
    max: Option<TimeEntry>,
}

impl TimeIndex {
    /// Entries decoded from a file's bytes: the longest valid prefix (timestamps strictly
    /// increasing, offsets not decreasing and inside the segment's `len` offsets), and whether
    /// that was all of it. Kafka preallocates the file, so an unclean stop leaves zeros after
    /// the last entry: those end the prefix.
    pub fn decode(buf: &[u8], len: i64) -> (Self, bool) {
        let mut entries: Vec<TimeEntry> = Vec::with_capacity(buf.len() / TIME_ENTRY_LEN);
        let mut clean = buf.len().is_multiple_of(TIME_ENTRY_LEN);
        for c in buf.chunks_exact(TIME_ENTRY_LEN) {
            let ts = i64::from_be_bytes(c[..8].try_into().expect("8 bytes"));
            let rel = u32::from_be_bytes(c[8..].try_into().expect("4 bytes"));
            let ordered = entries.last().is_none_or(|l| ts > l.ts && rel >= l.rel);
            if !ordered || i64::from(rel) >= len {
                clean = false;
                break;
            }
            entries.push(TimeEntry { ts, rel });
        }
        let max = entries.last().copied();
        (Self { entries, max }, clean)
    }

    /// The whole index as file bytes.
    pub fn encode(&self) -> Vec<u8> {
        self.entries.iter().flat_map(|e| e.encode()).collect()
    }

    /// The entries.
    pub fn entries(&self) -> &[TimeEntry] {
        &self.entries
    }

    /// Notes a batch appended to (or found in) the segment that starts at `base`.
    pub fn observe(&mut self, h: &BatchHeader, base: i64) {
        let Ok(rel) = u32::try_from(h.last_offset() - base) else {
            return;
        };
        if self.max.is_none_or(|m| h.max_timestamp_ms > m.ts) {
            self.max = Some(TimeEntry {
                ts: h.max_timestamp_ms,
                rel,
            });
        }
    }

    /// Adds an entry for the largest timestamp so far if it grew since the last entry; returns
    /// it, for the caller to write at `entries().len() - 1`.
    pub fn maybe_append(&mut self) -> Option<TimeEntry> {
        let m = self.max?;
        if self.entries.last().is_some_and(|l| m.ts <= l.ts || m.rel < l.rel) {
            return None;
        }
        self.entries.push(m);
        Some(m)
    }

    /// Forgets the last entry (its write failed).
    pub fn pop(&mut self) {
        self.entries.pop();
    }

    /// Keeps only the entries for offsets before `len` (relative); the largest timestamp falls
    /// back to the last entry kept, as Kafka's does after a truncation.
    pub fn truncate(&mut self, len: i64) {
        let keep = self.entries.partition_point(|e| i64::from(e.rel) < len);
        self.entries.truncate(keep);
        self.max = self.entries.last().copied();
    }

    /// Takes `other`'s largest timestamp where it is larger (batches a recovery scan saw).
    pub fn merge_max(&mut self, other: &TimeIndex) {
        if let Some(o) = other.max {
            if self.max.is_none_or(|m| o.ts > m.ts) {
                self.max = Some(o);
            }
        }
    }

    /// The largest timestamp seen in the segment, if any batch was.
    #[cfg(test)]
    pub fn max_timestamp(&self) -> Option<i64> {
        self.max.map(|m| m.ts)
    }

    /// The largest timestamp seen in the segment and the last offset (relative) of the first
    /// batch that reached it.
    pub fn max_entry(&self) -> Option<TimeEntry> {
        self.max
    }

    /// The last offset (relative) known to hold only timestamps before `ts`: a scan for the
    /// first batch at or after `ts` may start at the batch holding it.
    pub fn all_before(&self, ts: i64) -> Option<u32> {
        let i = self.entries.partition_point(|e| e.ts < ts);
        i.checked_sub(1).map(|i| self.entries[i].rel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(base_offset: i64, records: u32, max_ts: i64) -> BatchHeader {
        BatchHeader {
            base_offset,
            last_offset_delta: records - 1,
            max_timestamp_ms: max_ts,
            ..BatchHeader::default()
        }
    }

    #[test]
    fn entries_grow_only_with_the_largest_timestamp_and_round_trip() {
        let mut t = TimeIndex::default();
        assert_eq!(t.maybe_append(), None, "nothing seen yet");
        t.observe(&header(100, 2, 50), 100);
        assert_eq!(t.maybe_append(), Some(TimeEntry { ts: 50, rel: 1 }));
        // An older timestamp does not move the maximum: no new entry.
        t.observe(&header(102, 1, 40), 100);
        assert_eq!(t.maybe_append(), None);
        t.observe(&header(103, 3, 70), 100);
        assert_eq!(t.maybe_append(), Some(TimeEntry { ts: 70, rel: 5 }));
        assert_eq!(t.maybe_append(), None, "no growth since");
        let bytes = t.encode();
        assert_eq!(bytes.len(), 2 * TIME_ENTRY_LEN);
        let (back, clean) = TimeIndex::decode(&bytes, 6);
        assert!(clean);
        assert_eq!(back.entries(), t.entries());
        assert_eq!(back.max_timestamp(), Some(70));
    }

    #[test]
    fn decoding_keeps_the_valid_prefix_of_a_preallocated_or_damaged_file() {
        let mut bytes = TimeEntry { ts: 10, rel: 0 }.encode().to_vec();
        bytes.extend(TimeEntry { ts: 20, rel: 4 }.encode());
        // Kafka's preallocated tail after an unclean stop.
        let mut padded = bytes.clone();
        padded.extend([0u8; 36]);
        let (t, clean) = TimeIndex::decode(&padded, 5);
        assert!(!clean);
        assert_eq!(t.entries().len(), 2);
        // An entry past the segment's end, a torn entry, a timestamp that does not grow.
        let (t, clean) = TimeIndex::decode(&bytes, 4);
        assert_eq!((t.entries().len(), clean), (1, false));
        let (t, clean) = TimeIndex::decode(&bytes[..20], 5);
        assert_eq!((t.entries().len(), clean), (1, false));
        let mut flat = bytes.clone();
        flat.extend(TimeEntry { ts: 20, rel: 4 }.encode());
        assert_eq!(TimeIndex::decode(&flat, 5).0.entries().len(), 2);
    }

    #[test]
    fn truncation_and_lookup() {
        let mut t = TimeIndex::default();
        for (base, ts) in [(0, 10), (10, 20), (20, 30)] {
            t.observe(&header(base, 10, ts), 0);
            t.maybe_append();
        }
        assert_eq!(t.all_before(5), None);
        assert_eq!(t.all_before(20), Some(9));
        assert_eq!(t.all_before(31), Some(29));
        t.truncate(20);
        assert_eq!(t.entries().len(), 2);
        assert_eq!(t.max_timestamp(), Some(20));
    }
}
