//! The checks of a role to assume (`role_arn`, `external_id`,
//! `role_session_name` of an SQS sink or of the S3 claim bucket), by IAM's
//! own rules, so a typo is named at load rather than by STS at the first
//! delivery.

use super::validate::invalid;
use super::ConfigError;

/// `role_arn` (`arn:<partition>:iam::<account>:role/<path and name>`), and
/// the two options that only go with it.
pub(super) fn aws_role(
    at: &str,
    role_arn: &Option<String>,
    external_id: &Option<String>,
    session_name: &Option<String>,
) -> Result<(), ConfigError> {
    let Some(role_arn) = role_arn else {
        let only_with_role = [
            ("external_id", external_id.is_some()),
            ("role_session_name", session_name.is_some()),
        ];
        return match only_with_role.iter().find(|(_, set)| *set) {
            Some((key, _)) => Err(invalid(
                format!("{at}.{key}"),
                "absent without role_arn",
                "set",
            )),
            None => Ok(()),
        };
    };
    if !is_role_arn(role_arn) {
        let rule = "an IAM role ARN: arn:aws:iam::<12-digit account>:role/<name>";
        return Err(invalid(format!("{at}.role_arn"), rule, role_arn));
    }
    if let Some(id) = external_id {
        let ok = (2..=1224).contains(&id.len()) && id.bytes().all(|b| is_iam_char(b, b"+=,.@:/-"));
        if !ok {
            let rule = "2 to 1224 letters, digits or any of _+=,.@:/-";
            return Err(invalid(format!("{at}.external_id"), rule, id));
        }
    }
    if let Some(name) = session_name {
        let ok = (2..=64).contains(&name.len()) && name.bytes().all(|b| is_iam_char(b, b"+=,.@-"));
        if !ok {
            let rule = "2 to 64 letters, digits or any of _+=,.@-";
            return Err(invalid(format!("{at}.role_session_name"), rule, name));
        }
    }
    Ok(())
}

/// A role's ARN in any partition (`aws`, `aws-cn`, `aws-us-gov`, …).
fn is_role_arn(arn: &str) -> bool {
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(partition), Some("iam"), Some(""), Some(account), Some(resource)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return false;
    };
    let partition_ok = partition.starts_with("aws")
        && partition
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b == b'-');
    let account_ok = account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit());
    let name = resource.strip_prefix("role/").unwrap_or_default();
    let name_ok = !name.is_empty()
        && !name.ends_with('/')
        && arn.len() <= 2048
        && name.bytes().all(|b| is_iam_char(b, b"+=,.@-/"));
    partition_ok && account_ok && name_ok
}

/// A letter, a digit, `_`, or one of `others`.
fn is_iam_char(b: u8, others: &[u8]) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || others.contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_arns_of_every_partition_and_path_pass_and_others_are_named() {
        for ok in [
            "arn:aws:iam::123456789012:role/hooks-writer",
            "arn:aws-cn:iam::123456789012:role/team/hooks@writer",
            "arn:aws-us-gov:iam::123456789012:role/a",
        ] {
            assert!(is_role_arn(ok), "{ok}");
        }
        for bad in [
            "",
            "hooks-writer",
            "arn:aws:iam::12345678901:role/short-account",
            "arn:aws:iam:us-east-1:123456789012:role/regional",
            "arn:aws:sts::123456789012:assumed-role/a/b",
            "arn:aws:iam::123456789012:user/someone",
            "arn:aws:iam::123456789012:role/",
            "arn:aws:iam::123456789012:role/path/",
            "arn:aws:iam::123456789012:role/with space",
            "arn:gcp:iam::123456789012:role/a",
        ] {
            assert!(!is_role_arn(bad), "{bad}");
        }
    }

    #[test]
    fn each_option_is_checked_by_iams_rules() {
        let arn = Some("arn:aws:iam::123456789012:role/w".to_string());
        let some = |s: &str| Some(s.to_string());
        let error = |r: &Option<String>, e: &Option<String>, n: &Option<String>| {
            aws_role("sources[0].sinks[1]", r, e, n)
                .unwrap_err()
                .to_string()
        };
        assert!(aws_role("s", &arn, &some("ext:id/1"), &some("goad-eu@node.1")).is_ok());
        assert!(aws_role("s", &None, &None, &None).is_ok());
        assert_eq!(
            error(&some("role/w"), &None, &None),
            "sources[0].sinks[1].role_arn must be an IAM role ARN: \
             arn:aws:iam::<12-digit account>:role/<name>, got \"role/w\""
        );
        assert_eq!(
            error(&None, &some("x1"), &None),
            "sources[0].sinks[1].external_id must be absent without role_arn, got \"set\""
        );
        assert_eq!(
            error(&None, &None, &some("goad")),
            "sources[0].sinks[1].role_session_name must be absent without role_arn, got \"set\""
        );
        assert_eq!(
            error(&arn, &some("x"), &None),
            "sources[0].sinks[1].external_id must be 2 to 1224 letters, digits or any of \
             _+=,.@:/-, got \"x\""
        );
        assert_eq!(
            error(&arn, &None, &some("goad node")),
            "sources[0].sinks[1].role_session_name must be 2 to 64 letters, digits or any of \
             _+=,.@-, got \"goad node\""
        );
    }
}
