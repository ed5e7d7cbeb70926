//! Named limits that are not configuration. Each bounds a queue, a buffer or
//! a loop over external data; relations between them are asserted below.

/// Most shard threads a node may run (the shard index is stored as u32).
pub const MAX_SHARDS: usize = 256;

/// The highest `max_calls_per_s` of a sink: a call every 10 µs, finer
/// than the shard's loop can space them anyway.
pub const MAX_CALLS_PER_S: u32 = 100_000;

/// Most sinks one source may list (the sink index is stored as u16).
pub const MAX_SINKS_PER_SOURCE: usize = 64;

/// The most problems one config error lists (a config of many sources,
/// each wrong the same way, names the first ones and counts the rest).
pub const MAX_CONFIG_PROBLEMS: usize = 20;

/// Capacity of a shard's input channel (commits, completions, control).
pub const SHARD_INPUT_CAPACITY: usize = 16_384;

/// Most inputs a shard drains into one loop iteration (one store batch).
pub const MAX_INPUTS_PER_ITERATION: usize = 4_096;

/// Notifications (`notifications.source`) waiting to be committed; more
/// are counted dropped.
pub const NOTIFICATION_QUEUE: usize = 10_000;

/// A `rows.dead` notification names at most this many distinct reasons
/// (the rest are counted together) and this many of its rows' hook ids.
pub const SUMMARY_MAX_REASONS: usize = 10;
pub const SUMMARY_MAX_HOOK_IDS: usize = 10;

/// Due entries (or lanes and lane members) one step of
/// `dead_letter_source`, or of `wake_sink`, walks: the shard's commits
/// wait at most one step (measured: 300,000 rows dead-lettered beside
/// 1,000,000 due for another tenant held commits up to 22 ms, where one
/// write of them all held them 13 s; 100,000 rows woken, up to 28 ms).
pub const SWEEP_STEP_ENTRIES: usize = 1_024;

/// Held rows one scan reads at most while a pass over them, or the keys'
/// wakes, make those of resumed sinks and closed breakers due.
pub const WAKE_STEP_ROWS: usize = 4_096;

/// A key of a sink with `max_calls_per_s` queues the rows its turns start
/// within this time; rows claimed beyond them wait in the store for their
/// turns (see `core::pacing`), not in the windows.
pub const RATE_QUEUE_AHEAD_MS: u64 = 1_000;

/// A key queues no more rows than its slots start in this time at its
/// calls' time (and at least its wake window); the rest of its backlog
/// waits held (see `core::slow_keys`).
pub const QUEUE_DRAIN_MS: u64 = 1_000;

/// A key's wake keeps this many calls' worth of its held rows due or
/// queued per slot of `dispatch.sink_concurrency` (see `core::key_wake`):
/// enough to keep its slots busy between scans, and all a breaker that
/// opens again holds again.
pub const WAKE_CALLS_PER_SLOT: usize = 4;

/// The longest `notifications.coalesce_ms`: a summary waits no more than a day.
pub const MAX_COALESCE_MS: u64 = 86_400_000;

/// The longest `dispatch.attempt_timeout_ms`: an hour. An attempt holds a
/// slot of its key and an IO worker until it ends, and no receiver's answer
/// is worth holding them longer (a deadline is also a sum in u64 ms, which
/// an unbounded timeout would overflow).
pub const MAX_ATTEMPT_TIMEOUT_MS: u64 = 3_600_000;

/// The longest backoff, `retry.max_ms` (and a sink's own): 30 days. A
/// retried row is due at its failure's time plus its backoff, which must
/// stay below `core::HELD_DUE_MS`, where held rows wait (a row due past it
/// would be taken for one, and made due at the next wake of its key).
pub const MAX_RETRY_DELAY_MS: u64 = 30 * 86_400_000;

/// The longest `dedupe_window_ms` of a source: 30 days, longer than any
/// provider retries a delivery. Each hook with a dedupe key leaves an
/// entry until its window ends, so the window bounds how many the store
/// holds.
pub const MAX_DEDUPE_WINDOW_MS: u64 = 30 * 86_400_000;

/// The longest `dispatch.breaker_open_ms` and `dispatch.breaker_max_open_ms`:
/// a day. A breaker open longer parks a sink's rows past most retry
/// horizons (24 h by default) for want of one probe; `goad wake` closes
/// one at once.
pub const MAX_BREAKER_OPEN_MS: u64 = 86_400_000;

