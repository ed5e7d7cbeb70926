//! The node's routes (DESIGN §5) and the part of each that runs on the HTTP
//! loop: matching, authentication, and ingest, which hands the hook to its
//! shard and answers from there once it is durable. Everything else goes to
//! the admin workers.

use super::admin::AdminJob;
use super::auth::SourceIngest;
use super::http::{Handler, Later, Request, Response};
use super::replay::ReplayControl;
use super::NodeState;
use crate::runtime::{CommitError, NewHook, ShardStats};
use crate::store::{IngestRoom, RoomBound};
use percent_encoding::percent_decode_str;
use std::borrow::Cow;
use std::sync::Arc;

/// The body of an ingest's 202.
#[derive(serde::Serialize)]
struct Accepted {
    id: String,
}

/// A matched route: answered on the loop thread, or by the admin workers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Health,
    Ready,
    Ingest(String),
    /// A provider's check of a subscription to the source (`GET`).
    SubscriptionCheck(String),
    Worker(WorkerRoute),
}

/// The routes the admin workers answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerRoute {
    Metrics,
    Pressure,
    Stats,
    DeadLetters,
    /// One dead letter with its hook, by the id its listing gave.
    DeadLetter(String),
    PurgeDeadLetters,
    /// A hook and its sinks' states, by the id its ingest returned.
    Hook(String),
    /// Every configured sink's outcomes and breaker.
    Sinks,
    /// The configured sources: ingest paths, checks and sinks' targets.
    Sources,
    CreateReplay,
    /// Every replay's progress.
    Replays,
    GetReplay(String),
    /// A replay paused or resumed.
    ControlReplay(String, ReplayControl),
    DeadLetterSource(String),
    /// A sink's backlog due now and its breaker closed: (source, sink index).
    WakeSink(String, String),
    Reload,
    /// A backup of the data directory to a directory on the node's host.
    Backup,
    /// Whether the node drains: asked (`None`), started or ended.
    Drain(Option<bool>),
    /// A claim's body: (tenant, sha256).
    RedeemClaim(String, String),
}

impl WorkerRoute {
    /// Bounded reads that machines poll on short deadlines (a scrape, a
    /// service reading the pressure to throttle): answered on a worker of
    /// their own, never queued behind an operation that takes seconds.
    pub fn is_monitoring(&self) -> bool {
        matches!(
            self,
            WorkerRoute::Metrics | WorkerRoute::Pressure | WorkerRoute::Stats
        )
    }

    /// Whether the route takes a query: those that do check theirs
    /// (`admin::known_params`), the others refuse any, so that a filter
    /// written on one is not ignored while the route acts on everything
    /// (`POST /v1/sources/a/dead-letter?sink_index=1` dead-letters every
    /// sink's rows; `POST /v1/replays?source_id=a` with `{}` replays every
    /// dead letter). A scrape and a claim's redemption, asked by
    /// machines, take any.
    pub fn takes_query(&self) -> bool {
        matches!(
            self,
            WorkerRoute::Metrics
                | WorkerRoute::DeadLetters
                | WorkerRoute::PurgeDeadLetters
                | WorkerRoute::Sinks
                | WorkerRoute::Sources
                | WorkerRoute::Replays
                | WorkerRoute::RedeemClaim(..)
        )
    }
}

impl Route {
    /// Admin routes (all but ingest, health and metrics) need the admin
    /// token when one is configured; so does metrics with
    /// `metrics.needs_admin_token`.
    fn is_admin(&self) -> bool {
        matches!(self, Route::Worker(w) if *w != WorkerRoute::Metrics)
    }
}

