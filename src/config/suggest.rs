//! "Did you mean": for a key (or a value of a fixed set) that serde does
//! not know, the nearest one it expected, so a typo among a sink's
//! thirty-odd keys is named rather than left to be found in the list; and
//! for a top-level key written under a table's header (in TOML every key
//! after `[http]` is `http`'s), where it belongs.

use serde::de::{Deserialize, Deserializer, Error as _, Visitor};

/// How alike (Jaro, 0 to 1) a known name must be to what was written to
/// be suggested. clap suggests above 0.7 (Jaro too: strsim's
/// Jaro-Winkler rates long shared prefixes too high); config names share
/// suffixes (`_env`, `_ms`) that lift unrelated pairs near that
/// (`req_options` and `region`: 0.70), so a little more is asked.
const MIN_LIKENESS: f64 = 0.75;

/// What to add to serde's `message` about an unknown key or value, if
/// anything: that a key unknown in a table (`nested`) is one of the top
/// level's, or else the known name nearest to it.
pub(super) fn hint(message: &str, nested: bool) -> Option<String> {
    let top_level = (message.strip_prefix("unknown field `"))
        .and_then(|rest| rest.split_once('`'))
        .map(|(unknown, _)| unknown)
        .filter(|unknown| nested && top_level_keys().contains(unknown));
    match top_level {
        Some(key) => Some(format!(
            "`{key}` is a top-level key: in TOML every key after a [table] header is that table's, so write it above the first one"
        )),
        None => nearest_expected(message).map(|name| format!("did you mean `{name}`?")),
    }
}

/// The keys of the config's top level, as serde knows them.
fn top_level_keys() -> &'static [&'static str] {
    let mut keys = &[][..];
    let _ = super::Config::deserialize(StructFields(&mut keys));
    keys
}

/// A deserializer that only takes the field names of the struct asked of it.
struct StructFields<'a>(&'a mut &'static [&'static str]);

impl<'de> Deserializer<'de> for StructFields<'_> {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(Self::Error::custom("only a struct's field names are taken"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(Self::Error::custom("the field names are taken"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// The name serde's `message` expected that is nearest to the one it
/// calls unknown ("unknown field `x`, expected one of `a`, `b`", or
/// "unknown variant …"), if one is near enough.
fn nearest_expected(message: &str) -> Option<&str> {
    let rest = (message.strip_prefix("unknown field `"))
        .or_else(|| message.strip_prefix("unknown variant `"))?;
    let (unknown, expected) = rest.split_once("`, expected ")?;
    // `a`, `a` or `b`, one of `a`, `b`, `c`: the names are every other
    // piece between backquotes.
    nearest(unknown, expected.split('`').skip(1).step_by(2))
}

/// The name of `known` nearest to `unknown`, if one is near enough (a
/// name written in another case is as near as can be).
pub(super) fn nearest<'a>(
    unknown: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let unknown = unknown.to_lowercase();
    let names = known
        .into_iter()
        .map(|name| (strsim::jaro(&unknown, &name.to_lowercase()), name));
    let (likeness, name) = names.max_by(|a, b| a.0.total_cmp(&b.0))?;
    (likeness >= MIN_LIKENESS).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_near_name_is_suggested_and_a_far_one_is_not() {
        let sink = "unknown field `secret_evn`, expected one of `type`, `url`, `url_env`, `secret_env`, `session_token_env`, `paused`";
        assert_eq!(nearest_expected(sink), Some("secret_env"));
        let dispatch = "unknown field `concurency`, expected one of `batch`, `concurrency`, `sink_concurrency`";
        assert_eq!(nearest_expected(dispatch), Some("concurrency"));
        let one = "unknown field `too`, expected `to`";
        assert_eq!(nearest_expected(one), Some("to"));
        let variant = "unknown variant `basci`, expected `basic` or `body`";
        assert_eq!(nearest_expected(variant), Some("basic"));
        let retry = "unknown field `retries`, expected one of `sources`, `retry`, `dispatch`";
        assert_eq!(nearest_expected(retry), Some("retry"));
        let cased = "unknown field `Retry`, expected one of `sources`, `retry`, `dispatch`";
        assert_eq!(nearest_expected(cased), Some("retry"));
        let far = "unknown field `poll_ms`, expected one of `batch`, `max_ms`, `concurrency`";
        assert_eq!(nearest_expected(far), None);
        let sinkish = "unknown field `req_options`, expected one of `region`, `role_arn`";
        assert_eq!(nearest_expected(sinkish), None);
        assert_eq!(nearest_expected("invalid type: string, expected u64"), None);
        assert_eq!(
            nearest_expected("unknown field `x`, there are no fields"),
            None
        );
    }

    #[test]
    fn a_top_level_key_under_a_table_is_said_to_be_one() {
        assert!(top_level_keys().contains(&"listen"));
        assert!(top_level_keys().contains(&"sources"));
        let listen = "unknown field `listen`, expected one of `read_timeout_ms`, `idle_timeout_ms`";
        let told = "`listen` is a top-level key: in TOML every key after a [table] header is that table's, so write it above the first one";
        assert_eq!(hint(listen, true).as_deref(), Some(told));
        // At the top level it is another key's typo.
        let top = "unknown field `listen`, expected one of `data_dir`, `listens`";
        assert_eq!(hint(top, false).as_deref(), Some("did you mean `listens`?"));
        let typo =
            "unknown field `idle_timeot_ms`, expected one of `read_timeout_ms`, `idle_timeout_ms`";
        let near = Some("did you mean `idle_timeout_ms`?");
        assert_eq!(hint(typo, true).as_deref(), near);
        assert_eq!(hint("invalid type: string, expected u64", true), None);
    }

    #[test]
    fn a_value_of_a_fixed_set_gets_the_nearest_name_of_it() {
        assert_eq!(
            nearest("githib", ["github", "stripe", "slack"]),
            Some("github")
        );
        assert_eq!(nearest("SQS", ["http", "sqs", "pubsub"]), Some("sqs"));
        assert_eq!(nearest("kafka", ["http", "sqs", "pubsub"]), None);
        assert_eq!(nearest("x", []), None);
    }
}
