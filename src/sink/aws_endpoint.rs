//! Where goad's requests to an AWS service go when its config names no
//! endpoint, as AWS's SDKs and CLI read it: the URL in the service's own
//! variable (`AWS_ENDPOINT_URL_SQS`, `_S3`, `_STS`, `_SSO`), else in
//! `AWS_ENDPOINT_URL` — a LocalStack or moto server, or a VPC endpoint,
//! named once for every program of a machine — else in the AWS profile
//! (`AWS_PROFILE`, else `default`, in `AWS_CONFIG_FILE` or
//! `$HOME/.aws/config`): the service's `endpoint_url` in the `[services
//! <name>]` section its `services` names, else its own `endpoint_url` —
//! else the service's own endpoint. An empty variable or setting names
//! none, and none is read while `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS` is
//! `true` (or, that variable unset, the profile's
//! `ignore_configured_endpoint_urls`). A config's own endpoint (an SQS
//! sink's `endpoint`, the claim check's `s3_endpoint`) comes before all.

use super::aws_profile::{profile_endpoints, unreadable_config};
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

/// The variable that, `true`, leaves the endpoint variables and settings
/// unread.
const IGNORE: &str = "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS";

/// The endpoints an AWS profile names (see `aws_profile::profile_endpoints`).
pub(super) struct ProfileEndpoints {
    /// The profile and its file, as an error names them.
    pub(super) from: String,
    /// Its `ignore_configured_endpoint_urls` is `true`.
    pub(super) ignore: bool,
    /// Its `endpoint_url`, for every service.
    pub(super) every_service: Option<String>,
    /// Each service's `endpoint_url` in its `services` section, by the
    /// service's identifier there (`sqs`, `s3`, `sts`, `sso`).
    pub(super) services: Vec<(String, String)>,
}

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

    /// The service's key in a profile's `services` section.
    fn identifier(self) -> &'static str {
        match self {
            AwsService::Sqs => "sqs",
            AwsService::S3 => "s3",
            AwsService::Sts => "sts",
            AwsService::Sso => "sso",
        }
    }

    /// The endpoint the environment or the AWS profile names for this
    /// service now, without a trailing `/`; `None` where neither names
    /// one (see the module docs). A profile that cannot be read names none
    /// here: [`ConfiguredEndpoints::read`] said so where the clients were
    /// built. (A config's clients take theirs from the one reading.)
    pub(crate) fn configured_endpoint(self) -> Option<String> {
        let profile = profile_endpoints().ok().flatten();
        ConfiguredEndpoints { profile }.of(self)
    }

    /// Where this service's endpoint is named (as an error says it) and
    /// the URL (without a trailing `/`), of the variables `lookup` reads
    /// and the settings of `profile`.
    fn named_by(
        self,
        lookup: impl Fn(&str) -> Option<String>,
        profile: Option<&ProfileEndpoints>,
    ) -> Option<(String, String)> {
        let ignore = match lookup(IGNORE).filter(|value| !value.is_empty()) {
            Some(value) => value.trim().eq_ignore_ascii_case("true"),
            None => profile.is_some_and(|profile| profile.ignore),
        };
        if ignore {
            return None;
        }
        let variables = [self.variable(), EVERY_SERVICE]
            .map(|variable| (format!("the environment's {variable}"), lookup(variable)));
        let settings = profile.into_iter().flat_map(|profile| {
            let id = self.identifier();
            let own = profile.services.iter().find(|(service, _)| service == id);
            let from = &profile.from;
            [
                (
                    format!("the {id} endpoint_url in the services section of {from}"),
                    own.map(|(_, url)| url.clone()),
                ),
                (
                    format!("the endpoint_url of {from}"),
                    profile.every_service.clone(),
                ),
            ]
        });
        variables
            .into_iter()
            .chain(settings)
            .find_map(|(from, url)| {
                let url = url.filter(|url| !url.is_empty())?;
                Some((from, url.trim_end_matches('/').to_string()))
            })
    }
}

/// A variable's value (one that is not UTF-8 as well, which no URL or
/// region is).
pub(super) fn environment(variable: &str) -> Option<String> {
    std::env::var_os(variable).map(|value| value.to_string_lossy().into_owned())
}

/// The endpoints the environment and the AWS profile name (see the module
/// docs), the profile read once for the clients of one config.
#[derive(Default)]
pub(crate) struct ConfiguredEndpoints {
    profile: Option<ProfileEndpoints>,
}

impl ConfiguredEndpoints {
    /// The endpoints named now. Refuses one that a variable or the AWS
    /// profile names but is not an http:// or https:// URL with a host,
    /// naming where it was read and its value — of every service, not
    /// only of those the config's clients use — and a config file that
    /// cannot be read. Read where a config's clients of AWS's services
    /// are built.
    pub(crate) fn read() -> Result<ConfiguredEndpoints, ConfigError> {
        let profile =
            profile_endpoints().map_err(|e| unreadable_config(e, "its profile's endpoints"))?;
        check_named_by(environment, profile.as_ref())?;
        Ok(ConfiguredEndpoints { profile })
    }

    /// `service`'s endpoint, without a trailing `/`; `None` where none
    /// is named.
    pub(crate) fn of(&self, service: AwsService) -> Option<String> {
        let named = service.named_by(environment, self.profile.as_ref());
        named.map(|(_, url)| url)
    }
}

