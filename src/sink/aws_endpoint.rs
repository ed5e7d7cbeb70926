//! Where goad's requests to an AWS service go when its config names no
//! endpoint, as AWS's SDKs and CLI read it: the URL in the service's own
//! variable (`AWS_ENDPOINT_URL_SQS`, `_S3`, `_STS`, `_SSO`), else in
//! `AWS_ENDPOINT_URL` — a LocalStack or moto server, or a VPC endpoint,
//! named once for every program of a machine — else the service's own
//! endpoint. An empty variable names none, and neither is read while
//! `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS` is `true`. A config's own
//! endpoint (an SQS sink's `endpoint`, the claim check's `s3_endpoint`)
//! comes before both.

use crate::config::{invalid, is_http_url, ConfigError};

/// An AWS service goad sends requests to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AwsService {
    Sqs,
    S3,
    Sts,
    Sso,
}

/// The variable naming every service's endpoint that has none of its own.
const EVERY_SERVICE: &str = "AWS_ENDPOINT_URL";

/// The variable that, `true`, leaves the endpoint variables unread.
const IGNORE: &str = "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS";

impl AwsService {
    const ALL: [AwsService; 4] = [
        AwsService::Sqs,
        AwsService::S3,
        AwsService::Sts,
        AwsService::Sso,
    ];

    /// The variable naming this service's endpoint alone.
    fn variable(self) -> &'static str {
        match self {
            AwsService::Sqs => "AWS_ENDPOINT_URL_SQS",
            AwsService::S3 => "AWS_ENDPOINT_URL_S3",
            AwsService::Sts => "AWS_ENDPOINT_URL_STS",
            AwsService::Sso => "AWS_ENDPOINT_URL_SSO",
        }
    }

    /// The endpoint the environment names for this service, without a
    /// trailing `/`; `None` where it names none (see the module docs).
    pub(crate) fn environment_endpoint(self) -> Option<String> {
        self.named_by(environment).map(|(_, url)| url)
    }

    /// The variable naming this service's endpoint and its value (without
    /// a trailing `/`), of the variables `lookup` reads.
    fn named_by(self, lookup: impl Fn(&str) -> Option<String>) -> Option<(&'static str, String)> {
        if lookup(IGNORE).is_some_and(|value| value.trim().eq_ignore_ascii_case("true")) {
            return None;
        }
        [self.variable(), EVERY_SERVICE]
            .into_iter()
            .find_map(|variable| {
                let value = lookup(variable).filter(|value| !value.is_empty())?;
                Some((variable, value.trim_end_matches('/').to_string()))
            })
    }
}

/// A variable's value (one that is not UTF-8 as well, which no URL or
/// region is).
pub(super) fn environment(variable: &str) -> Option<String> {
    std::env::var_os(variable).map(|value| value.to_string_lossy().into_owned())
}

/// Refuses an endpoint variable that is set, not empty and not ignored
/// (see the module docs) but is not an http:// or https:// URL with a
/// host, naming the variable and its value — of every service, not only
/// of those the config's clients use now. Run where a client of an AWS
/// service is first built.
pub(crate) fn check_endpoint_variables() -> Result<(), ConfigError> {
    check_named_by(environment)
}

fn check_named_by(lookup: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
    for service in AwsService::ALL {
        let Some((variable, url)) = service.named_by(&lookup) else {
            continue;
        };
        if !is_http_url(&url) {
            let rule = "an http:// or https:// URL with a host (an AWS service's endpoint, or a \
                        server that speaks its API), as AWS's SDKs read it";
            return Err(invalid(format!("the environment's {variable}"), rule, url));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lookup of `pairs` alone.
    fn of<'a>(pairs: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
        |name| {
            let found = pairs.iter().find(|(n, _)| *n == name);
            found.map(|(_, value)| value.to_string())
        }
    }

    #[test]
    fn the_services_own_variable_comes_before_the_one_of_every_service() {
        let both = [
            ("AWS_ENDPOINT_URL", "http://localhost:4566/"),
            ("AWS_ENDPOINT_URL_SQS", "http://localhost:9324"),
        ];
        let named = |service: AwsService| service.named_by(of(&both));
        let sqs = ("AWS_ENDPOINT_URL_SQS", "http://localhost:9324".to_string());
        assert_eq!(named(AwsService::Sqs), Some(sqs));
        let every = ("AWS_ENDPOINT_URL", "http://localhost:4566".to_string());
        assert_eq!(named(AwsService::S3), Some(every.clone()));
        assert_eq!(named(AwsService::Sts), Some(every.clone()));
        assert_eq!(named(AwsService::Sso), Some(every));
        assert_eq!(AwsService::Sqs.named_by(of(&[])), None);
    }

    #[test]
    fn an_empty_variable_names_none_and_true_ignore_leaves_them_all_unread() {
        let empty = [
            ("AWS_ENDPOINT_URL_S3", ""),
            (
                "AWS_ENDPOINT_URL",
                "https://vpce-1.s3.eu-west-1.vpce.amazonaws.com",
            ),
        ];
        let every = "https://vpce-1.s3.eu-west-1.vpce.amazonaws.com".to_string();
        assert_eq!(
            AwsService::S3.named_by(of(&empty)),
            Some(("AWS_ENDPOINT_URL", every))
        );
        for ignore in ["true", "TRUE", " true"] {
            let ignored = [("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", ignore), empty[1]];
            assert_eq!(AwsService::S3.named_by(of(&ignored)), None, "{ignore:?}");
        }
        let not_ignored = [("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "false"), empty[1]];
        assert!(AwsService::S3.named_by(of(&not_ignored)).is_some());
    }

    #[test]
    fn a_set_variable_that_is_no_http_url_is_refused_naming_it() {
        let refused = |pairs: &[(&str, &str)]| check_named_by(of(pairs)).unwrap_err().to_string();
        let rule = "an http:// or https:// URL with a host (an AWS service's endpoint, or a \
                    server that speaks its API), as AWS's SDKs read it";
        assert_eq!(
            refused(&[("AWS_ENDPOINT_URL_STS", "localhost:4566")]),
            format!(
                "the environment's AWS_ENDPOINT_URL_STS must be {rule}, got \"localhost:4566\""
            )
        );
        assert_eq!(
            refused(&[("AWS_ENDPOINT_URL", "ftp://files")]),
            format!("the environment's AWS_ENDPOINT_URL must be {rule}, got \"ftp://files\"")
        );
        let fine = [
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:4566"),
            ("AWS_ENDPOINT_URL_SSO", "https://[::1]:8443/"),
        ];
        assert!(check_named_by(of(&fine)).is_ok());
        let ignored = [
            ("AWS_ENDPOINT_URL", "nonsense"),
            ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"),
        ];
        assert!(check_named_by(of(&ignored)).is_ok());
    }
}
