//! Bearer tokens a sink gets for its receiver: Google ID tokens (from the
//! metadata server or a service account key) and OAuth 2 client
//! credentials grants (a secret in the header or the form, or a JWT
//! signed by the client's key).

use super::*;

/// An unsigned JWT carrying `claims` (goad reads its `exp`; the receiver,
/// here, checks nothing).
fn jwt_of(claims: serde_json::Value) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!("e30.{}.sig", b64.encode(claims.to_string()))
}

/// The `n`-th ID token a stand-in issues, for the sink's audience, to
/// expire in 2096 (held as long as the test runs).
fn id_token(n: u32) -> String {
    let claims =
        serde_json::json!({"aud": "https://svc-abc.a.run.app", "n": n, "exp": 4_000_000_000u64});
    jwt_of(claims)
}

/// A receiver that answers 401 to its `refused`-th request (counting from
/// 1), 200 to the others.
fn refusing_once(refused: u32) -> Receiver {
    let seen = std::sync::atomic::AtomicU32::new(0);
    Receiver::start(move |_| {
        match seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == refused {
            true => Reply::status(401),
            false => Reply::status(200),
        }
    })
    .unwrap()
}

/// A config whose source `s` delivers to `receiver` with a Google ID
/// token of audience `https://svc-abc.a.run.app` from `credentials`.
fn id_token_config(dir: &std::path::Path, receiver: &Receiver, credentials: &str) -> goad::Config {
    let mut sink = SinkConfig::http(receiver.url("/hooks"));
    sink.google_id_token = Some(goad::config::GoogleIdTokenConfig {
        audience: "https://svc-abc.a.run.app".into(),
        credentials: Some(credentials.into()),
    });
    let mut c = config(dir);
    c.sources.push(source("s", "t", vec![sink]));
    c
}

/// The bearer tokens a receiver got.
fn bearers(receiver: &Receiver) -> Vec<String> {
    let received = receiver.received();
    let bearer = |r: &Received| r.header("authorization").unwrap().to_string();
    received.iter().map(bearer).collect()
}

/// `google_id_token` with `credentials = "metadata"`: each request carries
/// the metadata server's ID token for the sink's audience (asked with
/// `Metadata-Flavor: Google`, the audience percent-encoded, `format=full`),
/// kept while its `exp` is far; a 401 to a token held a while drops it and
/// the retry carries a new one, as Cloud Run asks of a caller. Another
/// sink for the same audience shares the token, and keeps it when a
/// reconfiguration builds it anew for another URL; one for another
/// audience has its own.
#[test]
fn a_google_id_token_sink_sends_the_metadata_servers_token_for_its_audience() {
    let issued = std::sync::atomic::AtomicU32::new(0);
    let metadata = Receiver::start(move |r| {
        if r.header("metadata-flavor") != Some("Google") {
            return Reply::status(403);
        }
        let n = issued.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        Reply::status(200).with_body(id_token(n))
    })
    .unwrap();
    std::env::set_var(
        "GCE_METADATA_HOST",
        metadata.url("").trim_start_matches("http://"),
    );
    let receiver = refusing_once(2);
    let dir = tempfile::tempdir().unwrap();
    let mut c = id_token_config(dir.path(), &receiver, "metadata");
    let mut same = c.sources[0].sinks[0].clone();
    same.url = Some(receiver.url("/same-audience"));
    let mut other = same.clone();
    other.google_id_token.as_mut().unwrap().audience = "https://svc-xyz.a.run.app".into();
    c.sources.push(source("same", "t", vec![same]));
    c.sources.push(source("other", "t", vec![other]));
    let engine = Engine::open(c.clone()).unwrap();
    commit_and_tick(&engine, "one");
    commit_and_tick(&engine, "two");
    for id in ["same", "other"] {
        engine.commit(NewHook::new(id, id)).unwrap();
        engine.tick().unwrap();
    }
    c.sources[1].sinks[0].url = Some(receiver.url("/same-moved"));
    engine.reconfigure(&c).unwrap();
    engine.commit(NewHook::new("same", "moved")).unwrap();
    engine.tick().unwrap();
    let asked: Vec<String> = metadata.received().into_iter().map(|r| r.path).collect();
    let path = |service: &str| {
        format!(
            "/computeMetadata/v1/instance/service-accounts/default/identity\
             ?audience=https%3A%2F%2F{service}.a.run.app&format=full"
        )
    };
    assert_eq!(asked, [path("svc-abc"), path("svc-abc"), path("svc-xyz")]);
    let sent = [1, 1, 2, 2, 3, 2].map(|n| format!("Bearer {}", id_token(n)));
    assert_eq!(bearers(&receiver), sent);
    assert!(rows(&engine).is_empty(), "all delivered");
}