/// Matches a method and path, or answers 404 / 405. Each segment is
/// percent-decoded before it is matched (RFC 3986 §6.2.2.2: `/v1/sources/a%2Db/hooks`
/// is `a-b`'s ingest), after the path is split: an escaped `/` stays in its segment.
pub fn route(method: &str, path: &str) -> Result<Route, Response> {
    let decoded: Vec<Cow<str>> = path
        .trim_start_matches('/')
        .split('/')
        .map(|segment| percent_decode_str(segment).decode_utf8_lossy())
        .collect();
    let segments: Vec<&str> = decoded.iter().map(|segment| segment.as_ref()).collect();
    let (route, allowed): (Route, &[&str]) = match segments.as_slice() {
        ["healthz"] => (Route::Health, &["GET"]),
        ["readyz"] => (Route::Ready, &["GET"]),
        ["metrics"] => (Route::Worker(WorkerRoute::Metrics), &["GET"]),
        ["v1", "pressure"] => (Route::Worker(WorkerRoute::Pressure), &["GET"]),
        ["v1", "stats"] => (Route::Worker(WorkerRoute::Stats), &["GET"]),
        ["v1", "dead-letters"] if method == "DELETE" => (
            Route::Worker(WorkerRoute::PurgeDeadLetters),
            &["GET", "DELETE"],
        ),
        ["v1", "dead-letters"] => (Route::Worker(WorkerRoute::DeadLetters), &["GET", "DELETE"]),
        ["v1", "dead-letters", id] if !id.is_empty() => (
            Route::Worker(WorkerRoute::DeadLetter(id.to_string())),
            &["GET"],
        ),
        ["v1", "hooks", id] if !id.is_empty() => {
            (Route::Worker(WorkerRoute::Hook(id.to_string())), &["GET"])
        }
        ["v1", "sinks"] => (Route::Worker(WorkerRoute::Sinks), &["GET"]),
        ["v1", "sources"] => (Route::Worker(WorkerRoute::Sources), &["GET"]),
        ["v1", "replays"] if method == "POST" => {
            (Route::Worker(WorkerRoute::CreateReplay), &["GET", "POST"])
        }
        ["v1", "replays"] => (Route::Worker(WorkerRoute::Replays), &["GET", "POST"]),
        ["v1", "replays", id] if !id.is_empty() => (
            Route::Worker(WorkerRoute::GetReplay(id.to_string())),
            &["GET"],
        ),
        ["v1", "replays", id, action @ ("pause" | "resume")] if !id.is_empty() => {
            let control = match *action {
                "pause" => ReplayControl::Pause,
                _ => ReplayControl::Resume,
            };
            let route = WorkerRoute::ControlReplay(id.to_string(), control);
            (Route::Worker(route), &["POST"])
        }
        ["v1", "reload"] => (Route::Worker(WorkerRoute::Reload), &["POST"]),
        ["v1", "backup"] => (Route::Worker(WorkerRoute::Backup), &["POST"]),
        ["v1", "drain"] => {
            let set = match method {
                "POST" => Some(true),
                "DELETE" => Some(false),
                _ => None,
            };
            (
                Route::Worker(WorkerRoute::Drain(set)),
                &["GET", "POST", "DELETE"],
            )
        }
        ["v1", "claims", tenant, sha256] if !tenant.is_empty() && !sha256.is_empty() => (
            Route::Worker(WorkerRoute::RedeemClaim(
                tenant.to_string(),
                sha256.to_string(),
            )),
            &["GET"],
        ),
        ["v1", "sources", id, "hooks"] if !id.is_empty() => {
            let route = match method {
                "GET" | "OPTIONS" => Route::SubscriptionCheck(id.to_string()),
                _ => Route::Ingest(id.to_string()),
            };
            (route, &["GET", "OPTIONS", "POST"])
        }
        ["v1", "sources", id, "sinks", index, "wake"] if !id.is_empty() => (
            Route::Worker(WorkerRoute::WakeSink(id.to_string(), index.to_string())),
            &["POST"],
        ),
        ["v1", "sources", id, "dead-letter"] if !id.is_empty() => (
            Route::Worker(WorkerRoute::DeadLetterSource(id.to_string())),
            &["POST"],
        ),
        _ => {
            return Err(Response::error(
                404,
                "not_found",
                &format!("no route {method} {path}"),
            ))
        }
    };
    if !allowed.contains(&method) {
        return Err(method_not_allowed(path, method, allowed));
    }
    Ok(route)
}

