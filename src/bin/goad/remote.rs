//! The subcommands that ask a running node, through its admin API.

use crate::args::NodeArgs;
use goad::node::client::ClientError;
use goad::say;
use std::process::ExitCode;
use std::time::Duration;

/// `goad hook` and `goad dlq show`: the node's JSON answer for `path`, or
/// with `body` only the hook's body.
pub fn show(node: &NodeArgs, path: &str, body: bool) -> ExitCode {
    match body {
        false => print_call(node, "GET", path, None),
        true => print_body(node, path),
    }
}

/// `--body`: the body of the hook `path` shows, decoded, on stdout.
fn print_body(node: &NodeArgs, path: &str) -> ExitCode {
    use base64::Engine as _;
    use std::io::Write as _;
    let letter = node.client().and_then(|c| c.call("GET", path, None));
    let body = letter.and_then(|letter| {
        let encoded = letter["body_base64"].as_str().unwrap_or_default();
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|e| ClientError(format!("{path}: the body is not base64: {e}")))
    });
    match body.map(|body| std::io::stdout().write_all(&body)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        // A reader that went away (`| head -c 100`) is no error.
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("goad: writing the body: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("goad: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `goad backup`: the node writes the backup; this waits up to an hour.
pub fn backup(node: &NodeArgs, to: &std::path::Path) -> ExitCode {
    const BACKUP_WAIT: Duration = Duration::from_secs(3_600);
    let to = match std::path::absolute(to) {
        Ok(to) => to,
        Err(e) => {
            eprintln!("goad: --to {}: {e}", to.display());
            return ExitCode::from(2);
        }
    };
    let body = serde_json::json!({"to": to});
    let answer =
        (node.client()).and_then(|c| c.call_within("POST", "/v1/backup", Some(&body), BACKUP_WAIT));
    print_answer(answer)
}

/// `goad sinks --failing`: the sinks `path` lists whose breaker is not
/// closed or whose latest attempt failed.
pub fn failing_sinks(node: &NodeArgs, path: &str) -> ExitCode {
    let listed = node.client().and_then(|c| c.call("GET", path, None));
    print_answer(listed.map(|mut listing| {
        if let Some(sinks) = listing["sinks"].as_array_mut() {
            sinks.retain(failing);
        }
        listing
    }))
}

/// Whether a sink of `/v1/sinks` is failing now: its breaker open or
/// half-open, or a failure since its last delivery.
fn failing(sink: &serde_json::Value) -> bool {
    let failed_at = sink["last_failure"]["at_ms"].as_u64();
    let delivered_at = sink["last_delivered_at_ms"].as_u64();
    sink["breaker"] != "closed" || failed_at > delivered_at
}

pub fn print_call(
    node: &NodeArgs,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> ExitCode {
    print_answer(node.client().and_then(|c| c.call(method, path, body)))
}

/// A node's JSON answer on stdout, or its error on stderr (exit 1).
pub fn print_answer(answer: Result<serde_json::Value, ClientError>) -> ExitCode {
    match answer {
        Ok(value) => {
            say!(
                "{}",
                serde_json::to_string_pretty(&value).expect("JSON values print")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("goad: {e}");
            ExitCode::FAILURE
        }
    }
}
