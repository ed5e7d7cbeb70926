//! Config parsing and validation: every error names the key and the value;
//! `goad check` exits 0 or prints the error and exits 2.

mod common;

use common::sink;
use goad::demo::receiver::{Receiver, Reply};
use goad::{Config, Engine, NewHook, SinkConfig, SinkError, SourceConfig};
use std::time::Duration;

fn error_of(toml: &str) -> String {
    match Config::from_toml(toml) {
        Err(e) => e.to_string(),
        Ok(c) => c
            .validate()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_else(|| "valid".into()),
    }
}

#[test]
fn defaults_are_the_reference_defaults() {
    let c = Config::from_toml("").unwrap();
    assert_eq!(
        (
            c.dispatch.batch,
            c.dispatch.concurrency,
            c.dispatch.max_inflight
        ),
        (128, 32, 4_096)
    );
    assert_eq!(
        (
            c.dispatch.max_inflight_bytes,
            c.dispatch.attempt_timeout_ms,
            c.dispatch.sink_concurrency
        ),
        (134_217_728, 30_000, 8)
    );
    assert_eq!(
        (
            c.dispatch.breaker_failures,
            c.dispatch.breaker_open_ms,
            c.dispatch.breaker_max_open_ms
        ),
        (5, 30_000, 300_000)
    );
    assert_eq!(
        (
            c.retry.base_ms,
            c.retry.max_ms,
            c.retry.max_attempts,
            c.retry.jitter,
            c.retry.max_elapsed_ms
        ),
        (100, 300_000, 84, true, 86_400_000)
    );
    assert_eq!(
        (
            c.listen.as_str(),
            c.max_body_bytes,
            c.replay.rate,
            c.replay.max_lag_ms,
            c.replay.retention_ms
        ),
        ("127.0.0.1:7878", 1_048_576, 1_000, 2_000, 604_800_000)
    );
    assert_eq!(
        c.dispatch.tenant_limits("any"),
        goad::config::TenantLimits::DEFAULT
    );
    c.validate().unwrap();
}

