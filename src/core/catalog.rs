//! The sources as the core sees them, and binding a row to a sink.
//!
//! A row is stored with its sink's index and type, and its hook with the
//! places of its source's sinks (where each delivers) when it was
//! committed. Its sink is looked up in the source as it is now: the sink
//! at its place, wherever a reload or restart moved it; else, for a sink
//! whose destination was changed where it stood, the sink at its index;
//! else the row cannot be bound (see [`Catalog::bind`]).

use crate::config::{Config, HeaderFilter, SinkConfig, SinkRetryConfig};
use crate::core::types::{SinkKey, SinkSpot, TenantId};
use crate::fnv::{spread, Fnv1a};
use crate::store::record::SinkPlaces;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::num::NonZeroU16;
use std::sync::{Arc, OnceLock, Weak};

/// A source's tenant and its sinks, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceEntry {
    pub tenant: TenantId,
    pub sinks: Vec<SinkEntry>,
    /// Each sink's place (`SinkConfig::place`), by index: a hook's record
    /// keeps them, and [`Catalog::bind`] reads its rows' sinks by them.
    pub places: SinkPlaces,
    /// Its `dedupe_window_ms` (0: no dedupe).
    pub dedupe_window_ms: u64,
}

/// What the core needs of one sink entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkEntry {
    pub sink_type: Arc<str>,
    /// How an ordered sink picks a hook's lane; `None` for an unordered sink.
    pub lane: Option<LaneBy>,
    /// The most attempts one call of a batching sink carries; `None` for a
    /// sink that does not batch.
    pub batch_max_entries: Option<NonZeroU16>,
    /// The least time between two of its key's calls, from its
    /// `max_calls_per_s` (µs, rounded up); `None` for a sink without a rate.
    pub call_interval_us: Option<u64>,
    /// Its own retry keys, if it has any.
    pub retry: Option<SinkRetryConfig>,
    /// The hooks it takes, if not all.
    pub filter: Option<HeaderFilter>,
    /// Its rows are held: none is attempted.
    pub paused: bool,
}

/// The spot of the sink at `index` of a source whose sinks have `places`.
fn spot_in(places: &[u64], index: usize) -> SinkSpot {
    let place = places[index];
    let rank = places[..index].iter().filter(|p| **p == place).count();
    SinkSpot {
        place,
        rank: rank as u16,
    }
}

impl SourceEntry {
    /// The index of its sink at the place `places` has at `index` (the
    /// first such for the first of equal places there, and so on).
    fn index_of(&self, places: &[u64], index: usize) -> Option<usize> {
        self.index_at(spot_in(places, index))
    }

    /// The index of its sink at `spot`, if one stands there.
    fn index_at(&self, spot: SinkSpot) -> Option<usize> {
        let mut at_place = (self.places.iter().enumerate()).filter(|(_, p)| **p == spot.place);
        at_place.nth(usize::from(spot.rank)).map(|(i, _)| i)
    }

    /// The sinks with a rate, with their indexes.
    fn rated_sinks(&self) -> impl Iterator<Item = (usize, &SinkEntry)> {
        (self.sinks.iter().enumerate()).filter(|(_, sink)| sink.call_interval_us.is_some())
    }

    /// The key of its sink at `index`, as the source `source_id`.
    fn key(&self, source_id: &Arc<str>, index: usize, sink: &SinkEntry) -> SinkKey {
        SinkKey {
            tenant: self.tenant.clone(),
            source_id: source_id.clone(),
            sink_index: index as u16,
            sink_type: sink.sink_type.clone(),
        }
    }
}

impl SinkEntry {
    /// What spaces its key's turns: its call interval and batch size.
    fn pace(&self) -> (Option<u64>, Option<NonZeroU16>) {
        (self.call_interval_us, self.batch_max_entries)
    }

    /// Whether its key's turns are spaced as `other`'s: a sink of the same
    /// type and pace.
    fn paces_as(&self, other: &SinkEntry) -> bool {
        self.sink_type == other.sink_type && self.pace() == other.pace()
    }
}

/// How an ordered sink picks the lane of a hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaneBy {
    /// One lane for every hook of the sink.
    Sink,
    /// One lane per value of this header (lowercase name); hooks without it
    /// share one lane.
    Header(String),
}

