//! The address space a data directory's shards map: each shard's LMDB map
//! takes `max_shard_bytes` of it (address space, not memory: the file
//! grows as hooks fill it). A process limited in address space (`ulimit
//! -v`, systemd's `LimitAS=`) that cannot map them all is refused before
//! any is opened, saying so, where LMDB would say "Cannot allocate
//! memory".

use super::StoreError;
use std::io;
use std::path::Path;

/// Refuses to open `shards` shards of `max_shard_bytes` each in
/// `data_dir` when their maps alone exceed the process's address-space
/// limit.
pub fn refuse_unmappable(
    data_dir: &Path,
    shards: usize,
    max_shard_bytes: u64,
) -> Result<(), StoreError> {
    let Some(limit_bytes) = address_space_limit() else {
        return Ok(());
    };
    let maps_bytes = (shards as u64).saturating_mul(max_shard_bytes);
    if maps_bytes <= limit_bytes {
        return Ok(());
    }
    let why = format!(
        "its {shards} shards map {maps_bytes} bytes of address space ({shards} × max_shard_bytes \
         {max_shard_bytes}), more than this process may map (its address-space limit, ulimit -v \
         or systemd's LimitAS=: {limit_bytes} bytes): lower max_shard_bytes, or raise the limit"
    );
    Err(StoreError::Io {
        path: data_dir.to_path_buf(),
        source: io::Error::new(io::ErrorKind::OutOfMemory, why),
    })
}

/// The process's soft address-space limit in bytes; `None` for none.
fn address_space_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit for getrlimit to fill.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) };
    (read == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}
