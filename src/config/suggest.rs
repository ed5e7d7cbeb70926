//! "Did you mean": for a key (or a value of a fixed set) that serde does
//! not know, the nearest one it expected, so a typo among a sink's
//! thirty-odd keys is named rather than left to be found in the list; and
//! for a key of an enclosing table written under a sub-table's header (in
//! TOML every key after `[http]` is `http`'s, and after `[[sources.sinks]]`
//! the sink's), where it belongs.

use serde::de::{Deserialize, Deserializer, Error as _, Visitor};
use serde_path_to_error::Segment;

/// How alike (Jaro, 0 to 1) a known name must be to what was written to
/// be suggested. clap suggests above 0.7 (Jaro too: strsim's
/// Jaro-Winkler rates long shared prefixes too high); config names share
/// suffixes (`_env`, `_ms`) that lift unrelated pairs near that
/// (`req_options` and `region`: 0.70), so a little more is asked.
const MIN_LIKENESS: f64 = 0.75;

/// What to add to serde's `message` about the unknown key or value at
/// `path` (the key last), if anything: that a key is one of an enclosing
/// table's, or else the known name nearest to it.
pub(super) fn hint(message: &str, path: &[Segment]) -> Option<String> {
    misplaced_key(message, path)
        .or_else(|| nearest_expected(message).map(|name| format!("did you mean `{name}`?")))
        .or_else(|| whole_number(message))
}

/// What serde's Rust type means, for a key whose value is no number of
/// that type ("invalid value: integer `-1`, expected u32").
fn whole_number(message: &str) -> Option<String> {
    let max = match message.rsplit_once("expected ")?.1 {
        "u8" => u64::from(u8::MAX),
        "u16" => u64::from(u16::MAX),
        "u32" => u64::from(u32::MAX),
        "u64" | "usize" => u64::MAX,
        _ => return None,
    };
    Some(format!(
        "this key takes a whole number from 0 to {max}, without quotes"
    ))
}

/// Where a key unknown in its table belongs, when a table enclosing it
/// (the nearest) has it.
fn misplaced_key(message: &str, path: &[Segment]) -> Option<String> {
    let (key, _) = message.strip_prefix("unknown field `")?.split_once('`')?;
    let (_, table) = path.split_last()?;
    let owner = (0..table.len())
        .rev()
        .map(|depth| &table[..depth])
        .find(|owner| keys_of(owner).contains(&key))?;
    let rule = "a key written after a table's header is that table's";
    let table = shown(table);
    Some(match owner {
        [] => format!(
            "`{key}` is a top-level key, not one of {table}: {rule}, so write it above the file's first table header"
        ),
        _ => format!(
            "`{key}` is a key of {}, not of {table}: {rule}, so write it under {}, above its first sub-table header",
            shown(owner),
            header(owner)
        ),
    })
}

/// The keys of the table at `path`, for the tables others are written
/// under (the top level, `[dispatch]`, a source, a sink); none for others.
fn keys_of(path: &[Segment]) -> &'static [&'static str] {
    use super::{Config, DispatchConfig, SinkConfig, SourceConfig};
    let shape: Vec<&str> = (path.iter())
        .map(|segment| match segment {
            Segment::Map { key } => key.as_str(),
            _ => "[]",
        })
        .collect();
    match shape[..] {
        [] => fields::<Config>(),
        ["dispatch"] => fields::<DispatchConfig>(),
        ["sources", "[]"] => fields::<SourceConfig>(),
        ["sources", "[]", "sinks", "[]"] => fields::<SinkConfig>(),
        _ => &[],
    }
}

/// `path` as errors name a key: `sources[0].sinks[1]`.
fn shown(path: &[Segment]) -> String {
    path.iter().fold(String::new(), |mut shown, segment| {
        match segment {
            Segment::Seq { index } => shown += &format!("[{index}]"),
            Segment::Map { key } if shown.is_empty() => shown += key,
            Segment::Map { key } => shown += &format!(".{key}"),
            _ => shown += "?",
        }
        shown
    })
}

