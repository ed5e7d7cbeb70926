//! Ingest answers counted by source, status and error code: the series of
//! `goad_ingest_requests_total`, so an operator sees a provider's hooks
//! refused (a rotated secret that the node does not have yet answers 401
//! `bad_signature` to every one) or shed (503) as it happens.

use super::http::Response;
use parking_lot::Mutex;
use std::collections::BTreeMap;

/// Per source (`""` for a source that is not configured: its name is the
/// client's, not a bounded label), per (status, error code — `""` for an
/// accepted hook), the answers given. Counting an answer in a series seen
/// before allocates nothing.
#[derive(Debug, Default)]
pub(crate) struct IngestCounts {
    counts: Mutex<BTreeMap<String, Answers>>,
}

/// One source's answers, by (status, error code).
type Answers = BTreeMap<(u16, &'static str), u64>;

impl IngestCounts {
    /// Counts `response`, an answer to an ingest into `source` (configured
    /// or not).
    pub fn count(&self, source: &str, configured: bool, response: &Response) {
        let source = if configured { source } else { "" };
        let series = (response.status, response.error.unwrap_or(""));
        let mut counts = self.counts.lock();
        if !counts.contains_key(source) {
            counts.insert(source.to_string(), Answers::new());
        }
        let of_source = counts.get_mut(source).expect("inserted above");
        *of_source.entry(series).or_default() += 1;
    }

    /// Every series, (source, status, error code), and its count, in order.
    pub fn snapshot(&self) -> Vec<((String, u16, &'static str), u64)> {
        let counts = self.counts.lock();
        let series = counts.iter().flat_map(|(source, of_source)| {
            of_source
                .iter()
                .map(move |((status, code), n)| ((source.clone(), *status, *code), *n))
        });
        series.collect()
    }
}
