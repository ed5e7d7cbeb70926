//! FNV-1a, 64 bits: a hash whose value does not change from one process
//! to the next (std's `HashMap` hasher is seeded per process), for what
//! the store keeps — the shard that owns a tenant, and the fingerprint of
//! the paces its rows were paced at (`Catalog::paces_fingerprint`, a sum
//! of `spread` hashes).

use std::hash::Hasher;

const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0100_0000_01b3;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(OFFSET_BASIS)
    }
}

impl Hasher for Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(PRIME);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// `hash` with every bit of it spread over all 64 (SplitMix64's
/// finalizer, a bijection). FNV-1a's last bytes move its value by a small
/// multiple of its prime only, so two sums of such hashes whose inputs
/// differ in their last bytes could be equal; sums of spread hashes are
/// not, but by chance.
pub(crate) fn spread(hash: u64) -> u64 {
    let z = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The published FNV-1a 64 test vectors: a tenant's shard, kept in
    /// every store, depends on them.
    #[test]
    fn hashes_as_published() {
        for (input, hash) in [
            ("", 0xcbf2_9ce4_8422_2325),
            ("a", 0xaf63_dc4c_8601_ec8c),
            ("foobar", 0x8594_4171_f739_67e8),
        ] {
            let mut hasher = Fnv1a::default();
            hasher.write(input.as_bytes());
            assert_eq!(hasher.finish(), hash, "{input:?}");
        }
    }
}