#[test]
fn each_range_rule_names_the_key_and_the_value() {
    let cases = [
        ("[dispatch]\nbatch = 0", "dispatch.batch must be a positive integer, got 0"),
        ("[dispatch]\nconcurrency = 0", "dispatch.concurrency must be an integer from 1 to 4096 (each shard runs its attempts on as many threads), got 0"),
        ("[dispatch]\nconcurrency = 40960", "dispatch.concurrency must be an integer from 1 to 4096 (each shard runs its attempts on as many threads), got 40960"),
        ("[dispatch]\nmax_inflight = 0", "dispatch.max_inflight must be a positive integer, got 0"),
        ("[dispatch]\nmax_inflight_bytes = 0", "dispatch.max_inflight_bytes must be a positive integer, got 0"),
        ("[dispatch]\nattempt_timeout_ms = 0", "dispatch.attempt_timeout_ms must be an integer from 1 to 3600000 (an hour), got 0"),
        // A deadline is a sum in u64 ms: an unbounded timeout would overflow it.
        ("[dispatch]\nattempt_timeout_ms = 18446744073709551615", "dispatch.attempt_timeout_ms must be an integer from 1 to 3600000 (an hour), got 18446744073709551615"),
        ("[dispatch]\nsink_concurrency = 33", "dispatch.sink_concurrency must be an integer from 1 to dispatch.concurrency (32), got 33"),
        ("[dispatch]\nbreaker_open_ms = 0", "dispatch.breaker_open_ms must be an integer from 1 to 86400000 (a day), got 0"),
        ("[dispatch]\nbreaker_open_ms = 86400001\nbreaker_max_open_ms = 86400001", "dispatch.breaker_open_ms must be an integer from 1 to 86400000 (a day), got 86400001"),
        ("[dispatch]\nbreaker_max_open_ms = 10", "dispatch.breaker_max_open_ms must be an integer from dispatch.breaker_open_ms (30000) to 86400000 (a day), got 10"),
        ("[dispatch]\nbreaker_max_open_ms = 18446744073709551615", "dispatch.breaker_max_open_ms must be an integer from dispatch.breaker_open_ms (30000) to 86400000 (a day), got 18446744073709551615"),
        ("[dispatch.tenants.\"acme corp\"]\nconcurrency = 1", "dispatch.tenants.acme corp must be a tenant id of [A-Za-z0-9_-], 1 to 128 characters, got \"acme corp\""),
        ("[dispatch.tenants.acme]\nconcurrency = 0", "dispatch.tenants.acme.concurrency must be a positive integer, got 0"),
        ("[dispatch.tenants.acme]\nmax_stored_bytes = 1000", "dispatch.tenants.acme.max_stored_bytes must be 0 (no bound) or at least max_body_bytes (1048576): a smaller bound would refuse a hook goad takes, got 1000"),
        ("[retry]\nmax_attempts = 0", "retry.max_attempts must be a positive integer, got 0"),
        ("[retry]\nbase_ms = 10\nmax_ms = 5", "retry.max_ms must be an integer from retry.base_ms (10) to 2592000000 (30 days), got 5"),
        // A row due past core::HELD_DUE_MS would be taken for a held one.
        ("[retry]\nmax_ms = 2592000001", "retry.max_ms must be an integer from retry.base_ms (100) to 2592000000 (30 days), got 2592000001"),
        ("[retry]\nbase_ms = 4611686018427387905\nmax_ms = 4611686018427387905", "retry.base_ms must be an integer from 0 to 2592000000 (30 days), got 4611686018427387905"),
        ("[retry]\nmax_elapsed_ms = 0", "retry.max_elapsed_ms must be a positive integer, got 0"),
        ("max_body_bytes = 0", "max_body_bytes must be an integer from 1 to 4294967295, got 0"),
        ("listen = \"127.0.0.1:99999\"", "listen must be a host:port address (a port from 0 to 65535), got \"127.0.0.1:99999\""),
        ("listen = \"nohost\"", "listen must be a host:port address (a port from 0 to 65535), got \"nohost\""),
        ("listen = \"::1:7878\"", "listen must be a host:port address (a port from 0 to 65535), got \"::1:7878\""),
        ("max_shard_bytes = 1000", "max_shard_bytes must be an integer from 16777216 (16 MiB, and 8 × max_body_bytes) to 4398046511104, got 1000"),
        ("max_body_bytes = 4194304\nmax_shard_bytes = 16777216", "max_shard_bytes must be an integer from 33554432 (16 MiB, and 8 × max_body_bytes) to 4398046511104, got 16777216"),
        ("max_shard_bytes = 5000000000000", "max_shard_bytes must be an integer from 16777216 (16 MiB, and 8 × max_body_bytes) to 4398046511104, got 5000000000000"),
        ("min_free_disk_bytes = 1000000", "min_free_disk_bytes must be an integer from 67108864 (64 MiB) to 1125899906842624 (1 PiB), got 1000000"),
        ("min_free_disk_bytes = 2000000000000000", "min_free_disk_bytes must be an integer from 67108864 (64 MiB) to 1125899906842624 (1 PiB), got 2000000000000000"),
        // A bound smaller than one largest request would hold it unread for ever.
        ("[http]\nmax_buffered_bytes = 1064959", "http.max_buffered_bytes must be at least one largest request, max_body_bytes (1048576) and a 16384-byte head: 1064960, got 1064959"),
        ("max_body_bytes = 536870912", "http.max_buffered_bytes must be at least one largest request, max_body_bytes (536870912) and a 16384-byte head: 536887296, got 268435456"),
        ("[http]\ntls_cert_file = \"c.pem\"", "http.tls_key_file must be set with http.tls_cert_file, got \"absent\""),
        ("[http]\ntls_key_file = \"k.pem\"", "http.tls_cert_file must be set with http.tls_key_file, got \"absent\""),
        ("[http]\ntls_client_ca_file = \"ca.pem\"", "http.tls_client_ca_file must be absent without http.tls_cert_file (only HTTPS asks for client certificates), got \"ca.pem\""),
        ("[[sources]]\nid = \"a\"\ndedupe_header = \"Authorization\"", "sources[0].dedupe_header must be a header goad stores with the hook (not a credential or framing header), got \"Authorization\""),
        ("[[sources]]\nid = \"a\"\ndedupe_header = \"bad header\"", "sources[0].dedupe_header must be a header goad stores with the hook (not a credential or framing header), got \"bad header\""),
        ("[replay]\nrate = 0", "replay.rate must be an integer from 1 to 100000, got 0"),
        ("[replay]\nretention_ms = 60", "replay.retention_ms must be at least 1000, got 60"),
        ("[dead_letters]\nretention_ms = 500", "dead_letters.retention_ms must be 0 (keep dead letters until replayed or purged) or at least 1000, got 500"),
        ("[claim_check]\nretention_ms = 0", "claim_check.retention_ms must be a positive integer, got 0"),
        ("[notifications]\nsource = \"ops\"\n[[sources]]\nid = \"a\"", "notifications.source must be the id of one of the sources, got \"ops\""),
        ("[[sources]]\nid = \"a\"\nforward_headers = [\"x-ok\", \"bad name\"]", "sources[0].forward_headers[1] must be a header name goad forwards (not a credential, a framing header, content-type, or goad's own x-goad-* and webhook-*), got \"bad name\""),
        ("[[sources]]\nid = \"a\"\nforward_headers = [\"Authorization\"]", "sources[0].forward_headers[0] must be a header name goad forwards (not a credential, a framing header, content-type, or goad's own x-goad-* and webhook-*), got \"Authorization\""),
        ("[[sources]]\nid = \"a\"\ndedupe_window_ms = 0", "sources[0].dedupe_window_ms must be an integer from 1 to 2592000000 (30 days); without it, every hook is stored, got 0"),
        ("[[sources]]\nid = \"a\"\ndedupe_window_ms = 2592000001", "sources[0].dedupe_window_ms must be an integer from 1 to 2592000000 (30 days); without it, every hook is stored, got 2592000001"),
        ("[[sources]]\nid = \"a\"\ndedupe_json_pointer = \"id\"", "sources[0].dedupe_json_pointer must be a JSON pointer (RFC 6901) to the key in the body: /id, /message/messageId, got \"id\""),
        ("[[sources]]\nid = \"a\"\ndedupe_header = \"x-id\"\ndedupe_json_pointer = \"/id\"", "sources[0].dedupe_json_pointer must be absent with dedupe_header (a hook's dedupe key comes from one place), got \"/id\""),
        ("[[sources]]\nid = \"a\"\nmax_ingest_per_s = 0", "sources[0].max_ingest_per_s must be a positive integer, got 0"),
        ("[claim_check]\ns3_region = \"us-east-1\"", "claim_check.s3_region must be absent without claim_check.s3_bucket, got \"set\""),
        ("[claim_check]\ns3_bucket = \"Claims_\"\ns3_region = \"us-east-1\"", "claim_check.s3_bucket must be an S3 bucket name: 3 to 63 lowercase letters, digits, '.' or '-', got \"Claims_\""),
        ("[claim_check]\ndir = \"/tmp/c\"\ns3_bucket = \"claims\"\ns3_region = \"us-east-1\"", "claim_check.dir must be absent with claim_check.s3_bucket (claims go to one place), got \"set\""),
        ("[claim_check]\ns3_bucket = \"claims\"\ns3_region = \"us-east-1\"\ncredentials = \"sso\"", "claim_check.credentials must be one of [\"env\", \"instance\", \"container\", \"web_identity\", \"profile\"], got \"sso\""),
        ("[claim_check]\ns3_bucket = \"claims\"\ns3_region = \"EU (Ireland)\"", "claim_check.s3_region must be an AWS region name of lowercase letters, digits and '-', got \"EU (Ireland)\""),
        ("[claim_check]\ns3_bucket = \"claims\"\ns3_region = \"us-east-1\"\ns3_prefix = \"/goad/\"", "claim_check.s3_prefix must be at most 256 characters, not starting with '/' nor holding '..', got \"/goad/\""),
        ("[claim_check]\ns3_bucket = \"claims\"\ns3_region = \"us-east-1\"\ns3_prefix = \"goad/../other/\"", "claim_check.s3_prefix must be at most 256 characters, not starting with '/' nor holding '..', got \"goad/../other/\""),
        ("[claim_check]\ns3_bucket = \"claims\"\ns3_region = \"us-east-1\"\naccess_key_id_env = \"\"", "claim_check.access_key_id_env must be an environment variable's name (letters, digits, '_', '.' and '-', not beginning with a digit), got \"\""),
        ("[claim_check]\ncredentials = \"instance\"", "claim_check.credentials must be absent without claim_check.s3_bucket, got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q\"\ncredentials = \"web_identity\"\nsecret_access_key_env = \"S\"", "sources[0].sinks[0].secret_access_key_env must be absent with credentials = \"web_identity\" (only env reads variables), got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\ncredentials = \"env\"", "sources[0].sinks[0].credentials must be absent without aws_service (it signs that service's requests), got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q\"\noauth2 = { token_url = \"https://auth/t\", client_id = \"c\", client_secret_env = \"S\" }", "sources[0].sinks[0].oauth2 must be absent for a sink of type \"sqs\", got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\noauth2 = { token_url = \"ftp://auth/t\", client_id = \"c\", client_secret_env = \"S\" }", "sources[0].sinks[0].oauth2.token_url must be an http:// or https:// URL with a host, got \"ftp://auth/t\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\noauth2 = { token_url = \"https://auth/t\", client_id = \"c\", client_secret_env = \"\" }", "sources[0].sinks[0].oauth2.client_secret_env must be an environment variable's name (letters, digits, '_', '.' and '-', not beginning with a digit), got \"\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nheaders_env = { Authorization = \"A\" }\noauth2 = { token_url = \"https://auth/t\", client_id = \"c\", client_secret_env = \"S\" }", "sources[0].sinks[0].headers_env.Authorization must be absent with oauth2 (its token is the authorization), got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"https://x.lambda-url.eu-west-1.on.aws/\"\naws_service = \"Lambda\"\nregion = \"eu-west-1\"", "sources[0].sinks[0].aws_service must be an AWS service's signing name of lowercase letters, digits and '-' (lambda, execute-api), got \"Lambda\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"https://x.lambda-url.eu-west-1.on.aws/\"\naws_service = \"lambda\"\nregion = \"eu-west-1\"\nheaders_env = { Authorization = \"A\" }", "sources[0].sinks[0].headers_env.Authorization must be absent with aws_service (the signature is the authorization), got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"https://u:pw@x.lambda-url.eu-west-1.on.aws/\"\naws_service = \"lambda\"\nregion = \"eu-west-1\"", "sources[0].sinks[0].url must be without user information with aws_service (the signature is the authorization), got \"a URL with user information\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"https://x.lambda-url.eu-west-1.on.aws/\"\naws_service = \"lambda\"\nregion = \"eu-west-1\"\ncredentials = \"sso\"", "sources[0].sinks[0].credentials must be one of [\"env\", \"instance\", \"container\", \"web_identity\", \"profile\"], got \"sso\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"https://x.lambda-url.eu-west-1.on.aws/\"\nregion = \"eu-west-1\"", "sources[0].sinks[0].region must be absent without aws_service (it signs that service's requests), got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"https://svc-abc.a.run.app/hooks\"\ngoogle_id_token = { audience = \"\" }", "sources[0].sinks[0].google_id_token.audience must be the receiving service's audience (a Cloud Run service's URL, an IAP client id), got \"\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"https://svc-abc.a.run.app/hooks\"\ngoogle_id_token = { audience = \"https://svc-abc.a.run.app\", credentials = \"env\" }", "sources[0].sinks[0].google_id_token.credentials must be one of [\"metadata\", \"service_account\", \"external_account\"], got \"env\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"https://svc-abc.a.run.app/hooks\"\ngoogle_id_token = { audience = \"https://svc-abc.a.run.app\" }\noauth2 = { token_url = \"https://auth/t\", client_id = \"c\", client_secret_env = \"S\" }", "sources[0].sinks[0].google_id_token must be absent with oauth2 (its token is the authorization), got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"https://svc-abc.a.run.app/hooks\"\ngoogle_id_token = { audience = \"https://svc-abc.a.run.app\" }\nheaders = { authorization = \"Bearer x\" }", "sources[0].sinks[0].headers.authorization must be absent with google_id_token (its token is the authorization), got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\noauth2 = { token_url = \"https://auth/t\", client_id = \"c\" }", "sources[0].sinks[0].oauth2.client_secret_env must be set: the variable holding the client's secret (or client_auth = \"private_key_jwt\"), got \"absent\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\noauth2 = { token_url = \"https://auth/t\", client_id = \"c\", client_auth = \"private_key_jwt\" }", "sources[0].sinks[0].oauth2.private_key_file must be set with client_auth = \"private_key_jwt\": the client's PEM private key, got \"absent\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\noauth2 = { token_url = \"https://auth/t\", client_id = \"c\", client_auth = \"private_key_jwt\", private_key_file = \"/k.pem\", client_secret_env = \"S\" }", "sources[0].sinks[0].oauth2.client_secret_env must be absent with client_auth = \"private_key_jwt\" (the client signs with its key), got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\noauth2 = { token_url = \"https://auth/t\", client_id = \"c\", client_secret_env = \"S\", key_id = \"k1\" }", "sources[0].sinks[0].oauth2.key_id must be absent without client_auth = \"private_key_jwt\", got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\noauth2 = { token_url = \"https://auth/t\", client_id = \"c\", client_secret_env = \"S\", certificate_file = \"/c.pem\" }", "sources[0].sinks[0].oauth2.certificate_file must be absent without client_auth = \"private_key_jwt\", got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"pubsub\"\nproject = \"p\"\ntopic = \"t\"\ncredentials = \"instance\"", "sources[0].sinks[0].credentials must be one of [\"env\", \"metadata\", \"service_account\", \"external_account\", \"authorized_user\"], got \"instance\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"pubsub\"\nproject = \"p\"\ntopic = \"t\"\ncredentials = \"metadata\"\ntoken_env = \"T\"", "sources[0].sinks[0].token_env must be absent with credentials = \"metadata\" (only env reads variables), got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"pubsub\"\nproject = \"p\"\ntopic = \"t\"\ninline_max_bytes = 0", "sources[0].sinks[0].inline_max_bytes must be a positive integer, got 0"),
        ("[[sources]]\nid = \"a\"\ningest_handshake = \"teams\"", "sources[0].ingest_handshake must be one of [\"microsoft_graph\", \"event_grid\", \"dropbox\", \"okta\"], got \"teams\""),
        ("[[sources]]\nid = \"a\"\ningest_signature = \"paypal\"\ningest_secret_env = \"S\"", "sources[0].ingest_signature must be one of [\"github\", \"stripe\", \"slack\", \"shopify\", \"standard_webhooks\", \"svix\", \"gitlab\", \"telegram\", \"zoom\", \"twitch\"] or a table { header, prefix, encoding, algorithm }, got \"paypal\""),
        ("[[sources]]\nid = \"a\"\ningest_signature = { header = \"x sig\" }\ningest_secret_env = \"S\"", "sources[0].ingest_signature.header must be a header name, got \"x sig\""),
        ("[[sources]]\nid = \"a\"\ningest_signature = { header = \"x-sig\", encoding = \"base32\" }\ningest_secret_env = \"S\"", "sources[0].ingest_signature.encoding must be one of [\"hex\", \"base64\"], got \"base32\" (did you mean \"base64\"?)"),
        ("[[sources]]\nid = \"a\"\ningest_signature = { header = \"x-sig\", algorithm = \"md5\" }\ningest_secret_env = \"S\"", "sources[0].ingest_signature.algorithm must be one of [\"sha256\", \"sha1\", \"sha512\"], got \"md5\""),
        ("[[sources]]\nid = \"a\"\ningest_signature = { header = \"x-sig\" }", "sources[0].ingest_signature must be set with ingest_secret_env (the provider's signing secret), got \"an HMAC in x-sig\""),
        ("[[sources]]\nid = \"a\"\ningest_signature = \"github\"", "sources[0].ingest_signature must be set with ingest_secret_env (the provider's signing secret), got \"github\""),
        ("[[sources]]\nid = \"a\"\ningest_jwt = { jwks_url = \"http://keys.example/certs\", issuer = \"https://accounts.google.com\", audience = \"https://n/v1/sources/a/hooks\" }", "sources[0].ingest_jwt.jwks_url must be an https:// URL (or http:// to a loopback address) of the issuer's keys, got \"http://keys.example/certs\""),
        ("[[sources]]\nid = \"a\"\ningest_jwt = { jwks_url = \"certs.json\", issuer = \"https://accounts.google.com\", audience = \"https://n/v1/sources/a/hooks\" }", "sources[0].ingest_jwt.jwks_url must be an https:// URL (or http:// to a loopback address) of the issuer's keys, got \"certs.json\""),
        ("[[sources]]\nid = \"a\"\ningest_jwt = { jwks_url = \"https://www.googleapis.com/oauth2/v3/certs\", issuer = [], audience = \"https://n/v1/sources/a/hooks\" }", "sources[0].ingest_jwt.issuer must be the issuer's name (the tokens' iss), or a list of them, got []"),
        ("[[sources]]\nid = \"a\"\ningest_jwt = { jwks_url = \"https://www.googleapis.com/oauth2/v3/certs\", issuer = \"https://accounts.google.com\", audience = \"\" }", "sources[0].ingest_jwt.audience must be the audience the sender puts in its tokens' aud (often this endpoint's URL), got \"\""),
        ("[[sources]]\nid = \"a\"\ningest_jwt = { jwks_url = \"https://www.googleapis.com/oauth2/v3/certs\", issuer = \"https://accounts.google.com\", audience = \"https://n/v1/sources/a/hooks\", claims = { email = [\"a@b\"] } }", "sources[0].ingest_jwt.claims.email must be a string, a boolean or an integer the claim must equal, got [\"a@b\"]"),
        ("[[sources]]\nid = \"a\"\ningest_token_env = \"T\"\ningest_jwt = { jwks_url = \"https://www.googleapis.com/oauth2/v3/certs\", issuer = \"https://accounts.google.com\", audience = \"https://n/v1/sources/a/hooks\" }", "sources[0].ingest_token_env must be not set with ingest_jwt (both read the Authorization header), got \"T\""),
        ("[[sources]]\nid = \"a\"\ningest_secret_env = \"S\"", "sources[0].ingest_signature must be set with ingest_secret_env (how the provider signs), got \"absent\""),
        ("[[sources]]\nid = \"a\"\ningest_signature = \"stripe\"\ningest_secret_env = [\"S\", \"\"]", "sources[0].ingest_secret_env[1] must be an environment variable's name (letters, digits, '_', '.' and '-', not beginning with a digit), got \"\""),
        ("[[sources]]\nid = \"a\"\ningest_signature = \"stripe\"\ningest_secret_env = []", "sources[0].ingest_secret_env must be an environment variable name, or a non-empty list of them, got []"),
        ("[[sources]]\nid = \"a\"\ningest_token_env = []", "sources[0].ingest_token_env must be an environment variable name, or a non-empty list of them, got []"),
        ("[[sources]]\nid = \"a\"\ningest_token_env = \"\"", "sources[0].ingest_token_env must be an environment variable's name (letters, digits, '_', '.' and '-', not beginning with a digit), got \"\""),
        ("admin_token_env = [\"OLD\", \"\"]", "admin_token_env[1] must be an environment variable's name (letters, digits, '_', '.' and '-', not beginning with a digit), got \"\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nsecret_env = []", "sources[0].sinks[0].secret_env must be an environment variable name, or a non-empty list of them, got []"),
        ("[[sources]]\nid = \"a b\"", "sources[0].id must be a source id of [A-Za-z0-9_-], 1 to 128 characters, got \"a b\""),
        ("[[sources]]\nid = \"a\"\n[[sources]]\nid = \"a\"", "sources[1].id must be unique among sources, got \"a\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"kafka\"", "sources[0].sinks[0].type must be one of [\"http\", \"sqs\", \"pubsub\"], got \"kafka\""),
        // A value of a fixed set written near one of it (a typo, another case) is told which.
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"SQS\"", "sources[0].sinks[0].type must be one of [\"http\", \"sqs\", \"pubsub\"], got \"SQS\" (did you mean \"sqs\"?)"),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"htpp\"", "sources[0].sinks[0].type must be one of [\"http\", \"sqs\", \"pubsub\"], got \"htpp\" (did you mean \"http\"?)"),
        ("[[sources]]\nid = \"a\"\ningest_signature = \"githib\"\ningest_secret_env = \"S\"", "sources[0].ingest_signature must be one of [\"github\", \"stripe\", \"slack\", \"shopify\", \"standard_webhooks\", \"svix\", \"gitlab\", \"telegram\", \"zoom\", \"twitch\"] or a table { header, prefix, encoding, algorithm }, got \"githib\" (did you mean \"github\"?)"),
        ("[[sources]]\nid = \"a\"\ningest_handshake = \"event-grid\"", "sources[0].ingest_handshake must be one of [\"microsoft_graph\", \"event_grid\", \"dropbox\", \"okta\"], got \"event-grid\" (did you mean \"event_grid\"?)"),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nmethod = \"pots\"", "sources[0].sinks[0].method must be one of post, put, patch, got \"pots\" (did you mean \"post\"?)"),
        ("[claim_check]\ns3_bucket = \"claims\"\ns3_region = \"us-east-1\"\ncredentials = \"webidentity\"", "claim_check.credentials must be one of [\"env\", \"instance\", \"container\", \"web_identity\", \"profile\"], got \"webidentity\" (did you mean \"web_identity\"?)"),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"ftp://x\"", "sources[0].sinks[0].url must be an http:// or https:// URL with a host, got \"ftp://x\""),
        // A port no connection can go to (the URL parser drops one over 65535).
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x:99999/\"", "sources[0].sinks[0].url must be an http:// or https:// URL with a host and a port from 1 to 65535, got \"http://x:99999/\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://[::1]:0/\"", "sources[0].sinks[0].url must be an http:// or https:// URL with a host and a port from 1 to 65535, got \"http://[::1]:0/\""),
        // A name beyond ASCII, a space: what to write instead.
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"https://bücher.example/hooks\"", "sources[0].sinks[0].url must be an http:// or https:// URL with a host, in ASCII: a name beyond it is written as its punycode (xn--…), got \"https://bücher.example/hooks\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"https://example.com/new hook\"", "sources[0].sinks[0].url must be an http:// or https:// URL with a host, and no space or line break (a space in a path or query is written %20), got \"https://example.com/new hook\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\ntimeout_ms = 30000", "sources[0].sinks[0].timeout_ms must be an integer from 1 to below dispatch.attempt_timeout_ms (30000), got 30000"),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nmethod = \"get\"", "sources[0].sinks[0].method must be one of post, put, patch, got \"get\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nheaders = { \"x a\" = \"1\" }", "sources[0].sinks[0].headers must be valid HTTP header names, got \"x a\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nheaders = { x-a = \"1\\n2\" }", "sources[0].sinks[0].headers.x-a must be a valid HTTP header value (no control characters but tab), got \"1\\n2\""),
        // ureq sends nothing but printable ASCII in an authorization header.
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nheaders = { Authorization = \"Basic José\" }", "sources[0].sinks[0].headers.Authorization must be printable ASCII (all an authorization header carries), got a value not shown here (a credential)"),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nheaders = { Content-Length = \"3\" }", "sources[0].sinks[0].headers must be a header goad does not set itself (not a framing or hop-by-hop header, x-goad-* or webhook-*), got \"Content-Length\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nheaders = { webhook-signature = \"v1,x\" }", "sources[0].sinks[0].headers must be a header goad does not set itself (not a framing or hop-by-hop header, x-goad-* or webhook-*), got \"webhook-signature\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nheaders_env = { x-goad-tenant = \"T\" }", "sources[0].sinks[0].headers_env must be a header goad does not set itself (not a framing or hop-by-hop header, x-goad-* or webhook-*), got \"x-goad-tenant\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nheaders = { x-key = \"1\" }\nheaders_env = { X-Key = \"K\" }", "sources[0].sinks[0].headers_env must be header names given once across headers and headers_env (in any case), got \"X-Key\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nheaders_env = { \"x a\" = \"K\" }", "sources[0].sinks[0].headers_env must be valid HTTP header names, got \"x a\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nheaders_env = { authorization = \"\" }", "sources[0].sinks[0].headers_env.authorization must be an environment variable's name (letters, digits, '_', '.' and '-', not beginning with a digit), got \"\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q\"\nheaders_env = { authorization = \"K\" }", "sources[0].sinks[0].headers_env must be absent for a sink of type \"sqs\", got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nclient_cert_file = \"c.pem\"\nclient_key_file = \"k.pem\"", "sources[0].sinks[0].client_cert_file must be absent with an http:// url (only TLS uses it), got \"c.pem\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"https://x\"\nclient_cert_file = \"c.pem\"", "sources[0].sinks[0].client_cert_file must be set with client_key_file (a certificate and its key), got \"c.pem\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"https://x\"\nclient_key_file = \"k.pem\"", "sources[0].sinks[0].client_key_file must be set with client_cert_file (a certificate and its key), got \"k.pem\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"pubsub\"\nproject = \"p\"\ntopic = \"t\"\nclient_key_file = \"k.pem\"", "sources[0].sinks[0].client_key_file must be absent for a sink of type \"pubsub\", got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nmax_calls_per_s = 0", "sources[0].sinks[0].max_calls_per_s must be an integer from 1 to 100000, got 0"),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nmax_calls_per_s = 100001", "sources[0].sinks[0].max_calls_per_s must be an integer from 1 to 100000, got 100001"),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nurl_env = \"U\"", "sources[0].sinks[0].url_env must be absent with url (the URL is one or the other), got \"set\""),
        ("[metrics]\nneeds_admin_token = true", "metrics.needs_admin_token must be false without admin_token_env (there is no token to need), got true"),
        // A secret written where its variable's name goes: refused, and not shown.
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nsecret_env = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw=\"", "sources[0].sinks[0].secret_env must be an environment variable's name (letters, digits, '_', '.' and '-', not beginning with a digit), got a value not shown here (is it the secret itself, not its variable's name?)"),
        ("[[sources]]\nid = \"a\"\ningest_token_env = [\"GOAD_TOKEN\", \"s3cret token\"]", "sources[0].ingest_token_env[1] must be an environment variable's name (letters, digits, '_', '.' and '-', not beginning with a digit), got a value not shown here (is it the secret itself, not its variable's name?)"),
        ("[[sources]]\nid = \"a\"\ningest_verify_token_env = \"1TOKEN\"", "sources[0].ingest_verify_token_env must be an environment variable's name (letters, digits, '_', '.' and '-', not beginning with a digit), got a value not shown here (is it the secret itself, not its variable's name?)"),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q\"\nsecret_access_key_env = \"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\"", "sources[0].sinks[0].secret_access_key_env must be an environment variable's name (letters, digits, '_', '.' and '-', not beginning with a digit), got a value not shown here (is it the secret itself, not its variable's name?)"),
        // One that is a name by its characters, shaped as a well-known kind of secret.
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nsecret_env = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"", "sources[0].sinks[0].secret_env must be an environment variable's name (letters, digits, '_', '.' and '-', not beginning with a digit), got a value not shown here (it is shaped as a webhook signing key: is it the secret itself, not its variable's name?)"),
        ("[[sources]]\nid = \"a\"\ningest_token_env = \"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJl\"", "sources[0].ingest_token_env must be an environment variable's name (letters, digits, '_', '.' and '-', not beginning with a digit), got a value not shown here (it is shaped as a JSON Web Token: is it the secret itself, not its variable's name?)"),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q\"\naccess_key_id_env = \"AKIAIOSFODNN7EXAMPLE\"", "sources[0].sinks[0].access_key_id_env must be an environment variable's name (letters, digits, '_', '.' and '-', not beginning with a digit), got a value not shown here (it is shaped as an AWS access key id: is it the secret itself, not its variable's name?)"),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl_env = \"\"", "sources[0].sinks[0].url_env must be an environment variable's name (letters, digits, '_', '.' and '-', not beginning with a digit), got \"\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q\"\nurl_env = \"U\"", "sources[0].sinks[0].url_env must be absent for a sink of type \"sqs\", got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nretry = { max_attempts = 0 }", "sources[0].sinks[0].retry.max_attempts must be a positive integer, got 0"),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nretry = { max_ms = 50 }", "sources[0].sinks[0].retry.max_ms must be an integer from sources[0].sinks[0].retry.base_ms (100) to 2592000000 (30 days), got 50"),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nfilter = { header = \"Authorization\", values = [\"x\"] }", "sources[0].sinks[0].filter.header must be a header goad stores with the hook (not a credential or framing header), got \"Authorization\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nfilter = { header = \"x-event\", values = [] }", "sources[0].sinks[0].filter.values must be a list of at least one value, got \"[]\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nca_file = \"ca.pem\"", "sources[0].sinks[0].ca_file must be absent with an http:// url (only TLS uses it), got \"ca.pem\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q\"\nca_file = \"ca.pem\"", "sources[0].sinks[0].ca_file must be absent for a sink of type \"sqs\", got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"pubsub\"\nproject = \"p\"", "sources[0].sinks[0].topic must be 1 to 255 characters, got \"\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"pubsub\"\nproject = \"p\"\ntopic = \"t\"\nregion = \"us-east-1\"", "sources[0].sinks[0].region must be absent for a sink of type \"pubsub\", got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"sqs\"", "sources[0].sinks[0].queue_url must be an http:// or https:// queue URL ending in the queue's name, got \"\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q\"\nurl = \"http://x\"", "sources[0].sinks[0].url must be absent for a sink of type \"sqs\", got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q\"", "sources[0].sinks[0].queue_url must be absent for a sink of type \"http\", got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q\"\nrole_arn = \"arn:aws:iam::123456789012:user/hooks\"", "sources[0].sinks[0].role_arn must be an IAM role ARN: arn:aws:iam::<12-digit account>:role/<name>, got \"arn:aws:iam::123456789012:user/hooks\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q\"\nexternal_id = \"ext-1\"", "sources[0].sinks[0].external_id must be absent without role_arn, got \"set\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nrole_arn = \"arn:aws:iam::123456789012:role/w\"", "sources[0].sinks[0].role_arn must be absent without aws_service (it signs that service's requests), got \"set\""),
        ("[claim_check]\nrole_arn = \"arn:aws:iam::123456789012:role/w\"", "claim_check.role_arn must be absent without claim_check.s3_bucket, got \"set\""),
        ("[claim_check]\ns3_bucket = \"claims\"\ns3_region = \"us-east-1\"\nrole_arn = \"arn:aws:iam::123456789012:role/w\"\nrole_session_name = \"a b\"", "claim_check.role_session_name must be 2 to 64 letters, digits or any of _+=,.@-, got \"a b\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q.fifo\"\nmessage_group_id = \"tenant a\"", "sources[0].sinks[0].message_group_id must be 1 to 128 letters, digits and punctuation (SQS's MessageGroupId), got \"tenant a\""),
        // A FIFO queue's default group, `<tenant>/<source>`: 141 characters.
        ("[[sources]]\nid = \"ssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssss\"\ntenant = \"tttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt\"\n[[sources.sinks]]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q.fifo\"", "sources[0].sinks[0].message_group_id must be set for this FIFO queue: its default, \"<tenant>/<source>\", is over SQS's 128 characters, got \"absent\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q\"\nregion = \"US East\"", "sources[0].sinks[0].region must be an AWS region name of lowercase letters, digits and '-', got \"US East\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nordering_key = \"header:x-c\"", "sources[0].sinks[0].ordering_key must be set only with ordered = true, got \"header:x-c\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nordered = true\nordering_key = \"x-c\"", "sources[0].sinks[0].ordering_key must be \"header:<name>\", a header name of letters, digits, '-', '_' or '.', got \"x-c\""),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nordered = true\nordering_key = \"header:Authorization\"", "sources[0].sinks[0].ordering_key must be a header goad stores with the hook (credential and framing headers are not stored), got \"header:Authorization\""),
        ("[egress]\ndeny_private_addresses = true\nallow_private_networks = [\"10.0.0.0/8\", \"10.20.1.0/16\"]", "egress.allow_private_networks[1] must be a network whose address has no bits set past its prefix length (10.20.0.0/16), got \"10.20.1.0/16\""),
        ("[notifications]\ncoalesce_ms = 86400001", "notifications.coalesce_ms must be an integer from 0 (each dead row told alone) to 86400000 (a day), got 86400001"),
        ("[egress]\nallow_private_networks = [\"internal.example.com\"]", "egress.allow_private_networks[0] must be a network as address/prefix length (10.20.0.0/16, fd00:1::/48), got \"internal.example.com\""),
    ];
    for (toml, want) in cases {
        assert_eq!(error_of(toml), want, "for {toml:?}");
    }
    let sinks = "[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\n".repeat(65);
    assert_eq!(
        error_of(&format!("[[sources]]\nid = \"a\"\n{sinks}")),
        "sources[0].sinks must be at most 64 sinks, got 65"
    );
}