/// 405: `path` takes only the `allowed` methods (and `HEAD` where it
/// takes `GET`: the front answers a `HEAD` as a `GET`, without the body).
fn method_not_allowed(path: &str, method: &str, allowed: &[&str]) -> Response {
    let head = allowed.contains(&"GET").then_some("HEAD");
    let allowed = allowed
        .iter()
        .copied()
        .chain(head)
        .collect::<Vec<_>>()
        .join(", ");
    Response::error(
        405,
        "method_not_allowed",
        &format!("{path} takes {allowed}, not {method}"),
    )
    .with_header("allow", allowed)
}

pub struct NodeHandler {
    state: Arc<NodeState>,
}

impl NodeHandler {
    pub(super) fn new(state: Arc<NodeState>) -> NodeHandler {
        NodeHandler { state }
    }

    /// An ingest, its answer counted (see `IngestCounts`) whether it is
    /// given now or once the commit is durable.
    fn ingest(&self, source_id: String, request: Request, later: Later<'_>) -> Option<Response> {
        let Some(engine) = self.state.engine() else {
            return Some(not_ready());
        };
        let counts = &self.state.ingest;
        let dedupe_key = match self.screen(&source_id, &request) {
            Ok(dedupe_key) => dedupe_key,
            Err((response, configured)) => {
                counts.count(&source_id, configured, &response);
                return Some(response);
            }
        };
        let state = self.state.clone();
        let counted_as = source_id.clone();
        let hook = hook_of(source_id.clone(), dedupe_key, request);
        let replier = later.replier();
        let committed = engine.commit_then(hook, move |result| {
            let response = match result {
                Ok(id) => Response::json(202, &Accepted { id }),
                Err(e) => commit_error(&e),
            };
            state.ingest.count(&counted_as, true, &response);
            replier.send(response)
        });
        match committed {
            Ok(()) => None,
            Err(e) => {
                let response = commit_error(&e);
                let configured = !matches!(e, CommitError::UnknownSource(_));
                counts.count(&source_id, configured, &response);
                Some(response)
            }
        }
    }

    /// An ingest's checks before its commit: its hook's dedupe key, or the
    /// answer it gets without a commit (a refusal, or a provider's check of
    /// the endpoint: one that carries no secret before the source's token
    /// and signature checks, a signed one after them) and whether its
    /// source is configured.
    fn screen(
        &self,
        source_id: &str,
        request: &Request,
    ) -> Result<Option<String>, (Response, bool)> {
        let tokens = self.state.tokens.read();
        let Some(ingest) = tokens.sources.get(source_id) else {
            return Err((unknown_source(source_id), false));
        };
        let answered = ingest
            .handshake
            .and_then(|h| h.answer_post(request))
            .or_else(|| refused_ingest(ingest, request))
            .or_else(|| {
                let check = ingest.signature.as_ref()?;
                let headers = |name: &str| request.header(name);
                check.endpoint_check_answer(&headers, &request.body)
            })
            .or_else(|| unframed(request))
            .or_else(|| self.state.drain.is_on().then(super::drain::refused));
        match answered {
            Some(response) => Err((response, true)),
            // Read once the request passed the source's checks (a body
            // pointer parses the JSON).
            None => {
                let header = |name: &str| request.header(name).map(str::to_string);
                Ok(ingest.dedupe.key(header, &request.body))
            }
        }
    }

    /// The refusal of a request to an admin route: 401 without the admin
    /// token, or, with none configured, a browser's or a rebound host's
    /// request (see `open_admin`).
    fn refused_admin(&self, route: &Route, request: &Request) -> Option<Response> {
        let needs_token = match route {
            Route::Worker(WorkerRoute::Metrics) => {
                self.state.config.read().metrics.needs_admin_token
            }
            route => route.is_admin(),
        };
        if !needs_token {
            return None;
        }
        match &self.state.tokens.read().admin {
            Some(tokens) => (!tokens.admit(request.header("authorization")))
                .then(|| unauthorized("the admin API needs the admin token")),
            None => {
                let loopback = self.state.listens_on_loopback;
                let refused = super::open_admin::refusal(request, loopback)?;
                Some(refused.answer(&self.state.front))
            }
        }
    }

