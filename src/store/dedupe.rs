//! Ingest deduplication: a source with a `dedupe_window_ms` stores a hook
//! with a dedupe key once per window. A commit of the same key for the same
//! source within the window stores nothing and is answered with the first
//! hook's id, as a provider retrying a delivery whose answer it lost
//! expects.
//!
//! - `dedupe`: SHA-256(source id, 0, dedupe key) → the window's end
//!   (u64 ms), the source's tenant (u8 length, bytes) and the first hook's
//!   id.
//! - `dedupe_ends`: (window end u64, that hash) → empty, in the order the
//!   windows end.
//!
//! An entry is written in its hook's commit, so it is as durable as the
//! hook. Each commit that writes one first deletes up to two whose window
//! ended, so the entries stay about as many as the open windows hold; a
//! lookup checks the end too, so an entry not yet deleted never matches.
//! The window is the source's when the first hook was committed. A
//! reshard moves each entry to its tenant's new shard.

use super::record::{CorruptRecord, Hook};
use super::{ShardStore, StoreError};
use heed::{RoTxn, RwTxn};
use sha2::{Digest, Sha256};

const HASH_BYTES: usize = 32;

/// Expired entries a commit deletes before it writes its own.
const EXPIRED_PER_COMMIT: usize = 2;

fn hash(source_id: &str, dedupe_key: &str) -> [u8; HASH_BYTES] {
    let mut h = Sha256::new();
    h.update(source_id.as_bytes());
    h.update([0]);
    h.update(dedupe_key.as_bytes());
    h.finalize().into()
}

fn end_key(ends_at_ms: u64, hash: &[u8; HASH_BYTES]) -> [u8; 8 + HASH_BYTES] {
    let mut k = [0u8; 8 + HASH_BYTES];
    k[..8].copy_from_slice(&ends_at_ms.to_be_bytes());
    k[8..].copy_from_slice(hash);
    k
}

/// An entry as stored.
struct Entry<'v> {
    ends_at_ms: u64,
    tenant: &'v str,
    hook_id: &'v str,
}

impl<'v> Entry<'v> {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(9 + self.tenant.len() + self.hook_id.len());
        v.extend_from_slice(&self.ends_at_ms.to_be_bytes());
        v.push(self.tenant.len() as u8);
        v.extend_from_slice(self.tenant.as_bytes());
        v.extend_from_slice(self.hook_id.as_bytes());
        v
    }

    fn decode(v: &'v [u8]) -> Result<Entry<'v>, CorruptRecord> {
        let corrupt = || CorruptRecord {
            what: "dedupe entry",
        };
        let (end, rest) = v.split_at_checked(8).ok_or_else(corrupt)?;
        let (&len, rest) = rest.split_first().ok_or_else(corrupt)?;
        let (tenant, id) = rest
            .split_at_checked(usize::from(len))
            .ok_or_else(corrupt)?;
        let text = |b| std::str::from_utf8(b).map_err(|_| corrupt());
        Ok(Entry {
            ends_at_ms: u64::from_be_bytes(end.try_into().expect("8 bytes")),
            tenant: text(tenant)?,
            hook_id: text(id)?,
        })
    }
}

/// The problems `goad verify` names: an entry that does not decode or has
/// no end key of its end, an end key that names no entry of that end.
pub(super) fn check(store: &ShardStore, txn: &RoTxn) -> Result<Vec<String>, StoreError> {
    let mut problems = Vec::new();
    for item in store.dedupe.iter(txn)? {
        let (hash, v) = item?;
        let hex = hex::encode(hash);
        match (<&[u8; HASH_BYTES]>::try_from(hash), Entry::decode(v)) {
            (Ok(hash), Ok(entry)) => {
                if store
                    .dedupe_ends
                    .get(txn, &end_key(entry.ends_at_ms, hash))?
                    .is_none()
                {
                    problems.push(format!("dedupe entry {hex} has no end key"));
                }
            }
            _ => problems.push(format!("dedupe entry {hex} does not decode")),
        }
    }
    for item in store.dedupe_ends.iter(txn)? {
        let (k, _) = item?;
        let named = match k.split_at_checked(8) {
            Some((end, hash)) => store
                .dedupe
                .get(txn, hash)?
                .and_then(|v| Entry::decode(v).ok())
                .is_some_and(|entry| entry.ends_at_ms.to_be_bytes() == end),
            None => false,
        };
        if !named {
            problems.push(format!("dedupe end key {} names no entry", hex::encode(k)));
        }
    }
    Ok(problems)
}

/// The id of the hook that took `hook`'s dedupe key for its source in a
/// window still open at `now_ms`, if any.
pub fn first_id(
    store: &ShardStore,
    txn: &RoTxn,
    hook: &Hook,
    now_ms: u64,
) -> Result<Option<String>, StoreError> {
    let Some(key) = &hook.dedupe_key else {
        return Ok(None);
    };
    let Some(v) = store.dedupe.get(txn, &hash(&hook.source_id, key))? else {
        return Ok(None);
    };
    // An entry that does not decode matches nothing; the commit replaces it.
    let open = Entry::decode(v)
        .ok()
        .filter(|entry| now_ms < entry.ends_at_ms);
    Ok(open.map(|entry| entry.hook_id.to_string()))
}