impl LaneBy {
    /// Parses a sink's `ordering_key` option (`header:<name>`); `None` when
    /// it is not of that form.
    pub fn parse(ordering_key: Option<&str>) -> Option<LaneBy> {
        match ordering_key {
            None => Some(LaneBy::Sink),
            Some(key) => {
                let name = key.strip_prefix("header:")?;
                let valid = !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
                valid.then(|| LaneBy::Header(name.to_ascii_lowercase()))
            }
        }
    }

    /// The lane key of a hook with `headers`.
    pub fn key(&self, headers: &[(String, String)]) -> String {
        match self {
            LaneBy::Sink => String::new(),
            LaneBy::Header(name) => headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
                .unwrap_or_default(),
        }
    }
}

/// Where a row goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// The sink at this index of the current source.
    Bound {
        sink_index: u16,
    },
    SourceGone,
    SinkGone,
}

impl Binding {
    /// The index of the sink bound to; `None` when its source or sink is
    /// gone.
    pub fn sink_index(self) -> Option<u16> {
        match self {
            Binding::Bound { sink_index } => Some(sink_index),
            Binding::SourceGone | Binding::SinkGone => None,
        }
    }
}

/// Every source of the config, by id.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    sources: HashMap<Arc<str>, SourceEntry>,
    /// Its `paces_fingerprint`, once computed.
    paces_fingerprint: OnceLock<u64>,
    /// What changed from the catalog before it, once noted (see
    /// `note_changes_from`).
    changes: OnceLock<Changes>,
}

/// What changed from a catalog, noted once for every shard.
#[derive(Debug, Clone)]
struct Changes {
    /// That catalog: a weak pointer keeps its address from being reused.
    from: Weak<Catalog>,
    /// The keys whose pace changed (`paces_changed_in`).
    paces: HashSet<SinkKey>,
    /// The keys that catalog owned whose rows may bind to another key in
    /// this one: it does not own them (see `owns_key`: of sinks gone, or
    /// of sources moved to another tenant), or their source's sinks'
    /// places changed (see `places_changed_from`).
    keys_to_rebind: HashSet<SinkKey>,
}

impl Catalog {
    pub fn from_config(config: &Config) -> Catalog {
        let sources = config
            .sources
            .iter()
            .map(|s| {
                let sinks = s
                    .sinks
                    .iter()
                    .map(|k| SinkEntry {
                        sink_type: Arc::from(k.kind.as_str()),
                        lane: k.ordered.then(|| {
                            LaneBy::parse(k.ordering_key.as_deref())
                                .expect("a validated ordering_key")
                        }),
                        batch_max_entries: None,
                        call_interval_us: k
                            .max_calls_per_s
                            .map(|rate| 1_000_000u64.div_ceil(rate.into())),
                        retry: k.retry,
                        filter: k.filter.clone(),
                        paused: k.paused,
                    })
                    .collect();
                let entry = SourceEntry {
                    tenant: Arc::from(s.tenant.as_str()),
                    sinks,
                    places: s.sinks.iter().map(SinkConfig::place).collect(),
                    dedupe_window_ms: s.dedupe_window_ms.unwrap_or(0),
                };
                (Arc::from(s.id.as_str()), entry)
            })
            .collect();
        Catalog {
            sources,
            paces_fingerprint: OnceLock::new(),
            changes: OnceLock::new(),
        }
    }

    /// The catalog with each sink's batch size as `batch_max_entries`
    /// (source id, sink index) gives it (the sinks themselves say, see
    /// `Sink::batch_max_entries`).
    pub fn with_batches(
        mut self,
        batch_max_entries: impl Fn(&str, u16) -> Option<NonZeroU16>,
    ) -> Catalog {
        for (source_id, entry) in &mut self.sources {
            for (index, sink) in entry.sinks.iter_mut().enumerate() {
                sink.batch_max_entries = batch_max_entries(source_id, index as u16);
            }
        }
        // A batch size spaces a rated sink's turns.
        self.paces_fingerprint.take();
        self.changes.take();
        self
    }

    /// The sink at `sink_index` of `source_id`, if there is one.
    pub fn sink(&self, source_id: &str, sink_index: u16) -> Option<&SinkEntry> {
        self.sources
            .get(source_id)?
            .sinks
            .get(usize::from(sink_index))
    }