/// The TOML header of the table at `path`: `[dispatch]`, `[[sources]]`.
fn header(path: &[Segment]) -> String {
    let keys: Vec<&str> = (path.iter())
        .filter_map(|segment| match segment {
            Segment::Map { key } => Some(key.as_str()),
            _ => None,
        })
        .collect();
    match path.last() {
        Some(Segment::Seq { .. }) => format!("[[{}]]", keys.join(".")),
        _ => format!("[{}]", keys.join(".")),
    }
}

/// The field names of `T`, a struct, as serde knows them.
fn fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut fields = &[][..];
    let _ = T::deserialize(StructFields(&mut fields));
    fields
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

/// The one of `values` whose name in `names` a config string is: an
/// enum of names read as a string, so that another type is `invalid
/// type: integer 5, expected a string` (toml says `wanted string or
/// table` for an enum) and an unknown name serde's `unknown variant`
/// error, which [`hint`] reads.
pub(super) fn named<'de, D: Deserializer<'de>, T: Copy>(
    de: D,
    names: &'static [&'static str],
    values: &[T],
) -> Result<T, D::Error> {
    assert_eq!(names.len(), values.len(), "a name for each value");
    let name = String::deserialize(de)?;
    match names.iter().position(|known| *known == name) {
        Some(at) => Ok(values[at]),
        None => Err(D::Error::unknown_variant(&name, names)),
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
pub(crate) fn nearest<'a>(
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

    /// A path of keys; a number is an index.
    fn path(keys: &[&str]) -> Vec<Segment> {
        (keys.iter())
            .map(|key| match key.parse() {
                Ok(index) => Segment::Seq { index },
                Err(_) => Segment::Map {
                    key: key.to_string(),
                },
            })
            .collect()
    }

    #[test]
    fn a_key_of_an_enclosing_table_is_said_to_be_its() {
        let unknown = |key: &str| format!("unknown field `{key}`, expected one of `a`, `{key}x`");
        let rule = "a key written after a table's header is that table's";
        let listen = hint(&unknown("listen"), &path(&["http", "listen"]));
        let told = format!("`listen` is a top-level key, not one of http: {rule}, so write it above the file's first table header");
        assert_eq!(listen, Some(told));
        let tenant = hint(
            &unknown("tenant"),
            &path(&["sources", "0", "sinks", "1", "tenant"]),
        );
        let told = format!("`tenant` is a key of sources[0], not of sources[0].sinks[1]: {rule}, so write it under [[sources]], above its first sub-table header");
        assert_eq!(tenant, Some(told));
        let url = hint(
            &unknown("url"),
            &path(&["sources", "2", "sinks", "0", "retry", "url"]),
        );
        let told = format!("`url` is a key of sources[2].sinks[0], not of sources[2].sinks[0].retry: {rule}, so write it under [[sources.sinks]], above its first sub-table header");
        assert_eq!(url, Some(told));
        let batch = hint(
            &unknown("batch"),
            &path(&["dispatch", "tenants", "acme", "batch"]),
        );
        let told = format!("`batch` is a key of dispatch, not of dispatch.tenants.acme: {rule}, so write it under [dispatch], above its first sub-table header");
        assert_eq!(batch, Some(told));
        // The nearest enclosing table that has it: a sink's `retry`, not the top level's.
        let retry = hint(
            &unknown("retry"),
            &path(&["sources", "0", "sinks", "0", "oauth2", "retry"]),
        );
        assert!(retry
            .unwrap()
            .starts_with("`retry` is a key of sources[0].sinks[0], "));
        // Unknown where it stands and above: the nearest name, as ever.
        let typo =
            "unknown field `idle_timeot_ms`, expected one of `read_timeout_ms`, `idle_timeout_ms`";
        let near = Some("did you mean `idle_timeout_ms`?".to_string());
        assert_eq!(hint(typo, &path(&["http", "idle_timeot_ms"])), near);
        let top = "unknown field `listens`, expected one of `data_dir`, `listen`";
        let near = Some("did you mean `listen`?".to_string());
        assert_eq!(hint(top, &path(&["listens"])), near);
        // A type error: what serde's Rust type means, for a number.
        assert_eq!(
            hint("invalid type: string, expected u64", &path(&["shards"])),
            Some(
                "this key takes a whole number from 0 to 18446744073709551615, without quotes"
                    .into()
            )
        );
        let boolean = "invalid type: string \"yes\", expected a boolean";
        assert_eq!(hint(boolean, &path(&["pin_shards"])), None);
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