/// A path goad would take as something else than meant is refused, for
/// every key that names a file or directory: a leading `~` (no shell
/// expands it here: goad would make a directory named `~` in its working
/// directory), whitespace at an end, or nothing. A `~` inside is a name.
#[test]
fn a_path_key_refuses_a_tilde_whitespace_at_its_ends_or_nothing() {
    let tilde =
        "a path without a leading ~ (only a shell expands it: write the home directory out)";
    let ends = "a path without whitespace at its start or end";
    let https_sink =
        "[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"https://x\"\n";
    let oauth2 = "oauth2 = { token_url = \"https://auth\", client_id = \"c\", client_auth = \"private_key_jwt\", key_id = \"k\", private_key_file = ";
    let cases = [
        (
            "data_dir = \"~/goad\"".to_string(),
            "data_dir",
            tilde,
            "\"~/goad\"",
        ),
        ("data_dir = \"~\"".into(), "data_dir", tilde, "\"~\""),
        (
            "data_dir = \"goad-data \"".into(),
            "data_dir",
            ends,
            "\"goad-data \"",
        ),
        (
            "data_dir = \"\"".into(),
            "data_dir",
            "a non-empty path",
            "\"\"",
        ),
        (
            "[claim_check]\ndir = \"~/claims\"".into(),
            "claim_check.dir",
            tilde,
            "\"~/claims\"",
        ),
        (
            "[http]\ntls_cert_file = \" /etc/goad/cert.pem\"\ntls_key_file = \"/etc/goad/key.pem\""
                .into(),
            "http.tls_cert_file",
            ends,
            "\" /etc/goad/cert.pem\"",
        ),
        (
            format!("{https_sink}ca_file = \"~/ca.pem\""),
            "sources[0].sinks[0].ca_file",
            tilde,
            "\"~/ca.pem\"",
        ),
        (
            format!("{https_sink}{oauth2}\"~alice/key.pem\" }}"),
            "sources[0].sinks[0].oauth2.private_key_file",
            tilde,
            "\"~alice/key.pem\"",
        ),
    ];
    for (toml, key, rule, value) in cases {
        assert_eq!(
            error_of(&toml),
            format!("{key} must be {rule}, got {value}"),
            "for {toml:?}"
        );
    }
    assert_eq!(error_of("data_dir = \"/srv/goad~old/data\""), "valid");
}

