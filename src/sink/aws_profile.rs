//! `credentials = "profile"`: an AWS profile's credentials, found as AWS's
//! SDKs find them. The profile is `AWS_PROFILE`, else `default`:
//!
//! 1. its keys (and session token) in the shared credentials file,
//!    `AWS_SHARED_CREDENTIALS_FILE` or `$HOME/.aws/credentials` — static
//!    keys, or a secret mounted as that file — kept for
//!    `CREDENTIALS_LIFETIME_MS`, so a rotated file applies within minutes;
//! 2. else its IAM Identity Center (SSO) role, with the token `aws sso
//!    login` cached (see `aws_sso`);
//! 3. else its `credential_process` in the config file, `AWS_CONFIG_FILE`
//!    or `$HOME/.aws/config` (section `[profile <name>]`, or `[default]`):
//!    a command, run by `sh -c`, whose standard output is AWS's credentials
//!    document (`Version` 1, `AccessKeyId`, `SecretAccessKey`,
//!    `SessionToken`, `Expiration`) — IAM Roles Anywhere's signing helper,
//!    aws-vault, a secrets manager's CLI. Its credentials are kept until
//!    shortly before their `Expiration` (`CREDENTIALS_LIFETIME_MS` when it
//!    names none). It may run `CREDENTIAL_PROCESS_TIMEOUT_MS`, in a process
//!    group of its own, killed whole when it overruns.
//!
//! A profile whose config section names a `role_arn` is that role instead:
//! assumed at STS (`external_id`, `role_session_name` as the section says)
//! with the credentials of its `source_profile`, found the same way (a
//! chain of role profiles, up to `MAX_PROFILE_CHAIN`; its own keys when it
//! names itself), or of its `credential_source`: `Environment` (the
//! `AWS_ACCESS_KEY_ID` variables), `Ec2InstanceMetadata` (the instance's
//! role) or `EcsContainer` (the container endpoint), as
//! `credentials = "env"`, `"instance"` and `"container"` read them.

use super::assume_role::{assume, RoleToAssume, DEFAULT_ROLE_SESSION_NAME};
use super::aws_credentials::{
    container_credentials, env, from_json, instance_credentials, read_file, CredentialsError,
    EnvCredentials, Fetch,
};
use super::aws_endpoint::ProfileEndpoints;
use super::aws_sso::SsoRole;
use super::client::Client;
use super::BoxError;
use crate::config::{invalid, ConfigError};
use crate::limits::{
    CREDENTIALS_LIFETIME_MS, CREDENTIAL_PROCESS_OUTPUT_BYTES, CREDENTIAL_PROCESS_TIMEOUT_MS,
};
use aws_credential_types::Credentials;
use serde_json::Value;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

/// The credentials of a role profile's `credential_source`.
fn credential_source(source: &str, client: &Client, now: SystemTime) -> Result<Credentials, Fetch> {
    match source {
        "Environment" => EnvCredentials::default().read().map_err(|e| match e {
            CredentialsError::NotSet { variable } => Fetch::NotSet(variable),
            other => Fetch::Failed(other.into()),
        }),
        "Ec2InstanceMetadata" => instance_credentials(client, now),
        "EcsContainer" => container_credentials(client, now),
        other => Err(Fetch::failed(format!(
            "{other:?} is not one of Environment, Ec2InstanceMetadata, EcsContainer"
        ))),
    }
}

/// The most profiles in a `source_profile` chain: a longer one loops.
const MAX_PROFILE_CHAIN: usize = 8;

/// The credentials of the `AWS_PROFILE` profile at `now` (a role it
/// names assumed at the STS endpoint of `region`).
pub(super) fn profile_credentials(
    now: SystemTime,
    region: &str,
    client: &Client,
) -> Result<Credentials, Fetch> {
    SharedFiles::read()?.credentials_of(&profile_name(), now, region, client, 0)
}

