//! A fast hasher for the hot maps keyed by addresses, ids and tokens (code objects, frames,
//! scopes, module calls, storages): std's SipHash resists crafted keys, which these are not, and
//! cost the per-call paths more than the rest of their map work.
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate over machine words, as rustc's FxHasher.
#[derive(Default, Clone, Copy)]
pub struct IntHasher(u64);

const K: u64 = 0xf135_7aea_2e62_a9c5;

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        // The product's entropy is in its high bits; the table indexes by the low ones.
        self.0.rotate_left(26)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = self.0.wrapping_add(n).wrapping_mul(K);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

pub type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;
pub type IntSet<K> = HashSet<K, BuildHasherDefault<IntHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_addresses_spread_over_the_low_bits() {
        // Addresses 16 bytes apart must not share a bucket in a small table.
        let buckets: HashSet<u64> = (0..64u64)
            .map(|i| {
                let mut h = IntHasher::default();
                h.write_usize(0x7f00_0000_0000 + 16 * i as usize);
                h.finish() & 63
            })
            .collect();
        assert!(buckets.len() > 32, "{} buckets of 64", buckets.len());
    }

    #[test]
    fn maps_keep_what_is_inserted() {
        let mut m: IntMap<(usize, usize), u32> = IntMap::default();
        for i in 0..1000 {
            m.insert((i * 16, i * 32), i as u32);
        }
        assert!((0..1000).all(|i| m[&(i * 16, i * 32)] == i as u32));
    }
}
