//! Record codecs: the hook and the delivery row, as stored.
//!
//! Both start with a format byte. Strings and byte strings are a u32
//! big-endian length and the bytes; optional strings a presence byte first.
//!
//! Hook (key: seq): `2, id, tenant, source_id, place count u32, place
//! u64*, received_at_ms u64, content_type?, dedupe_key?, header count u32,
//! (name, value)*, body`. The places are its source's sinks' (see
//! `SinkConfig::place`) when it was committed, in the config's order: what
//! binds its rows, stored by sink index, to the sinks a later config
//! lists (`Catalog::bind`). A hook written before store format 6 starts
//! with 1 and has no places.
//!
//! Row (key: seq, sink index): `1, state u8 (0 pending, 1 dead), sink_type,
//! attempts u32, first_attempt_at_ms u64 (0 = never), at_ms u64 (due time
//! while pending, dead time once dead), size u64, error?, replay?`, and for
//! a row of an ordered sink `1, lane id (14 bytes)`. A row written before
//! replays existed ends after `error`.

use crate::core::{LaneId, TenantId, LANE_ID_BYTES};
use std::fmt;
use std::sync::Arc;

const FORMAT: u8 = 1;

/// The format byte of a hook record with its sinks' places.
const PLACED_HOOK_FORMAT: u8 = 2;

/// The places of a hook's source's sinks when it was committed, by sink
/// index.
pub type SinkPlaces = Arc<[u64]>;

/// A stored hook: the body verbatim and what came with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// UUIDv7; every delivery of the hook carries it.
    pub id: String,
    /// The shard's commit order (the key, not stored in the value).
    pub seq: u64,
    /// The tenant of its source.
    pub tenant: TenantId,
    pub source_id: Arc<str>,
    /// When it was committed (wall-clock ms since the Unix epoch).
    pub received_at_ms: u64,
    pub content_type: Option<String>,
    /// The provider's event key, if any.
    pub dedupe_key: Option<String>,
    /// Provider headers in arrival order.
    pub headers: Vec<(String, String)>,
    /// Verbatim, as committed.
    pub body: Vec<u8>,
}

impl Hook {
    /// What the hook weighs in the in-flight byte windows: its body.
    pub fn size_bytes(&self) -> u64 {
        self.body.len() as u64
    }

    /// Its ids, as [`decode_hook_head`] reads them.
    pub fn head(&self) -> HookHead {
        HookHead {
            id: self.id.clone(),
            tenant: self.tenant.clone(),
            source_id: self.source_id.clone(),
        }
    }

    /// The key consumers dedupe on: `tenant:source:dedupe_key`, or the id.
    pub fn idempotency_key(&self) -> String {
        match &self.dedupe_key {
            Some(k) => Hook::idempotency_key_of(&self.tenant, &self.source_id, k),
            None => self.id.clone(),
        }
    }

    /// The idempotency key of a hook of `tenant` and `source_id` whose
    /// dedupe key is `dedupe_key`.
    pub fn idempotency_key_of(tenant: &str, source_id: &str, dedupe_key: &str) -> String {
        format!("{tenant}:{source_id}:{dedupe_key}")
    }
}

/// A hook `h<seq>` of tenant `t`, source `s`, body `payload`, for tests.
#[cfg(test)]
pub(crate) fn sample_hook(seq: u64) -> Hook {
    Hook {
        id: format!("h{seq}"),
        seq,
        tenant: Arc::from("t"),
        source_id: Arc::from("s"),
        received_at_ms: 5,
        content_type: None,
        dedupe_key: None,
        headers: vec![],
        body: b"payload".to_vec(),
    }
}

/// Where a row is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowStatus {
    /// Due now or later, or claimed.
    Pending,
    /// Dead-lettered: kept with its hook until replayed.
    Dead,
}

/// A stored delivery row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowRecord {
    pub status: RowStatus,
    /// The type of the sink the row was written for (`http` or a host sink's name).
    pub sink_type: Arc<str>,
    /// Attempts spent so far.
    pub attempts: u32,
    /// When the first attempt started (0 before it); the retry horizon
    /// counts from it.
    pub first_attempt_at_ms: u64,
    /// Due time while pending; dead time once dead.
    pub at_ms: u64,
    /// Its hook's body size.
    pub size_bytes: u64,
    /// The last error (pending) or the dead-letter reason (dead).
    pub error: Option<String>,
    /// The replay that revived the row, if any.
    pub replay: Option<Arc<str>>,
    /// The ordering lane of a row of an ordered sink.
    pub lane: Option<LaneId>,
}

/// A record that does not decode: a broken invariant of the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptRecord {
    /// Which kind of record.
    pub what: &'static str,
}