/// What keeps the `AWS_PROFILE` profile from being found at all, read
/// without fetching anything (no request, no process run): the files'
/// places unknown (`HOME` not set, nor the variables naming them), or
/// neither file holding the profile's section. Said at a start and by
/// `goad check --environment`, as a missing variable is.
pub(super) fn profile_problem() -> Option<Fetch> {
    let files = match SharedFiles::read() {
        Ok(files) => files,
        Err(e) => return Some(e),
    };
    let profile = profile_name();
    let holds = |file: &Option<String>, section: &str| {
        (file.as_deref())
            .is_some_and(|text| text.lines().any(|l| header_is(l, section) == Some(true)))
    };
    let in_config = SharedFiles::config_sections(&profile)
        .iter()
        .any(|section| holds(&files.config, section));
    if holds(&files.credentials, &profile) || in_config {
        return None;
    }
    Some(Fetch::failed(format!(
        "profile [{profile}] is in neither {} nor {}",
        files.credentials_path, files.config_path
    )))
}

/// The profile whose credentials are asked for: `AWS_PROFILE`, else
/// `default`.
fn profile_name() -> String {
    std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into())
}

/// AWS's shared credentials and config files, as read for one fetch.
struct SharedFiles {
    credentials_path: String,
    credentials: Option<String>,
    config_path: String,
    config: Option<String>,
}

impl SharedFiles {
    /// The files where the environment says they are, as they are now.
    fn read() -> Result<SharedFiles, Fetch> {
        let credentials_path = file_path("AWS_SHARED_CREDENTIALS_FILE", "credentials")?;
        let config_path = file_path("AWS_CONFIG_FILE", "config")?;
        Ok(SharedFiles {
            credentials: read_if_present(&credentials_path)?,
            credentials_path,
            config: read_if_present(&config_path)?,
            config_path,
        })
    }

    /// The sections of the config file that may hold `profile`'s settings.
    fn config_sections(profile: &str) -> Vec<String> {
        match profile {
            "default" => vec!["default".to_string(), "profile default".to_string()],
            name => vec![format!("profile {name}")],
        }
    }

    /// `name` in `profile`'s section of the config file.
    fn config_value(&self, profile: &str, name: &str) -> Option<String> {
        profile_value(self.config.as_deref()?, profile, name)
    }

    /// `profile`'s credentials: a role it names (`role_arn`) assumed with
    /// its `source_profile`'s credentials, else its own. `depth` counts
    /// the profiles above it in a chain.
    fn credentials_of(
        &self,
        profile: &str,
        now: SystemTime,
        region: &str,
        client: &Client,
        depth: usize,
    ) -> Result<Credentials, Fetch> {
        let Some(role_arn) = self.config_value(profile, "role_arn") else {
            return self.own_credentials(profile, now, client);
        };
        let config_path = &self.config_path;
        let sources = (
            self.config_value(profile, "source_profile"),
            self.config_value(profile, "credential_source"),
        );
        let base = match sources {
            (Some(source), None) if source == profile => self.own_credentials(profile, now, client)?,
            (Some(_), None) if depth + 1 == MAX_PROFILE_CHAIN => {
                let why = format!("the source_profile chain from [{profile}] is longer than {MAX_PROFILE_CHAIN} profiles (a loop?)");
                return Err(Fetch::failed(why));
            }
            (Some(source), None) => self.credentials_of(&source, now, region, client, depth + 1)?,
            (None, Some(source)) => credential_source(&source, client, now).map_err(|e| match e {
                Fetch::Failed(why) => Fetch::failed(format!(
                    "profile [{profile}] of {config_path}: credential_source {source}: {why}"
                )),
                not_set => not_set,
            })?,
            (Some(_), Some(_)) => {
                return Err(Fetch::failed(format!(
                    "profile [{profile}] of {config_path} names both a source_profile and a credential_source"
                )))
            }
            (None, None) => {
                return Err(Fetch::failed(format!(
                    "profile [{profile}] of {config_path} names a role_arn but no source_profile or credential_source"
                )))
            }
        };
        let role = RoleToAssume {
            external_id: self.config_value(profile, "external_id"),
            session_name: (self.config_value(profile, "role_session_name"))
                .unwrap_or_else(|| DEFAULT_ROLE_SESSION_NAME.into()),
            role_arn,
        };
        assume(&role, base, region, client, now).map_err(|cause| {
            let role_arn = &role.role_arn;
            Fetch::failed(format!(
                "cannot assume role {role_arn} of profile [{profile}]: {cause}"
            ))
        })
    }