    /// An ingest refused on its head alone, counted as an ingest answer:
    /// its source is not configured, or it lacks the source's token or
    /// `ingest_jwt` token. A source that answers a provider's check of its
    /// endpoint is not screened so: such a check may carry no credentials,
    /// and is told by its body.
    fn refused_ingest_head(&self, source_id: &str, head: &Request) -> Option<Response> {
        self.state.engine()?;
        let tokens = self.state.tokens.read();
        let (response, configured) = match tokens.sources.get(source_id) {
            None => (unknown_source(source_id), false),
            Some(ingest) if ingest.handshake.is_none() => {
                (refused_credentials(ingest, head)?, true)
            }
            Some(_) => return None,
        };
        self.state.ingest.count(source_id, configured, &response);
        Some(response)
    }

    /// A provider's `GET` or `OPTIONS` of the ingest path: its check of a
    /// subscription, answered for a source with `ingest_verify_token_env`
    /// (`GET`, Meta's) or an `ingest_handshake` that has one (`GET`,
    /// Dropbox's and Okta's; `OPTIONS`, the CloudEvents webhook handshake);
    /// other sources take only `POST`. Counted as an ingest answer.
    fn subscription_check(&self, source_id: &str, request: &Request) -> Response {
        let tokens = self.state.tokens.read();
        let (response, configured) = match tokens.sources.get(source_id) {
            None => (unknown_source(source_id), false),
            Some(ingest) => {
                let answer = match request.method.as_str() {
                    "GET" => match ingest.verify_token.as_deref() {
                        Some(token) => {
                            let answer = super::provider_handshake::subscription_answer;
                            Some(answer(request, token))
                        }
                        None => ingest.handshake.and_then(|h| h.answer_get(request)),
                    },
                    _ => ingest.handshake.and_then(|h| h.answer_options(request)),
                };
                let refused = || method_not_allowed(&request.path, &request.method, &["POST"]);
                (answer.unwrap_or_else(refused), true)
            }
        };
        self.state.ingest.count(source_id, configured, &response);
        response
    }
}

impl Handler for NodeHandler {
    fn hangup(&self) {
        super::admin::reload_on_hangup(&self.state);
    }

    fn stopping(&self) {
        if let Some(systemd) = &self.state.systemd {
            systemd.stopping();
        }
    }

    /// The service manager's watchdog, if it watches.
    fn turning_every(&self) -> Option<std::time::Duration> {
        self.state.systemd.as_ref()?.watchdog_every()
    }

    fn turning(&self) {
        if let Some(systemd) = &self.state.systemd {
            systemd.alive();
        }
    }

    /// A request refused before its body is read: no route takes it, an
    /// admin route without the admin token, or an ingest its source's
    /// credentials refuse (see `refused_ingest_head`). The whole request
    /// is checked again as it is handled.
    fn refuse_head(&self, head: &Request) -> Option<Response> {
        let route = match route(&head.method, &head.path) {
            Ok(route) => route,
            Err(response) => return Some(response),
        };
        if let Some(refused) = self.refused_admin(&route, head) {
            return Some(refused);
        }
        match route {
            Route::Ingest(source_id) => self.refused_ingest_head(&source_id, head),
            _ => None,
        }
    }

    fn handle(&self, request: Request, later: Later<'_>) -> Option<Response> {
        let route = match route(&request.method, &request.path) {
            Ok(route) => route,
            Err(response) => return Some(response),
        };
        if let Some(refused) = self.refused_admin(&route, &request) {
            return Some(refused);
        }
        match route {
            Route::Health => Some(Response::json(200, &serde_json::json!({"status": "ok"}))),
            Route::Ready => Some(match self.state.engine() {
                Some(_) if self.state.drain.is_on() => super::drain::not_ready(),
                Some(engine) => readiness(
                    &engine.stats(),
                    &engine.ingest_rooms(),
                    engine.min_free_disk_bytes(),
                ),
                None => not_ready(),
            }),
            Route::Ingest(source_id) => self.ingest(source_id, request, later),
            Route::SubscriptionCheck(source_id) => {
                Some(self.subscription_check(&source_id, &request))
            }
            Route::Worker(route) => {
                if self.state.engine().is_none() {
                    return Some(not_ready());
                }
                let job = AdminJob {
                    route,
                    request,
                    reply: later.replier(),
                };
                self.state.admin.submit(job);
                None
            }
        }
    }
}

