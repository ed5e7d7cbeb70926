//! The subcommands that work on this machine: a node (`serve`), its config
//! (`check`), its data directory (`verify`, `reshard`) and signing keys
//! (`keygen`).

use goad::{say, Config, Node, NodeOptions};
use std::path::PathBuf;
use std::process::ExitCode;

/// Prints a new signing secret, each line after the comment saying what it is for.
pub fn keygen(hmac: bool) -> ExitCode {
    use goad::sink::signing::SigningKey;
    let made = match hmac {
        true => SigningKey::generate_secret().map(|secret| {
            format!("# the sink's secret_env variable and its receivers hold this shared secret:\n{secret}")
        }),
        false => SigningKey::generate().map(|(private, public)| {
            format!(
                "# the sink's secret_env variable holds this private key (keep it secret):\n{private}\n\
                 # its receivers verify the v1a signatures with this public key:\n{public}"
            )
        }),
    };
    match made {
        Ok(text) => {
            say!("{text}");
            ExitCode::SUCCESS
        }
        Err(_) => {
            eprintln!("goad keygen: the system gave no randomness");
            ExitCode::FAILURE
        }
    }
}

/// `goad check`: the file, and with `environment` (given by
/// `--environment`: whether `--allow-open-admin` was too) what it names;
/// without, it warns of an admin API a start would refuse to open.
pub fn check(path: &std::path::Path, environment: Option<bool>) -> ExitCode {
    let checked = Config::load(path)
        .map_err(|e| e.to_string())
        .and_then(|c| match environment {
            Some(allow_open_admin) => goad::node::check_environment(&c, allow_open_admin)
                .map(|warnings| {
                    warnings.iter().for_each(|w| eprintln!("warning: {w}"));
                    c
                })
                .map_err(|e| e.to_string()),
            None => {
                if let Some(refusal) = goad::node::open_admin_refusal(&c) {
                    eprintln!("warning: goad serve refuses this config: {refusal}");
                }
                Ok(c)
            }
        });
    match checked {
        Ok(c) => {
            c.warnings().iter().for_each(|w| eprintln!("warning: {w}"));
            let what = if environment.is_some() {
                "; its variables and files read"
            } else {
                ""
            };
            let sinks = c.sources.iter().map(|s| s.sinks.len()).sum();
            let (sources, sinks) = (counted(c.sources.len(), "source"), counted(sinks, "sink"));
            say!("{}: ok ({sources}, {sinks}{what})", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

/// "1 source", "2 sources".
fn counted(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// The config at `path`, or the embedded defaults; an invalid file is
/// logged and exits 2.
fn config_or_default(path: &Option<PathBuf>) -> Result<Config, ExitCode> {
    match path {
        Some(path) => Config::load(path).map_err(|e| {
            goad::log::error("invalid config", &[("error", &e)]);
            ExitCode::from(2)
        }),
        None => Ok(Config::default()),
    }
}

pub fn serve(config_path: Option<PathBuf>, allow_open_admin: bool) -> ExitCode {
    let config = match config_or_default(&config_path) {
        Ok(c) => c,
        Err(code) => return code,
    };
    goad::node::open_files::raise_soft_limit();
    let node = match Node::start(NodeOptions {
        config,
        config_path,
        allow_open_admin,
        notify_systemd: true,
    }) {
        Ok(node) => node,
        Err(e) => {
            goad::log::error("cannot start the node", &[("error", &e)]);
            return ExitCode::from(2);
        }
    };
    match node.wait() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            goad::log::error("the node stopped with an error", &[("error", &e)]);
            ExitCode::FAILURE
        }
    }
}

pub fn verify(config_path: Option<PathBuf>, data_dir: Option<PathBuf>) -> ExitCode {
    let mut config = match config_or_default(&config_path) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(dir) = data_dir {
        config.data_dir = dir;
    }
    let verified = goad::runtime::shards_to_open(&config)
        .and_then(|shards| goad::store::verify_data_dir(&config.data_dir, shards));
    let shards = match verified {
        Ok(shards) => shards,
        Err(e) => {
            eprintln!("goad verify: {e}");
            return ExitCode::from(2);
        }
    };
    let mut sound = true;
    for (k, shard) in shards.iter().enumerate() {
        let verdict = match shard.problem_count {
            0 => "sound".to_string(),
            1 => "1 problem".to_string(),
            n => format!("{n} problems"),
        };
        say!(
            "shard {k}: {} hooks; rows {} due, {} in flight, {} waiting in lanes, {} dead: {verdict}",
            shard.hooks, shard.due, shard.in_flight, shard.lane_members, shard.dead
        );
        for problem in &shard.problems {
            say!("  - {problem}");
        }
        let unlisted = shard.problem_count - shard.problems.len() as u64;
        if unlisted > 0 {
            say!("  - and {unlisted} more");
        }
        sound &= shard.problem_count == 0;
    }
    if sound {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

pub fn reshard(config_path: Option<PathBuf>, shards: usize) -> ExitCode {
    let config = match config_or_default(&config_path) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let to_shards = Config {
        shards,
        ..config.clone()
    }
    .shard_count();
    let now_ms = goad::runtime::wall_ms();
    match goad::store::reshard(
        &config.data_dir,
        to_shards,
        config.max_shard_bytes,
        goad::Engine::shard_of,
        now_ms,
    ) {
        Ok(done) => {
            say!(
                "resharded {} from {} to {} shards: {} hooks, {} rows; the old shards are in {} \
                 (delete them once the node runs); set shards = {} in the config",
                config.data_dir.display(),
                done.from_shards,
                done.to_shards,
                done.hooks,
                done.rows,
                done.kept_at.display(),
                done.to_shards
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("goad reshard: {e}");
            ExitCode::from(2)
        }
    }
}