    /// `profile`'s own credentials: its keys (and session token) in the
    /// credentials file, else its config section's `credential_process`.
    fn own_credentials(
        &self,
        profile: &str,
        now: SystemTime,
        client: &Client,
    ) -> Result<Credentials, Fetch> {
        let credentials_path = &self.credentials_path;
        if let Some(file) = &self.credentials {
            if let Some(key_id) = ini_value(file, profile, "aws_access_key_id") {
                let secret =
                    ini_value(file, profile, "aws_secret_access_key").ok_or_else(|| {
                        Fetch::failed(format!(
                            "no aws_secret_access_key in profile [{profile}] of {credentials_path}"
                        ))
                    })?;
                return Ok(Credentials::new(
                    key_id,
                    secret,
                    ini_value(file, profile, "aws_session_token"),
                    Some(now + Duration::from_millis(CREDENTIALS_LIFETIME_MS)),
                    "profile",
                ));
            }
        }
        if let Some(role) = self.sso_role(profile)? {
            return role.credentials(client, now);
        }
        let Some(command) = self.config_value(profile, "credential_process") else {
            return Err(Fetch::failed(format!(
                "no aws_access_key_id in profile [{profile}] of {credentials_path} \
                 nor an SSO role or a credential_process in [{}] of {}",
                SharedFiles::config_sections(profile)[0],
                self.config_path
            )));
        };
        let timeout = Duration::from_millis(CREDENTIAL_PROCESS_TIMEOUT_MS);
        let document = run_credential_process(&command, timeout).map_err(Fetch::Failed)?;
        let version = serde_json::from_str::<Value>(&document)
            .ok()
            .and_then(|d| d.get("Version").and_then(Value::as_u64));
        if version != Some(1) {
            let why = "credential_process printed no credentials document of Version 1";
            return Err(Fetch::failed(why.to_string()));
        }
        from_json(&document, now)
    }
}

impl SharedFiles {
    /// `profile`'s IAM Identity Center role, if its section names one
    /// (`sso_account_id`); an error names what it lacks.
    fn sso_role(&self, profile: &str) -> Result<Option<SsoRole>, Fetch> {
        let Some(account_id) = self.config_value(profile, "sso_account_id") else {
            return Ok(None);
        };
        let config_path = &self.config_path;
        let lacks = |what: &str| {
            Fetch::failed(format!(
                "profile [{profile}] of {config_path} names an sso_account_id but no {what}"
            ))
        };
        let role_name = self
            .config_value(profile, "sso_role_name")
            .ok_or_else(|| lacks("sso_role_name"))?;
        let (token_key, region) = match self.config_value(profile, "sso_session") {
            Some(session) => {
                let section = format!("sso-session {session}");
                let region = (self.config.as_deref())
                    .and_then(|file| ini_value(file, &section, "sso_region"))
                    .ok_or_else(|| lacks(&format!("sso_region in [{section}]")))?;
                (session, region)
            }
            None => (
                self.config_value(profile, "sso_start_url")
                    .ok_or_else(|| lacks("sso_session or sso_start_url"))?,
                self.config_value(profile, "sso_region")
                    .ok_or_else(|| lacks("sso_region"))?,
            ),
        };
        Ok(Some(SsoRole {
            account_id,
            role_name,
            region,
            token_key,
        }))
    }
}

/// The `region` the profile (`AWS_PROFILE`, else `default`) names in
/// the shared config file, with where it was read; `None` where the file,
/// or the setting, or `$HOME` to find the file by, is absent.
pub(super) fn profile_region() -> Result<Option<(String, String)>, Fetch> {
    let Some(config) = ProfileConfig::read()? else {
        return Ok(None);
    };
    let from = format!("the region of {}", config.name());
    Ok(config.value("region").map(|region| (from, region)))
}