/// `http.max_buffered_bytes` takes exactly one largest request, and its
/// default of 256 MiB with the default body bound; not 0, which is no
/// room at all, not "no bound".
#[test]
fn max_buffered_bytes_takes_one_largest_request_or_more() {
    assert_eq!(Config::default().http.max_buffered_bytes, 256 << 20);
    for toml in [
        "[http]\nmax_buffered_bytes = 1064960",
        "max_body_bytes = 4294967295\n[http]\nmax_buffered_bytes = 18446744073709551615",
    ] {
        assert_eq!(error_of(toml), "valid", "{toml}");
    }
    assert_eq!(
        error_of("[http]\nmax_buffered_bytes = 0"),
        "http.max_buffered_bytes must be at least one largest request, max_body_bytes (1048576) and a 16384-byte head: 1064960, got 0"
    );
}

/// Every URL goad sends requests to is at most `HTTP_MAX_URL_BYTES` long,
/// so that its request line fits a connection's write buffer: a longer one
/// is refused naming its key and its length (not the URL itself), where it
/// would otherwise fail every attempt.
#[test]
fn a_url_too_long_to_send_a_request_to_names_its_key_and_length() {
    use goad::limits::HTTP_MAX_URL_BYTES;
    let sink = "[[sources]]\nid = \"a\"\n[[sources.sinks]]\n";
    let cases = [
        ("sources[0].sinks[0].url", format!("{sink}type = \"http\"\nurl = \"URL\""), "https://hooks.example.com/"),
        ("sources[0].sinks[0].queue_url", format!("{sink}type = \"sqs\"\nregion = \"us-east-1\"\nqueue_url = \"URL\""), "https://sqs.us-east-1.amazonaws.com/1/"),
        ("sources[0].sinks[0].endpoint", format!("{sink}type = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q\"\nendpoint = \"URL\""), "http://localhost:5000/"),
        ("sources[0].sinks[0].oauth2.token_url", format!("{sink}type = \"http\"\nurl = \"http://x\"\noauth2 = {{ token_url = \"URL\", client_id = \"c\", client_secret_env = \"S\" }}"), "https://auth.example.com/"),
        ("claim_check.s3_endpoint", "[claim_check]\ns3_bucket = \"claims\"\ns3_region = \"us-east-1\"\ns3_endpoint = \"URL\"".into(), "http://localhost:9000/"),
        ("sources[0].ingest_jwt.jwks_url", "[[sources]]\nid = \"a\"\ningest_jwt = { jwks_url = \"URL\", issuer = \"i\", audience = \"a\" }".into(), "https://keys.example.com/"),
    ];
    for (key, config, prefix) in &cases {
        let with_url_of = |bytes: usize| {
            config.replace(
                "URL",
                &format!("{prefix}{}", "p".repeat(bytes - prefix.len())),
            )
        };
        assert_eq!(
            error_of(&with_url_of(HTTP_MAX_URL_BYTES)),
            "valid",
            "{key} at {HTTP_MAX_URL_BYTES} bytes"
        );
        assert_eq!(
            error_of(&with_url_of(HTTP_MAX_URL_BYTES + 1)),
            format!(
                "{key} must be a URL of at most 16367 bytes (its request line is sent as a \
                 header line, of at most 16384), got a URL of 16368 bytes"
            )
        );
    }
    // Counted as sent: `é`'s two bytes go as six (`%C3%A9`).
    let (key, config, prefix) = &cases[0];
    let path = "p".repeat(HTTP_MAX_URL_BYTES - prefix.len() - 2);
    let url = format!("{prefix}{path}é");
    assert_eq!(url.len(), HTTP_MAX_URL_BYTES);
    assert_eq!(
        error_of(&config.replace("URL", &url)),
        format!(
            "{key} must be a URL of at most 16367 bytes (its request line is sent as a header \
             line, of at most 16384), got a URL of 16371 bytes"
        )
    );
}