/// Records that `hook` took its dedupe key for its source until
/// `ends_at_ms`, after deleting up to two entries whose window ended.
pub fn remember(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    hook: &Hook,
    now_ms: u64,
    ends_at_ms: u64,
) -> Result<(), StoreError> {
    let Some(key) = &hook.dedupe_key else {
        return Ok(());
    };
    forget_ended(store, wtxn, now_ms)?;
    let entry = Entry {
        ends_at_ms,
        tenant: &hook.tenant,
        hook_id: &hook.id,
    };
    put(
        store,
        wtxn,
        &hash(&hook.source_id, key),
        ends_at_ms,
        &entry.encode(),
    )
}

/// Writes an entry (`value`, its window ending at `ends_at_ms`) and its end
/// key, replacing the entry of that hash (whose window ended, or which
/// does not decode) and its end key. A reshard writes each entry
/// [`entries`] read into its tenant's new shard with it.
pub(super) fn put(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    hash: &[u8; HASH_BYTES],
    ends_at_ms: u64,
    value: &[u8],
) -> Result<(), StoreError> {
    let old = store
        .dedupe
        .get(wtxn, hash)?
        .map(|v| Entry::decode(v).map(|e| e.ends_at_ms));
    match old {
        Some(Ok(old_end_ms)) => {
            store.dedupe_ends.delete(wtxn, &end_key(old_end_ms, hash))?;
        }
        Some(Err(_)) => crate::log::error(
            "a dedupe entry did not decode; replaced it (its end key goes when its time comes)",
            &[("hash", &hex::encode(hash))],
        ),
        None => {}
    }
    store.dedupe.put(wtxn, hash, value)?;
    store
        .dedupe_ends
        .put(wtxn, &end_key(ends_at_ms, hash), &[])?;
    Ok(())
}

/// An entry as [`entries`] reads it.
pub(super) struct Stored {
    pub hash: [u8; HASH_BYTES],
    pub ends_at_ms: u64,
    pub tenant: String,
    /// The entry's bytes, as [`put`] writes them.
    pub value: Vec<u8>,
}

/// Every entry of `store`, for a reshard to write in the tenant's new
/// shard with [`put`].
pub(super) fn entries(store: &ShardStore, txn: &RoTxn) -> Result<Vec<Stored>, StoreError> {
    let mut out = Vec::new();
    for item in store.dedupe.iter(txn)? {
        let (hash, v) = item?;
        let hash = <[u8; HASH_BYTES]>::try_from(hash).map_err(|_| CorruptRecord {
            what: "dedupe entry",
        })?;
        let entry = Entry::decode(v)?;
        out.push(Stored {
            hash,
            ends_at_ms: entry.ends_at_ms,
            tenant: entry.tenant.to_string(),
            value: v.to_vec(),
        });
    }
    Ok(out)
}