/// The endpoints the profile (`AWS_PROFILE`, else `default`) names in
/// the shared config file: its `endpoint_url`, and each service's in the
/// `[services <name>]` section its `services` setting names (AWS's
/// nested form: `sqs =`, then `endpoint_url = …` indented below it);
/// `None` where the file, or `$HOME` to find it by, is absent.
pub(super) fn profile_endpoints() -> Result<Option<ProfileEndpoints>, Fetch> {
    let Some(config) = ProfileConfig::read()? else {
        return Ok(None);
    };
    let services = match config.value("services") {
        Some(name) => ini_settings(&config.text, &format!("services {name}"))
            .filter(|setting| setting.name == "endpoint_url")
            .filter_map(|setting| Some((setting.under?.to_string(), setting.value.to_string())))
            .collect(),
        None => Vec::new(),
    };
    let ignore = config.value("ignore_configured_endpoint_urls");
    Ok(Some(ProfileEndpoints {
        from: config.name(),
        ignore: ignore.is_some_and(|value| value.eq_ignore_ascii_case("true")),
        every_service: config.value("endpoint_url"),
        services,
    }))
}

/// The `ca_bundle` the profile (`AWS_PROFILE`, else `default`) names in
/// the shared config file: a PEM file of the roots AWS's services'
/// clients trust; `None` where the file, or the setting, is absent (or
/// the file cannot be read, which `aws_endpoint` refuses).
pub(crate) fn profile_ca_bundle() -> Option<std::path::PathBuf> {
    let config = ProfileConfig::read().ok()??;
    let bundle = config.value("ca_bundle").filter(|path| !path.is_empty());
    bundle.map(std::path::PathBuf::from)
}

/// The error of a config file that could not be read (`e`) for what was
/// `wanted` of it.
pub(super) fn unreadable_config(e: Fetch, wanted: &str) -> ConfigError {
    let why = match e {
        Fetch::NotSet(variable) => format!("{variable} is not set"),
        Fetch::Failed(e) => e.to_string(),
    };
    let rule = format!("a readable AWS config file, for {wanted}");
    invalid("the environment's AWS_CONFIG_FILE", rule, why)
}

/// The profile's section of the shared config file, as read now.
struct ProfileConfig {
    path: String,
    text: String,
    profile: String,
}

impl ProfileConfig {
    /// `AWS_CONFIG_FILE`, else `$HOME/.aws/config`, with the profile
    /// `AWS_PROFILE` (else `default`); `None` where the file, or `$HOME`
    /// to find it by, is absent.
    fn read() -> Result<Option<ProfileConfig>, Fetch> {
        let path = match file_path("AWS_CONFIG_FILE", "config") {
            Err(Fetch::NotSet(_)) => return Ok(None),
            found => found?,
        };
        let Some(text) = read_if_present(&path)? else {
            return Ok(None);
        };
        let profile = profile_name();
        Ok(Some(ProfileConfig {
            path,
            text,
            profile,
        }))
    }

    /// `name` in the profile's section.
    fn value(&self, name: &str) -> Option<String> {
        profile_value(&self.text, &self.profile, name)
    }

    /// The profile and the file, as an error names them.
    fn name(&self) -> String {
        format!("AWS profile {:?} in {}", self.profile, self.path)
    }
}

/// The file `variable` names, else `$HOME/.aws/<name>`.
fn file_path(variable: &str, name: &str) -> Result<String, Fetch> {
    match std::env::var(variable) {
        Ok(path) => Ok(path),
        Err(_) => Ok(format!("{}/.aws/{name}", env("HOME")?)),
    }
}

/// A file's text; `None` when there is no such file.
fn read_if_present(path: &str) -> Result<Option<String>, Fetch> {
    match std::path::Path::new(path).exists() {
        true => read_file(path).map(Some),
        false => Ok(None),
    }
}

/// `name` in `profile`'s section of a config file's `text`.
fn profile_value(text: &str, profile: &str, name: &str) -> Option<String> {
    let sections = SharedFiles::config_sections(profile);
    (sections.iter()).find_map(|section| ini_value(text, section, name))
}

/// The value of `name` in the `[section]` of an INI text, not nested
/// under another setting (see [`ini_settings`]).
fn ini_value(text: &str, section: &str, name: &str) -> Option<String> {
    ini_settings(text, section)
        .find(|setting| setting.under.is_none() && setting.name == name)
        .map(|setting| setting.value.to_string())
}

/// One `name = value` line of an INI text.
struct IniSetting<'a> {
    /// The setting it is nested under, if any: AWS's nested form, a
    /// `name =` line with no value and the indented lines below it.
    under: Option<&'a str>,
    name: &'a str,
    value: &'a str,
}