/// Scenario 62 among them: an option the sink does not have.
#[test]
fn unknown_keys_and_bad_types_name_the_dotted_key() {
    let cases = [
        ("[dispatch]\npoll_ms = 5", "config key dispatch.poll_ms:", "unknown field `poll_ms`"),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nreq_options = 1", "config key sources[0].sinks[0].req_options:", "unknown field `req_options`"),
        ("[dispatch]\nconcurrency = -1", "config key dispatch.concurrency:", "invalid value: integer `-1`, expected u32\nthis key takes a whole number from 0 to 4294967295, without quotes"),
        ("[retry]\nbase_ms = \"100\"", "config key retry.base_ms:", "invalid type: string \"100\", expected u64\nthis key takes a whole number from 0 to 18446744073709551615, without quotes"),
        ("[[sources]]\nid = \"a\"\ningest_signature = { header = \"x-sig\", digest = \"sha1\" }", "config key sources[0].ingest_signature.digest:", "unknown field `digest`, expected one of `header`, `prefix`, `encoding`, `algorithm`"),
        ("[[sources]]\nid = \"a\"\ningest_signature = { prefix = \"sha1=\" }", "config key sources[0].ingest_signature:", "missing field `header`"),
        ("[[sources]]\nid = \"a\"\ningest_signature = 1", "config key sources[0].ingest_signature:", "expected a scheme's name or a table { header, prefix, encoding, algorithm }"),
        ("[[sources]]\nid = \"a\"\ningest_jwt = { jwks_url = \"https://k/certs\", issuer = \"i\", audience = \"a\", subject = \"s\" }", "config key sources[0].ingest_jwt.subject:", "unknown field `subject`, expected one of `jwks_url`, `issuer`, `audience`, `claims`"),
        ("[[sources]]\nid = \"a\"\ningest_jwt = { jwks_url = \"https://k/certs\", issuer = \"i\" }", "config key sources[0].ingest_jwt:", "missing field `audience`"),
        ("[egress]\ndeny_private_addresses = \"yes\"", "config key egress.deny_private_addresses:", "invalid type: string \"yes\", expected a boolean"),
        ("[egress]\ndeny_private = true", "config key egress.deny_private:", "unknown field `deny_private`"),
        ("[[sources]]\nid = \"a\"\ningest_token_env = 7", "config key sources[0].ingest_token_env:", "expected a string, or a list of strings"),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\nfilter = \"x-event\"", "config key sources[0].sinks[0].filter:", "invalid type: string \"x-event\", expected a table"),
        ("http = 5", "config key http:", "invalid type: integer `5`, expected a table"),
        ("[metrics]\nper_sink = \"some\"", "config key metrics.per_sink:", "unknown variant `some`, expected one of `all`, `counts`, `off`"),
        ("[metrics]\nper_sink = 5", "config key metrics.per_sink:", "invalid type: integer `5`, expected a string"),
        ("[metrics]\nper_sink = \"Counts\"", "config key metrics.per_sink:", "unknown variant `Counts`, expected one of `all`, `counts`, `off`\ndid you mean `counts`?"),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\noauth2 = { token_url = \"https://auth/t\", client_id = \"c\", client_secret_env = \"S\", client_auth = \"jwt\" }", "config key sources[0].sinks[0].oauth2.client_auth:", "unknown variant `jwt`, expected one of `basic`, `body`, `private_key_jwt`"),
        ("[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\noauth2 = { token_url = \"https://auth/t\", client_secret_env = \"S\" }", "config key sources[0].sinks[0].oauth2:", "missing field `client_id`"),
    ];
    for (toml, prefix, cause) in cases {
        let e = error_of(toml);
        assert!(
            e.starts_with(prefix) && e.contains(cause),
            "for {toml:?}: {e}"
        );
    }
}