/// The 401 of an ingest that lacks the source's token (or `ingest_jwt`
/// token), if it does: its head tells.
fn refused_credentials(ingest: &SourceIngest, request: &Request) -> Option<Response> {
    if let Some(tokens) = &ingest.token {
        if !tokens.admit(request.header("authorization")) {
            return Some(unauthorized("this source needs its ingest token"));
        }
    }
    let jwt = ingest.jwt.as_ref()?;
    jwt.refusal(
        request.header("authorization"),
        crate::runtime::wall_ms() / 1_000,
    )
}

/// The 401 of an ingest that lacks the source's token or its provider's
/// signature, or its 429 past the source's rate, if it does.
fn refused_ingest(ingest: &SourceIngest, request: &Request) -> Option<Response> {
    if let Some(refused) = refused_credentials(ingest, request) {
        return Some(refused);
    }
    let now_ms = crate::runtime::wall_ms();
    if let Some(check) = &ingest.signature {
        let headers = |name: &str| request.header(name);
        if let Err(refusal) = check.verify(&headers, &request.body, now_ms / 1_000) {
            return Some(Response::error(401, "bad_signature", &refusal.to_string()));
        }
    }
    let wait_s = ingest.rate.as_ref()?.take(now_ms).err()?;
    let message =
        format!("this source takes at most its max_ingest_per_s; come back in {wait_s} s");
    let response = Response::error(429, "rate_limited", &message);
    Some(response.with_header("retry-after", wait_s.to_string()))
}

/// 411 for a hook whose body is framed by neither header the parser frames
/// a body by (it refuses the rest).
fn unframed(request: &Request) -> Option<Response> {
    let framed = ["content-length", "transfer-encoding"];
    let unframed = framed.iter().all(|name| request.header(name).is_none());
    unframed.then(|| {
        let message = "a hook needs a body framed by Content-Length or Transfer-Encoding: chunked";
        Response::error(411, "length_required", message)
    })
}

/// The hook a request carries: its body, content type, dedupe key (the
/// value of the source's dedupe header) and the provider headers that may
/// ever be forwarded (credentials and framing headers are not stored).
fn hook_of(source_id: String, dedupe_key: Option<String>, request: Request) -> NewHook {
    let content_type = request.header("content-type").map(str::to_string);
    let headers = request
        .headers
        .into_iter()
        .filter(|(name, _)| !crate::sink::never_forwarded(name))
        .collect();
    NewHook {
        source_id,
        headers,
        content_type,
        body: request.body,
        dedupe_key,
    }
}

fn commit_error(e: &CommitError) -> Response {
    let message = e.to_string();
    match e {
        CommitError::UnknownSource(_) => Response::error(404, "unknown_source", &message),
        CommitError::TooLarge { .. } => Response::error(413, "body_too_large", &message),
        CommitError::BadHeader { .. } => Response::error(400, "bad_header", &message),
        CommitError::QueueFull => Response::unavailable("queue_full", &message, 1),
        CommitError::Store(_) => Response::unavailable("store_unavailable", &message, 1),
        CommitError::Stopped => Response::unavailable("stopping", &message, 1),
        CommitError::TimedOut => Response::unavailable("commit_timeout", &message, 1),
        CommitError::ShardRestarting => Response::unavailable("shard_restarting", &message, 1),
        CommitError::StoreFull { .. } => Response::unavailable("store_full", &message, 5),
        CommitError::DiskFull { .. } => Response::unavailable("disk_full", &message, 5),
        CommitError::TenantFull { .. } => Response::unavailable("tenant_full", &message, 5),
        // The node commits from its HTTP loop, never from a shard's thread.
        CommitError::OnShardThread => Response::error(500, "internal", &message),
    }
}