impl fmt::Display for CorruptRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "undecodable {} record", self.what)
    }
}

impl std::error::Error for CorruptRecord {}

struct Writer(Vec<u8>);

impl Writer {
    fn bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(&(b.len() as u32).to_be_bytes());
        self.0.extend_from_slice(b);
    }
    fn opt(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.0.push(1);
                self.bytes(s.as_bytes());
            }
            None => self.0.push(0),
        }
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
}

struct Reader<'a> {
    b: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CorruptRecord> {
        if self.b.len() < n {
            return Err(CorruptRecord { what: self.what });
        }
        let (head, tail) = self.b.split_at(n);
        self.b = tail;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, CorruptRecord> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, CorruptRecord> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, CorruptRecord> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn bytes(&mut self) -> Result<&'a [u8], CorruptRecord> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn string(&mut self) -> Result<String, CorruptRecord> {
        let what = self.what;
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| CorruptRecord { what })
    }
    fn opt(&mut self) -> Result<Option<String>, CorruptRecord> {
        match self.u8()? {
            0 => Ok(None),
            1 => self.string().map(Some),
            _ => Err(CorruptRecord { what: self.what }),
        }
    }
    /// A hook record's format byte, ids and places (format 2).
    fn hook_head(&mut self) -> Result<(HookHead, Option<SinkPlaces>), CorruptRecord> {
        let placed = match self.u8()? {
            FORMAT => false,
            PLACED_HOOK_FORMAT => true,
            _ => return Err(CorruptRecord { what: self.what }),
        };
        let head = HookHead {
            id: self.string()?,
            tenant: Arc::from(self.string()?),
            source_id: Arc::from(self.string()?),
        };
        if !placed {
            return Ok((head, None));
        }
        let count = self.u32()? as usize;
        if count > self.b.len() / 8 {
            return Err(CorruptRecord { what: self.what });
        }
        let places = (0..count).map(|_| self.u64()).collect::<Result<_, _>>()?;
        Ok((head, Some(places)))
    }
    fn end(&self) -> Result<(), CorruptRecord> {
        if self.b.is_empty() {
            Ok(())
        } else {
            Err(CorruptRecord { what: self.what })
        }
    }
}

/// A hook record without places (as before store format 6).
pub fn encode_hook(h: &Hook) -> Vec<u8> {
    encode_placed_hook(h, None)
}

/// A hook record with its sinks' places, or without them (`None`).
pub fn encode_placed_hook(h: &Hook, places: Option<&[u64]>) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(64 + h.body.len()));
    w.0.push(if places.is_some() {
        PLACED_HOOK_FORMAT
    } else {
        FORMAT
    });
    w.bytes(h.id.as_bytes());
    w.bytes(h.tenant.as_bytes());
    w.bytes(h.source_id.as_bytes());
    if let Some(places) = places {
        w.u32(places.len() as u32);
        for &place in places {
            w.u64(place);
        }
    }
    w.u64(h.received_at_ms);
    w.opt(h.content_type.as_deref());
    w.opt(h.dedupe_key.as_deref());
    w.u32(h.headers.len() as u32);
    for (name, value) in &h.headers {
        w.bytes(name.as_bytes());
        w.bytes(value.as_bytes());
    }
    w.bytes(&h.body);
    w.0
}

pub fn decode_hook(seq: u64, b: &[u8]) -> Result<Hook, CorruptRecord> {
    decode_placed_hook(seq, b).map(|(hook, _)| hook)
}

/// A hook record and its sinks' places (`None` for a record without).
pub fn decode_placed_hook(seq: u64, b: &[u8]) -> Result<(Hook, Option<SinkPlaces>), CorruptRecord> {
    let mut r = Reader { b, what: "hook" };
    let (head, places) = r.hook_head()?;
    let received_at_ms = r.u64()?;
    let content_type = r.opt()?;
    let dedupe_key = r.opt()?;
    let count = r.u32()? as usize;
    let mut headers = Vec::with_capacity(count.min(256));
    for _ in 0..count {
        headers.push((r.string()?, r.string()?));
    }
    let body = r.bytes()?.to_vec();
    r.end()?;
    let hook = Hook {
        id: head.id,
        seq,
        tenant: head.tenant,
        source_id: head.source_id,
        received_at_ms,
        content_type,
        dedupe_key,
        headers,
        body,
    };
    Ok((hook, places))
}

/// A hook's ids without its headers and body (dead-letter listings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookHead {
    pub id: String,
    pub tenant: TenantId,
    pub source_id: Arc<str>,
}

pub fn decode_hook_head(b: &[u8]) -> Result<HookHead, CorruptRecord> {
    decode_placed_hook_head(b).map(|(head, _)| head)
}