/// How long past its attempt's deadline a request of goad's sinks may run
/// in all (see `sink::client::request_timeout`), and an attempt may wait
/// for another's fetch of a token or credentials (see `sink::expiring`):
/// the shard's timer fails the attempt first.
pub const REQUEST_PAST_DEADLINE_MS: u64 = 250;

/// How long the node keeps a host's addresses (see `sink::address_book`).
pub const DNS_CACHE_MS: u64 = 30_000;

/// How long a host's addresses serve when looking it up again fails (see
/// `sink::address_book`): a day, within RFC 8767's one to three.
pub const DNS_STALE_MAX_MS: u64 = 24 * 60 * 60 * 1_000;

/// The longest response head an HTTP client reads: a longer one fails the
/// attempt.
pub const HTTP_MAX_RESPONSE_HEAD_BYTES: usize = 16 * 1024;

/// The longest header line an HTTP sink sends (the name, `: `, the value
/// and the line break): a hook with a longer one is refused as it is
/// committed. A node's ingest reads request heads of at most
/// `MAX_HEAD_BYTES`, so a header it forwards fits (unless its ISO-8859-1
/// bytes grow past it as text).
pub const HTTP_MAX_HEADER_LINE_BYTES: usize = MAX_HEAD_BYTES;

/// The longest URL goad sends a request to (a sink's, an endpoint's, a
/// token service's): its request line, `PATCH <path and query> HTTP/1.1`
/// at the longest, is a header line that fits. A longer URL is refused by
/// the config check, naming its key, rather than failing every attempt.
pub const HTTP_MAX_URL_BYTES: usize = HTTP_MAX_HEADER_LINE_BYTES - "PATCH  HTTP/1.1\r\n".len();

/// Each HTTP client connection's read and write buffers, which hold a
/// response head or a request line whole, with room to tell one that is
/// too long. Every pooled connection keeps its buffers: ureq's defaults
/// (128 KiB each way) made a connection cost 256 KiB, and a node with many
/// sinks, each keeping up to `sink_concurrency` connections, grew by
/// hundreds of megabytes.
pub const HTTP_BUFFER_BYTES: usize = HTTP_MAX_RESPONSE_HEAD_BYTES + 1024;
// The write buffer holds the longest header line goad sends whole.
const _: () = assert!(HTTP_MAX_HEADER_LINE_BYTES < HTTP_BUFFER_BYTES);

/// Longest an outcome or claim waits uncommitted in a shard's open write
/// transaction (a crash within it redelivers, never loses).
pub const OUTCOME_FLUSH_MS: u64 = 10;

/// Most operations a shard's write transaction holds before it is committed.
pub const MAX_UNFLUSHED_OPS: usize = 16_384;

/// How long a shard waits after a failed store write before it scans
/// again, so a store that keeps failing costs a retry a second, not a busy
/// loop.
pub const STORE_RETRY_MS: u64 = 1_000;

/// Longest a shard waits for more commits before a sync when the last sync
/// served many more than are queued (group commit; see `runtime::shard`).
pub const GROUP_COMMIT_LINGER_US: u64 = 200;

/// A shard that panics restarts from its store at once; one that panics
/// again within `SHARD_HEALTHY_RUN_MS` of its restart first refuses commits
/// for `SHARD_RESTART_DELAY_MS`, doubling per repeat up to
/// `SHARD_MAX_RESTART_DELAY_MS` (see `runtime::restart`).
pub const SHARD_HEALTHY_RUN_MS: u64 = 60_000;
pub const SHARD_RESTART_DELAY_MS: u64 = 1_000;
pub const SHARD_MAX_RESTART_DELAY_MS: u64 = 60_000;

/// How long `commit` waits for room in a full shard input channel before
/// it reports the queue as full.
pub const COMMIT_QUEUE_WAIT_MS: u64 = 1_000;

/// How long `commit` waits for its batch to be durable before giving up.
pub const COMMIT_REPLY_WAIT_MS: u64 = 30_000;

/// How often the stall watcher wakes (see `runtime::stall`).
pub const STALL_TICK_MS: u64 = 100;

/// How late past its tick the stall watcher must wake for the gap to be a
/// stall of the process (see `runtime::stall`): well above any delay of
/// a sleeping thread's wake-up on a busy machine.
pub const STALL_MIN_MS: u64 = 2_000;

/// How far the wall clock must be behind a shard's stored clock at open
/// for the step back to be logged (see `runtime::clock`).
pub const CLOCK_BEHIND_LOGGED_MS: u64 = 1_000;