    /// Whether `key` is of a configured sink: its source has a sink of its
    /// type at its index.
    pub fn has_key(&self, key: &SinkKey) -> bool {
        (self.sink(&key.source_id, key.sink_index)).is_some_and(|s| s.sink_type == key.sink_type)
    }

    /// The spot of `key`'s sink, if its source has a sink at its index.
    pub fn spot_of(&self, key: &SinkKey) -> Option<SinkSpot> {
        let entry = self.sources.get(&key.source_id)?;
        let index = usize::from(key.sink_index);
        (index < entry.places.len()).then(|| spot_in(&entry.places, index))
    }

    /// `key` at the index of its source's sink at `spot`, if one stands
    /// there.
    pub fn key_at(&self, key: &SinkKey, spot: SinkSpot) -> Option<SinkKey> {
        let index = self.sources.get(&key.source_id)?.index_at(spot)?;
        Some(SinkKey {
            sink_index: index as u16,
            ..key.clone()
        })
    }

    /// `key` of a sink in `previous` at the index that sink has here (found
    /// by its spot); `None` when it is gone.
    pub fn key_moved_from(&self, previous: &Catalog, key: &SinkKey) -> Option<SinkKey> {
        self.key_at(key, previous.spot_of(key)?)
    }

    /// Whether `key` is one of the catalog's own: of a configured sink
    /// whose source is its tenant's. (Rows of a hook committed before its
    /// source moved to another tenant keep their hook's tenant: their key
    /// is of a configured sink, but not the catalog's own.)
    pub fn owns_key(&self, key: &SinkKey) -> bool {
        (self.sources.get(&key.source_id)).is_some_and(|entry| {
            entry.tenant == key.tenant
                && (entry.sinks.get(usize::from(key.sink_index)))
                    .is_some_and(|sink| sink.sink_type == key.sink_type)
        })
    }

    /// The batch size of the sink a key is bound to; `None` when it does
    /// not batch (or is gone).
    pub fn batch_max_entries(&self, source_id: &str, sink_index: u16) -> Option<NonZeroU16> {
        self.sink(source_id, sink_index)?.batch_max_entries
    }

    /// The least time between two calls of a key of this sink (µs);
    /// `None` when it has no rate (or is gone).
    pub fn call_interval_us(&self, source_id: &str, sink_index: u16) -> Option<u64> {
        self.sink(source_id, sink_index)?.call_interval_us
    }

    /// Whether the sink a key is bound to holds its rows.
    pub fn is_paused(&self, source_id: &str, sink_index: u16) -> bool {
        self.sink(source_id, sink_index).is_some_and(|s| s.paused)
    }

    /// The keys of the sinks whose pace `next` changes: a sink with a rate
    /// here or in `next` whose key is gone from the other, or there has
    /// another rate or batch size (which spaces its turns).
    pub fn paces_changed_in(&self, next: &Catalog) -> HashSet<SinkKey> {
        let mut changed = HashSet::new();
        for (from, to) in [(self, next), (next, self)] {
            for (source_id, entry) in &from.sources {
                let there = to.sources.get(source_id);
                for (index, sink) in entry.rated_sinks() {
                    let kept = (there.and_then(|other| other.sinks.get(index)))
                        .is_some_and(|other| other.paces_as(sink));
                    if !kept {
                        changed.insert(entry.key(source_id, index, sink));
                    }
                }
            }
        }
        changed
    }

    /// Notes what changed from `previous` once for every shard: the keys
    /// whose pace changed (if any did) and the keys it owned that this
    /// catalog does not. The engine does, on the thread that reloads, so a
    /// shard taking this catalog over `previous` does not compare every
    /// source's sinks again (~50 ms at 100,000 sources) nor look each of
    /// its keys up in it (at 100,000 keys, a reload's step took 68–108 ms
    /// of a shard's loop before this note, 16–18 ms with it).
    pub fn note_changes_from(&self, previous: &Arc<Catalog>) {
        let paces = match previous.paces_fingerprint() == self.paces_fingerprint() {
            true => HashSet::new(),
            false => previous.paces_changed_in(self),
        };
        let keys_to_rebind = (previous.keys())
            .filter(|key| !self.owns_key(key) || self.places_changed_from(previous, &key.source_id))
            .collect();
        let from = Arc::downgrade(previous);
        let _ = self.changes.set(Changes {
            from,
            paces,
            keys_to_rebind,
        });
    }

