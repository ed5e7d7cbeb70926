//! Ingest answers counted by source, status and error code: the series of
//! `goad_ingest_requests_total`, so an operator sees a provider's hooks
//! refused (a rotated secret that the node does not have yet answers 401
//! `bad_signature` to every one) or shed (503) as it happens.

use super::http::Response;
use parking_lot::Mutex;
use std::collections::BTreeMap;

/// (source, status, error code): the source is `""` for a source that is
/// not configured (its name is the client's, not a bounded label), the
/// code `""` for an accepted hook.
pub(crate) type IngestSeries = (String, u16, String);

#[derive(Debug, Default)]
pub(crate) struct IngestCounts {
    counts: Mutex<BTreeMap<IngestSeries, u64>>,
}

impl IngestCounts {
    /// Counts `response`, an answer to an ingest into `source` (configured
    /// or not).
    pub fn count(&self, source: &str, configured: bool, response: &Response) {
        let code = match response.status {
            ..400 => String::new(),
            _ => serde_json::from_slice::<serde_json::Value>(&response.body)
                .ok()
                .and_then(|body| body["error"].as_str().map(str::to_string))
                .unwrap_or_default(),
        };
        let source = if configured { source } else { "" };
        let series = (source.to_string(), response.status, code);
        *self.counts.lock().entry(series).or_default() += 1;
    }

    /// Every series and its count, in order.
    pub fn snapshot(&self) -> Vec<(IngestSeries, u64)> {
        let counts = self.counts.lock();
        counts
            .iter()
            .map(|(series, n)| (series.clone(), *n))
            .collect()
    }
}