/// `/readyz` of an open engine whose shards' stats are `shards` and
/// whose stores have `rooms` for new hooks (measured now: see
/// [`crate::runtime::Engine::ingest_rooms`]), `min_free_bytes` kept free
/// on their disk: ready, unless a shard refuses commits — one that
/// panicked again soon after a restart, or whose store keeps failing (a
/// file system gone read-only: every commit fails until it mends) — or
/// no shard has room for a new hook (the disk at `min_free_disk_bytes`,
/// or every store full), which a load balancer had better not send hooks
/// to. One full shard of several leaves the node ready: it refuses its
/// own tenants' hooks alone.
fn readiness(shards: &[ShardStats], rooms: &[Option<IngestRoom>], min_free_bytes: u64) -> Response {
    if let Some(shard) = shards.iter().position(|s| s.restarting) {
        let message = format!("shard {shard} is restarting after an internal error");
        return Response::unavailable("shard_restarting", &message, 1);
    }
    if let Some(shard) = shards.iter().position(|s| s.store_failing) {
        let message = format!(
            "shard {shard}'s store failed a write and cannot be read back yet (the log says why; \
             it is tried again every second)"
        );
        return Response::unavailable("store_unavailable", &message, 1);
    }
    if let Some(full) = no_room(rooms, min_free_bytes) {
        return full;
    }
    Response::json(200, &serde_json::json!({"status": "ready"}))
}

/// The answer of a node none of whose shards has room for a new hook
/// (see [`readiness`]); `None` if one has, or cannot be measured.
fn no_room(rooms: &[Option<IngestRoom>], min_free_bytes: u64) -> Option<Response> {
    let full: Vec<IngestRoom> = rooms
        .iter()
        .map_while(|room| room.filter(|r| r.room_bytes == 0))
        .collect();
    if full.is_empty() || full.len() < rooms.len() {
        return None;
    }
    let on_disk = full.iter().find_map(|room| match room.bound {
        RoomBound::Disk { available_bytes } => Some(available_bytes),
        RoomBound::Map { .. } => None,
    });
    Some(match on_disk {
        Some(available_bytes) => {
            let message = format!(
                "no shard takes new hooks: the file system holding the data directory has \
                 {available_bytes} bytes free, and min_free_disk_bytes keeps {min_free_bytes} for \
                 recording deliveries (ready again once deliveries or the operator free room)"
            );
            Response::unavailable("disk_full", &message, 5)
        }
        None => {
            let message = "no shard takes new hooks: each shard's store holds what new hooks may \
                           fill, 7/8 of max_shard_bytes (ready again once deliveries free room)";
            Response::unavailable("store_full", message, 5)
        }
    })
}

fn not_ready() -> Response {
    Response::unavailable(
        "not_ready",
        "the engine is still opening (recovering claimed rows)",
        1,
    )
}

fn unknown_source(source_id: &str) -> Response {
    let message = format!("no source {source_id:?} is configured");
    Response::error(404, "unknown_source", &message)
}