    /// What was noted changed from `previous`, if it was noted from that
    /// very catalog.
    fn changes_from(&self, previous: &Arc<Catalog>) -> Option<&Changes> {
        (self.changes.get())
            .filter(|noted| std::ptr::eq(noted.from.as_ptr(), Arc::as_ptr(previous)))
    }

    /// The keys whose pace changed from `previous`: those noted, when
    /// noted from that very catalog, else compared now.
    pub fn paces_changed_since(&self, previous: &Arc<Catalog>) -> Cow<'_, HashSet<SinkKey>> {
        match self.changes_from(previous) {
            Some(noted) => Cow::Borrowed(&noted.paces),
            None => Cow::Owned(previous.paces_changed_in(self)),
        }
    }

    /// The keys `previous` owned whose rows may bind to another key in
    /// this catalog (see `Changes::keys_to_rebind`), when noted from that
    /// very catalog.
    pub fn keys_to_rebind_since(&self, previous: &Arc<Catalog>) -> Option<&HashSet<SinkKey>> {
        self.changes_from(previous)
            .map(|noted| &noted.keys_to_rebind)
    }

    /// Whether `source_id`'s sinks' places differ from those it has in
    /// `previous` (a sink inserted, removed or moved, or where it delivers
    /// changed), or it is in only one of the two: its rows, bound by
    /// their places (see [`Catalog::bind`]), may bind to other sinks.
    pub fn places_changed_from(&self, previous: &Catalog, source_id: &str) -> bool {
        let now = self.sources.get(source_id).map(|s| &s.places[..]);
        now != previous.sources.get(source_id).map(|s| &s.places[..])
    }

    /// Every key it owns: one a sink.
    fn keys(&self) -> impl Iterator<Item = SinkKey> + '_ {
        (self.sources.iter()).flat_map(|(source_id, entry)| {
            (entry.sinks.iter().enumerate())
                .map(move |(index, sink)| entry.key(source_id, index, sink))
        })
    }

    /// A fingerprint of every rated sink's source, index, type and pace
    /// (what `paces_changed_in` compares), the same whatever order the
    /// sources are in: the store keeps the one its paced rows were paced
    /// at, and a reload whose catalog has the same one changes no pace
    /// (see `repace`). Computed once: the engine asks for it as it builds
    /// a catalog, so no shard spends a reload's time on it.
    pub fn paces_fingerprint(&self) -> u64 {
        *self.paces_fingerprint.get_or_init(|| {
            let mut sum = 0u64;
            for (source_id, entry) in &self.sources {
                for (index, sink) in entry.rated_sinks() {
                    let mut hasher = Fnv1a::default();
                    (&**source_id, index, &*sink.sink_type, sink.pace()).hash(&mut hasher);
                    sum = sum.wrapping_add(spread(hasher.finish()));
                }
            }
            sum
        })
    }

    /// Whether a reload to `next` may free rows held for a sink paused
    /// here: its source is gone, its sinks' places changed (a held row may
    /// bind to another sink now), or the sink is resumed.
    pub fn resumes_in(&self, next: &Catalog) -> bool {
        self.sources.iter().any(|(source_id, entry)| {
            let paused = entry.sinks.iter().map(|sink| sink.paused);
            entry.sinks.iter().any(|sink| sink.paused)
                && next.sources.get(source_id).is_none_or(|there| {
                    there.places != entry.places
                        || paused
                            .zip(&there.sinks)
                            .any(|(was, sink)| was && !sink.paused)
                })
        })
    }

    /// The retry keys of the sink a key is bound to, where it has its own.
    pub fn retry(&self, source_id: &str, sink_index: u16) -> Option<SinkRetryConfig> {
        self.sink(source_id, sink_index)?.retry
    }

    pub fn source(&self, source_id: &str) -> Option<&SourceEntry> {
        self.sources.get(source_id)
    }

    /// Binds a row stored with (`sink_index`, `sink_type`) of `source_id`,
    /// whose hook's record kept `places`, its sinks' places then (`None`:
    /// a hook written before store format 6). The row goes to the sink now
    /// at the place its index had then (the first such sink for the first
    /// of equal places, the second for the second): a sink a reload moved,
    /// or before which it inserted or removed sinks, keeps its rows. A
    /// row whose place no sink has now goes to the sink now at its index,
    /// if of its type and at a place no sink had then: that sink's
    /// destination was changed where it stood. Else its sink is gone.
    /// A hook without places binds by index and type, else to the one
    /// sink of its type.
    pub fn bind(
        &self,
        source_id: &str,
        sink_index: u16,
        sink_type: &str,
        places: Option<&[u64]>,
    ) -> Binding {
        let Some(source) = self.sources.get(source_id) else {
            return Binding::SourceGone;
        };
        let index = usize::from(sink_index);
        let Some(places) = places.filter(|places| index < places.len()) else {
            return Self::bind_by_type(source, sink_index, sink_type);
        };
        if let Some(i) = source.index_of(places, index) {
            return Binding::Bound {
                sink_index: i as u16,
            };
        }
        let edited_in_place = !source.places.contains(&places[index])
            && (source.sinks.get(index)).is_some_and(|sink| &*sink.sink_type == sink_type)
            && !places.contains(&source.places[index]);
        if edited_in_place {
            Binding::Bound { sink_index }
        } else {
            Binding::SinkGone
        }
    }

    /// How a row of a hook without places binds: by index and type, else
    /// to the one sink of its type.
    fn bind_by_type(source: &SourceEntry, sink_index: u16, sink_type: &str) -> Binding {
        if source
            .sinks
            .get(sink_index as usize)
            .is_some_and(|sink| &*sink.sink_type == sink_type)
        {
            return Binding::Bound { sink_index };
        }
        let mut same_type = source
            .sinks
            .iter()
            .enumerate()
            .filter(|(_, sink)| &*sink.sink_type == sink_type);
        match (same_type.next(), same_type.next()) {
            (Some((i, _)), None) => Binding::Bound {
                sink_index: i as u16,
            },
            _ => Binding::SinkGone,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SinkConfig;

    fn catalog(kinds: &[&str]) -> Catalog {
        let sinks = kinds.iter().map(|k| SinkConfig::of_kind(*k)).collect();
        Catalog::from_config(&Config::with_one_source(sinks))
    }

    #[test]
    fn a_row_of_a_hook_without_places_binds_by_index_then_by_the_unique_type_else_gone() {
        let c = catalog(&["http", "tag"]);
        assert_eq!(
            c.bind("s", 1, "tag", None),
            Binding::Bound { sink_index: 1 }
        );
        // Reordered: the row was stored at index 0 as "tag"; the one "tag" is at 1.
        assert_eq!(
            c.bind("s", 0, "tag", None),
            Binding::Bound { sink_index: 1 }
        );
        assert_eq!(c.bind("s", 0, "sqs", None), Binding::SinkGone);
        assert_eq!(c.bind("nope", 0, "http", None), Binding::SourceGone);
        let two = catalog(&["http", "http"]);
        assert_eq!(two.bind("s", 5, "http", None), Binding::SinkGone);
        assert_eq!(
            two.bind("s", 1, "http", None),
            Binding::Bound { sink_index: 1 }
        );
    }

    /// A catalog of one source whose HTTP sinks post to these URLs.
    fn posting_to(urls: &[&str]) -> Catalog {
        let sinks = (urls.iter())
            .map(|url| SinkConfig {
                url: Some(url.to_string()),
                ..SinkConfig::of_kind("http")
            })
            .collect();
        Catalog::from_config(&Config::with_one_source(sinks))
    }

    /// Where each row of a hook committed under `then` goes under `now`.
    fn bound(then: &Catalog, now: &Catalog) -> Vec<Binding> {
        let places = &then.source("s").unwrap().places;
        (0..places.len() as u16)
            .map(|i| now.bind("s", i, "http", Some(places)))
            .collect()
    }

    #[test]
    fn a_row_goes_to_the_sink_at_its_place_wherever_the_config_moved_it() {
        let bound_to = |i| Binding::Bound { sink_index: i };
        let gone = Binding::SinkGone;
        let ab = posting_to(&["https://a/", "https://b/"]);
        // Unchanged, and with a sink added at the end.
        assert_eq!(bound(&ab, &ab), [bound_to(0), bound_to(1)]);
        let abc = posting_to(&["https://a/", "https://b/", "https://c/"]);
        assert_eq!(bound(&ab, &abc), [bound_to(0), bound_to(1)]);
        // The first removed: its rows go to no other sink (by index and
        // type they went to b).
        assert_eq!(
            bound(&ab, &posting_to(&["https://b/"])),
            [gone, bound_to(0)]
        );
        // A sink inserted first, and the two swapped.
        let cab = posting_to(&["https://c/", "https://a/", "https://b/"]);
        assert_eq!(bound(&ab, &cab), [bound_to(1), bound_to(2)]);
        assert_eq!(
            bound(&ab, &posting_to(&["https://b/", "https://a/"])),
            [bound_to(1), bound_to(0)]
        );
        // a's URL mended where it stood: its rows go to the mended sink.
        let mended = posting_to(&["https://a.example/", "https://b/"]);
        assert_eq!(bound(&ab, &mended), [bound_to(0), bound_to(1)]);
        // a removed and another sink in its index: that sink is a new
        // place, so it is taken for a mended a.
        assert_eq!(
            bound(&ab, &posting_to(&["https://c/", "https://b/"])),
            [bound_to(0), bound_to(1)]
        );
        // b moved into a's index and a removed: a's rows are gone.
        assert_eq!(
            bound(&ab, &posting_to(&["https://b/", "https://c/"])),
            [gone, bound_to(0)]
        );
        // Two sinks at one place (with different headers, say): the
        // first's rows go to the first now, the second's to the second.
        let aba = posting_to(&["https://a/", "https://b/", "https://a/"]);
        let a_ab = posting_to(&["https://a/", "https://c/", "https://a/", "https://b/"]);
        assert_eq!(bound(&aba, &a_ab), [bound_to(0), bound_to(3), bound_to(2)]);
        // One of the two removed: the first's rows stay with the one left.
        assert_eq!(
            bound(&aba, &posting_to(&["https://b/", "https://a/"])),
            [bound_to(1), bound_to(0), gone]
        );
        // A place the hook did not keep for the row's index: by type.
        assert_eq!(ab.bind("s", 2, "http", Some(&[1, 2])), gone);
    }

    /// A catalog of sources `s0`, `s1`, … each with one sink of each
    /// (rate, batch size) given, listed in the config in `order`.
    fn paced(sinks: &[&[(Option<u32>, u16)]], order: &[usize]) -> Catalog {
        let mut config = Config::default();
        for &i in order {
            let sinks = (sinks[i].iter())
                .map(|(rate, _)| SinkConfig {
                    max_calls_per_s: *rate,
                    ..SinkConfig::of_kind("b")
                })
                .collect();
            let source = crate::config::SourceConfig::new(format!("s{i}"), "t", sinks);
            config.sources.push(source);
        }
        Catalog::from_config(&config).with_batches(|source_id, index| {
            let source: usize = source_id[1..].parse().unwrap();
            NonZeroU16::new(sinks[source][usize::from(index)].1)
        })
    }

    /// The fingerprint of the paces is the same for the same sources
    /// listed in another order, and another for any rate or batch size
    /// changed, or a rated sink moved or gone: the reload that keeps it
    /// changes no pace. Two changes of batch sizes by one, each way, do
    /// not cancel out.
    #[test]
    fn the_paces_fingerprint_is_anothers_for_any_pace_changed() {
        let sinks: &[&[(Option<u32>, u16)]] = &[&[(Some(5), 10), (None, 3)], &[(Some(7), 1)]];
        let base = paced(sinks, &[0, 1]);
        let fingerprint = base.paces_fingerprint();
        assert_eq!(paced(sinks, &[1, 0]).paces_fingerprint(), fingerprint);
        let same = paced(&[&[(Some(5), 10), (None, 4)], &[(Some(7), 1)]], &[0, 1]);
        assert_eq!(
            same.paces_fingerprint(),
            fingerprint,
            "an unrated sink's batch"
        );
        assert!(same.paces_changed_in(&base).is_empty());
        for changed in [
            paced(&[&[(Some(6), 10), (None, 3)], &[(Some(7), 1)]], &[0, 1]),
            paced(&[&[(Some(5), 11), (None, 3)], &[(Some(7), 1)]], &[0, 1]),
            paced(&[&[(Some(5), 11), (None, 3)], &[(Some(7), 2)]], &[0, 1]),
            paced(&[&[(Some(5), 9), (None, 3)], &[(Some(7), 2)]], &[0, 1]),
            paced(&[&[(None, 3), (Some(5), 10)], &[(Some(7), 1)]], &[0, 1]),
            paced(&[&[(Some(7), 1)], &[(Some(5), 10), (None, 3)]], &[0, 1]),
            paced(sinks, &[0]),
        ] {
            assert_ne!(changed.paces_fingerprint(), fingerprint, "{changed:?}");
            assert!(!changed.paces_changed_in(&base).is_empty(), "{changed:?}");
        }
    }

    /// What a reload changes is noted once, from the catalog before it:
    /// the keys whose pace changed and the keys to bind again (of the
    /// sinks gone, and of sources whose sinks' places changed). A core
    /// holding another catalog (a copy, or one a reload in between gave
    /// it) compares its own paces and finds no keys noted.
    #[test]
    fn what_a_reload_changed_is_noted_from_the_catalog_before_it() {
        let before: &[&[(Option<u32>, u16)]] = &[&[(Some(5), 10)], &[(Some(7), 1), (None, 1)]];
        let after: &[&[(Option<u32>, u16)]] = &[&[(Some(5), 10)], &[(Some(8), 1)]];
        let previous = Arc::new(paced(before, &[0, 1]));
        let next = paced(after, &[0, 1]);
        next.note_changes_from(&previous);
        let s1 = |index| SinkKey {
            tenant: Arc::from("t"),
            source_id: Arc::from("s1"),
            sink_index: index,
            sink_type: Arc::from("b"),
        };
        let changed = HashSet::from([s1(0)]);
        match next.paces_changed_since(&previous) {
            Cow::Borrowed(noted) => assert_eq!(*noted, changed),
            Cow::Owned(_) => panic!("compared again"),
        }
        // s1 lost a sink: its other key's rows are bound again too.
        assert_eq!(
            next.keys_to_rebind_since(&previous),
            Some(&HashSet::from([s1(0), s1(1)]))
        );
        let copy = Arc::new(paced(before, &[1, 0]));
        match next.paces_changed_since(&copy) {
            Cow::Owned(compared) => assert_eq!(compared, changed),
            Cow::Borrowed(_) => panic!("noted from another catalog"),
        }
        assert_eq!(next.keys_to_rebind_since(&copy), None);
        let same = paced(before, &[1, 0]);
        same.note_changes_from(&previous);
        assert!(same.paces_changed_since(&previous).is_empty());
        assert_eq!(same.keys_to_rebind_since(&previous), Some(&HashSet::new()));
    }

    /// A source moved to another tenant keeps its sinks (`has_key`), but
    /// the old tenant's keys are no longer the catalog's own, and a reload
    /// notes them with the keys of the sinks gone.
    #[test]
    fn a_source_moved_to_another_tenant_disowns_its_old_tenants_keys() {
        let catalog = |tenant: &str, kinds: &[&str]| {
            let sinks = kinds.iter().map(|k| SinkConfig::of_kind(*k)).collect();
            let mut config = Config::default();
            (config.sources).push(crate::config::SourceConfig::new("s", tenant, sinks));
            Arc::new(Catalog::from_config(&config))
        };
        let key = |tenant: &str, index, kind: &str| SinkKey {
            tenant: Arc::from(tenant),
            source_id: Arc::from("s"),
            sink_index: index,
            sink_type: Arc::from(kind),
        };
        let before = catalog("t", &["x", "y"]);
        let moved = catalog("u", &["x"]);
        moved.note_changes_from(&before);
        assert!(moved.has_key(&key("t", 0, "x")) && !moved.owns_key(&key("t", 0, "x")));
        assert!(moved.owns_key(&key("u", 0, "x")));
        assert!(!moved.has_key(&key("t", 1, "y")) && !moved.owns_key(&key("u", 1, "y")));
        let disowned = HashSet::from([key("t", 0, "x"), key("t", 1, "y")]);
        assert_eq!(moved.keys_to_rebind_since(&before), Some(&disowned));
    }
}
