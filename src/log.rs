//! Structured log lines on stderr, in logfmt:
//! `ts_ms=1764495000123 level=info msg="node listening" addr=127.0.0.1:7878 scheme=http`.
//! A value with a space, a quote, an `=` or nothing in it is quoted.

use std::fmt::{self, Display, Write as _};
use std::io::Write as _;

#[derive(Debug, Clone, Copy)]
pub enum Level {
    Info,
    Warn,
    Error,
}

impl Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        })
    }
}

pub fn info(msg: &str, fields: &[(&str, &dyn Display)]) {
    write(Level::Info, msg, fields);
}

pub fn warn(msg: &str, fields: &[(&str, &dyn Display)]) {
    write(Level::Warn, msg, fields);
}

pub fn error(msg: &str, fields: &[(&str, &dyn Display)]) {
    write(Level::Error, msg, fields);
}

/// A line of a command's output on stdout. A reader that went away (`goad
/// dlq list | head`) is no error: the command goes on to its end, as it
/// would have with a reader that read everything.
pub fn out(line: fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stdout(), "{line}");
}

/// `println!` for a command's output, through [`out`].
#[macro_export]
macro_rules! say {
    () => {
        $crate::log::out(format_args!(""))
    };
    ($($line:tt)*) => {
        $crate::log::out(format_args!($($line)*))
    };
}

/// One line, written whole so lines from threads do not interleave.
pub fn write(level: Level, msg: &str, fields: &[(&str, &dyn Display)]) {
    let line = format_line(crate::runtime::wall_ms(), level, msg, fields);
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

fn format_line(ts_ms: u64, level: Level, msg: &str, fields: &[(&str, &dyn Display)]) -> String {
    let mut line = format!("ts_ms={ts_ms} level={level} msg=");
    push_value(&mut line, msg);
    for (key, value) in fields {
        let _ = write!(line, " {key}=");
        push_value(&mut line, &value.to_string());
    }
    line.push('\n');
    line
}

fn push_value(line: &mut String, value: &str) {
    let plain = !value.is_empty()
        && !value
            .chars()
            .any(|c| c.is_whitespace() || c == '"' || c == '=' || c.is_control());
    if plain {
        line.push_str(value);
    } else {
        let _ = write!(line, "{value:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_with_spaces_quotes_or_nothing_are_quoted() {
        let line = format_line(
            5,
            Level::Warn,
            "store failed",
            &[("shard", &3), ("error", &"disk \"full\""), ("empty", &"")],
        );
        assert_eq!(
            line,
            "ts_ms=5 level=warn msg=\"store failed\" shard=3 error=\"disk \\\"full\\\"\" empty=\"\"\n"
        );
    }
}
