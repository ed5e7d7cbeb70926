//! A source's `ingest_jwt`: hooks carrying an OpenID Connect token that
//! an issuer signed with a key it publishes (Google Pub/Sub push, Entra),
//! checked against the keys fetched from a real key-set server on
//! loopback.

use super::*;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use goad::config::{IngestJwt, OneOrMany};
use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivatePkcs8KeyDer;
use serde_json::{json, Value};

const AUDIENCE: &str = "https://goad.example/v1/sources/push/hooks";
const PUSHER: &str = "pusher@p.iam.gserviceaccount.com";

/// The issuer's two keys: an RSA key (`r1`) and an EC key (`e2`) it
/// publishes later.
struct Issuer {
    rsa: RsaKeyPair,
    ec: EcdsaKeyPair,
}

impl Issuer {
    fn new() -> Issuer {
        let pem = std::fs::read(fixtures().join("google-service-account-test-key.pem")).unwrap();
        let der = PrivatePkcs8KeyDer::from_pem_slice(&pem).unwrap();
        let rsa = RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).unwrap();
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let ec =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        Issuer { rsa, ec }
    }

    /// The key set, with the EC key once it is published.
    fn key_set(&self, with_ec: bool) -> String {
        let b64 = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
        let rsa =
            aws_lc_rs::signature::RsaPublicKeyComponents::<Vec<u8>>::from(self.rsa.public_key());
        let mut keys = vec![
            json!({"kty": "RSA", "alg": "RS256", "use": "sig", "kid": "r1",
                                   "n": b64(&rsa.n), "e": b64(&rsa.e)}),
        ];
        if with_ec {
            let point = self.ec.public_key().as_ref();
            keys.push(json!({"kty": "EC", "crv": "P-256", "kid": "e2",
                             "x": b64(&point[1..33]), "y": b64(&point[33..])}));
        }
        json!({ "keys": keys }).to_string()
    }

    /// A token of `claims` signed with key `kid` (`e2` signs with the EC
    /// key, any other with the RSA key).
    fn token(&self, kid: &str, claims: &Value) -> String {
        let b64 = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
        let alg = if kid == "e2" { "ES256" } else { "RS256" };
        let header = json!({"alg": alg, "kid": kid, "typ": "JWT"});
        let signed = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let rng = SystemRandom::new();
        let signature = if kid == "e2" {
            self.ec
                .sign(&rng, signed.as_bytes())
                .unwrap()
                .as_ref()
                .to_vec()
        } else {
            let mut signature = vec![0; self.rsa.public_key().modulus_len()];
            let alg = &aws_lc_rs::signature::RSA_PKCS1_SHA256;
            self.rsa
                .sign(alg, &rng, signed.as_bytes(), &mut signature)
                .unwrap();
            signature
        };
        format!("{signed}.{}", b64(&signature))
    }
}

/// Pub/Sub push's claims, issued now for an hour.
fn push_claims() -> Value {
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    json!({"iss": "https://accounts.google.com", "aud": AUDIENCE, "email": PUSHER,
           "email_verified": true, "iat": now_s, "exp": now_s + 3_600})
}

/// A source `push` checking tokens against the keys at `jwks_url`.
fn push_source(id: &str, jwks_url: String, sink_url: String) -> goad::config::SourceConfig {
    let mut push = source(id, "t1", vec![SinkConfig::http(sink_url)]);
    push.ingest_jwt = Some(IngestJwt {
        jwks_url,
        issuer: OneOrMany::Many(vec![
            "https://accounts.google.com".into(),
            "accounts.google.com".into(),
        ]),
        audience: AUDIENCE.into(),
        claims: [("email".to_string(), json!(PUSHER))].into(),
    });
    push
}

