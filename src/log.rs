//! Structured log lines on stderr, in logfmt:
//! `ts_ms=1764495000123 level=info msg="node listening" addr=127.0.0.1:7878 scheme=http`.
//! A value with a space, a quote, an `=` or nothing in it is quoted.
//!
//! With `GOAD_LOG_FORMAT=json` in the environment (read at the first
//! line), each line is a JSON object instead, for log pipelines that parse
//! JSON (Cloud Logging, CloudWatch, Elasticsearch):
//! `{"ts_ms":1764495000123,"level":"info","msg":"node listening","addr":"127.0.0.1:7878","scheme":"http"}`;
//! the fields' values are strings.

use std::fmt::{self, Display, Write as _};
use std::io::Write as _;
use std::sync::OnceLock;

/// The variable that picks the format: `logfmt` (the default) or `json`.
pub const FORMAT_VARIABLE: &str = "GOAD_LOG_FORMAT";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Logfmt,
    Json,
}

/// The format `GOAD_LOG_FORMAT` names, read once; another value is told
/// of (in logfmt) and logfmt used.
fn format() -> Format {
    static FORMAT: OnceLock<Format> = OnceLock::new();
    *FORMAT.get_or_init(|| match std::env::var(FORMAT_VARIABLE).as_deref() {
        Ok("json") => Format::Json,
        Ok("logfmt") | Err(std::env::VarError::NotPresent) => Format::Logfmt,
        Ok(other) => {
            let line = format_line(
                crate::runtime::wall_ms(),
                Level::Warn,
                "unknown log format; logging logfmt",
                &[(FORMAT_VARIABLE, &other), ("known", &"logfmt, json")],
            );
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
            Format::Logfmt
        }
        Err(std::env::VarError::NotUnicode(_)) => Format::Logfmt,
    })
}

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
    let ts_ms = crate::runtime::wall_ms();
    let line = match format() {
        Format::Logfmt => format_line(ts_ms, level, msg, fields),
        Format::Json => format_json_line(ts_ms, level, msg, fields),
    };
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

fn format_json_line(
    ts_ms: u64,
    level: Level,
    msg: &str,
    fields: &[(&str, &dyn Display)],
) -> String {
    // Written in order (ts_ms, level, msg, then the fields as given), each
    // key and value escaped as a JSON string.
    let quoted = |text: &str| serde_json::Value::from(text).to_string();
    let mut line = format!(
        "{{\"ts_ms\":{ts_ms},\"level\":\"{level}\",\"msg\":{}",
        quoted(msg)
    );
    for (key, value) in fields {
        let _ = write!(line, ",{}:{}", quoted(key), quoted(&value.to_string()));
    }
    line.push_str("}\n");
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

    #[test]
    fn a_json_line_is_one_object_with_the_fields_as_strings() {
        let line = format_json_line(
            5,
            Level::Error,
            "store failed",
            &[("shard", &3), ("error", &"disk \"full\"\nnow")],
        );
        assert_eq!(
            line,
            "{\"ts_ms\":5,\"level\":\"error\",\"msg\":\"store failed\",\"shard\":\"3\",\"error\":\"disk \\\"full\\\"\\nnow\"}\n"
        );
    }
}