/// Longest a shard sleeps with nothing to do, so that a lost wake-up costs at
/// most this much.
pub const MAX_SLEEP_MS: u64 = 1_000;

/// The largest `dispatch.concurrency`: each shard's IO pool has that many
/// worker threads, so a value past what threads can serve (a typo of a few
/// zeros) would start tens of thousands of them at open or reload.
pub const MAX_CONCURRENCY: u32 = 4_096;

/// Stuck workers (their attempt timed out and never came back) a shard's IO
/// pool replaces; past this the pool runs short and says so in its stats.
pub const MAX_ABANDONED_WORKERS: usize = 64;

/// How often a busy shard reports its demand to the coordinator.
pub const REPORT_INTERVAL_MS: u64 = 50;

/// `max_body_bytes` by default: the largest hook body a commit takes.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 1024 * 1024;

/// The most of a content-encoded ingest body decoded to find its dedupe
/// key at a source's `dedupe_json_pointer`: a body that decodes to more
/// (a compression bomb among them) makes a hook without a key.
pub const DEDUPE_DECODED_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// `goad demo --committers` at most: each is a thread.
pub const DEMO_MAX_COMMITTERS: u64 = 1_024;

/// `goad demo --hooks` at most: what commits and settles well within the
/// demo's two minutes on a small machine.
pub const DEMO_MAX_HOOKS: u64 = 1_000_000;

/// `max_shard_bytes` by default: each shard's LMDB map (address space,
/// not disk; the file grows as it fills).
pub const DEFAULT_MAX_SHARD_BYTES: u64 = 64 * 1024 * 1024 * 1024;

/// The smallest `max_shard_bytes`: room for a few thousand small hooks.
pub const MIN_SHARD_BYTES: u64 = 16 * 1024 * 1024;

/// The largest `max_shard_bytes` (every shard's map shares the process's
/// address space).
pub const MAX_SHARD_BYTES: u64 = 4 * 1024 * 1024 * 1024 * 1024;

/// `min_free_disk_bytes` by default: what new hooks leave free on the file
/// system holding the data directory, for the writes that record
/// deliveries (and for whatever else shares the disk: logs, a claim check).
pub const DEFAULT_MIN_FREE_DISK_BYTES: u64 = 256 * 1024 * 1024;

/// The smallest `min_free_disk_bytes`. Recording deliveries grows a
/// store's file by what its write transactions copy before LMDB frees the
/// old pages: measured at 12–31 MB for backlogs of 3,000 to 100,000 rows
/// parked again and again (docs/operations.md, "The disk is full").
pub const MIN_FREE_DISK_FLOOR_BYTES: u64 = 64 * 1024 * 1024;

/// The largest `min_free_disk_bytes` (a larger one is likely a unit mistake).
pub const MIN_FREE_DISK_CEILING_BYTES: u64 = 1024 * 1024 * 1024 * 1024 * 1024;

/// How often a shard whose store keeps failing logs it (see
/// `runtime::failure_log`).
pub const STORE_FAILURE_LOG_INTERVAL_MS: u64 = 10_000;

/// How often a shard taking commits measures again what its store and
/// the disk have room for (see `runtime::room`).
pub const STORE_MEASURE_INTERVAL_MS: u64 = 1_000;

/// The part of a shard's map new hooks may not fill: the writes that
/// record deliveries, retries and replays need pages too (see
/// `store::fill`).
pub const SHARD_OUTCOME_RESERVE_DIVISOR: u64 = 8;

/// Longest `Retry-After` a sink may ask for.
pub const MAX_RETRY_AFTER_MS: u64 = 3_600_000;

/// Longest error text kept on a row.
pub const MAX_ERROR_TEXT_BYTES: usize = 1_024;

/// Default per-phase timeout of an HTTP sink.
pub const HTTP_TIMEOUT_MS: u64 = 5_000;

/// Default response bytes an HTTP sink reads before dropping the rest.
pub const HTTP_MAX_RESPONSE_BYTES: u64 = 65_536;

/// Default largest body a queue sink sends inline; larger ones go to the claim check.
pub const INLINE_MAX_BYTES: u64 = 65_536;

/// Default time a claim is kept after its last check-in: 7 days.
pub const CLAIM_RETENTION_MS: u64 = 7 * 24 * 3_600_000;

/// The shortest `dead_letters.retention_ms` other than 0 (off): shorter
/// is more likely a unit mistake than a policy.
pub const MIN_DEAD_RETENTION_MS: u64 = 1_000;