/// A hook whose token the issuer signed for this source's audience and
/// sender is taken and delivered (without the token); one with no token,
/// another sender or an expired token gets 401 saying why, and nothing
/// is stored. When the issuer starts signing with a key it has just
/// published, the node fetches its keys again once (whatever the number
/// of such tokens) and takes them; a reload that leaves the source as it
/// was keeps the keys. A source whose keys cannot be fetched answers 503
/// `signing_keys_unavailable` saying why.
#[test]
fn a_source_with_ingest_jwt_takes_hooks_its_issuer_signed_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = Arc::new(Issuer::new());
    let published = Arc::new(Mutex::new(issuer.key_set(false)));
    let keys = published.clone();
    let jwks = Receiver::start(move |_| {
        let set = keys.lock().clone();
        Reply::status(200)
            .header("content-type", "application/json")
            .header("cache-control", "public, max-age=20000, must-revalidate")
            .with_body(set)
    })
    .unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir.path());
    c.sources.push(push_source(
        "push",
        jwks.url("/certs"),
        receiver.url("/push"),
    ));
    // Nothing listens on port 9: its keys cannot be fetched.
    let down = "http://127.0.0.1:9/certs".to_string();
    c.sources
        .push(push_source("down", down, receiver.url("/down")));
    let path = dir.path().join("goad.toml");
    std::fs::write(&path, toml::to_string(&c).unwrap()).unwrap();
    let node = start_with(c, Some(path));
    let addr = node.local_addr();
    let bearer = |token: &str| format!("Bearer {token}");
    let push = |source: &str, token: &str| {
        ingest(
            addr,
            source,
            b"{\"message\":{}}",
            &[("authorization", &bearer(token))],
        )
    };

    let k1 = issuer.token("r1", &push_claims());
    let mut first = push("push", &k1);
    // The node fetches the keys as it starts; until they are in hand, 503.
    wait_until("the keys to be fetched", Duration::from_secs(20), || {
        if first.status == 503 {
            assert_eq!(first.error_code(), "signing_keys_unavailable");
            first = push("push", &k1);
        }
        first.status != 503
    });
    assert_eq!(first.status, 202, "{}", first.text());
    assert!(receiver.wait_for(1, Duration::from_secs(10)));
    let delivered = &receiver.received()[0];
    assert_eq!(delivered.body, b"{\"message\":{}}");
    assert_eq!(delivered.header("authorization"), None);
    assert_eq!(jwks.count(), 1);

    let refused = |reply: HttpReply| (reply.status, reply.json()["message"].clone());
    let unsigned = ingest(addr, "push", b"{}", &[]);
    assert_eq!(
        refused(unsigned),
        (
            401,
            json!(format!(
                "this source needs a bearer token: a JWT signed by a key of {}",
                jwks.url("/certs")
            ))
        )
    );
    let mut intruder = push_claims();
    intruder["email"] = json!("intruder@q.iam.gserviceaccount.com");
    assert_eq!(
        refused(push("push", &issuer.token("r1", &intruder))),
        (
            401,
            json!(format!(
                "the token's email is \"intruder@q.iam.gserviceaccount.com\", not \"{PUSHER}\""
            ))
        )
    );
    // Expired 600 s before it was made: the node's clock may have passed
    // another second or two by the time it checks.
    let made = Instant::now();
    let mut expired = push_claims();
    expired["exp"] = json!(expired["iat"].as_u64().unwrap() - 600);
    let (status, message) = refused(push("push", &issuer.token("r1", &expired)));
    let ago_s: u64 = (message.as_str().unwrap())
        .strip_prefix("the token expired ")
        .and_then(|m| m.strip_suffix(" s ago"))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{message}"));
    assert_eq!(status, 401);
    assert!(
        (600..=601 + made.elapsed().as_secs()).contains(&ago_s),
        "{message}"
    );

    // The issuer publishes a new key and signs with it: asked again, at
    // most once every 10 s, the node takes it.
    *published.lock() = issuer.key_set(true);
    let k2 = issuer.token("e2", &push_claims());
    let mut answers = Vec::new();
    wait_until("the new key to be fetched", Duration::from_secs(30), || {
        let reply = push("push", &k2);
        answers.push((reply.status, reply.error_code()));
        reply.status == 202
    });
    let mut unknown = answers.iter().filter(|(status, _)| *status != 202);
    assert!(
        unknown.all(|answer| {
            *answer == (401, "unauthorized".into())
                || *answer == (503, "signing_key_unknown".into())
        }),
        "{answers:?}"
    );
    assert_eq!(
        jwks.count(),
        2,
        "one fetch more, for {} tokens",
        answers.len()
    );

    assert_eq!(call(addr, "POST", "/v1/reload", &[], b"").status, 200);
    assert_eq!(push("push", &k1).status, 202);
    assert_eq!(jwks.count(), 2, "the reload kept the keys");
    assert!(receiver.wait_for(3, Duration::from_secs(10)));
    let taken = r#"source="push",status="202""#;
    assert_eq!(metric(addr, "goad_ingest_requests_total", taken), 3.0);
    let fetches = "goad_ingest_jwt_key_fetches_total";
    assert_eq!(metric(addr, fetches, r#"source="push",result="ok""#), 2.0);
    assert_eq!(
        metric(addr, fetches, r#"source="push",result="failed""#),
        0.0
    );

    let mut down = push("down", &k1);
    wait_until("the failed fetch", Duration::from_secs(20), || {
        if down.json()["message"]
            .as_str()
            .unwrap()
            .contains("are being fetched")
        {
            down = push("down", &k1);
        }
        down.json()["message"]
            .as_str()
            .unwrap()
            .contains("could not be fetched")
    });
    assert_eq!(
        (down.status, down.error_code()),
        (503, "signing_keys_unavailable".into())
    );
    assert_eq!(down.header("retry-after"), Some("5"));
    assert_eq!(metric(addr, fetches, r#"source="down",result="ok""#), 0.0);
    assert!(metric(addr, fetches, r#"source="down",result="failed""#) >= 1.0);
    let message = down.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with("the keys to check this source's tokens with could not be fetched from http://127.0.0.1:9/certs: "),
        "{message}"
    );
}

/// The key set at one `jwks_url` serves every source naming it: fetched
/// once as the node starts however many sources name it (a URL of its
/// own is fetched on its own), and a reload's sources take it with its
/// keys — one the reload adds, one whose issuers it changed — fetching
/// nothing again; each source's metric counts its key set's fetches.
#[test]
fn sources_naming_one_key_set_share_its_fetches() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = Arc::new(Issuer::new());
    let set = issuer.key_set(false);
    let jwks = Receiver::start(move |_| {
        Reply::status(200)
            .header("content-type", "application/json")
            .with_body(set.clone())
    })
    .unwrap();
    let fetches_of = |path: &str| {
        let received = jwks.received();
        received.iter().filter(|r| r.path == path).count()
    };
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir.path());
    for (id, path) in [("a", "/certs"), ("b", "/certs"), ("c", "/other")] {
        c.sources
            .push(push_source(id, jwks.url(path), receiver.url("/push")));
    }
    let path = dir.path().join("goad.toml");
    std::fs::write(&path, toml::to_string(&c).unwrap()).unwrap();
    let node = start_with(c.clone(), Some(path.clone()));
    let addr = node.local_addr();
    let token = format!("Bearer {}", issuer.token("r1", &push_claims()));
    let push = |source: &str| ingest(addr, source, b"{}", &[("authorization", &token)]).status;
    wait_until("the keys to be fetched", Duration::from_secs(20), || {
        ["a", "b", "c"].iter().all(|source| push(source) == 202)
    });
    assert_eq!((fetches_of("/certs"), fetches_of("/other")), (1, 1));

    c.sources[1].ingest_jwt.as_mut().unwrap().issuer =
        OneOrMany::One("https://accounts.google.com".into());
    c.sources
        .push(push_source("d", jwks.url("/certs"), receiver.url("/push")));
    std::fs::write(&path, toml::to_string(&c).unwrap()).unwrap();
    assert_eq!(call(addr, "POST", "/v1/reload", &[], b"").status, 200);
    assert_eq!((push("b"), push("d")), (202, 202), "no wait for keys");
    assert_eq!((fetches_of("/certs"), fetches_of("/other")), (1, 1));
    let fetches = "goad_ingest_jwt_key_fetches_total";
    for source in ["a", "b", "c", "d"] {
        let ok = format!(r#"source="{source}",result="ok""#);
        assert_eq!(metric(addr, fetches, &ok), 1.0, "{source}");
    }
}