/// `google_id_token` with `credentials = "service_account"`: the key file
/// `GOOGLE_APPLICATION_CREDENTIALS` names is read when the engine opens (a
/// missing one is a config error naming the key and the file); its token
/// endpoint gets a JWT bearer grant asking for the sink's audience
/// (`target_audience`), and its `id_token` is sent, once for both hooks.
/// An endpoint whose answer holds no ID token (an access token alone)
/// fails the attempt, naming the endpoint, the account and what was
/// missing.
#[test]
fn a_google_id_token_sink_exchanges_a_service_account_key_for_its_token() {
    let keys = tempfile::tempdir().unwrap();
    let key_path = keys.path().join("key.json");
    std::env::set_var("GOOGLE_APPLICATION_CREDENTIALS", &key_path);
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let c = id_token_config(dir.path(), &receiver, "service_account");
    let refused = Engine::open(c.clone()).err().expect("no key file");
    assert_eq!(
        refused.to_string(),
        format!(
            "sources[0].sinks[0].google_id_token.credentials must be \"service_account\" only \
             with a usable service-account key file at GOOGLE_APPLICATION_CREDENTIALS (cannot \
             read {}: No such file or directory (os error 2)), got \"service_account\"",
            key_path.display()
        )
    );
    let access_only = Receiver::start(|_| {
        Reply::status(200).with_body(r#"{"access_token": "ya29.x", "expires_in": 3599}"#)
    })
    .unwrap();
    let key_file = service_account_key_file(&access_only.url("/token"));
    std::fs::write(&key_path, key_file.to_string()).unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    let mut once = id_token_config(other_dir.path(), &receiver, "service_account");
    once.retry.max_attempts = 1;
    let engine = Engine::open(once).unwrap();
    commit_and_tick(&engine, "zero");
    let dead: Vec<_> = (rows(&engine).into_iter())
        .map(|r| (r.record.status, r.record.error))
        .collect();
    let why = format!(
        "sink http: cannot get a Google ID token from {} for goad@p.iam.gserviceaccount.com: \
         no id_token in its answer",
        access_only.url("/token")
    );
    assert_eq!(dead, [(goad::RowStatus::Dead, Some(why))]);
    drop(engine);
    let token_endpoint = Receiver::start(|_| {
        Reply::status(200).with_body(serde_json::json!({"id_token": id_token(1)}).to_string())
    })
    .unwrap();
    let token_uri = token_endpoint.url("/token");
    let key_file = service_account_key_file(&token_uri);
    std::fs::write(&key_path, key_file.to_string()).unwrap();
    let engine = Engine::open(c).unwrap();
    commit_and_tick(&engine, "one");
    commit_and_tick(&engine, "two");
    assert_eq!(
        bearers(&receiver),
        [1, 1].map(|n| format!("Bearer {}", id_token(n)))
    );
    let grants = token_endpoint.received();
    assert_eq!(grants.len(), 1, "one token for both");
    let form = String::from_utf8(grants[0].body.clone()).unwrap();
    let assertion = form
        .strip_prefix("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=")
        .expect("a JWT bearer grant");
    let claims = assertion.split('.').nth(1).unwrap();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let claims: serde_json::Value = serde_json::from_slice(&b64.decode(claims).unwrap()).unwrap();
    assert_eq!(claims["target_audience"], "https://svc-abc.a.run.app");
    assert_eq!(claims["iss"], "goad@p.iam.gserviceaccount.com");
    assert_eq!(claims["aud"], token_uri);
    assert_eq!(claims.get("scope"), None);
}

/// A token endpoint that issues `tok-1`, `tok-2`, … (one per request).
pub(crate) fn token_endpoint() -> Receiver {
    let issued = std::sync::atomic::AtomicU32::new(0);
    Receiver::start(move |_| {
        let n = issued.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        Reply::status(200)
            .header("content-type", "application/json")
            .with_body(format!(
                r#"{{"access_token": "tok-{n}", "token_type": "Bearer", "expires_in": 3600}}"#
            ))
    })
    .unwrap()
}

/// An HTTP sink with `oauth2` sends `authorization: Bearer` with a token of
/// the client-credentials grant (client authenticated with HTTP Basic,
/// each part form-encoded), kept across deliveries. A 401 to a token held
/// a while drops it and is retried with a new one; a 401 to a fresh token
/// is the receiver's refusal, dead-lettered.
#[test]
fn an_oauth2_sink_sends_the_grants_token_and_asks_again_after_a_401() {
    use std::sync::atomic::{AtomicU32, Ordering};
    std::env::set_var("GOAD_TEST_OAUTH2_SECRET", "s3cret:/");
    let tokens = token_endpoint();
    let accepted = std::sync::Arc::new(AtomicU32::new(1));
    let accepting = accepted.clone();
    let receiver = Receiver::start(move |r| {
        let wanted = format!("Bearer tok-{}", accepting.load(Ordering::SeqCst));
        match r.header("authorization") == Some(wanted.as_str()) {
            true => Reply::status(200),
            false => Reply::status(401).with_body("invalid_token"),
        }
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.base_ms = 10;
    c.retry.max_ms = 10;
    let mut sink = SinkConfig::http(receiver.url("/in"));
    sink.oauth2 = Some(goad::config::OAuth2Config {
        scope: Some("hooks:write".into()),
        audience: Some("https://api.example.com".into()),
        ..goad::config::OAuth2Config::new(
            tokens.url("/token"),
            "goad client",
            "GOAD_TEST_OAUTH2_SECRET",
        )
    });
    c.sources.push(source("s", "t", vec![sink]));
    let engine = Engine::open(c).unwrap();
    commit_and_tick(&engine, "a");
    commit_and_tick(&engine, "b");
    // The receiver now takes only the next token.
    accepted.store(2, Ordering::SeqCst);
    commit_and_tick(&engine, "c");
    // And then none.
    accepted.store(99, Ordering::SeqCst);
    commit_and_tick(&engine, "d");
    let seen: Vec<(String, String, u16)> = receiver
        .received()
        .into_iter()
        .map(|r| {
            let auth = r.header("authorization").unwrap_or_default().to_string();
            (String::from_utf8(r.body).unwrap(), auth, r.status)
        })
        .collect();
    let sent =
        |body: &str, token: u32, status| (body.to_string(), format!("Bearer tok-{token}"), status);
    assert_eq!(
        seen,
        [
            sent("a", 1, 200),
            sent("b", 1, 200),
            sent("c", 1, 401),
            sent("c", 2, 200),
            sent("d", 2, 401),
            sent("d", 3, 401),
        ]
    );
    assert_eq!(
        dead_attempts_and_reasons(&engine),
        [(
            2,
            "sink http: permanent: HTTP status 401: invalid_token".to_string()
        )]
    );
    let asked = tokens.received();
    assert_eq!(asked.len(), 3);
    let basic = base64::engine::general_purpose::STANDARD.encode("goad%20client:s3cret%3A%2F");
    for request in &asked {
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", "/token")
        );
        assert_eq!(
            request.header("authorization"),
            Some(format!("Basic {basic}").as_str())
        );
        assert_eq!(
            request.header("content-type"),
            Some("application/x-www-form-urlencoded")
        );
        assert_eq!(
            String::from_utf8_lossy(&request.body),
            "grant_type=client_credentials&scope=hooks%3Awrite&audience=https%3A%2F%2Fapi.example.com"
        );
    }
}

/// With `client_auth = "body"` the client's id and secret go in the token
/// request's form, and no `authorization` is sent to the token endpoint; a
/// token endpoint that fails fails the attempt, naming it (without its
/// URL's query, which may hold a secret).
#[test]
fn an_oauth2_client_may_authenticate_in_the_form_and_a_failing_endpoint_is_named() {
    std::env::set_var("GOAD_TEST_OAUTH2_BODY_SECRET", "s3cret");
    let tokens = token_endpoint();
    let refusing =
        Receiver::start(|_| Reply::status(400).with_body(r#"{"error":"invalid_client"}"#)).unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 1;
    let grant = |token_url: String| goad::config::OAuth2Config {
        client_auth: goad::config::ClientAuth::Body,
        ..goad::config::OAuth2Config::new(token_url, "goad", "GOAD_TEST_OAUTH2_BODY_SECRET")
    };
    let mut good = SinkConfig::http(receiver.url("/good"));
    good.oauth2 = Some(grant(tokens.url("/token")));
    let mut bad = SinkConfig::http(receiver.url("/bad"));
    bad.oauth2 = Some(grant(refusing.url("/token?key=s3cret")));
    c.sources.push(source("s", "t", vec![good, bad]));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick().unwrap();
    let got = receiver.received();
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].path.as_str(), got[0].header("authorization")),
        ("/good", Some("Bearer tok-1"))
    );
    let asked = tokens.received();
    assert_eq!(asked[0].header("authorization"), None);
    assert_eq!(
        String::from_utf8_lossy(&asked[0].body),
        "grant_type=client_credentials&client_id=goad&client_secret=s3cret"
    );
    let token_url = refusing.url("/token");
    assert_eq!(
        dead_attempts_and_reasons(&engine),
        [(
            1,
            format!(
                r#"sink http: cannot get an OAuth 2 token from {token_url}: HTTP status 400: {{"error":"invalid_client"}}"#
            )
        )]
    );
}

/// A token endpoint that gives a token no header can carry (a line break
/// in it, which would also split the request; a letter beyond ASCII,
/// which ureq refuses in an `authorization` header) fails that attempt
/// alone, transient, saying so: the token is not kept, and the next
/// attempt asks for a new one and delivers. Before, the token was kept
/// for its hour and every attempt of the sink meanwhile failed (the line
/// break's dead-lettered as permanent, the letter's with ureq's
/// `authorization header is not a string`).
#[test]
fn a_token_no_header_can_carry_is_not_kept_and_the_attempt_is_retried() {
    let issued = std::sync::atomic::AtomicU32::new(0);
    let tokens = Receiver::start(move |_| {
        let token = match issued.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => r"tok-1\r\nx-injected: 1",
            1 => "tök-2",
            _ => "tok-3",
        };
        Reply::status(200)
            .header("content-type", "application/json")
            .with_body(format!(
                r#"{{"access_token": "{token}", "expires_in": 3600}}"#
            ))
    })
    .unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(granted_config(dir.path(), &receiver, &tokens, 30_000, 0)).unwrap();
    commit_granted(&engine, 1);
    engine.tick().unwrap();
    let got = receiver.received();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].header("authorization"), Some("Bearer tok-3"));
    assert_eq!(tokens.count(), 3);
    let stats = engine.sink_stats().unwrap();
    let outcomes = &stats[0].outcomes;
    assert_eq!((outcomes.delivered, outcomes.retried), (1, 2));
    let token_url = tokens.url("/token");
    assert_eq!(
        outcomes.last_failure.as_ref().unwrap().error,
        format!("cannot get an OAuth 2 token from {token_url}: the token it gave is empty or holds a character other than printable ASCII (a line break, a letter beyond ASCII), which no authorization header can carry")
    );
}

