//! Key to latest offset, in bounded memory, as Kafka's `SkimpyOffsetMap`: a key is kept as a
//! 128-bit hash (two keyed SipHash values; Kafka keeps an MD5) beside its offset, 24 bytes a key,
//! in an open-addressing table. The table starts small and doubles up to the memory given; it
//! is full at 90% of that (Kafka's `log.cleaner.io.buffer.load.factor`), and a clean then stops
//! at the last batch whose keys all fit.

use std::hash::{BuildHasher, Hasher};

/// Bytes one key takes: two hash words and an offset.
pub const BYTES_PER_KEY: u64 = 24;
/// The share of the slots the memory allows that may be used.
const LOAD_FACTOR: f64 = 0.9;
/// The table's first size, in slots.
const INITIAL_SLOTS: usize = 1 << 12;
/// A slot no key holds.
const EMPTY: i64 = -1;

#[derive(Debug, Clone, Copy)]
struct Slot {
    hash: [u64; 2],
    offset: i64,
}

const FREE: Slot = Slot {
    hash: [0, 0],
    offset: EMPTY,
};

/// The offset map of one cleaner thread.
#[derive(Debug)]
pub struct OffsetMap {
    slots: Vec<Slot>,
    len: usize,
    /// Slots the memory allows.
    max_slots: usize,
    /// Keys the memory allows (90% of its slots).
    max_keys: usize,
    latest: i64,
    hashers: [std::collections::hash_map::RandomState; 2],
}

impl OffsetMap {
    /// A map using at most `memory` bytes (at least room for one key).
    pub fn new(memory: u64) -> Self {
        let max_slots = usize::try_from(memory / BYTES_PER_KEY).unwrap_or(usize::MAX).max(2);
        Self {
            slots: Vec::new(),
            len: 0,
            max_slots,
            max_keys: ((max_slots as f64 * LOAD_FACTOR) as usize).max(1),
            latest: -1,
            hashers: Default::default(),
        }
    }

    /// Forgets every key and the latest offset; keeps the table's memory for the next clean.
    pub fn clear(&mut self) {
        self.slots.fill(FREE);
        self.len = 0;
        self.latest = -1;
    }

    fn hash(&self, key: &[u8]) -> [u64; 2] {
        self.hashers.each_ref().map(|b| {
            let mut h = b.build_hasher();
            h.write(key);
            h.finish()
        })
    }

    /// The slot holding `hash`, or the free one where it would go.
    fn find(&self, hash: [u64; 2]) -> usize {
        // Never endless: at most 90% of the slots are taken.
        let n = self.slots.len();
        let mut i = (hash[0] % n as u64) as usize;
        loop {
            let s = &self.slots[i];
            if s.offset == EMPTY || s.hash == hash {
                return i;
            }
            i = if i + 1 == n { 0 } else { i + 1 };
        }
    }

    /// Doubles the table when it is half full (or makes the first one), up to the memory given.
    fn grow_if_needed(&mut self) {
        let full = self.slots.len() == self.max_slots;
        if !self.slots.is_empty() && (self.len * 2 < self.slots.len() || full) {
            return;
        }
        let size = (self.slots.len() * 2).max(INITIAL_SLOTS).min(self.max_slots);
        let old = std::mem::replace(&mut self.slots, vec![FREE; size]);
        for s in old.into_iter().filter(|s| s.offset != EMPTY) {
            let i = self.find(s.hash);
            self.slots[i] = s;
        }
    }

    /// Records `offset` as the latest of `key`; false, changing nothing, when the key is new and
    /// the map is full.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let hash = self.hash(key);
        if !self.slots.is_empty() {
            let i = self.find(hash);
            if self.slots[i].offset != EMPTY {
                self.slots[i].offset = offset;
                return true;
            }
        }
        if self.len >= self.max_keys {
            return false;
        }
        self.grow_if_needed();
        let i = self.find(hash);
        self.slots[i] = Slot { hash, offset };
        self.len += 1;
        true
    }

    /// The latest offset of `key`, if it was put.
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        if self.slots.is_empty() {
            return None;
        }
        let s = self.slots[self.find(self.hash(key))];
        (s.offset != EMPTY).then_some(s.offset)
    }

    /// Notes that every record up to `offset` was taken in.
    pub fn update_latest_offset(&mut self, offset: i64) {
        self.latest = self.latest.max(offset);
    }

    /// The last offset taken in; -1 before any.
    pub fn latest_offset(&self) -> i64 {
        self.latest
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The share of the keys the memory allows that are held.
    pub fn utilization(&self) -> f64 {
        self.len as f64 / self.max_keys as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_offset_of_each_key_wins_and_the_map_grows() {
        let mut m = OffsetMap::new(128 << 20);
        for round in 0..3i64 {
            for k in 0..10_000i64 {
                assert!(m.put(format!("key-{k}").as_bytes(), round * 10_000 + k));
            }
        }
        assert_eq!(m.len(), 10_000);
        assert_eq!(m.get(b"key-7"), Some(20_007));
        assert_eq!(m.get(b"nope"), None);
        assert_eq!(m.get(b""), None);
        assert!(m.put(b"", 5));
        assert_eq!(m.get(b""), Some(5));
        m.update_latest_offset(29_999);
        m.update_latest_offset(3);
        assert_eq!(m.latest_offset(), 29_999);
        m.clear();
        assert!(m.is_empty());
        assert_eq!((m.get(b"key-7"), m.latest_offset()), (None, -1));
    }

    #[test]
    fn a_full_map_refuses_new_keys_but_takes_newer_offsets_of_known_ones() {
        // 100 slots' worth of memory: 90 keys.
        let mut m = OffsetMap::new(100 * BYTES_PER_KEY);
        for k in 0..90 {
            assert!(m.put(&[k], i64::from(k)), "{k}");
        }
        assert!(!m.put(&[200], 1000));
        assert_eq!(m.get(&[200]), None);
        assert!(m.put(&[3], 1001));
        assert_eq!(m.get(&[3]), Some(1001));
        assert_eq!(m.len(), 90);
        assert!((m.utilization() - 1.0).abs() < 1e-9);
    }
}