/// How long a done replay is kept by default (`replay.retention_ms`): a
/// week to look back at what it did.
pub const DEFAULT_REPLAY_RETENTION_MS: u64 = 7 * 24 * 3_600_000;

/// The shortest `replay.retention_ms`: shorter is more likely a unit
/// mistake than a policy.
pub const MIN_REPLAY_RETENTION_MS: u64 = 1_000;

/// Replays a node keeps (running, paused, or done within
/// `replay.retention_ms`) before it refuses new ones: each is a file read
/// at start and a job the pacer looks at ten times a second.
pub const MAX_STORED_REPLAYS: usize = 100_000;

/// Longest a shard waits between sweeps for dead letters past
/// `dead_letters.retention_ms`.
pub const DEAD_EXPIRY_INTERVAL_MS: u64 = 60_000;

/// Longest a shard waits after logging dead-lettered rows before it logs
/// more: a sink refusing everything gets a line per key this often.
pub const DEAD_LOG_INTERVAL_MS: u64 = 10_000;

/// Longest the claim sweeper sleeps between sweeps.
pub const CLAIM_SWEEP_INTERVAL_MS: u64 = 3_600_000;

/// Default largest SQS message (body and attributes): SQS's own limit,
/// for one message and for a batch's messages together.
pub const SQS_MAX_MESSAGE_BYTES: u64 = 1_048_576;

/// Default largest Pub/Sub message (data, attributes, ordering key):
/// Pub/Sub's own limit, for one message and for a publish request.
pub const PUBSUB_MAX_MESSAGE_BYTES: u64 = 10_000_000;

/// Longest value of a Pub/Sub message's attribute, and longest ordering
/// key: Pub/Sub's own limits (bytes). A message past either is refused,
/// and with it its whole publish.
pub const PUBSUB_MAX_ATTRIBUTE_VALUE_BYTES: usize = 1_024;
pub const PUBSUB_MAX_ORDERING_KEY_BYTES: usize = 1_024;

/// Most messages in one SQS `SendMessageBatch`: SQS's own limit.
pub const SQS_BATCH_MAX_ENTRIES: u16 = 10;

/// Most messages in one Pub/Sub publish: Pub/Sub's own limit.
pub const PUBSUB_BATCH_MAX_ENTRIES: u16 = 1_000;

/// Most attempts in one batch of any sink; a host sink asking for more
/// gets this many.
pub const MAX_BATCH_ENTRIES: u16 = 1_000;

/// How long an OAuth 2 token whose answer names no lifetime is kept (a
/// receiver's 401 to it sooner drops it).
pub const OAUTH2_DEFAULT_LIFETIME_S: u64 = 3_600;

/// The longest a fetched token or credentials are taken to live, whatever
/// their answer says: an answer may name a time no clock holds (an
/// `expires_in` of 10^19 s), and one kept a year is fetched again anyway
/// when a receiver refuses it.
pub const FETCHED_MAX_LIFETIME_S: u64 = 365 * 86_400;

/// How long an issuer's key set (a source's `ingest_jwt`) is used before
/// it is fetched again, when its answer gives no `Cache-Control: max-age`;
/// a max-age is followed up to `JWKS_MAX_FRESH_S`.
pub const JWKS_DEFAULT_FRESH_S: u64 = 3_600;
pub const JWKS_MAX_FRESH_S: u64 = 86_400;

/// The least time between two fetches of one key set: a token naming a
/// key the set lacks asks for it again at most this often, whoever sends
/// such tokens.
pub const JWKS_MIN_REFETCH_MS: u64 = 10_000;

/// Seconds a token's `exp` and `nbf` may be off from the node's clock.
pub const JWT_CLOCK_SKEW_S: u64 = 60;

/// Fetched AWS credentials are fetched again this long before they expire.
pub const CREDENTIALS_REFRESH_MS: u64 = 5 * 60_000;

/// How many times a refresh of credentials or a token that keeps failing
/// is tried over that margin (the one in hand serving meanwhile): one
/// try each tenth of it, not one per attempt.
pub const CREDENTIALS_REFRESH_TRIES: u32 = 10;

/// How long fetched AWS credentials that name no expiry are kept.
pub const CREDENTIALS_LIFETIME_MS: u64 = 15 * 60_000;

/// How long an AWS profile's `credential_process` may run before it is
/// killed (with the processes it started) and the attempt fails.
pub const CREDENTIAL_PROCESS_TIMEOUT_MS: u64 = 30_000;