/// With `client_auth = "private_key_jwt"` the client proves itself with a
/// JWT it signs with its private key (RFC 7523 §2.2: ES256 here, the key
/// read from `private_key_file` and named by `key_id`), for the token
/// endpoint, with an id of its own; no secret and no `authorization` go
/// to the token endpoint, and the token serves both hooks.
#[test]
fn an_oauth2_client_may_authenticate_with_a_jwt_signed_by_its_key() {
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        b64.encode(pkcs8.as_ref())
    );
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("client-key.pem");
    std::fs::write(&key_path, pem).unwrap();
    let tokens = token_endpoint();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = config(dir.path());
    let token_url = tokens.url("/token");
    let mut sink = SinkConfig::http(receiver.url("/hooks"));
    sink.oauth2 = Some(goad::config::OAuth2Config {
        client_secret_env: None,
        client_auth: goad::config::ClientAuth::PrivateKeyJwt,
        private_key_file: Some(key_path),
        key_id: Some("k-1".into()),
        ..goad::config::OAuth2Config::new(&token_url, "goad", "")
    });
    c.sources.push(source("s", "t", vec![sink]));
    let engine = Engine::open(c).unwrap();
    commit_and_tick(&engine, "one");
    commit_and_tick(&engine, "two");
    assert_eq!(bearers(&receiver), ["Bearer tok-1", "Bearer tok-1"]);
    let asked = tokens.received();
    assert_eq!(asked.len(), 1, "one token for both");
    assert_eq!(asked[0].header("authorization"), None);
    let (header, claims, signed, signature) = client_assertion(&asked[0]);
    assert_eq!(
        header,
        serde_json::json!({"alg": "ES256", "typ": "JWT", "kid": "k-1"})
    );
    assert_eq!(
        (&claims["iss"], &claims["sub"]),
        (&"goad".into(), &"goad".into())
    );
    assert_eq!(claims["aud"], token_url);
    let (iat, exp) = (
        claims["iat"].as_u64().unwrap(),
        claims["exp"].as_u64().unwrap(),
    );
    assert_eq!(exp - iat, 300);
    assert!(claims["jti"].as_str().is_some_and(|jti| !jti.is_empty()));
    let public = aws_lc_rs::signature::UnparsedPublicKey::new(
        &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED,
        pair.public_key().as_ref(),
    );
    public
        .verify(signed.as_bytes(), &signature)
        .expect("signed with the client's key");
}

