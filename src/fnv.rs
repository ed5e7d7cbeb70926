//! FNV-1a, 64 bits: a hash whose value does not change from one process
//! to the next (std's `HashMap` hasher is seeded per process), for what
//! the store keeps — the shard that owns a tenant, and the fingerprint of
//! the paces its rows were paced at (`Catalog::paces_fingerprint`).

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