/// A config wrong in several places is refused naming each section's
/// first problem and each source's (its ids', its own keys' and each of
/// its sinks'), in the file's order, so one reading mends them all; past
/// 20, the rest are counted.
#[test]
fn every_section_and_source_that_is_wrong_is_named_at_once() {
    let toml = "[dispatch]\nbatch = 0\n[retry]\nmax_attempts = 0\n\
        [[sources]]\nid = \"a\"\ntenant = \"\"\n\
        [[sources]]\nid = \"b\"\n\
        [[sources]]\nid = \"c\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"ftp://x\"\n\
        [[sources]]\nid = \"d d\"\ntenant = \"t\"\nmax_ingest_per_s = 0\n\
        [[sources.sinks]]\ntype = \"http\"\nurl = \"http://x\"\n\
        [[sources.sinks]]\ntype = \"http\"\nurl = \"\"\n\
        [[sources.sinks]]\ntype = \"sqs\"\n";
    let config = Config::from_toml(toml).unwrap();
    let e = config.validate().unwrap_err();
    assert_eq!(e.key(), "dispatch.batch");
    assert_eq!(
        e.to_string(),
        "dispatch.batch must be a positive integer, got 0\n\
         retry.max_attempts must be a positive integer, got 0\n\
         sources[0].tenant must be a tenant id of [A-Za-z0-9_-], 1 to 128 characters, got \"\"\n\
         sources[2].sinks[0].url must be an http:// or https:// URL with a host, got \"ftp://x\"\n\
         sources[3].id must be a source id of [A-Za-z0-9_-], 1 to 128 characters, got \"d d\"\n\
         sources[3].max_ingest_per_s must be a positive integer, got 0\n\
         sources[3].sinks[1].url must be an http:// or https:// URL with a host, got \"\"\n\
         sources[3].sinks[2].queue_url must be an http:// or https:// queue URL ending in the queue's name, got \"\""
    );

    let many: String = (0..25)
        .map(|i| format!("[[sources]]\nid = \"s{i}\"\ntenant = \"t {i}\"\n"))
        .collect();
    let e = Config::from_toml(&many).unwrap().validate().unwrap_err();
    let lines: Vec<String> = e.to_string().lines().map(String::from).collect();
    assert_eq!(lines.len(), 21, "{e}");
    assert_eq!(
        (lines[19].as_str(), lines[20].as_str()),
        (
            "sources[19].tenant must be a tenant id of [A-Za-z0-9_-], 1 to 128 characters, got \"t 19\"",
            "…and 5 more"
        )
    );
}

#[test]
fn goad_check_exits_0_for_a_good_file_and_2_naming_the_key_for_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(&good, "[[sources]]\nid = \"stripe\"\ntenant = \"acme\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://127.0.0.1:9000/hooks\"\n").unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[dispatch]\nsink_concurrency = 0\n").unwrap();
    let run = |path: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_goad"))
            .args(["check", "--config"])
            .arg(path)
            .output()
            .unwrap()
    };
    let ok = run(&good);
    assert_eq!(ok.status.code(), Some(0));
    // What `goad check` prints to stderr for `toml` written as `name`,
    // exiting `code`.
    let stderr_of = |name: &str, toml: &str, code: i32| {
        let path = dir.path().join(name);
        std::fs::write(&path, toml).unwrap();
        let out = run(&path);
        assert_eq!(out.status.code(), Some(code), "{name}");
        String::from_utf8(out.stderr).unwrap()
    };
    // Valid, but most likely a mistake: a warning, and exit 0.
    let warnings_of = |name: &str, toml: &str| stderr_of(name, toml, 0).trim().to_string();
    assert_eq!(
        warnings_of("sinkless.toml", "[[sources]]\nid = \"quiet\"\n"),
        "warning: sources[0] (\"quiet\") has no sinks: its hooks are answered 202 and stored nowhere"
    );
    // No source at all: the node would take no hook.
    assert_eq!(
        warnings_of("empty.toml", "[dispatch]\nsink_concurrency = 4\n"),
        "warning: no sources: every ingest is answered 404 unknown_source (a source is a [[sources]] table with its id and its sinks)"
    );
    // An admin API open beyond loopback, which a start refuses without
    // --allow-open-admin; with an admin token it is not warned of.
    let sources = "[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://127.0.0.1:9/\"\n";
    assert_eq!(
        warnings_of("open.toml", &format!("listen = \"0.0.0.0:7878\"\n{sources}")),
        "warning: goad serve refuses this config: listen = \"0.0.0.0:7878\" is not a loopback address and no admin token is set: set admin_token_env (and the variable it names), or pass --allow-open-admin to serve the admin API unauthenticated"
    );
    let tokened =
        format!("listen = \"0.0.0.0:7878\"\nadmin_token_env = \"GOAD_CHECK_ADMIN\"\n{sources}");
    assert_eq!(warnings_of("tokened.toml", &tokened), "");
    // Two sinks of a source delivering every hook to one place (a sink
    // copied and not changed): a warning each; one with a filter, another
    // method or another queue is not warned of.
    let twins = "[[sources]]\nid = \"orders\"\n\
         [[sources.sinks]]\ntype = \"http\"\nurl = \"https://r.example/hooks\"\n\
         [[sources.sinks]]\ntype = \"http\"\nurl = \"https://r.example/hooks\"\nmethod = \"POST\"\n\
         [[sources.sinks]]\ntype = \"http\"\nurl = \"https://r.example/hooks\"\nmethod = \"put\"\n\
         [[sources.sinks]]\ntype = \"http\"\nurl = \"https://r.example/hooks\"\nfilter = { header = \"x-event\", values = [\"paid\"] }\n\
         [[sources.sinks]]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q.fifo\"\n\
         [[sources.sinks]]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q.fifo\"\nmessage_group_id = \"g\"\n\
         [[sources.sinks]]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/other.fifo\"\n";
    assert_eq!(
        warnings_of("twins.toml", twins),
        "warning: sources[0].sinks[1] delivers to the place sources[0].sinks[0] does, and neither has a filter: each hook goes there twice\n\
         warning: sources[0].sinks[5] delivers to the place sources[0].sinks[4] does, and neither has a filter: each hook goes there twice"
    );
    // A credential written in the file (a credential header's value, a
    // URL's password), where the issue asks it come from the environment:
    // a warning naming where it goes instead; a user alone, or a header
    // that is no credential, is not warned of.
    let written = "[[sources]]\nid = \"a\"\n\
         [[sources.sinks]]\ntype = \"http\"\nurl = \"https://bob:s3cret@r.example/\"\n\
         headers = { Authorization = \"Bearer abc\", x-team = \"payments\" }\n\
         [[sources.sinks]]\ntype = \"http\"\nurl = \"https://bob@r.example/other\"\n\
         headers_env = { authorization = \"RECEIVER_AUTH\" }\n";
    assert_eq!(
        warnings_of("written.toml", written),
        "warning: sources[0].sinks[0].headers.Authorization is a credential written in the config file, where whoever reads the file reads it: keep it in the environment and name its variable in headers_env\n\
         warning: sources[0].sinks[0].url holds a password, written in the config file where whoever reads the file reads it: keep the URL in the environment and name its variable in url_env"
    );
    let err = run(&bad);
    assert_eq!(err.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&err.stderr).trim(),
        "dispatch.sink_concurrency must be an integer from 1 to dispatch.concurrency (32), got 0"
    );
    let missing = run(&dir.path().join("nope.toml"));
    assert_eq!(missing.status.code(), Some(2));
    // A mistyped key: the key nearest to it among those expected is
    // suggested; one like none of them is not. One line break ends it. A
    // key of an enclosing table written under a sub-table's header (TOML
    // makes it the sub-table's) is said to be the enclosing table's, not
    // taken for a typo.
    let refusals = [
        (
            "typo.toml",
            "[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x/\"\nsecret_evn = \"S\"\n",
            "config key sources[0].sinks[0].secret_evn: TOML parse error at line 6",
            ", `paused`\ndid you mean `secret_env`?\n",
        ),
        (
            "unlike.toml",
            "[dispatch]\npoll_ms = 5\n",
            "config key dispatch.poll_ms: TOML parse error at line 2",
            ", `breaker_max_open_ms`, `tenants`\n",
        ),
        (
            "misplaced.toml",
            "data_dir = \"d\"\n[http]\nmax_connections = 10\nlisten = \"127.0.0.1:7979\"\n",
            "config key http.listen: TOML parse error at line 4",
            ", `tls_client_ca_file`\n`listen` is a top-level key, not one of http: a key written after a table's header is that table's, so write it above the file's first table header\n",
        ),
        (
            "source_key.toml",
            "[[sources]]\nid = \"a\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://x/\"\ntenant = \"acme\"\n",
            "config key sources[0].sinks[0].tenant: TOML parse error at line 6",
            ", `paused`\n`tenant` is a key of sources[0], not of sources[0].sinks[0]: a key written after a table's header is that table's, so write it under [[sources]], above its first sub-table header\n",
        ),
    ];
    for (name, toml, starts, ends) in refusals {
        let refused = stderr_of(name, toml, 2);
        assert!(
            refused.starts_with(starts) && refused.ends_with(ends),
            "{refused}"
        );
    }
}