/// The client assertion of a token request's form: its header and claims,
/// what it signs and its signature.
fn client_assertion(request: &Received) -> (serde_json::Value, serde_json::Value, String, Vec<u8>) {
    let form = String::from_utf8(request.body.clone()).unwrap();
    let assertion = form
        .strip_prefix(
            "grant_type=client_credentials&client_id=goad&client_assertion_type=\
             urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer&client_assertion=",
        )
        .expect("a client assertion");
    let parts: Vec<&str> = assertion.split('.').collect();
    let url_safe = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let decoded = |part: &str| -> serde_json::Value {
        serde_json::from_slice(&url_safe.decode(part).unwrap()).unwrap()
    };
    (
        decoded(parts[0]),
        decoded(parts[1]),
        format!("{}.{}", parts[0], parts[1]),
        url_safe.decode(parts[2]).unwrap(),
    )
}

/// `openssl` run with `args`; its standard output.
fn openssl(args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let out = std::process::Command::new("openssl")
        .args(args)
        .output()
        .expect("openssl runs");
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
    out.stdout
}

/// The base64url thumbprint `openssl` gives the PEM certificate at `path`
/// with `digest` (`-sha1`, `-sha256`).
fn thumbprint(path: &std::path::Path, digest: &str) -> String {
    let out = openssl(&[
        "x509".as_ref(),
        "-noout".as_ref(),
        "-fingerprint".as_ref(),
        digest.as_ref(),
        "-in".as_ref(),
        path.as_os_str(),
    ]);
    let out = String::from_utf8(out).unwrap();
    let hex = out.trim().rsplit('=').next().unwrap().replace(':', "");
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// With a `certificate_file` beside its key, a `private_key_jwt`
/// assertion names the key by the certificate's SHA-1 and SHA-256
/// thumbprints (`x5t`, `x5t#S256`: how Microsoft Entra ID finds a
/// certificate credential), both as `openssl` computes them, and is signed
/// by that certificate's key (RS256, checked by `openssl` with the
/// certificate's public key).
#[test]
fn an_oauth2_client_key_may_be_named_by_its_certificate() {
    let fixtures = fixtures();
    let (key_path, cert_path) = (
        fixtures.join("localhost-key.pem"),
        fixtures.join("localhost-cert.pem"),
    );
    let dir = tempfile::tempdir().unwrap();
    let tokens = token_endpoint();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = config(dir.path());
    let mut sink = SinkConfig::http(receiver.url("/hooks"));
    sink.oauth2 = Some(goad::config::OAuth2Config {
        client_secret_env: None,
        client_auth: goad::config::ClientAuth::PrivateKeyJwt,
        private_key_file: Some(key_path),
        certificate_file: Some(cert_path.clone()),
        ..goad::config::OAuth2Config::new(tokens.url("/token"), "goad", "")
    });
    c.sources.push(source("s", "t", vec![sink]));
    let engine = Engine::open(c).unwrap();
    commit_and_tick(&engine, "one");
    assert_eq!(bearers(&receiver), ["Bearer tok-1"]);
    let (header, _, signed, signature) = client_assertion(&tokens.received()[0]);
    assert_eq!(
        header,
        serde_json::json!({
            "alg": "RS256",
            "typ": "JWT",
            "x5t": thumbprint(&cert_path, "-sha1"),
            "x5t#S256": thumbprint(&cert_path, "-sha256"),
        })
    );
    let public_key = dir.path().join("public.pem");
    let out = openssl(&[
        "x509".as_ref(),
        "-pubkey".as_ref(),
        "-noout".as_ref(),
        "-in".as_ref(),
        cert_path.as_os_str(),
    ]);
    std::fs::write(&public_key, out).unwrap();
    let (signed_path, signature_path) = (dir.path().join("signed"), dir.path().join("signature"));
    std::fs::write(&signed_path, signed).unwrap();
    std::fs::write(&signature_path, signature).unwrap();
    let verified = openssl(&[
        "dgst".as_ref(),
        "-sha256".as_ref(),
        "-verify".as_ref(),
        public_key.as_os_str(),
        "-signature".as_ref(),
        signature_path.as_os_str(),
        signed_path.as_os_str(),
    ]);
    assert_eq!(String::from_utf8(verified).unwrap().trim(), "Verified OK");
}

/// A `certificate_file` that is not the certificate of `private_key_file`'s
/// key is refused when the sink is built, naming the key.
#[test]
fn an_oauth2_client_certificate_of_another_key_is_refused() {
    let fixtures = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let cert_path = fixtures.join("localhost-2-cert.pem");
    let mut c = config(dir.path());
    let mut sink = SinkConfig::http("http://127.0.0.1:9/hooks".to_string());
    sink.oauth2 = Some(goad::config::OAuth2Config {
        client_secret_env: None,
        client_auth: goad::config::ClientAuth::PrivateKeyJwt,
        private_key_file: Some(fixtures.join("localhost-key.pem")),
        certificate_file: Some(cert_path.clone()),
        ..goad::config::OAuth2Config::new("https://auth.example/token", "goad", "")
    });
    c.sources.push(source("s", "t", vec![sink]));
    let error = Engine::open(c).map(|_| ()).unwrap_err().to_string();
    assert_eq!(
        error,
        format!(
            "sources[0].sinks[0].oauth2.certificate_file must be the PEM certificate of private_key_file's key (its public key is not private_key_file's), got {cert_path:?}"
        )
    );
}

/// A reconfiguration keeps an unchanged OAuth 2 sink's token; a new client
/// secret builds the sink anew, which asks for a new token.
#[test]
fn a_reconfiguration_keeps_an_unchanged_sinks_oauth2_token() {
    let variable = "GOAD_TEST_OAUTH2_RELOAD_SECRET";
    std::env::set_var(variable, "first");
    let tokens = token_endpoint();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    let mut sink = SinkConfig::http(receiver.url("/in"));
    sink.oauth2 = Some(goad::config::OAuth2Config::new(
        tokens.url("/token"),
        "goad",
        variable,
    ));
    c.sources.push(source("s", "t", vec![sink]));
    let engine = Engine::open(c.clone()).unwrap();
    commit_and_tick(&engine, "a");
    engine.reconfigure(&c).unwrap();
    commit_and_tick(&engine, "b");
    std::env::set_var(variable, "second");
    engine.reconfigure(&c).unwrap();
    commit_and_tick(&engine, "c");
    let sent: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| r.header("authorization").unwrap_or_default().to_string())
        .collect();
    assert_eq!(sent, ["Bearer tok-1", "Bearer tok-1", "Bearer tok-2"]);
    assert_eq!(tokens.received().len(), 2);
}

