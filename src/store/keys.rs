//! Key codecs. Every integer is big-endian, so byte order is numeric order
//! and a time-ordered key appends at the right edge of its B-tree.
//!
//! | db       | key                                                      | bytes |
//! |----------|----------------------------------------------------------|-------|
//! | records  | hook: seq u64                                            | 8     |
//! | records  | row: seq u64, sink_index u16                             | 10    |
//! | due      | tenant_no u32, due_at_ms u64, seq u64, sink_index u16    | 22    |
//! | inflight | seq u64, sink_index u16                                  | 10    |
//! | dead     | tenant_no u32, dead_at_ms u64, seq u64, sink_index u16   | 22    |
//! | tenants  | tenant id (UTF-8)                                        | 1–128 |
//! | lanes    | lane id: tenant_no u32, sink_index u16, lane hash u64    | 14    |
//! | members  | lane id, seq u64                                         | 22    |
//! | meta     | name (ASCII)                                             |       |
//!
//! A lane's hash is the first 8 bytes of SHA-256 of `source id, 0, key`.

use crate::core::{LaneId, RowId, LANE_ID_BYTES};
use sha2::{Digest, Sha256};

pub fn hook_key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

/// Whether a `records` key is a hook's (the others are rows').
pub fn is_hook_key(k: &[u8]) -> bool {
    k.len() == 8
}

/// The length of a row's key (in `records`, and of its in-flight marker).
pub const ROW_KEY_BYTES: usize = 10;

pub fn row_key(row: RowId) -> [u8; ROW_KEY_BYTES] {
    let mut k = [0u8; ROW_KEY_BYTES];
    k[..8].copy_from_slice(&row.seq.to_be_bytes());
    k[8..].copy_from_slice(&row.sink_index.to_be_bytes());
    k
}

/// The row a key names; `None` for a key of the wrong length (corrupt).
pub fn parse_row_key(k: &[u8]) -> Option<RowId> {
    (k.len() == ROW_KEY_BYTES).then(|| RowId {
        seq: u64_at(k, 0),
        sink_index: u16::from_be_bytes([k[8], k[9]]),
    })
}

/// The length of a due or dead key.
pub const TIMED_KEY_BYTES: usize = 22;

/// A due or dead key: (tenant_no, at_ms, seq, sink_index).
pub fn timed_key(tenant_no: u32, at_ms: u64, row: RowId) -> [u8; TIMED_KEY_BYTES] {
    let mut k = [0u8; TIMED_KEY_BYTES];
    k[..4].copy_from_slice(&tenant_no.to_be_bytes());
    k[4..12].copy_from_slice(&at_ms.to_be_bytes());
    k[12..].copy_from_slice(&row_key(row));
    k
}

/// The parts of a due or dead key; `None` for a key of the wrong length.
pub fn parse_timed_key(k: &[u8]) -> Option<(u32, u64, RowId)> {
    if k.len() != TIMED_KEY_BYTES {
        return None;
    }
    Some((
        u32::from_be_bytes([k[0], k[1], k[2], k[3]]),
        u64_at(k, 4),
        parse_row_key(&k[12..])?,
    ))
}

/// An in-flight marker's value: the tenant number and the size.
pub fn inflight_value(tenant_no: u32, size_bytes: u64) -> [u8; 12] {
    let mut v = [0u8; 12];
    v[..4].copy_from_slice(&tenant_no.to_be_bytes());
    v[4..].copy_from_slice(&size_bytes.to_be_bytes());
    v
}

/// (tenant_no, size) of an in-flight marker; `None` if it is not 12 bytes.
pub fn parse_inflight_value(v: &[u8]) -> Option<(u32, u64)> {
    (v.len() == 12).then(|| (u32::from_be_bytes([v[0], v[1], v[2], v[3]]), u64_at(v, 4)))
}