/// The most of a `credential_process`'s output read: its standard output
/// (a credentials document of a few hundred bytes) and its standard error.
pub const CREDENTIAL_PROCESS_OUTPUT_BYTES: u64 = 64 * 1024;

/// How long an assumed role's credentials last (STS's default, and the
/// most a role allows unless its maximum session duration is raised).
pub const ASSUMED_ROLE_DURATION_S: u64 = 3_600;

/// Where a Pub/Sub sink publishes unless its `endpoint` says otherwise.
pub const PUBSUB_ENDPOINT: &str = "https://pubsub.googleapis.com";

/// How long `shutdown` waits for running attempts before leaving them due.
pub const SHUTDOWN_GRACE_MS: u64 = 5_000;

/// Due rows of one tenant read per call while scanning.
pub const MAX_DUE_PAGE_ROWS: usize = 4_096;

/// Undecodable due entries one scan steps over before it stops reading; the
/// shell sets them aside and scans again.
pub const MAX_UNREADABLE_DUE_PER_SCAN: usize = 1_024;

/// Dead keys one replay step examines in a shard before it yields (so a
/// replay behind many non-matching dead rows still progresses, a page per step).
pub const REPLAY_SCAN_BUDGET: usize = 20_000;

/// Largest HTTP request head (request line and headers) the node reads.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Most headers in one HTTP request to the node.
pub const MAX_HEADERS: usize = 64;

/// Bytes the node reads from a socket per read call.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;

/// The most room a connection's emptied read buffer keeps for its next
/// request: a head and a read's worth (a large body's room is let go).
pub const RETAINED_INPUT_BYTES: usize = MAX_HEAD_BYTES + READ_CHUNK_BYTES;

/// Bytes of answers one connection to the node may hold unwritten before
/// the node answers no further request of it (a client that pipelines
/// requests and never reads the answers); it goes on as the client reads.
pub const MAX_PENDING_OUTPUT_BYTES: usize = 256 * 1024;

/// How long a stopping node waits for in-flight requests before it closes them.
pub const HTTP_DRAIN_MS: u64 = 10_000;

/// How long a connection the node closes after its last answer (an error,
/// `Connection: close`, a read timeout) goes on being read, and its bytes
/// dropped, waiting for its client to close first (see
/// `node::http::linger`).
pub const LINGER_MS: u64 = 2_000;

/// The most a closing connection reads and drops: past that the node
/// resets it. A client sending a body well over `max_body_bytes` gets its
/// 413 if the rest of its body is no larger.
pub const LINGER_BYTES: usize = 16 * 1024 * 1024;

/// The largest config file goad reads (a node of 100,000 sources is
/// ~20 MB): one larger, or an endless stream, is refused, not read into
/// memory (`bounded_read`).
pub const MAX_CONFIG_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// The largest certificate, key or credentials file goad reads (a CA
/// bundle of every public root is ~220 KB).
pub const MAX_KEY_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// How many connections refused at `http.max_connections` (503) may close
/// in stages at once, besides the cap; past that, one is closed at once
/// (and its client, if it sent its request, may see a reset instead).
pub const REFUSALS_LINGERING: usize = 64;

const _: () = assert!(MAX_INPUTS_PER_ITERATION <= SHARD_INPUT_CAPACITY);
const _: () = assert!(MIN_SHARD_BYTES <= DEFAULT_MAX_SHARD_BYTES);
const _: () = assert!(DEFAULT_MAX_SHARD_BYTES <= MAX_SHARD_BYTES);
const _: () = assert!(MIN_FREE_DISK_FLOOR_BYTES <= DEFAULT_MIN_FREE_DISK_BYTES);
const _: () = assert!(DEFAULT_MIN_FREE_DISK_BYTES <= MIN_FREE_DISK_CEILING_BYTES);
const _: () = assert!(MAX_SINKS_PER_SOURCE <= u16::MAX as usize);
const _: () = assert!(MAX_SHARDS <= u32::MAX as usize);
const _: () = assert!(SQS_BATCH_MAX_ENTRIES <= MAX_BATCH_ENTRIES);
const _: () = assert!(CREDENTIALS_REFRESH_MS < CREDENTIALS_LIFETIME_MS);
const _: () = assert!(CREDENTIALS_REFRESH_MS < ASSUMED_ROLE_DURATION_S * 1_000);
const _: () = assert!(PUBSUB_BATCH_MAX_ENTRIES <= MAX_BATCH_ENTRIES);