/// A hook record's ids and its sinks' places.
pub fn decode_placed_hook_head(b: &[u8]) -> Result<(HookHead, Option<SinkPlaces>), CorruptRecord> {
    Reader { b, what: "hook" }.hook_head()
}

pub fn encode_row(row: &RowRecord) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(48));
    w.0.push(FORMAT);
    w.0.push(match row.status {
        RowStatus::Pending => 0,
        RowStatus::Dead => 1,
    });
    w.bytes(row.sink_type.as_bytes());
    w.u32(row.attempts);
    w.u64(row.first_attempt_at_ms);
    w.u64(row.at_ms);
    w.u64(row.size_bytes);
    w.opt(row.error.as_deref());
    w.opt(row.replay.as_deref());
    // Written only for a laned row, so other rows keep their old bytes.
    if let Some(lane) = row.lane {
        w.0.push(1);
        w.0.extend_from_slice(&lane.0);
    }
    w.0
}

pub fn decode_row(b: &[u8]) -> Result<RowRecord, CorruptRecord> {
    let mut r = Reader { b, what: "row" };
    if r.u8()? != FORMAT {
        return Err(CorruptRecord { what: "row" });
    }
    let status = match r.u8()? {
        0 => RowStatus::Pending,
        1 => RowStatus::Dead,
        _ => return Err(CorruptRecord { what: "row" }),
    };
    let row = RowRecord {
        status,
        sink_type: Arc::from(r.string()?),
        attempts: r.u32()?,
        first_attempt_at_ms: r.u64()?,
        at_ms: r.u64()?,
        size_bytes: r.u64()?,
        error: r.opt()?,
        replay: if r.b.is_empty() {
            None
        } else {
            r.opt()?.map(Arc::from)
        },
        lane: None,
    };
    let lane = if r.b.is_empty() {
        None
    } else if r.u8()? == 1 {
        let id = r.take(LANE_ID_BYTES)?.try_into().expect("lane id bytes");
        Some(LaneId(id))
    } else {
        return Err(CorruptRecord { what: "row" });
    };
    r.end()?;
    Ok(RowRecord { lane, ..row })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_and_row_round_trip_and_truncation_is_detected() {
        let hook = Hook {
            id: "0190-x".into(),
            seq: 9,
            tenant: "acme".into(),
            source_id: "stripe".into(),
            received_at_ms: 123,
            content_type: Some("application/json".into()),
            dedupe_key: None,
            headers: vec![("x-a".into(), "1".into())],
            body: b"{\"a\":1}".to_vec(),
        };
        let bytes = encode_hook(&hook);
        assert_eq!(
            decode_hook_head(&bytes),
            Ok(HookHead {
                id: hook.id.clone(),
                tenant: hook.tenant.clone(),
                source_id: hook.source_id.clone(),
            })
        );
        assert_eq!(decode_hook(9, &bytes), Ok(hook.clone()));
        assert!(decode_hook(9, &bytes[..bytes.len() - 1]).is_err());
        // With its sinks' places (store format 6): read back with them,
        // and the old format without.
        let places: SinkPlaces = Arc::from([7, u64::MAX]);
        let placed = encode_placed_hook(&hook, Some(&places));
        assert_eq!(placed.len(), bytes.len() + 4 + 16);
        assert_eq!(
            decode_placed_hook(9, &placed),
            Ok((hook.clone(), Some(places.clone())))
        );
        assert_eq!(decode_placed_hook(9, &bytes), Ok((hook.clone(), None)));
        assert_eq!(
            decode_placed_hook_head(&placed),
            Ok((hook.head(), Some(places)))
        );
        assert!(decode_hook(9, &placed[..placed.len() - 1]).is_err());
        // A count of places the record cannot hold.
        let mut lying = placed.clone();
        let count_at = 1 + 3 * 4 + hook.id.len() + hook.tenant.len() + hook.source_id.len();
        lying[count_at..count_at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode_placed_hook_head(&lying).is_err());
        let row = RowRecord {
            status: RowStatus::Dead,
            sink_type: "http".into(),
            attempts: 3,
            first_attempt_at_ms: 5,
            at_ms: 6,
            size_bytes: 7,
            error: Some("boom".into()),
            replay: Some("r1".into()),
            lane: None,
        };
        assert_eq!(decode_row(&encode_row(&row)), Ok(row.clone()));
        let laned = RowRecord {
            lane: Some(LaneId([7; LANE_ID_BYTES])),
            ..row
        };
        let bytes = encode_row(&laned);
        assert_eq!(decode_row(&bytes), Ok(laned));
        assert!(decode_row(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode_row(&[1, 7]).is_err());
    }
}