/// Deletes up to `EXPIRED_PER_COMMIT` end keys whose time came by `now_ms`,
/// each with its entry if that ended too (a stray end key, left by an
/// entry that did not decode, leaves a newer entry of its hash alone).
fn forget_ended(store: &ShardStore, wtxn: &mut RwTxn, now_ms: u64) -> Result<(), StoreError> {
    let ended: Vec<Vec<u8>> = store
        .dedupe_ends
        .iter(wtxn)?
        .take(EXPIRED_PER_COMMIT)
        .map(|item| item.map(|(k, _)| k.to_vec()))
        .collect::<Result<_, _>>()?;
    for key in ended {
        let ends_at_ms = (key.len() == 8 + HASH_BYTES).then(|| super::keys::u64_at(&key, 0));
        if ends_at_ms.is_some_and(|end| end > now_ms) {
            break;
        }
        store.dedupe_ends.delete(wtxn, &key)?;
        let Some(hash) = key.get(8..) else {
            continue;
        };
        let ended = match store.dedupe.get(wtxn, hash)? {
            Some(v) => Entry::decode(v).map_or(true, |entry| entry.ends_at_ms <= now_ms),
            None => false,
        };
        if ended {
            store.dedupe.delete(wtxn, hash)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::record::sample_hook;
    use super::*;
    use std::sync::Arc;

    /// Hook `id` of `source` with dedupe key `key`.
    fn hook(source: &str, key: &str, id: &str) -> Hook {
        Hook {
            id: id.into(),
            source_id: Arc::from(source),
            dedupe_key: Some(key.into()),
            ..sample_hook(0)
        }
    }

    fn counts(store: &ShardStore, txn: &RoTxn) -> (u64, u64) {
        (
            store.dedupe.len(txn).unwrap(),
            store.dedupe_ends.len(txn).unwrap(),
        )
    }

    #[test]
    fn a_key_matches_within_its_window_and_ended_entries_are_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let store = ShardStore::open(dir.path(), 0, 1).unwrap();
        let mut wtxn = store.env.write_txn().unwrap();
        remember(&store, &mut wtxn, &hook("gh", "d-1", "h1"), 100, 1_100).unwrap();
        remember(&store, &mut wtxn, &hook("gh", "d-2", "h2"), 200, 1_200).unwrap();
        let first = |txn: &RoTxn, source, key, now_ms| {
            first_id(&store, txn, &hook(source, key, "later"), now_ms).unwrap()
        };
        assert_eq!(first(&wtxn, "gh", "d-1", 1_099).as_deref(), Some("h1"));
        assert_eq!(first(&wtxn, "gh", "d-1", 1_100), None, "its window ended");
        assert_eq!(first(&wtxn, "other", "d-1", 500), None, "another source's");
        // A commit at 1,150 deletes d-1's ended entry, not d-2's.
        remember(&store, &mut wtxn, &hook("gh", "d-3", "h3"), 1_150, 1_300).unwrap();
        assert_eq!(counts(&store, &wtxn), (2, 2));
        assert_eq!(first(&wtxn, "gh", "d-2", 1_150).as_deref(), Some("h2"));
        // At 2,000 all three ended; a commit deletes two (d-2, d-3) and
        // d-4's own; d-1 is long gone.
        remember(&store, &mut wtxn, &hook("gh", "d-4", "h4"), 2_000, 3_000).unwrap();
        assert_eq!(counts(&store, &wtxn), (1, 1));
        // Three ended entries (d-4, a, b), the last retaken: two deleted by
        // the budget, the third replaced with its end key.
        for (key, id, end) in [("a", "ha", 3_010), ("b", "hb", 3_020)] {
            remember(&store, &mut wtxn, &hook("gh", key, id), 2_500, end).unwrap();
        }
        remember(&store, &mut wtxn, &hook("gh", "b", "hb2"), 3_500, 4_500).unwrap();
        assert_eq!(first(&wtxn, "gh", "b", 3_600).as_deref(), Some("hb2"));
        assert_eq!(counts(&store, &wtxn), (1, 1), "only b's new entry is left");
    }

    #[test]
    fn verify_names_an_entry_without_its_end_key_and_a_stray_end_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = ShardStore::open(dir.path(), 0, 1).unwrap();
        let mut wtxn = store.env.write_txn().unwrap();
        remember(&store, &mut wtxn, &hook("gh", "d-1", "h1"), 100, 1_100).unwrap();
        remember(&store, &mut wtxn, &hook("gh", "d-2", "h2"), 100, 1_200).unwrap();
        assert_eq!(check(&store, &wtxn).unwrap(), Vec::<String>::new());
        let (h1, h2) = (hash("gh", "d-1"), hash("gh", "d-2"));
        store
            .dedupe_ends
            .delete(&mut wtxn, &end_key(1_100, &h1))
            .unwrap();
        store
            .dedupe_ends
            .put(&mut wtxn, &end_key(1_300, &h2), &[])
            .unwrap();
        assert_eq!(
            check(&store, &wtxn).unwrap(),
            [
                format!("dedupe entry {} has no end key", hex::encode(h1)),
                format!(
                    "dedupe end key {} names no entry",
                    hex::encode(end_key(1_300, &h2))
                ),
            ]
        );
    }

    /// A stored entry that does not decode matches nothing, stalls no
    /// commit, and is replaced; the end key it leaves behind deletes no
    /// newer entry when its time comes.
    #[test]
    fn an_entry_that_does_not_decode_matches_nothing_and_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let store = ShardStore::open(dir.path(), 0, 1).unwrap();
        let mut wtxn = store.env.write_txn().unwrap();
        remember(&store, &mut wtxn, &hook("gh", "d-1", "h1"), 100, 1_100).unwrap();
        store
            .dedupe
            .put(&mut wtxn, &hash("gh", "d-1"), b"junk")
            .unwrap();
        let first = |txn: &RoTxn, now_ms| {
            first_id(&store, txn, &hook("gh", "d-1", "later"), now_ms).unwrap()
        };
        assert_eq!(first(&wtxn, 200), None);
        remember(&store, &mut wtxn, &hook("gh", "d-1", "h2"), 200, 5_000).unwrap();
        assert_eq!(first(&wtxn, 300).as_deref(), Some("h2"));
        // At 2,000 the stray end key (1,100) goes; h2's entry stays.
        remember(&store, &mut wtxn, &hook("gh", "d-9", "h3"), 2_000, 6_000).unwrap();
        assert_eq!(first(&wtxn, 2_100).as_deref(), Some("h2"));
        assert_eq!(counts(&store, &wtxn), (2, 2));
        assert_eq!(check(&store, &wtxn).unwrap(), Vec::<String>::new());
    }
}
