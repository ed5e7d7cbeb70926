//! The checks of how an HTTP sink authorizes its requests: an OAuth 2
//! grant (`oauth2`), AWS signatures (`aws_service`), a Google ID token
//! (`google_id_token`), and no two of these, nor one beside the sink's own
//! `authorization` header or a URL's user information.

use super::sink_checks::{aws_credentials, options_set, AWS_SIGNING_OPTIONS};
use super::validate::{
    check_http_url, check_region, env_name, invalid, is_region, unknown_name, usable_path,
};
use super::{ClientAuth, ConfigError, GoogleIdTokenConfig, OAuth2Config, SinkConfig};
use crate::sink::gcp_id_token::ID_TOKEN_SOURCES;

/// An HTTP sink's `oauth2`: a token endpoint URL and a secret's variable,
/// and no `authorization` header of the operator's beside it.
pub(super) fn validate_oauth2(at: &str, oauth2: &OAuth2Config) -> Result<(), ConfigError> {
    check_http_url(format!("{at}.oauth2.token_url"), &oauth2.token_url)?;
    let key = |name: &str| format!("{at}.oauth2.{name}");
    let signs = oauth2.client_auth == ClientAuth::PrivateKeyJwt;
    match (&oauth2.client_secret_env, signs) {
        (Some(var), false) => env_name(key("client_secret_env"), var)?,
        (None, false) => {
            let rule = "set: the variable holding the client's secret (or client_auth = \"private_key_jwt\")";
            return Err(invalid(key("client_secret_env"), rule, "absent"));
        }
        (Some(_), true) => {
            let rule =
                "absent with client_auth = \"private_key_jwt\" (the client signs with its key)";
            return Err(invalid(key("client_secret_env"), rule, "set"));
        }
        _ => {}
    }
    usable_path(key("private_key_file"), oauth2.private_key_file.as_deref())?;
    usable_path(key("certificate_file"), oauth2.certificate_file.as_deref())?;
    let key_options = [
        ("private_key_file", oauth2.private_key_file.is_some()),
        ("key_id", oauth2.key_id.is_some()),
        ("certificate_file", oauth2.certificate_file.is_some()),
    ];
    match (key_options.iter().find(|(_, set)| *set), signs) {
        (Some((name, _)), false) => {
            let rule = "absent without client_auth = \"private_key_jwt\"";
            Err(invalid(key(name), rule, "set"))
        }
        (_, true) if oauth2.private_key_file.is_none() => {
            let rule = "set with client_auth = \"private_key_jwt\": the client's PEM private key";
            Err(invalid(key("private_key_file"), rule, "absent"))
        }
        _ => Ok(()),
    }
}

/// The key of an HTTP sink's own `authorization` header, if it sets one.
fn operator_authorization(at: &str, sink: &SinkConfig) -> Option<String> {
    let operators = sink.headers.keys().chain(sink.headers_env.keys());
    let name = operators
        .into_iter()
        .find(|n| n.eq_ignore_ascii_case("authorization"))?;
    Some(match sink.headers.contains_key(name) {
        true => format!("{at}.headers.{name}"),
        false => format!("{at}.headers_env.{name}"),
    })
}

/// An HTTP sink's `aws_service`: a service and a region to sign for,
/// credentials as an SQS sink's, and nothing else that sets the request's
/// authorization (the signature is). Without it, the keys that sign are
/// refused: there is nothing for them to sign.
pub(super) fn validate_aws_signing(at: &str, sink: &SinkConfig) -> Result<(), ConfigError> {
    let Some(service) = &sink.aws_service else {
        let options = options_set(sink);
        let mut signing = options
            .iter()
            .filter(|(key, _)| AWS_SIGNING_OPTIONS.contains(key));
        return match signing.find(|(_, set)| *set) {
            Some((key, _)) => {
                let rule = "absent without aws_service (it signs that service's requests)";
                Err(invalid(format!("{at}.{key}"), rule, "set"))
            }
            None => Ok(()),
        };
    };
    if !is_region(service) {
        let rule = "an AWS service's signing name of lowercase letters, digits and '-' (lambda, execute-api)";
        return Err(invalid(format!("{at}.aws_service"), rule, service));
    }
    check_region(format!("{at}.region"), sink.region.as_ref())?;
    aws_credentials(at, sink)
}

/// An HTTP sink's `google_id_token`: an audience, and credentials that
/// can ask Google for an ID token.
pub(super) fn validate_google_id_token(
    at: &str,
    id_token: &GoogleIdTokenConfig,
) -> Result<(), ConfigError> {
    let key = format!("{at}.google_id_token");
    if id_token.audience.is_empty() {
        let rule = "the receiving service's audience (a Cloud Run service's URL, an IAP client id)";
        return Err(invalid(format!("{key}.audience"), rule, ""));
    }
    let credentials = id_token.credentials.as_deref().unwrap_or("metadata");
    if !ID_TOKEN_SOURCES.contains(&credentials) {
        let rule = format!("one of {ID_TOKEN_SOURCES:?}");
        let key = format!("{key}.credentials");
        return Err(unknown_name(key, rule, credentials, ID_TOKEN_SOURCES));
    }
    Ok(())
}

/// An HTTP sink's ways of authorizing its requests: at most one of
/// `oauth2`, `aws_service` and `google_id_token`, each of which is the
/// request's `authorization`, so neither the sink's own `authorization`
/// header nor a URL's user information (sent as Basic) goes beside it.
pub(super) fn one_authorization(at: &str, sink: &SinkConfig) -> Result<(), ConfigError> {
    let ways = [
        (
            sink.oauth2.is_some(),
            "oauth2",
            "oauth2 (its token is the authorization)",
        ),
        (
            sink.aws_service.is_some(),
            "aws_service",
            "aws_service (the signature is the authorization)",
        ),
        (
            sink.google_id_token.is_some(),
            "google_id_token",
            "google_id_token (its token is the authorization)",
        ),
    ];
    let mut set = ways.into_iter().filter(|(on, _, _)| *on);
    let Some((_, _, way)) = set.next() else {
        return Ok(());
    };
    if let Some((_, key, _)) = set.next() {
        return Err(invalid(
            format!("{at}.{key}"),
            format!("absent with {way}"),
            "set",
        ));
    }
    if let Some(key) = operator_authorization(at, sink) {
        return Err(invalid(key, format!("absent with {way}"), "set"));
    }
    let url = sink.url.as_deref().unwrap_or("");
    let user_info = url
        .parse::<ureq::http::Uri>()
        .is_ok_and(|u| u.authority().is_some_and(|a| a.as_str().contains('@')));
    if user_info {
        let rule = format!("without user information with {way}");
        return Err(invalid(
            format!("{at}.url"),
            rule,
            "a URL with user information",
        ));
    }
    Ok(())
}