/// Sinks whose grants are the same (two sources' sinks, one client and
/// scope) share one token, asked for once; a sink that a reconfiguration
/// builds anew for another change (its URL) keeps it; a grant of another
/// scope has a token of its own.
#[test]
fn sinks_with_the_same_grant_share_one_token_across_a_reconfiguration() {
    let variable = "GOAD_TEST_OAUTH2_SHARED_SECRET";
    std::env::set_var(variable, "shared");
    let tokens = token_endpoint();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    let granted = |path: &str, scope: Option<&str>| {
        let mut sink = SinkConfig::http(receiver.url(path));
        sink.oauth2 = Some(goad::config::OAuth2Config {
            scope: scope.map(Into::into),
            ..goad::config::OAuth2Config::new(tokens.url("/token"), "goad", variable)
        });
        sink
    };
    let (a, b, read) = (
        granted("/a", None),
        granted("/b", None),
        granted("/b-read", Some("read")),
    );
    c.sources.push(source("a", "t", vec![a]));
    c.sources.push(source("b", "u", vec![b, read]));
    let engine = Engine::open(c.clone()).unwrap();
    engine.commit(NewHook::new("a", "1")).unwrap();
    engine.commit(NewHook::new("b", "2")).unwrap();
    engine.tick().unwrap();
    c.sources[0].sinks[0].url = Some(receiver.url("/a-moved"));
    engine.reconfigure(&c).unwrap();
    engine.commit(NewHook::new("a", "3")).unwrap();
    engine.tick().unwrap();
    let sent: std::collections::BTreeMap<String, String> = receiver
        .received()
        .into_iter()
        .map(|r| {
            (
                r.path.clone(),
                r.header("authorization").unwrap().to_string(),
            )
        })
        .collect();
    let shared = &sent["/a"];
    assert_eq!((&sent["/b"], &sent["/a-moved"]), (shared, shared));
    assert_ne!(&sent["/b-read"], shared);
    assert_eq!(sent.len(), 4);
    let mut asked: Vec<String> = (tokens.received().iter())
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    asked.sort();
    assert_eq!(
        asked,
        [
            "grant_type=client_credentials",
            "grant_type=client_credentials&scope=read"
        ]
    );
}