/// The lane of the rows of sink `sink_index` of `source_id` whose ordering
/// key is `key`, for a tenant numbered `tenant_no`.
pub fn lane_id(tenant_no: u32, sink_index: u16, source_id: &str, key: &str) -> LaneId {
    let hash = Sha256::new()
        .chain_update(source_id.as_bytes())
        .chain_update([0])
        .chain_update(key.as_bytes())
        .finalize();
    let mut id = [0u8; LANE_ID_BYTES];
    id[..4].copy_from_slice(&tenant_no.to_be_bytes());
    id[4..6].copy_from_slice(&sink_index.to_be_bytes());
    id[6..].copy_from_slice(&hash[..8]);
    LaneId(id)
}

/// The tenant number and sink index a lane's rows have.
pub fn lane_parts(lane: LaneId) -> (u32, u16) {
    let b = lane.0;
    (
        u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        u16::from_be_bytes([b[4], b[5]]),
    )
}

/// The length of a member key.
pub const MEMBER_KEY_BYTES: usize = LANE_ID_BYTES + 8;

/// A lane member's key: the lane, then the member's seq (commit order).
pub fn member_key(lane: LaneId, seq: u64) -> [u8; MEMBER_KEY_BYTES] {
    let mut k = [0u8; MEMBER_KEY_BYTES];
    k[..LANE_ID_BYTES].copy_from_slice(&lane.0);
    k[LANE_ID_BYTES..].copy_from_slice(&seq.to_be_bytes());
    k
}

/// The lane and row a member key names; `None` for a key of the wrong length.
pub fn parse_member_key(k: &[u8]) -> Option<(LaneId, RowId)> {
    if k.len() != MEMBER_KEY_BYTES {
        return None;
    }
    let lane = LaneId(k[..LANE_ID_BYTES].try_into().expect("lane id bytes"));
    let row = RowId {
        seq: u64_at(k, LANE_ID_BYTES),
        sink_index: lane_parts(lane).1,
    };
    Some((lane, row))
}

pub fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_sort_by_tenant_then_time() {
        let row = RowId {
            seq: 7,
            sink_index: 3,
        };
        assert_eq!(parse_row_key(&row_key(row)), Some(row));
        assert_eq!(parse_timed_key(&timed_key(2, 99, row)), Some((2, 99, row)));
        assert_eq!(parse_row_key(&row_key(row)[1..]), None);
        assert_eq!(parse_timed_key(&timed_key(2, 99, row)[..21]), None);
        assert!(timed_key(1, u64::MAX, row) < timed_key(2, 0, row));
        assert!(
            timed_key(
                1,
                5,
                RowId {
                    seq: 9,
                    sink_index: 0
                }
            ) < timed_key(
                1,
                6,
                RowId {
                    seq: 1,
                    sink_index: 0
                }
            )
        );
        assert_eq!(
            parse_inflight_value(&inflight_value(4, 1 << 40)).unwrap(),
            (4, 1 << 40)
        );
    }

    #[test]
    fn lane_ids_name_tenant_sink_and_key_and_members_sort_in_commit_order() {
        let lane = lane_id(3, 1, "stripe", "cus_1");
        assert_eq!(lane_parts(lane), (3, 1));
        assert_eq!(lane, lane_id(3, 1, "stripe", "cus_1"), "stable");
        for other in [
            lane_id(4, 1, "stripe", "cus_1"),
            lane_id(3, 2, "stripe", "cus_1"),
            lane_id(3, 1, "github", "cus_1"),
            lane_id(3, 1, "stripe", "cus_2"),
            // The separator keeps (source, key) pairs apart.
            lane_id(3, 1, "stripecus_1", ""),
        ] {
            assert_ne!(lane, other);
        }
        let row = RowId {
            seq: 9,
            sink_index: 1,
        };
        assert_eq!(parse_member_key(&member_key(lane, 9)), Some((lane, row)));
        assert!(member_key(lane, 9) < member_key(lane, 10));
        assert_eq!(parse_member_key(&member_key(lane, 9)[1..]), None);
    }
}