pub(super) fn unauthorized(message: &str) -> Response {
    Response::error(401, "unauthorized", message)
        .with_header("www-authenticate", "Bearer".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each refused commit answers as docs/http-api.md says: its status,
    /// its error code and, for a 503, how long to wait (`Retry-After`).
    #[test]
    fn a_refused_commit_answers_the_status_code_and_wait_the_api_documents() {
        let answer = |e: CommitError| {
            let response = commit_error(&e);
            let wait = (response.headers.iter()).find(|(name, _)| *name == "retry-after");
            let wait = wait.map(|(_, seconds)| seconds.clone());
            (response.status, response.error.unwrap(), wait)
        };
        let at_once = |code| (503, code, Some("1".to_string()));
        let later = |code| (503, code, Some("5".to_string()));
        let io = std::io::Error::other("read-only file system");
        let store = crate::store::StoreError::Io {
            path: "/data/shard-0".into(),
            source: io,
        };
        let cases = [
            (CommitError::QueueFull, at_once("queue_full")),
            (
                CommitError::Store(Arc::new(store)),
                at_once("store_unavailable"),
            ),
            (CommitError::TimedOut, at_once("commit_timeout")),
            (CommitError::ShardRestarting, at_once("shard_restarting")),
            (CommitError::Stopped, at_once("stopping")),
            (
                CommitError::StoreFull {
                    used_bytes: 7,
                    limit_bytes: 7,
                },
                later("store_full"),
            ),
            (
                CommitError::DiskFull {
                    available_bytes: 1,
                    min_free_bytes: 2,
                },
                later("disk_full"),
            ),
            (
                CommitError::TenantFull {
                    tenant: "acme".into(),
                    used_bytes: 9,
                    limit_bytes: 8,
                },
                later("tenant_full"),
            ),
            (
                CommitError::UnknownSource("nope".into()),
                (404, "unknown_source", None),
            ),
            (
                CommitError::TooLarge {
                    size_bytes: 2,
                    max_bytes: 1,
                },
                (413, "body_too_large", None),
            ),
            (
                CommitError::BadHeader {
                    name: "x".into(),
                    why: "a line break".into(),
                },
                (400, "bad_header", None),
            ),
        ];
        for (refusal, expected) in cases {
            assert_eq!(answer(refusal.clone()), expected, "{refusal:?}");
        }
    }

    #[test]
    fn routes_match_with_their_methods() {
        assert_eq!(
            route("POST", "/v1/sources/stripe/hooks"),
            Ok(Route::Ingest("stripe".into()))
        );
        assert_eq!(
            route("GET", "/v1/replays/r1"),
            Ok(Route::Worker(WorkerRoute::GetReplay("r1".into())))
        );
        assert_eq!(
            route("POST", "/v1/replays/r1/resume"),
            Ok(Route::Worker(WorkerRoute::ControlReplay(
                "r1".into(),
                ReplayControl::Resume
            )))
        );
        assert_eq!(
            route("POST", "/v1/replays/r1/stop").unwrap_err().status,
            404
        );
        assert_eq!(
            route("GET", "/v1/replays"),
            Ok(Route::Worker(WorkerRoute::Replays))
        );
        assert_eq!(route("GET", "/v1/sources//hooks").unwrap_err().status, 404);
        assert_eq!(
            route("GET", "/v1/sources/stripe/hooks"),
            Ok(Route::SubscriptionCheck("stripe".into()))
        );
        let wrong = route("PUT", "/v1/sources/stripe/hooks").unwrap_err();
        assert_eq!(wrong.status, 405);
        assert_eq!(
            wrong.headers,
            vec![("allow", "GET, OPTIONS, POST, HEAD".to_string())]
        );
        assert_eq!(route("GET", "/nope").unwrap_err().status, 404);
        // One path, two methods.
        assert_eq!(
            route("GET", "/v1/dead-letters"),
            Ok(Route::Worker(WorkerRoute::DeadLetters))
        );
        assert_eq!(
            route("DELETE", "/v1/dead-letters"),
            Ok(Route::Worker(WorkerRoute::PurgeDeadLetters))
        );
        let wrong = route("POST", "/v1/dead-letters").unwrap_err();
        assert_eq!(
            wrong.headers,
            vec![("allow", "GET, DELETE, HEAD".to_string())]
        );
    }

    /// A client that escapes what it need not (`%2D` for `-`, `%76` for
    /// `v`) reaches the route it names; an escaped `/` does not split its
    /// segment, and a bad escape is kept as it is.
    #[test]
    fn segments_are_matched_percent_decoded() {
        assert_eq!(
            route("POST", "/v1/sources/stripe%2Dlive/hooks"),
            Ok(Route::Ingest("stripe-live".into()))
        );
        assert_eq!(
            route("GET", "/%761/hooks/h%5F1"),
            Ok(Route::Worker(WorkerRoute::Hook("h_1".into())))
        );
        assert_eq!(
            route("POST", "/v1/sources/a%2Fb/hooks"),
            Ok(Route::Ingest("a/b".into()))
        );
        assert_eq!(
            route("POST", "/v1/sources/a%2/hooks"),
            Ok(Route::Ingest("a%2".into()))
        );
        assert_eq!(route("GET", "/v1/%2Fstats").unwrap_err().status, 404);
    }

    /// A node is ready unless a shard refuses commits: one restarting
    /// after panics in a row, or one whose store keeps failing.
    #[test]
    fn readiness_says_which_shard_refuses_commits_and_why() {
        let answer = |shards: &[ShardStats]| {
            let r = readiness(shards, &[None; 2], 0);
            let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            (r.status, body)
        };
        let fine = ShardStats::default();
        let failing = ShardStats {
            store_failing: true,
            ..fine
        };
        let restarting = ShardStats {
            restarting: true,
            ..fine
        };
        assert_eq!(
            answer(&[fine, fine]),
            (200, serde_json::json!({"status": "ready"}))
        );
        assert_eq!(
            answer(&[fine, failing]),
            (
                503,
                serde_json::json!({
                    "error": "store_unavailable",
                    "message": "shard 1's store failed a write and cannot be read back yet (the \
                                log says why; it is tried again every second)"
                })
            )
        );
        let (status, body) = answer(&[failing, restarting]);
        assert_eq!((status, &body["error"]), (503, &"shard_restarting".into()));
    }

    /// A node none of whose shards has room for a new hook is not ready,
    /// saying which limit is met (the disk's where one shard's is); one
    /// with room in a shard, or a shard it cannot measure, is.
    #[test]
    fn readiness_says_when_no_shard_has_room_for_a_hook() {
        let answer = |rooms: &[Option<IngestRoom>]| {
            let r = readiness(&[ShardStats::default(); 2], rooms, 1_000);
            let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            let retry_after = r.headers.iter().find(|(name, _)| *name == "retry-after");
            (r.status, body, retry_after.map(|(_, value)| value.clone()))
        };
        let room = |room_bytes, bound| Some(IngestRoom { room_bytes, bound });
        let map = RoomBound::Map {
            limit_bytes: 7 << 20,
        };
        let disk = RoomBound::Disk {
            available_bytes: 900,
        };
        let ready = (200, serde_json::json!({"status": "ready"}), None);
        assert_eq!(answer(&[room(0, map), room(4_096, disk)]), ready);
        assert_eq!(answer(&[room(0, disk), None]), ready);
        assert_eq!(
            answer(&[room(0, map), room(0, disk)]),
            (
                503,
                serde_json::json!({
                    "error": "disk_full",
                    "message": "no shard takes new hooks: the file system holding the data \
                                directory has 900 bytes free, and min_free_disk_bytes keeps 1000 \
                                for recording deliveries (ready again once deliveries or the \
                                operator free room)"
                }),
                Some("5".into())
            )
        );
        let (status, body, _) = answer(&[room(0, map), room(0, map)]);
        assert_eq!((status, &body["error"]), (503, &"store_full".into()));
    }

    /// While a shard that panicked twice in a row refuses commits, the node
    /// is not ready and ingest answers 503 saying why; then both recover.
    #[test]
    fn a_restarting_shard_makes_the_node_unready_until_it_serves_again() {
        use crate::config::SinkConfig;
        use crate::node::{Node, NodeOptions};
        use crate::test_support::{one_source, wait_until};
        use std::time::Duration;

        let dir = tempfile::tempdir().unwrap();
        let config = one_source(dir.path(), SinkConfig::http("http://127.0.0.1:9/"));
        let node = Node::start(NodeOptions::new(config)).unwrap();
        assert!(node.wait_ready(Duration::from_secs(20)));
        let engine = node.engine().unwrap();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let base = format!("http://{}", node.local_addr());
        let ask = |method: &str, path: &str| {
            let url = format!("{base}{path}");
            let mut response = match method {
                "GET" => agent.get(&url).call(),
                _ => agent.post(&url).send("{}"),
            }
            .unwrap();
            let body = response.body_mut().read_to_string().unwrap();
            (response.status().as_u16(), body)
        };
        assert_eq!(ask("GET", "/readyz").0, 200);

        engine.panic_shard(0);
        engine.panic_shard(0);
        wait_until("the second restart", || engine.stats()[0].restarts == 2);
        let (status, body) = ask("GET", "/readyz");
        assert_eq!(status, 503);
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"], "shard_restarting");
        assert_eq!(
            body["message"],
            "shard 0 is restarting after an internal error"
        );
        let (status, body) = ask("POST", "/v1/sources/s/hooks");
        assert_eq!(status, 503);
        assert!(body.contains("\"shard_restarting\""), "{body}");

        wait_until("the refusal to end", || !engine.stats()[0].restarting);
        assert_eq!(ask("GET", "/readyz").0, 200);
        assert_eq!(ask("POST", "/v1/sources/s/hooks").0, 202);
        node.stop();
        node.wait().unwrap();
    }
}