/// The settings in the `[section]` of an INI text (AWS's shared files:
/// `name = value` lines, `#` and `;` comments; a section's name with its
/// words one space apart), in order.
fn ini_settings<'a>(text: &'a str, section: &'a str) -> impl Iterator<Item = IniSetting<'a>> {
    let (mut in_section, mut nesting) = (false, None);
    text.lines().filter_map(move |raw| {
        let line = raw.trim();
        if line.starts_with('#') || line.starts_with(';') {
            return None;
        }
        if let Some(is_section) = header_is(line, section) {
            (in_section, nesting) = (is_section, None);
            return None;
        }
        let (name, value) = line.split_once('=').filter(|_| in_section)?;
        let (name, value) = (name.trim(), value.trim());
        let indented = raw.starts_with([' ', '\t']);
        if !indented {
            nesting = value.is_empty().then_some(name);
        }
        let under = nesting.filter(|_| indented);
        Some(IniSetting { under, name, value })
    })
}

/// Whether `line`, if an INI section's header, is `[section]`'s (spaces
/// inside the brackets as they come); `None` for another line.
fn header_is(line: &str, section: &str) -> Option<bool> {
    let header = line.trim().strip_prefix('[')?.strip_suffix(']')?;
    Some(header.split_whitespace().eq(section.split(' ')))
}

/// The standard output of `command` run by `sh -c`, once it exits 0
/// within `timeout`; otherwise why not (its exit status and the start of
/// its standard error, or the timeout, when its process group is killed).
fn run_credential_process(command: &str, timeout: Duration) -> Result<String, BoxError> {
    let child = Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start credential_process: {e}"))?;
    let group = child.id() as libc::pid_t;
    let (finished, outcome) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name("goad-credential-process".into())
        .spawn(move || {
            let _ = finished.send(output_of(child));
        })
        .map_err(|e| format!("cannot start credential_process's reader: {e}"))?;
    match outcome.recv_timeout(timeout) {
        Ok(output) => output,
        Err(_) => {
            // SAFETY: kill(2) touches no memory of ours. The group is the
            // child's own (`process_group(0)`), alive while any process of
            // it is, so the signal reaches nothing else.
            unsafe { libc::kill(-group, libc::SIGKILL) };
            let ms = timeout.as_millis();
            Err(format!("credential_process did not finish within {ms} ms, killed").into())
        }
    }
}

/// Reads `child`'s two streams at once, each to its end (kept up to
/// `CREDENTIAL_PROCESS_OUTPUT_BYTES`), and waits for it: a process that
/// fills one pipe while goad waits on the other would stall until killed.
fn output_of(mut child: Child) -> Result<String, BoxError> {
    let stderr = child.stderr.take().map(|err| {
        std::thread::Builder::new()
            .name("goad-credential-process-stderr".into())
            .spawn(move || Kept::of(err))
    });
    let stdout = match child.stdout.take() {
        Some(out) => Kept::of(out)?,
        None => Kept::default(),
    };
    let stderr = match stderr.transpose()? {
        Some(reader) => reader
            .join()
            .map_err(|_| "credential_process's reader panicked")??,
        None => Kept::default(),
    };
    let status = child.wait()?;
    if !status.success() {
        let excerpt = super::status::excerpt(&stderr.bytes);
        return Err(format!("credential_process failed ({status}): {excerpt}").into());
    }
    if stdout.cut {
        let limit = CREDENTIAL_PROCESS_OUTPUT_BYTES;
        return Err(format!("credential_process printed more than {limit} bytes").into());
    }
    String::from_utf8(stdout.bytes).map_err(|_| "credential_process printed no UTF-8 text".into())
}

/// What a stream of a credential process gave, up to
/// `CREDENTIAL_PROCESS_OUTPUT_BYTES`, and whether it gave more.
#[derive(Default)]
struct Kept {
    bytes: Vec<u8>,
    cut: bool,
}

