//! The `goad` command.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "goad",
    version,
    about = "A thread-per-core webhook dispatch engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the engine in-process against loopback receivers and print a summary.
    Demo {
        /// Hooks to commit.
        #[arg(long, default_value_t = 4_000)]
        hooks: u64,
        /// Threads committing at once.
        #[arg(long, default_value_t = 16)]
        committers: usize,
        /// Body size of each hook.
        #[arg(long, default_value_t = 1_024)]
        body_bytes: usize,
    },
    /// Validate a config file: exit 0, or print the error and exit 2.
    Check {
        #[arg(long)]
        config: PathBuf,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Demo {
            hooks,
            committers,
            body_bytes,
        } => match goad::demo::run(&goad::demo::DemoOptions {
            hooks,
            committers,
            body_bytes,
        }) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("goad demo: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Check { config } => match goad::Config::load(&config) {
            Ok(c) => {
                println!("{}: ok ({} sources)", config.display(), c.sources.len());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(2)
            }
        },
    }
}