/// `goad check --environment` also reads what the file names, as a start
/// does: a secret variable that is not set and a CA file that is missing
/// are errors naming their keys (plain `goad check` passes both), and an
/// admin API without a token on a public address is refused unless
/// `--allow-open-admin` is given, as `goad serve` refuses it, and so is a
/// data directory that is a file.
#[test]
fn goad_check_environment_reads_the_variables_and_files_the_config_names() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let write = |ca_file: &std::path::Path| {
        let path = dir.path().join("goad.toml");
        std::fs::write(
            &path,
            format!(
                "[[sources]]\nid = \"stripe\"\n[[sources.sinks]]\ntype = \"http\"\n\
                 url = \"https://127.0.0.1:9000/hooks\"\nsecret_env = \"GOAD_CHECK_SECRET\"\n\
                 ca_file = {ca_file:?}\n"
            ),
        )
        .unwrap();
        path
    };
    let check = |path: &std::path::Path, args: &[&str], secret: Option<&str>| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_goad"));
        command.args(["check", "--config"]).arg(path).args(args);
        command.env_remove("GOAD_CHECK_SECRET");
        if let Some(secret) = secret {
            command.env("GOAD_CHECK_SECRET", secret);
        }
        let out = command.output().unwrap();
        let text = String::from_utf8_lossy(if out.status.success() {
            &out.stdout
        } else {
            &out.stderr
        });
        (out.status.code(), text.trim().to_string())
    };
    let good = write(&fixtures.join("test-ca.pem"));
    let shown = good.display();
    assert_eq!(
        check(&good, &[], None),
        (Some(0), format!("{shown}: ok (1 source, 1 sink)"))
    );
    assert_eq!(
        check(&good, &["--environment"], None),
        (
            Some(2),
            "sources[0].sinks[0].secret_env must be the name of a set, non-empty environment variable, \
             got \"GOAD_CHECK_SECRET\" (not set)"
                .to_string()
        )
    );
    assert_eq!(
        check(&good, &["--environment"], Some("whsec_c2VjcmV0")),
        (
            Some(0),
            format!("{shown}: ok (1 source, 1 sink; its variables and files read)")
        )
    );
    // A secret that cannot sign: named with why, as a start names it.
    let cannot_sign = |why: &str| {
        (
            Some(2),
            format!(
                "sources[0].sinks[0].secret_env must be a variable holding a valid secret \
                 ({why}), got \"GOAD_CHECK_SECRET\""
            ),
        )
    };
    let receivers_key = "whpk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    assert_eq!(
        check(&good, &["--environment"], Some(receivers_key)),
        cannot_sign(
            "a whpk_ key is a receiver's public key and cannot sign: give the whsk_ key it was \
             made with"
        )
    );
    assert_eq!(
        check(&good, &["--environment"], Some("whsec_")),
        cannot_sign("the secret is empty")
    );
    assert_eq!(
        check(&good, &["--environment"], Some("whsk_c2VjcmV0")),
        cannot_sign(
            "a whsk_ key must be an Ed25519 seed (32 bytes) or a seed and its public key (64 bytes)"
        )
    );
    // A line break a secret's file left: receivers would check every
    // signature with a secret other than the one it was made with.
    assert_eq!(
        check(&good, &["--environment"], Some("whsec_c2VjcmV0\n")),
        (
            Some(2),
            "sources[0].sinks[0].secret_env must be a variable holding a secret with no space \
             or line break at either end (a secret's file may leave one), got \"GOAD_CHECK_SECRET\""
                .to_string()
        )
    );
    // As a start does, it refuses an admin API without a token beyond
    // loopback unless told to allow it.
    let public = dir.path().join("public.toml");
    std::fs::write(&public, "listen = \"0.0.0.0:7878\"\n").unwrap();
    let (code, text) = check(&public, &["--environment"], None);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("admin_token_env") && text.contains("--allow-open-admin"),
        "{text}"
    );
    assert_eq!(
        check(&public, &[], None).0,
        Some(0),
        "without --environment"
    );
    let allowed = check(&public, &["--environment", "--allow-open-admin"], None);
    assert_eq!(allowed.0, Some(0), "{}", allowed.1);
    // A host that does not resolve here is named as such (the system's
    // words for why vary with its resolver).
    let unknown = dir.path().join("unknown.toml");
    std::fs::write(&unknown, "listen = \"example.invalid:7878\"\n").unwrap();
    let (code, text) = check(&unknown, &["--environment"], None);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.starts_with(
            "listen must be a host:port address of this machine's (its host does not resolve \
             here: "
        ) && text.ends_with("), got \"example.invalid:7878\""),
        "{text}"
    );
    // A data directory that is a file, or under one, is named: a start
    // refuses it before it listens.
    for (data_dir, why) in [
        (public.clone(), "data_dir is a file, not a directory"),
        (
            public.join("data"),
            "a part of data_dir's path is a file, not a directory",
        ),
    ] {
        let filed = dir.path().join("filed.toml");
        std::fs::write(&filed, format!("data_dir = {data_dir:?}\n")).unwrap();
        assert_eq!(
            check(&filed, &["--environment"], None),
            (
                Some(2),
                format!(
                    "cannot open the engine: store: {}: {why}",
                    data_dir.display()
                )
            )
        );
    }
    let missing = fixtures.join("missing-ca.pem");
    let bad = write(&missing);
    assert_eq!(
        check(&bad, &["--environment"], Some("whsec_c2VjcmV0")),
        (
            Some(2),
            format!(
                "sources[0].sinks[0].ca_file must be a PEM file of root certificates (cannot \
                 read it: No such file or directory (os error 2)), got {missing:?}"
            )
        )
    );
}

/// `goad check --environment` fetches each `ingest_jwt` key set, once for
/// the sources naming its URL: one it cannot fetch is a warning for each
/// of them naming the key and why, and the check still passes, as a node
/// starts without the keys.
#[test]
fn goad_check_environment_fetches_each_key_set_and_warns_of_one_it_cannot() {
    let zeros = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"; // 32 bytes
    let key_set = format!(
        r#"{{"keys": [{{"kty": "EC", "crv": "P-256", "kid": "k1", "x": "{zeros}", "y": "{zeros}"}}]}}"#
    );
    let issuer = Receiver::start(move |_| Reply::status(200).with_body(key_set.clone())).unwrap();
    let gone = Receiver::start(|_| Reply::status(404)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goad.toml");
    let source = |id: &str, jwks_url: String| {
        format!(
            "[[sources]]\nid = \"{id}\"\ningest_jwt = {{ jwks_url = \"{jwks_url}\", \
             issuer = \"https://issuer.example\", audience = \"https://goad.example/{id}\" }}\n\
             sinks = [{{ type = \"http\", url = \"http://127.0.0.1:9/{id}\" }}]\n"
        )
    };
    let (good_url, gone_url) = (issuer.url("/certs"), gone.url("/certs"));
    let config = source("push", good_url)
        + &source("entra", gone_url.clone())
        + &source("entra-eu", gone_url.clone());
    std::fs::write(&path, config).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goad"))
        .args(["check", "--environment", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        stdout.trim(),
        format!(
            "{}: ok (3 sources, 3 sinks; its variables and files read)",
            path.display()
        )
    );
    let warning = |i: usize, id: &str| {
        format!(
            "warning: sources[{i}].ingest_jwt.jwks_url {gone_url:?}: cannot fetch a key set goad \
             can use (HTTP status 404); a node answers source {id:?}'s hooks 503 until it can"
        )
    };
    assert_eq!(
        stderr.trim(),
        format!("{}\n{}", warning(1, "entra"), warning(2, "entra-eu"))
    );
    let requests = (issuer.received().len(), gone.received().len());
    assert_eq!(requests, (1, 1), "each fetched once");
}

/// The README's `goad.toml`, under "Configuration".
fn readme_example() -> &'static str {
    let readme = include_str!("../README.md");
    let section = &readme[readme.find("## Configuration").expect("the section")..];
    let start = section.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let block = &section[start..];
    &block[..block.find("```").expect("the block's end")]
}

/// `goad check --environment --config path`, the variables `unset` unset
/// and `env` set: its exit code and what it wrote to standard error.
fn check_environment_with(
    path: &std::path::Path,
    unset: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_goad"));
    command
        .args(["check", "--environment", "--config"])
        .arg(path);
    for name in unset {
        command.env_remove(name);
    }
    let out = command.envs(env.iter().copied()).output().unwrap();
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

/// `goad check --environment` warns of the credentials that sinks and the
/// claim bucket read from the environment at each request, which a start
/// does not need: AWS keys not set or that no request can carry (an
/// assumed role's base keys too), a Pub/Sub `token_env`. It still exits
/// 0, and warns of nothing once they are set.
#[test]
fn goad_check_environment_warns_of_credentials_read_at_each_request() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goad.toml");
    let config = r#"
[claim_check]
s3_bucket = "claims"
s3_region = "eu-west-1"
access_key_id_env = "GOAD_CHECK_CLAIM_KEY"
secret_access_key_env = "GOAD_CHECK_CLAIM_SECRET"
[[sources]]
id = "a"
[[sources.sinks]]
type = "sqs"
queue_url = "https://sqs.eu-west-1.amazonaws.com/1/q"
access_key_id_env = "GOAD_CHECK_SQS_KEY"
secret_access_key_env = "GOAD_CHECK_SQS_SECRET"
session_token_env = "GOAD_CHECK_SQS_TOKEN"
[[sources.sinks]]
type = "pubsub"
project = "p"
topic = "t"
token_env = "GOAD_CHECK_PUBSUB_TOKEN"
[[sources.sinks]]
type = "http"
url = "https://lambda.example.com/"
aws_service = "lambda"
region = "eu-west-1"
access_key_id_env = "GOAD_CHECK_LAMBDA_KEY"
secret_access_key_env = "GOAD_CHECK_SQS_SECRET"
role_arn = "arn:aws:iam::123456789012:role/hooks"
[[sources.sinks]]
type = "sqs"
queue_url = "https://sqs.eu-west-1.amazonaws.com/1/fetched"
credentials = "instance"
"#;
    std::fs::write(&path, config).unwrap();
    let unset = [
        "GOAD_CHECK_CLAIM_KEY",
        "GOAD_CHECK_CLAIM_SECRET",
        "GOAD_CHECK_SQS_KEY",
        "GOAD_CHECK_SQS_SECRET",
        "GOAD_CHECK_SQS_TOKEN",
        "GOAD_CHECK_PUBSUB_TOKEN",
        "GOAD_CHECK_LAMBDA_KEY",
    ];
    let check = |env: &[(&str, &str)]| check_environment_with(&path, &unset, env);
    let (code, stderr) = check(&[
        ("GOAD_CHECK_SQS_KEY", "AK"),
        ("GOAD_CHECK_SQS_SECRET", "S"),
        ("GOAD_CHECK_SQS_TOKEN", "T\nx"),
        ("GOAD_CHECK_PUBSUB_TOKEN", "tok\r\n"),
    ]);
    let tail = "; a node starts, and its requests fail until it is fixed";
    let line = |text: &str| format!("warning: {text}{tail}");
    let expected = [
        line("sources[0].sinks[0]: no AWS credentials in GOAD_CHECK_SQS_TOKEN: the session token is empty or holds a character other than printable ASCII (a line break, a letter beyond ASCII), which no request can carry"),
        line("sources[0].sinks[1]: cannot get a Pub/Sub access token from $GOAD_CHECK_PUBSUB_TOKEN: the token it gave is empty or holds a character other than printable ASCII (a line break, a letter beyond ASCII), which no authorization header can carry"),
        line("sources[0].sinks[2]: no AWS credentials: GOAD_CHECK_LAMBDA_KEY is not set"),
        line("claim_check: no AWS credentials: GOAD_CHECK_CLAIM_KEY is not set"),
    ];
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr.lines().collect::<Vec<_>>(), expected, "{stderr}");
    let (code, stderr) = check(&[
        ("GOAD_CHECK_SQS_KEY", "AK"),
        ("GOAD_CHECK_SQS_SECRET", "S"),
        ("GOAD_CHECK_SQS_TOKEN", "T"),
        ("GOAD_CHECK_PUBSUB_TOKEN", "tok"),
        ("GOAD_CHECK_LAMBDA_KEY", "AK"),
        ("GOAD_CHECK_CLAIM_KEY", "AK"),
        ("GOAD_CHECK_CLAIM_SECRET", "S"),
    ]);
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
}