impl Kept {
    /// Reads `stream` to its end, keeping its start.
    fn of(mut stream: impl Read) -> std::io::Result<Kept> {
        let mut bytes = Vec::new();
        (&mut stream)
            .take(CREDENTIAL_PROCESS_OUTPUT_BYTES)
            .read_to_end(&mut bytes)?;
        let more = std::io::copy(&mut stream, &mut std::io::sink())?;
        Ok(Kept {
            bytes,
            cut: more > 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::wait_until;

    #[test]
    fn ini_sections_are_found_by_name_with_comments_and_spacing() {
        let file = "# keys\n[default]\naws_access_key_id = AKD\n\n[ hooks ]\n; rotated\n\
                    aws_access_key_id=AKH\naws_secret_access_key = s=h \n\
                    [profile   roles  anywhere]\ncredential_process = helper --a=b\n";
        let value = |section, name| ini_value(file, section, name);
        assert_eq!(
            value("default", "aws_access_key_id").as_deref(),
            Some("AKD")
        );
        assert_eq!(value("hooks", "aws_access_key_id").as_deref(), Some("AKH"));
        assert_eq!(
            value("hooks", "aws_secret_access_key").as_deref(),
            Some("s=h")
        );
        assert_eq!(
            value("profile roles anywhere", "credential_process").as_deref(),
            Some("helper --a=b")
        );
        assert_eq!(value("default", "aws_secret_access_key"), None);
        assert_eq!(value("other", "aws_access_key_id"), None);
    }

    #[test]
    fn a_nested_setting_is_of_the_setting_above_it_not_of_the_section() {
        let file = "[profile local]\nservices = moto\ns3 =\n  addressing_style = path\n\
                    \x20 endpoint_url = http://nested\nregion = eu-west-1\n\n\
                    [services moto]\nsqs =\n  endpoint_url = http://sqs:1\n\
                    s3 =\n\tendpoint_url = http://s3:2\n";
        assert_eq!(ini_value(file, "profile local", "endpoint_url"), None);
        let region = ini_value(file, "profile local", "region");
        assert_eq!(region.as_deref(), Some("eu-west-1"));
        let services: Vec<_> = ini_settings(file, "services moto")
            .map(|setting| (setting.under, setting.name, setting.value))
            .collect();
        assert_eq!(
            services,
            [
                (None, "sqs", ""),
                (Some("sqs"), "endpoint_url", "http://sqs:1"),
                (None, "s3", ""),
                (Some("s3"), "endpoint_url", "http://s3:2"),
            ]
        );
    }

    #[test]
    fn a_credential_process_gives_its_output_or_its_failure() {
        let long = Duration::from_secs(30);
        assert_eq!(
            run_credential_process("printf '%s' \"$0-ok\"", long).unwrap(),
            "sh-ok"
        );
        assert_eq!(
            run_credential_process("echo no token >&2; exit 3", long)
                .unwrap_err()
                .to_string(),
            "credential_process failed (exit status: 3): no token"
        );
        // More than a pipe holds on standard error before the answer: it
        // is read beside standard output, not after it.
        let chatty = "head -c 300000 /dev/zero | tr '\\0' x >&2; printf ok";
        assert_eq!(run_credential_process(chatty, long).unwrap(), "ok");
        let flood = "head -c 300000 /dev/zero | tr '\\0' x";
        assert_eq!(
            run_credential_process(flood, long).unwrap_err().to_string(),
            "credential_process printed more than 65536 bytes"
        );
        let failed = "printf 'line one\\n\\tline two\\n' >&2; exit 1";
        assert_eq!(
            run_credential_process(failed, long)
                .unwrap_err()
                .to_string(),
            "credential_process failed (exit status: 1): line one line two"
        );
    }

    /// A process that overruns is killed with what it started: here a
    /// `sleep` in the background, which would outlive the shell.
    #[test]
    fn a_credential_process_that_overruns_is_killed_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let command = format!("sleep 30 & echo $! > '{}'; sleep 30", pid_file.display());
        let error = run_credential_process(&command, Duration::from_millis(200))
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "credential_process did not finish within 200 ms, killed"
        );
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let stat = format!("/proc/{}/stat", pid.trim());
        // Gone, or a zombie until its new parent reaps it.
        wait_until(
            "the background sleep is killed",
            || match std::fs::read_to_string(&stat) {
                Ok(text) => text
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z'),
                Err(_) => true,
            },
        );
    }
}