/// A config whose source `granted` (tenant `a`) posts to `receiver` with
/// a token of a client credentials grant asked of `tokens`; its attempts
/// time out after `attempt_timeout_ms` and are retried after `retry_ms`.
fn granted_config(
    dir: &std::path::Path,
    receiver: &Receiver,
    tokens: &Receiver,
    attempt_timeout_ms: u64,
    retry_ms: u64,
) -> goad::Config {
    std::env::set_var("GOAD_TEST_OAUTH2_GRANTED_SECRET", "s3cret");
    let mut c = config(dir);
    c.dispatch.attempt_timeout_ms = attempt_timeout_ms;
    c.retry.base_ms = retry_ms;
    c.retry.max_ms = retry_ms;
    let mut sink = SinkConfig::http(receiver.url("/granted"));
    sink.oauth2 = Some(goad::config::OAuth2Config::new(
        tokens.url("/token"),
        "goad",
        "GOAD_TEST_OAUTH2_GRANTED_SECRET",
    ));
    c.sources.push(source("granted", "a", vec![sink]));
    c
}

/// Commits `hooks` hooks of source `granted`.
fn commit_granted(engine: &Engine, hooks: usize) {
    for n in 0..hooks {
        let hook = NewHook::new("granted", format!("g{n}"));
        engine.commit(hook).unwrap();
    }
}

