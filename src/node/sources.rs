//! `GET /v1/sources`: the sources the node takes hooks for, as its config
//! stands (after the last reload): where each one's provider posts, how
//! ingest checks it (a token, a signature scheme, an issuer's tokens), how it dedupes, and
//! where each of its sinks delivers — what an operator wiring a provider
//! or checking a reload asks. No secret is shown: tokens and secrets are
//! named by whether they are set, and a sink's URL loses its user
//! information and query (`url_env` URLs are shown as their variable).
//! Filtered by `source_id` and `tenant`, as `/v1/sinks` is; paged by
//! `limit` and `cursor` (see [`super::listing`]): a source's key is its id.

use super::http::{Request, Response};
use super::listing::SourceListing;
use crate::config::{Config, SinkConfig, SourceConfig};
use crate::sink::client::shown_url;
use serde_json::{json, Value};

pub(super) fn sources(config: &Config, request: &Request) -> Response {
    let listing = match SourceListing::of(request) {
        Ok(listing) => listing,
        Err(bad) => return bad,
    };
    let matching: Vec<&SourceConfig> = (config.sources.iter())
        .filter(|s| listing.takes(&s.id, &s.tenant))
        .collect();
    let (listed, next_cursor) = match listing.paging.page(matching, |s| s.id.clone()) {
        Ok(page) => page,
        Err(bad) => return bad,
    };
    let sources: Vec<Value> = listed.into_iter().map(source_json).collect();
    Response::json(
        200,
        &json!({ "sources": sources, "next_cursor": next_cursor }),
    )
}

fn source_json(source: &SourceConfig) -> Value {
    let sinks: Vec<Value> = (source.sinks.iter().enumerate())
        .map(|(index, sink)| sink_json(index, sink))
        .collect();
    json!({
        "id": source.id,
        "tenant": source.tenant,
        "ingest_path": format!("/v1/sources/{}/hooks", source.id),
        "ingest_token": source.ingest_token_env.is_some(),
        "ingest_verify_token": source.ingest_verify_token_env.is_some(),
        "ingest_handshake": source.ingest_handshake,
        "ingest_signature": source.ingest_signature,
        "ingest_jwt": source.ingest_jwt,
        "dedupe_header": match &source.dedupe_json_pointer {
            Some(_) => None,
            None => Some(source.dedupe_header.as_deref().unwrap_or("idempotency-key").to_ascii_lowercase()),
        },
        "dedupe_json_pointer": source.dedupe_json_pointer,
        "dedupe_window_ms": source.dedupe_window_ms.filter(|ms| *ms > 0),
        "max_ingest_per_s": source.max_ingest_per_s,
        "forward_headers": source.forward_headers,
        "sinks": sinks,
    })
}

fn sink_json(index: usize, sink: &SinkConfig) -> Value {
    let target = match sink.kind.as_str() {
        "http" => match (&sink.url, &sink.url_env) {
            (Some(url), _) => Some(shown_url(url)),
            (None, Some(variable)) => Some(format!("${variable}")),
            (None, None) => None,
        },
        "sqs" => sink.queue_url.as_deref().map(shown_url),
        "pubsub" => match (&sink.project, &sink.topic) {
            (Some(project), Some(topic)) => Some(format!("projects/{project}/topics/{topic}")),
            _ => None,
        },
        _ => None,
    };
    // How an HTTP sink's requests are authorized, beside any signature.
    let auth = match () {
        _ if sink.oauth2.is_some() => Some("oauth2"),
        _ if sink.aws_service.is_some() => Some("aws_sigv4"),
        _ if sink.google_id_token.is_some() => Some("google_id_token"),
        _ => None,
    };
    json!({
        "index": index,
        "type": sink.kind,
        "target": target,
        "auth": auth,
        "ordered": sink.ordered,
        "ordering_key": sink.ordering_key,
        "paused": sink.paused,
        "filter": sink.filter,
    })
}
