//! The `goad` command.

#![deny(clippy::unwrap_used, clippy::undocumented_unsafe_blocks)]

mod args;
mod drain;
mod local;
mod remote;

use args::{query, Cli, Command, DlqCommand};
use clap::Parser;
use drain::drain_and_wait;
use goad::node::client::encode;
use local::{check, keygen, reshard, serve, verify};
use remote::{backup, failing_sinks, print_call, show};
use signal_hook::consts::{SIGINT, SIGTERM};
use std::process::ExitCode;
use std::sync::Arc;

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Demo {
            hooks,
            committers,
            body_bytes,
        } => demo(goad::demo::DemoOptions {
            hooks,
            committers,
            body_bytes,
            interrupted: Arc::default(),
        }),
        Command::Serve {
            config,
            allow_open_admin,
        } => serve(config, allow_open_admin),
        Command::Check {
            config,
            environment,
            allow_open_admin,
        } => check(&config, environment.then_some(allow_open_admin)),
        Command::Keygen { hmac } => keygen(hmac),
        Command::Verify { config, data_dir } => verify(config, data_dir),
        Command::Reshard { config, shards } => reshard(config, shards),
        Command::Hook { node, id, body } => {
            show(&node, &format!("/v1/hooks/{}", encode(&id)), body)
        }
        Command::Backup { node, to } => backup(&node, &to),
        Command::Drain {
            node,
            end,
            status,
            wait,
        } => {
            let method = match (end, status) {
                (_, true) => "GET",
                (true, _) => "DELETE",
                _ => "POST",
            };
            match wait {
                Some(wait) => drain_and_wait(&node, method, wait),
                None => print_call(&node, method, "/v1/drain", None),
            }
        }
        Command::Reload(node) => print_call(&node, "POST", "/v1/reload", None),
        Command::Dlq { command } => dlq(command),
        Command::Pressure(node) => print_call(&node, "GET", "/v1/pressure", None),
        Command::Stats(node) => print_call(&node, "GET", "/v1/stats", None),
        Command::Sources { node, listing } => print_call(
            &node,
            "GET",
            &format!("/v1/sources{}", listing.query()),
            None,
        ),
        Command::Wake { node, source, sink } => {
            let path = format!("/v1/sources/{}/sinks/{sink}/wake", encode(&source));
            print_call(&node, "POST", &path, None)
        }
        Command::Sinks {
            node,
            listing,
            failing,
        } => {
            let path = format!("/v1/sinks{}", listing.query());
            match failing {
                true => failing_sinks(&node, &path),
                false => print_call(&node, "GET", &path, None),
            }
        }
    }
}

/// `goad demo`: the engine against loopback receivers of its own. The
/// first SIGINT or SIGTERM ends it early, its temporary data directory
/// removed; a second one ends the process at once.
fn demo(options: goad::demo::DemoOptions) -> ExitCode {
    for signal in [SIGINT, SIGTERM] {
        let interrupted = &options.interrupted;
        let registered =
            signal_hook::flag::register_conditional_shutdown(signal, 1, interrupted.clone())
                .and_then(|_| signal_hook::flag::register(signal, interrupted.clone()));
        if let Err(e) = registered {
            eprintln!("goad demo: cannot handle signal {signal}: {e}");
            return ExitCode::FAILURE;
        }
    }
    match goad::demo::run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("goad demo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `goad dlq …`: a node's dead letters and replays.
fn dlq(command: DlqCommand) -> ExitCode {
    match command {
        DlqCommand::List {
            node,
            filter,
            limit,
            cursor,
        } => {
            let query = filter.query(&[("limit", Some(limit.to_string())), ("cursor", cursor)]);
            print_call(&node, "GET", &format!("/v1/dead-letters{query}"), None)
        }
        DlqCommand::Add { node, source } => {
            let path = format!("/v1/sources/{}/dead-letter", encode(&source));
            print_call(&node, "POST", &path, None)
        }
        DlqCommand::Show { node, id, body } => {
            show(&node, &format!("/v1/dead-letters/{}", encode(&id)), body)
        }
        DlqCommand::Purge { node, filter, all } => {
            let query = filter.query(&[]);
            match (query.is_empty(), all) {
            (true, false) => usage("goad dlq purge: give a filter (--source, --tenant, --hook, --sink, --reason, --since, --until), or --all to delete every dead letter"),
            (false, true) => usage("goad dlq purge: --all deletes every dead letter; give it no filter"),
            _ => print_call(&node, "DELETE", &format!("/v1/dead-letters{query}"), None),
        }
        }
        DlqCommand::Replay { node, filter } => {
            let body = serde_json::json!({
                "source_id": filter.source,
                "tenant": filter.tenant,
                "hook_id": filter.hook,
                "sink_index": filter.sink,
                "reason": filter.reason,
                "since_ms": filter.since_ms,
                "until_ms": filter.until_ms,
            });
            print_call(&node, "POST", "/v1/replays", Some(&body))
        }
        DlqCommand::Replays {
            node,
            id,
            pause,
            resume,
            state,
            limit,
            cursor,
        } => match (id, pause, resume) {
            (None, ..) => {
                let params = [
                    ("state", state),
                    ("limit", Some(limit.to_string())),
                    ("cursor", cursor),
                ];
                let path = format!("/v1/replays{}", query(params.iter()));
                print_call(&node, "GET", &path, None)
            }
            (Some(id), false, false) => {
                print_call(&node, "GET", &format!("/v1/replays/{}", encode(&id)), None)
            }
            (Some(id), pause, _) => {
                let action = if pause { "pause" } else { "resume" };
                let path = format!("/v1/replays/{}/{action}", encode(&id));
                print_call(&node, "POST", &path, None)
            }
        },
    }
}

/// A command given wrongly: `why` on stderr, exit 2.
fn usage(why: &str) -> ExitCode {
    eprintln!("{why}");
    ExitCode::from(2)
}