/// `goad check --environment` warns of an SQS sink's profile credentials
/// (`credentials = "profile"`) that cannot be found at all, read without
/// fetching: no `HOME` to find the files in (a service's user may have
/// none), or neither file holding the profile's section. It passes once
/// the profile is there.
#[test]
fn goad_check_environment_warns_of_a_profile_it_cannot_find() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goad.toml");
    let config = r#"
[[sources]]
id = "a"
sinks = [{ type = "sqs", queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/q", credentials = "profile" }]
"#;
    std::fs::write(&path, config).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    let credentials = "[other]\naws_access_key_id = AK\naws_secret_access_key = S\n";
    std::fs::write(home.join(".aws/credentials"), credentials).unwrap();
    let unset = [
        "HOME",
        "AWS_PROFILE",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
    ];
    let check = |env: &[(&str, &str)]| {
        let (code, stderr) = check_environment_with(&path, &unset, env);
        assert_eq!(code, Some(0));
        stderr
    };
    let tail = "; a node starts, and its requests fail until it is fixed\n";
    assert_eq!(
        check(&[]),
        format!("warning: sources[0].sinks[0]: no AWS credentials: HOME is not set{tail}")
    );
    let at = home.to_str().unwrap();
    assert_eq!(
        check(&[("HOME", at)]),
        format!(
            "warning: sources[0].sinks[0]: cannot get AWS credentials from the AWS profile: \
             profile [default] is in neither {0}/.aws/credentials nor {0}/.aws/config{tail}",
            home.display()
        )
    );
    assert_eq!(check(&[("HOME", at), ("AWS_PROFILE", "other")]), "");
}

/// The README's `goad.toml` (under "Configuration") is a valid config:
/// every key it shows exists and every value it shows passes.
#[test]
fn the_readmes_example_config_is_valid() {
    let config = Config::from_toml(readme_example()).expect("the example parses");
    config.validate().expect("the example validates");
    assert_eq!(config.dead_letters.retention_ms, 30 * 24 * 3_600_000);
    let stripe = config.source("stripe").expect("the example's source");
    assert_eq!(stripe.ingest_signature, Some("stripe".into()));
    assert_eq!(stripe.dedupe_header.as_deref(), Some("idempotency-key"));
    assert_eq!(stripe.dedupe_window_ms, Some(86_400_000));
    let sink = &stripe.sinks[0];
    assert_eq!(
        (
            sink.max_calls_per_s,
            sink.retry.and_then(|r| r.max_attempts)
        ),
        (Some(50), Some(10))
    );
}

/// Each key the README's example sets, set instead to each of a list of
/// hostile values (zero, negatives, the extremes of TOML's integers and of
/// u16 and u32, floats, empty and odd strings, lists and tables of the
/// wrong kind), is taken or refused with an error naming its dotted path
/// (`sources[0].sinks[0].url`) — never a panic, never an error about
/// something else. An engine runs a hook with each value of `[dispatch]`,
/// `[retry]`, `[dead_letters]` and `[claim_check]` it takes.
#[test]
fn every_key_of_the_readmes_example_set_to_a_hostile_value_is_taken_or_refused_naming_it() {
    let hostile = [
        "0",
        "-1",
        "1",
        "255",
        "256",
        "65535",
        "65536",
        "4294967296",
        "9223372036854775807",
        "18446744073709551615",
        "-9223372036854775808",
        "1.5e308",
        "-0.0",
        "nan",
        "inf",
        "true",
        "\"\"",
        "\"x\"",
        "\"a,b\"",
        "\"\\u0000\"",
        "\"http://[::1\"",
        "\"http://h:99999/\"",
        "[]",
        "[\"\"]",
        "[0]",
        "{}",
    ];
    let lines: Vec<&str> = readme_example().lines().collect();
    let (mut table, mut sources, mut sinks) = (String::new(), 0, 0);
    let (mut taken, mut refused, mut wrong) = (0, 0, Vec::new());
    let mut engine_runs = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim();
        if trimmed == "[[sources]]" {
            (sources, sinks) = (sources + 1, 0);
            table = format!("sources[{}]", sources - 1);
        } else if trimmed == "[[sources.sinks]]" {
            sinks += 1;
            table = format!("sources[{}].sinks[{}]", sources - 1, sinks - 1);
        } else if let Some(name) = trimmed.strip_prefix('[') {
            table = name[..name.find(']').expect("a table header")].to_string();
        }
        let Some((key, _)) = line.split_once(" = ").filter(|_| !trimmed.starts_with('#')) else {
            continue;
        };
        let key = key.trim();
        let path = match table.is_empty() {
            true => key.to_string(),
            false => format!("{table}.{key}"),
        };
        for value in hostile {
            let mut changed: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            changed[i] = format!("{key} = {value}");
            let text = changed.join("\n");
            match std::panic::catch_unwind(|| error_of(&text)) {
                Ok(error) if error == "valid" => {
                    taken += 1;
                    let engine_keys = ["dispatch.", "retry.", "dead_letters.", "claim_check."];
                    if engine_keys.iter().any(|s| path.starts_with(s)) {
                        engine_runs.push((format!("{path} = {value}"), text));
                    }
                }
                Ok(error) if error.contains(&path) => refused += 1,
                Ok(error) => wrong.push(format!("{path} = {value}: {error}")),
                Err(_) => wrong.push(format!("{path} = {value}: a panic")),
            }
        }
    }
    assert_eq!(wrong, Vec::<String>::new());
    assert!(
        taken > 0 && refused > taken,
        "{taken} taken, {refused} refused"
    );
    for (what, text) in &engine_runs {
        runs_a_hook(what, text);
    }
    assert!(engine_runs.len() > 30, "{} engines run", engine_runs.len());
}

/// An engine on `text`'s config -- on a directory of its own, with one
/// shard and one source, whose sink fails each hook's first attempt --
/// takes a hook and runs on, its shard never restarted: a sum of times or
/// sizes that overflows (the tests have overflow checks) would panic it.
fn runs_a_hook(what: &str, text: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::from_toml(text).unwrap();
    (c.data_dir, c.shards) = (dir.path().to_path_buf(), 1);
    c.claim_check.dir = Some(dir.path().join("claims"));
    c.notifications.source = None;
    let sinks = vec![SinkConfig::of_kind("second")];
    c.sources = vec![SourceConfig::new("s", "t", sinks)].into();
    let second_time_lucky = sink(|d| match d.attempt {
        1 => Err(SinkError::transient("not yet")),
        _ => Ok(()),
    });
    let engine = Engine::builder(c).sink("second", second_time_lucky).open();
    let engine = engine.unwrap_or_else(|e| panic!("{what}: {e}"));
    let committed = engine.commit(NewHook::new("s", "x"));
    committed.unwrap_or_else(|e| panic!("{what}: {e}"));
    let ticked = engine.tick_within(Duration::from_secs(10));
    ticked.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(engine.stats()[0].restarts, 0, "{what}");
}
