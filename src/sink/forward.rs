//! Which provider headers reach a sink.
//!
//! Never forwarded: credentials, hop-by-hop and framing headers, and
//! goad's own namespaces (`x-goad-*`, `webhook-*`), so a provider cannot
//! forge an id or a signature. A source's `forward_headers` list is an
//! allowlist, still minus that set; `content-encoding` is forwarded
//! whatever it lists, as it says how to read the body it comes with.
//! Names are lowercased and repeats are joined with ", " in arrival order.

/// Credentials: never stored with a hook nor forwarded, but a sink's own
/// `headers` may send them (a receiver's API key; best from `headers_env`,
/// and one written in the config file is warned of).
const CREDENTIALS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
];

/// Headers in which providers send a source's secret itself (GitLab's,
/// Telegram's; checked by `ingest_signature = "gitlab"` or `"telegram"`):
/// credentials as well.
pub const PROVIDER_TOKENS: [&str; 2] = ["x-gitlab-token", "x-telegram-bot-api-secret-token"];

/// Hop-by-hop and framing headers: the HTTP client's alone.
const FRAMING: &[&str] = &[
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "expect",
];

/// Headers that say how to read the body they come with (a gzip body
/// without its `content-encoding` is bytes no receiver can read):
/// forwarded whatever a source's allowlist says.
const REPRESENTATION: &[&str] = &["content-encoding"];

/// Whether a header is goad's or the HTTP client's to send (lowercase
/// name): framing and hop-by-hop headers and goad's own namespaces. A
/// sink's own `headers` may not name one.
pub fn reserved_header(name: &str) -> bool {
    FRAMING.contains(&name) || name.starts_with("x-goad-") || name.starts_with("webhook-")
}

/// Whether a header carries a credential (lowercase name).
pub fn is_credential(name: &str) -> bool {
    CREDENTIALS.contains(&name) || PROVIDER_TOKENS.contains(&name)
}

/// Whether a header is never stored with a hook nor forwarded (lowercase name).
pub fn never_forwarded(name: &str) -> bool {
    reserved_header(name) || is_credential(name) || name == "content-type"
}

/// The forwarded headers of a hook, lowercased and joined.
pub fn forwarded(headers: &[(String, String)], allow: Option<&[String]>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        let allowed = |a: &[String]| {
            REPRESENTATION.contains(&name.as_str())
                || a.iter().any(|n| n.eq_ignore_ascii_case(&name))
        };
        if never_forwarded(&name) || allow.is_some_and(|a| !allowed(a)) {
            continue;
        }
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, joined)) => {
                joined.push_str(", ");
                joined.push_str(value);
            }
            None => out.push((name, value.clone())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn drops_credentials_framing_and_own_namespaces_and_joins_repeats() {
        let got = forwarded(
            &h(&[
                ("X-GitHub-Event", "push"),
                ("Authorization", "x"),
                ("x-goad-id", "forged"),
                ("webhook-signature", "v1,f"),
                ("Content-Length", "3"),
                ("x-a", "1"),
                ("X-A", "2"),
            ]),
            None,
        );
        assert_eq!(got, h(&[("x-github-event", "push"), ("x-a", "1, 2")]));
    }

    #[test]
    fn an_allowlist_keeps_only_its_names_minus_the_never_set_plus_the_body_encoding() {
        let allow = vec!["x-keep".to_string(), "cookie".to_string()];
        let got = forwarded(
            &h(&[
                ("x-keep", "1"),
                ("x-drop", "2"),
                ("cookie", "c"),
                ("Content-Encoding", "gzip"),
            ]),
            Some(&allow),
        );
        assert_eq!(got, h(&[("x-keep", "1"), ("content-encoding", "gzip")]));
    }
}