fn check_named_by(
    lookup: impl Fn(&str) -> Option<String>,
    profile: Option<&ProfileEndpoints>,
) -> Result<(), ConfigError> {
    for service in AwsService::ALL {
        let Some((from, url)) = service.named_by(&lookup, profile) else {
            continue;
        };
        if !is_http_url(&url) {
            let rule = "an http:// or https:// URL with a host (an AWS service's endpoint, or a \
                        server that speaks its API), as AWS's SDKs read it";
            return Err(invalid(from, rule, url));
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

    /// An endpoint named by the environment's `name`.
    fn variable(name: &str, url: &str) -> (String, String) {
        (format!("the environment's {name}"), url.to_string())
    }

    #[test]
    fn the_services_own_variable_comes_before_the_one_of_every_service() {
        let both = [
            ("AWS_ENDPOINT_URL", "http://localhost:4566/"),
            ("AWS_ENDPOINT_URL_SQS", "http://localhost:9324"),
        ];
        let named = |service: AwsService| service.named_by(of(&both), None);
        let sqs = variable("AWS_ENDPOINT_URL_SQS", "http://localhost:9324");
        assert_eq!(named(AwsService::Sqs), Some(sqs));
        let every = variable("AWS_ENDPOINT_URL", "http://localhost:4566");
        assert_eq!(named(AwsService::S3), Some(every.clone()));
        assert_eq!(named(AwsService::Sts), Some(every.clone()));
        assert_eq!(named(AwsService::Sso), Some(every));
        assert_eq!(AwsService::Sqs.named_by(of(&[]), None), None);
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
        let every = "https://vpce-1.s3.eu-west-1.vpce.amazonaws.com";
        assert_eq!(
            AwsService::S3.named_by(of(&empty), None),
            Some(variable("AWS_ENDPOINT_URL", every))
        );
        for ignore in ["true", "TRUE", " true"] {
            let ignored = [("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", ignore), empty[1]];
            assert_eq!(
                AwsService::S3.named_by(of(&ignored), None),
                None,
                "{ignore:?}"
            );
        }
        let not_ignored = [("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "false"), empty[1]];
        assert!(AwsService::S3.named_by(of(&not_ignored), None).is_some());
    }

    #[test]
    fn a_set_variable_that_is_no_http_url_is_refused_naming_it() {
        let refused =
            |pairs: &[(&str, &str)]| check_named_by(of(pairs), None).unwrap_err().to_string();
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
        assert!(check_named_by(of(&fine), None).is_ok());
        let ignored = [
            ("AWS_ENDPOINT_URL", "nonsense"),
            ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"),
        ];
        assert!(check_named_by(of(&ignored), None).is_ok());
    }

    /// Profile "local" of file /c, naming an endpoint for every service
    /// and one for SQS in its `services` section.
    fn profile() -> ProfileEndpoints {
        ProfileEndpoints {
            from: "AWS profile \"local\" in /c".into(),
            ignore: false,
            every_service: Some("http://every:1/".into()),
            services: vec![("sqs".into(), "http://sqs:2".into())],
        }
    }

    #[test]
    fn the_variables_come_before_the_profile_and_its_services_before_its_own_endpoint() {
        let local = profile();
        let named =
            |service: AwsService, pairs: &[(&str, &str)]| service.named_by(of(pairs), Some(&local));
        let of_local = |what: &str, url: &str| {
            Some((
                format!("{what} AWS profile \"local\" in /c"),
                url.to_string(),
            ))
        };
        assert_eq!(
            named(AwsService::Sqs, &[]),
            of_local(
                "the sqs endpoint_url in the services section of",
                "http://sqs:2"
            )
        );
        assert_eq!(
            named(AwsService::S3, &[]),
            of_local("the endpoint_url of", "http://every:1")
        );
        let every = [("AWS_ENDPOINT_URL", "http://env:3")];
        let from_every = variable("AWS_ENDPOINT_URL", "http://env:3");
        assert_eq!(named(AwsService::Sqs, &every), Some(from_every));

        let ignoring = ProfileEndpoints {
            ignore: true,
            ..profile()
        };
        assert_eq!(AwsService::Sqs.named_by(of(&every), Some(&ignoring)), None);
        let not_ignored = [("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "false")];
        let named = AwsService::Sqs.named_by(of(&not_ignored), Some(&ignoring));
        assert_eq!(
            named.map(|(_, url)| url).as_deref(),
            Some("http://sqs:2"),
            "the variable first"
        );
    }

    #[test]
    fn a_profiles_endpoint_that_is_no_http_url_is_refused_naming_where_it_is() {
        let local = ProfileEndpoints {
            services: vec![("sts".into(), "sts.internal".into())],
            ..profile()
        };
        let refused = check_named_by(of(&[]), Some(&local))
            .unwrap_err()
            .to_string();
        assert!(
            refused.starts_with(
                "the sts endpoint_url in the services section of AWS profile \"local\" in /c \
                 must be an http:// or https:// URL"
            ),
            "{refused}"
        );
        assert!(refused.ends_with("got \"sts.internal\""), "{refused}");
    }
}
