//! "Did you mean": for a key (or a value of a fixed set) that serde does
//! not know, the nearest one it expected, so a typo among a sink's
//! thirty-odd keys is named rather than left to be found in the list.

/// How alike (Jaro, 0 to 1) a known name must be to what was written to
/// be suggested. clap suggests above 0.7 (Jaro too: strsim's
/// Jaro-Winkler rates long shared prefixes too high); config names share
/// suffixes (`_env`, `_ms`) that lift unrelated pairs near that
/// (`req_options` and `region`: 0.70), so a little more is asked.
const MIN_LIKENESS: f64 = 0.75;

/// The name serde's `message` expected that is nearest to the one it
/// calls unknown ("unknown field `x`, expected one of `a`, `b`", or
/// "unknown variant …"), if one is near enough.
pub(super) fn nearest_expected(message: &str) -> Option<&str> {
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
