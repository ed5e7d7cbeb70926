//! The Pub/Sub emulator a machine names for every program, as Google's
//! client libraries read it: `PUBSUB_EMULATOR_HOST` (`HOST:PORT`). A
//! Pub/Sub sink whose config names no `endpoint` publishes there, over
//! plain HTTP and with no token (as the libraries do: the emulator takes
//! none, and a developer's machine has no metadata server to ask). An
//! empty variable names none.

use crate::config::{invalid, is_http_url, ConfigError};

/// The variable, as Google's libraries name it.
const VARIABLE: &str = "PUBSUB_EMULATOR_HOST";

/// The emulator's endpoint (`http://HOST:PORT`) if the environment names
/// one; an error naming the variable if its value is not `HOST:PORT`.
pub(crate) fn emulator_endpoint() -> Result<Option<String>, ConfigError> {
    let value = std::env::var_os(VARIABLE).map(|v| v.to_string_lossy().into_owned());
    endpoint_of(value)
}

fn endpoint_of(value: Option<String>) -> Result<Option<String>, ConfigError> {
    let Some(host) = value.filter(|value| !value.is_empty()) else {
        return Ok(None);
    };
    let endpoint = format!("http://{host}");
    match is_http_url(&endpoint) && !host.contains(['/', '?', '#', '@']) {
        true => Ok(Some(endpoint)),
        false => {
            let rule =
                "the emulator's HOST:PORT (as localhost:8085), as Google's libraries read it";
            Err(invalid(format!("the environment's {VARIABLE}"), rule, host))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_name_the_emulator_and_anything_else_is_refused() {
        let of = |value: &str| endpoint_of(Some(value.to_string()));
        assert_eq!(
            of("localhost:8085").unwrap().as_deref(),
            Some("http://localhost:8085")
        );
        assert_eq!(
            of("[::1]:8085").unwrap().as_deref(),
            Some("http://[::1]:8085")
        );
        assert_eq!(of("").unwrap(), None);
        assert_eq!(endpoint_of(None).unwrap(), None);
        for bad in [
            "http://localhost:8085",
            "localhost:8085/v1",
            "localhost:port",
            "user@host:1",
        ] {
            assert_eq!(
                of(bad).unwrap_err().to_string(),
                format!(
                    "the environment's PUBSUB_EMULATOR_HOST must be the emulator's HOST:PORT (as \
                     localhost:8085), as Google's libraries read it, got {bad:?}"
                )
            );
        }
    }
}
