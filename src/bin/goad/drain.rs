//! `goad drain --wait D`: drain a node (or, with `--status`, only watch it)
//! and wait until it holds no pending row, as a deploy script or a
//! pre-stop hook must before it stops the node.

use crate::args::NodeArgs;
use crate::remote::print_answer;
use goad::node::client::{ClientError, NodeClient};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How often the node is asked how many rows it still holds.
const ASK_EVERY: Duration = Duration::from_secs(1);

/// Asks `/v1/drain` with `method` (POST starts draining, GET only asks),
/// then asks again every second until `pending_rows` is 0, printing each
/// new count on stderr. Exits 0 with the node's last answer on stdout once
/// it holds nothing, 1 when `wait` passes first (naming what it holds and
/// the paused sinks that keep rows) or the node cannot be asked.
pub fn drain_and_wait(node: &NodeArgs, method: &str, wait: Duration) -> ExitCode {
    let client = match node.client() {
        Ok(client) => client,
        Err(e) => return print_answer(Err(e)),
    };
    print_answer(wait_until_drained(&client, method, wait))
}

fn wait_until_drained(
    client: &NodeClient,
    method: &str,
    wait: Duration,
) -> Result<serde_json::Value, ClientError> {
    let deadline = goad::runtime::deadline_after(wait);
    let mut state = client.call(method, "/v1/drain", None)?;
    let mut last_told = None;
    loop {
        let Some(pending) = state["pending_rows"].as_u64() else {
            let answer = format!("/v1/drain answered without a pending_rows count: {state}");
            return Err(ClientError(answer));
        };
        if pending == 0 {
            return Ok(state);
        }
        if last_told != Some(pending) {
            eprintln!("goad: {pending} rows pending");
            last_told = Some(pending);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ClientError(still_pending(&state, wait)));
        }
        std::thread::sleep(left.min(ASK_EVERY));
        state = client.call("GET", "/v1/drain", None)?;
    }
}

/// Why the wait ended with rows held.
fn still_pending(state: &serde_json::Value, wait: Duration) -> String {
    let pending = &state["pending_rows"];
    let waited = humantime::format_duration(wait);
    let paused: Vec<String> = (state["paused_sinks"].as_array().into_iter().flatten())
        .map(|s| {
            format!(
                "{}/{}",
                s["source_id"].as_str().unwrap_or("?"),
                s["sink_index"]
            )
        })
        .collect();
    let draining = match state["draining"].as_bool() {
        Some(false) => " (the node is not draining: goad drain starts it)",
        _ => "",
    };
    match paused.is_empty() {
        true => format!("{pending} rows still pending after {waited}{draining}"),
        false => format!(
            "{pending} rows still pending after {waited}{draining}; paused sinks hold theirs until resumed: {}",
            paused.join(", ")
        ),
    }
}
