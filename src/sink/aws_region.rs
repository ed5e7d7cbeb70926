//! The AWS region a client signs for where its config names none — an
//! SQS sink's `region` (whose queue URL names none either: a LocalStack
//! or moto queue, a VPC endpoint's), an HTTP sink's with `aws_service`,
//! `claim_check.s3_region` — found as AWS's SDKs and CLI find it:
//! `AWS_REGION`, else `AWS_DEFAULT_REGION`, else the `region` of the
//! profile (`AWS_PROFILE`, else `default`) in the shared config file
//! (`AWS_CONFIG_FILE`, else `$HOME/.aws/config`). An empty variable or
//! setting names none. Read where the config's clients are built: at a
//! start, a reload and `goad check --environment`.

use super::aws_credentials::Fetch;
use super::aws_endpoint::environment;
use super::aws_profile::{profile_region, unreadable_config};
use crate::config::{invalid, is_region, ConfigError, REGION_RULE};

/// The variables that name a region, in the order they are read.
const VARIABLES: [&str; 2] = ["AWS_REGION", "AWS_DEFAULT_REGION"];

/// The environment's region, read at most once for the clients of one
/// config (see the module docs).
#[derive(Default)]
pub(crate) struct EnvironmentRegion {
    read: Option<Option<String>>,
}

impl EnvironmentRegion {
    /// `configured`, else the environment's region; where neither names
    /// one, an error naming `key` and saying why it is needed (`needed`).
    /// A region the environment names that is not a region's name is an
    /// error naming where it was read.
    pub(crate) fn or(
        &mut self,
        configured: Option<String>,
        key: &str,
        needed: &str,
    ) -> Result<String, ConfigError> {
        if let Some(region) = configured {
            return Ok(region);
        }
        if self.read.is_none() {
            self.read = Some(read(lookup_variable, profile_region)?);
        }
        let rule = format!(
            "set{needed}, or named by {}, {} or the AWS profile's `region`",
            VARIABLES[0], VARIABLES[1]
        );
        (self.read.clone().flatten()).ok_or_else(|| invalid(key, rule, "absent"))
    }
}

/// A variable's value, `None` when unset or empty.
fn lookup_variable(variable: &str) -> Option<String> {
    environment(variable).filter(|value| !value.is_empty())
}

/// The region `variable` (the first of [`VARIABLES`] set) or else
/// `profile` names, checked; `None` where none names one.
fn read(
    variable: impl Fn(&str) -> Option<String>,
    profile: impl FnOnce() -> Result<Option<(String, String)>, Fetch>,
) -> Result<Option<String>, ConfigError> {
    let named = VARIABLES
        .iter()
        .find_map(|v| Some((format!("the environment's {v}"), variable(v)?)));
    let named = match named {
        Some(named) => Some(named),
        None => profile().map_err(|e| unreadable_config(e, "its profile's region"))?,
    };
    match named {
        Some((_, region)) if region.is_empty() => Ok(None),
        Some((_, region)) if is_region(&region) => Ok(Some(region)),
        Some((from, region)) => Err(invalid(from, REGION_RULE, region)),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variables<'a>(set: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            let value = set.iter().find(|(n, _)| *n == name)?.1;
            Some(value.to_string()).filter(|v| !v.is_empty())
        }
    }

    fn profile(region: Option<&str>) -> impl FnOnce() -> Result<Option<(String, String)>, Fetch> {
        let region = region.map(|r| {
            (
                "the region of AWS profile \"default\" in /c".to_string(),
                r.into(),
            )
        });
        move || Ok(region)
    }

    #[test]
    fn aws_region_comes_before_aws_default_region_before_the_profile() {
        let both = [
            ("AWS_REGION", "eu-west-1"),
            ("AWS_DEFAULT_REGION", "us-east-2"),
        ];
        let read_with = |set, region| read(variables(set), profile(region)).unwrap();
        assert_eq!(
            read_with(&both, Some("ap-south-1")).as_deref(),
            Some("eu-west-1")
        );
        let default_only = [("AWS_DEFAULT_REGION", "us-east-2")];
        assert_eq!(
            read_with(&default_only, Some("ap-south-1")).as_deref(),
            Some("us-east-2")
        );
        let empty = [("AWS_REGION", "")];
        assert_eq!(
            read_with(&empty, Some("ap-south-1")).as_deref(),
            Some("ap-south-1")
        );
        assert_eq!(read_with(&[], None), None);
        assert_eq!(
            read_with(&[], Some("")),
            None,
            "an empty setting names none"
        );
    }

    #[test]
    fn a_region_that_is_no_region_s_name_is_refused_naming_where_it_was_read() {
        let refusal = |set, profile| read(variables(set), profile).unwrap_err().to_string();
        let rule = "an AWS region name of lowercase letters, digits and '-'";
        assert_eq!(
            refusal(&[("AWS_DEFAULT_REGION", "EU West")], profile(None)),
            format!("the environment's AWS_DEFAULT_REGION must be {rule}, got \"EU West\"")
        );
        assert_eq!(
            refusal(&[], profile(Some("eu_west"))),
            format!("the region of AWS profile \"default\" in /c must be {rule}, got \"eu_west\"")
        );
        let unreadable = || Err(Fetch::failed("cannot read /c: permission denied".into()));
        assert_eq!(
            read(variables(&[]), unreadable).unwrap_err().to_string(),
            "the environment's AWS_CONFIG_FILE must be a readable AWS config file, for its \
             profile's region, got \"cannot read /c: permission denied\""
        );
    }

    #[test]
    fn a_configured_region_is_taken_without_reading_the_environment() {
        let mut environment = EnvironmentRegion::default();
        let region = environment.or(Some("eu-west-1".into()), "k", "");
        assert_eq!(region.unwrap(), "eu-west-1");
        assert!(environment.read.is_none());
    }
}
