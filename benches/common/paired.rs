//! Two workloads alternated in blocks (each warm within its block), so the
//! machine's drift (clock frequency, other guests) weighs on both alike: on
//! a noisy machine the ratio of the two means is steadier than the ratio of
//! two criterion runs made one after the other.

use std::time::Instant;

/// The mean nanoseconds per call of `first` and of `second`, over `blocks`
/// alternated blocks of `block` calls each.
pub fn paired(
    blocks: u32,
    block: u32,
    mut first: impl FnMut(),
    mut second: impl FnMut(),
) -> [f64; 2] {
    let mut ns = [0u128; 2];
    for _ in 0..blocks {
        let start = Instant::now();
        for _ in 0..block {
            first();
        }
        ns[0] += start.elapsed().as_nanos();
        let start = Instant::now();
        for _ in 0..block {
            second();
        }
        ns[1] += start.elapsed().as_nanos();
    }
    ns.map(|t| t as f64 / f64::from(blocks * block))
}

/// `cargo bench` passes --bench; `cargo test` runs benches as a short smoke pass.
pub fn benching() -> bool {
    std::env::args().any(|a| a == "--bench")
}