/// A token endpoint that takes connections and never answers: while one
/// attempt asks it (until the client's own timeout), the sink's other
/// attempts wait for that request only until their deadline, then their
/// workers are back. Before, each waited for the request, then asked
/// again itself, one after another: every attempt of each round left its
/// worker stuck, and within seconds the shard had none for anyone.
#[test]
fn attempts_waiting_for_a_token_another_asks_for_are_back_at_their_deadline() {
    let asked = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let asking = asked.clone();
    let silent = Receiver::start(move |_| {
        asking.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Reply::hang()
    })
    .unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut c = granted_config(dir.path(), &receiver, &silent, 300, 1_500);
    c.dispatch.sink_concurrency = 32;
    let open = SinkConfig::http(receiver.url("/open"));
    c.sources.push(source("open", "b", vec![open]));
    let engine = Engine::open(c).unwrap();
    commit_granted(&engine, 32);
    wait_until(
        "every attempt of the first round failed",
        Duration::from_secs(10),
        || rows(&engine).iter().all(|row| row.record.attempts >= 1),
    );
    // Only the worker asking for the token is left stuck (until its
    // client's 5 s timeout), however many attempts waited for it.
    wait_until(
        "the waiting workers are back",
        Duration::from_secs(4),
        || engine.stats()[0].abandoned_workers == 1,
    );
    let requests = asked.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(requests, 1, "one request for the token");
    for row in rows(&engine) {
        assert_eq!(
            row.record.error.as_deref(),
            Some("attempt_timeout: no result after 300 ms")
        );
    }
    engine.commit(NewHook::new("open", "o")).unwrap();
    wait_until(
        "the other tenant's hook is delivered",
        Duration::from_secs(10),
        || receiver.received().iter().any(|r| r.path == "/open"),
    );
    assert!(receiver.received().iter().all(|r| r.path == "/open"));
}

/// A token endpoint that fails, slowly: the attempts that waited for its
/// answer take its failure, so it is asked once for all of them, not by
/// each in turn (the last waiting out every answer before its own).
#[test]
fn attempts_waiting_for_a_token_request_that_fails_take_its_failure() {
    let failing = Receiver::start(|_| {
        (Reply::status(503).with_body("try later")).delayed(Duration::from_secs(2))
    })
    .unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let c = granted_config(dir.path(), &receiver, &failing, 20_000, 60_000);
    let engine = Engine::open(c).unwrap();
    commit_granted(&engine, 8);
    wait_until("every attempt failed", Duration::from_secs(15), || {
        rows(&engine).iter().all(|row| row.record.attempts == 1)
    });
    assert_eq!(failing.count(), 1, "one request for the token");
    let errors: Vec<Option<String>> = rows(&engine).into_iter().map(|r| r.record.error).collect();
    let failed = format!(
        "cannot get an OAuth 2 token from {}: HTTP status 503: try later",
        failing.url("/token")
    );
    assert_eq!(errors, vec![Some(failed); 8]);
    assert_eq!(receiver.count(), 0);
}
