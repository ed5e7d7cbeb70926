//! Provider signatures and token schemes at ingest: only hooks that carry
//! the source's secret are taken; and providers' checks of a new endpoint
//! (Slack, Zoom, Meta, Twitch, Microsoft Graph, Event Grid, Dropbox,
//! Okta), answered, not stored.

use super::*;

/// HMAC-SHA256 of the concatenated `parts` under `secret`.
fn hmac_sha256(secret: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    use hmac::{KeyInit, Mac};
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).unwrap();
    parts.iter().for_each(|part| mac.update(part));
    mac.finalize().into_bytes().to_vec()
}

/// Source `id` of tenant `t1`, delivering to `url`, whose hooks `scheme`
/// signs with the secret in variable `secret_var`.
fn signed_source(
    id: &str,
    scheme: &str,
    secret_var: &str,
    url: &str,
) -> goad::config::SourceConfig {
    let mut source = source(id, "t1", vec![SinkConfig::http(url)]);
    source.ingest_signature = Some(scheme.into());
    source.ingest_secret_env = Some(goad::config::OneOrMany::One(secret_var.into()));
    source
}

/// A source with `ingest_signature` takes only hooks its provider signed
/// with the secret of `ingest_secret_env` (signatures made here as each
/// provider documents them): each scheme's signed hook is accepted and
/// delivered; a wrong secret, another body, a missing header or a
/// timestamp past the tolerance gets 401 `bad_signature` saying which, and
/// nothing is stored. A second secret (a rotation) is accepted too.
#[test]
fn a_source_with_a_provider_signature_takes_only_signed_hooks() {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir.path());
    let schemes = [
        "github",
        "stripe",
        "slack",
        "zoom",
        "shopify",
        "standard_webhooks",
    ];
    for scheme in schemes {
        let var = format!("NODE_TEST_SIG_{}", scheme.to_uppercase());
        let secret = match scheme {
            "standard_webhooks" => "whsec_c2lnbmluZy1zZWNyZXQ=".to_string(),
            _ => format!("{scheme}-secret"),
        };
        std::env::set_var(&var, secret);
        let mut source = source(scheme, "t1", vec![SinkConfig::http(receiver.url("/in"))]);
        source.ingest_signature = Some(scheme.into());
        let vars = vec![var, "NODE_TEST_SIG_ROTATED".to_string()];
        source.ingest_secret_env = Some(goad::config::OneOrMany::Many(vars));
        c.sources.push(source);
    }
    std::env::set_var("NODE_TEST_SIG_ROTATED", "rotated-secret");
    let node = start(c);
    let addr = node.local_addr();
    let now_s = goad::runtime::wall_ms() / 1_000;
    let body = br#"{"event":"paid"}"#;
    // The headers `scheme`'s provider sends for `body` signed with
    // `secret` at `t` (unix seconds).
    let signed = |scheme: &str, secret: &[u8], body: &[u8], t: u64| -> Vec<(String, String)> {
        let ts = t.to_string();
        let pairs: Vec<(&str, String)> = match scheme {
            "github" => vec![(
                "x-hub-signature-256",
                format!("sha256={}", hex::encode(hmac_sha256(secret, &[body]))),
            )],
            "stripe" => {
                let sig = hex::encode(hmac_sha256(secret, &[ts.as_bytes(), b".", body]));
                vec![("stripe-signature", format!("t={ts},v1={sig},v0=ignored"))]
            }
            "slack" | "zoom" => {
                let sig = hex::encode(hmac_sha256(secret, &[b"v0:", ts.as_bytes(), b":", body]));
                let (signature, timestamp) = match scheme {
                    "slack" => ("x-slack-signature", "x-slack-request-timestamp"),
                    _ => ("x-zm-signature", "x-zm-request-timestamp"),
                };
                vec![(signature, format!("v0={sig}")), (timestamp, ts.clone())]
            }
            "shopify" => vec![(
                "x-shopify-hmac-sha256",
                b64.encode(hmac_sha256(secret, &[body])),
            )],
            _ => {
                let id = "msg_1";
                let sig = hmac_sha256(secret, &[id.as_bytes(), b".", ts.as_bytes(), b".", body]);
                vec![
                    ("webhook-id", id.to_string()),
                    ("webhook-timestamp", ts.clone()),
                    ("webhook-signature", format!("v1,{}", b64.encode(sig))),
                ]
            }
        };
        pairs.into_iter().map(|(n, v)| (n.to_string(), v)).collect()
    };
    let post = |scheme: &str, headers: &[(String, String)], body: &[u8]| {
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        ingest(addr, scheme, body, &headers)
    };
    let refused = |reply: HttpReply| {
        assert_eq!(
            (reply.status, reply.error_code()),
            (401, "bad_signature".to_string())
        );
        reply.json()["message"].as_str().unwrap().to_string()
    };
    for scheme in schemes {
        let secret: Vec<u8> = match scheme {
            "standard_webhooks" => b"signing-secret".to_vec(),
            _ => format!("{scheme}-secret").into_bytes(),
        };
        let ok = post(scheme, &signed(scheme, &secret, body, now_s), body);
        assert_eq!(ok.status, 202, "{scheme}: {}", ok.text());
        let rotated = post(
            scheme,
            &signed(scheme, b"rotated-secret", body, now_s),
            body,
        );
        assert_eq!(rotated.status, 202, "{scheme} with the second secret");
        let header = signed(scheme, &secret, body, now_s)
            .into_iter()
            .find(|(n, _)| n.contains("signature") || n.contains("hmac"))
            .unwrap()
            .0;
        let wrong = post(scheme, &signed(scheme, b"wrong", body, now_s), body);
        assert_eq!(
            refused(wrong),
            format!("{header} does not match the body under any of the source's secrets")
        );
        let other_body = post(scheme, &signed(scheme, &secret, body, now_s), b"{}");
        assert!(refused(other_body).contains("does not match"));
        assert_eq!(
            refused(post(scheme, &[], body)),
            match scheme {
                "standard_webhooks" => "this source needs a signed hook: no webhook-id".to_string(),
                _ => format!("this source needs a signed hook: no {header}"),
            }
        );
        if ["stripe", "slack", "zoom", "standard_webhooks"].contains(&scheme) {
            let stale = post(scheme, &signed(scheme, &secret, body, now_s - 3_600), body);
            let message = refused(stale);
            assert!(
                message.contains("s from now, more than the 300 s allowed"),
                "{scheme}: {message}"
            );
        }
    }
    assert!(receiver.wait_for(12, Duration::from_secs(20)));
    let engine = node.engine().unwrap();
    wait_until(
        "every signed hook delivered",
        Duration::from_secs(20),
        || engine.hook_count().unwrap() == 0,
    );
    assert_eq!(
        receiver.count(),
        12,
        "two signed hooks per scheme, nothing else"
    );
    // Three refusals per scheme, and a stale one for each of the four
    // schemes that sign a timestamp.
    let refusals = metric(
        addr,
        "goad_ingest_requests_total",
        "error=\"bad_signature\"",
    );
    assert_eq!(refusals, 22.0);
}

/// Providers outside the named schemes: a table checks an HMAC of the body
/// in the header, prefix, encoding and algorithm it names (Intercom's
/// `x-hub-signature: sha1=<hex>`, Typeform's `typeform-signature:
/// sha256=<base64>`), and `gitlab` takes the secret itself in
/// `x-gitlab-token`, which is a credential: never stored nor forwarded,
/// while the provider's other headers are. Anything else gets 401
/// `bad_signature` saying why, and is not delivered.
#[test]
fn a_table_or_a_token_scheme_takes_only_hooks_that_carry_the_secret() {
    use base64::Engine as _;
    use goad::config::{HmacSignature, IngestSignature, OneOrMany};
    use hmac::{KeyInit, Mac};
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir.path());
    let table = |header: &str, prefix: &str, encoding: &str, algorithm: &str| {
        IngestSignature::Hmac(HmacSignature {
            header: header.to_string(),
            prefix: Some(prefix.to_string()),
            encoding: Some(encoding.to_string()),
            algorithm: Some(algorithm.to_string()),
        })
    };
    let signatures = [
        ("intercom", table("X-Hub-Signature", "sha1=", "hex", "sha1")),
        (
            "typeform",
            table("typeform-signature", "sha256=", "base64", "sha256"),
        ),
        ("gitlab", IngestSignature::from("gitlab")),
    ];
    for (id, signature) in &signatures {
        let var = format!("NODE_TEST_TABLE_{}", id.to_uppercase());
        std::env::set_var(&var, format!("{id}-secret"));
        let mut source = source(id, "t1", vec![SinkConfig::http(receiver.url("/in"))]);
        source.ingest_signature = Some(signature.clone());
        source.ingest_secret_env = Some(OneOrMany::One(var));
        c.sources.push(source);
    }
    let node = start(c);
    let addr = node.local_addr();
    let body = br#"{"topic":"conversation.user.created"}"#;
    let sha1_hex = |secret: &[u8], body: &[u8]| {
        let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(secret).unwrap();
        mac.update(body);
        format!("sha1={}", hex::encode(mac.finalize().into_bytes()))
    };
    let sha256_b64 = |secret: &[u8], body: &[u8]| {
        let b64 = base64::engine::general_purpose::STANDARD;
        format!("sha256={}", b64.encode(hmac_sha256(secret, &[body])))
    };
    let post = |id: &str, header: &str, value: &str, body: &[u8]| {
        ingest(
            addr,
            id,
            body,
            &[(header, value), ("x-gitlab-event", "Push Hook")],
        )
    };
    let refusal = |reply: HttpReply| {
        assert_eq!(
            (reply.status, reply.error_code().as_str()),
            (401, "bad_signature")
        );
        reply.json()["message"].as_str().unwrap().to_string()
    };

    let intercom = |secret: &[u8], signed: &[u8], sent: &[u8]| {
        post(
            "intercom",
            "x-hub-signature",
            &sha1_hex(secret, signed),
            sent,
        )
    };
    assert_eq!(intercom(b"intercom-secret", body, body).status, 202);
    assert_eq!(
        refusal(intercom(b"other-secret", body, body)),
        "x-hub-signature does not match the body under any of the source's secrets"
    );
    assert_eq!(
        refusal(intercom(b"intercom-secret", body, b"{}")),
        "x-hub-signature does not match the body under any of the source's secrets"
    );
    let sha256_in_a_sha1_table = post("intercom", "x-hub-signature", "sha256=00", body);
    assert_eq!(
        refusal(sha256_in_a_sha1_table),
        "x-hub-signature is not a signature of this scheme"
    );

    let typeform = sha256_b64(b"typeform-secret", body);
    assert_eq!(
        post("typeform", "typeform-signature", &typeform, body).status,
        202
    );
    assert_eq!(
        refusal(post(
            "typeform",
            "typeform-signature",
            "sha256=no base64!",
            body
        )),
        "typeform-signature is not a signature of this scheme"
    );
    assert_eq!(
        refusal(ingest(addr, "typeform", body, &[])),
        "this source needs a signed hook: no typeform-signature"
    );

    let gitlab = post("gitlab", "x-gitlab-token", "gitlab-secret", body);
    assert_eq!(gitlab.status, 202, "{}", gitlab.text());
    let gitlab_id = gitlab.json()["id"].as_str().unwrap().to_string();
    assert_eq!(
        refusal(post("gitlab", "x-gitlab-token", "gitlab-secret2", body)),
        "x-gitlab-token is none of the source's secrets"
    );

    assert!(receiver.wait_for(3, Duration::from_secs(20)));
    let engine = node.engine().unwrap();
    wait_until("every hook delivered", Duration::from_secs(20), || {
        engine.hook_count().unwrap() == 0
    });
    let received = receiver.received();
    assert_eq!(received.len(), 3, "one hook per source, nothing refused");
    let from_gitlab = received
        .iter()
        .find(|r| r.header("webhook-id") == Some(gitlab_id.as_str()))
        .expect("gitlab's hook");
    assert_eq!(from_gitlab.header("x-gitlab-token"), None, "a credential");
    assert_eq!(from_gitlab.header("x-gitlab-event"), Some("Push Hook"));
    let from_intercom = received
        .iter()
        .find(|r| r.header("x-goad-source") == Some("intercom"))
        .expect("intercom's hook");
    assert_eq!(
        from_intercom.header("x-hub-signature"),
        Some(sha1_hex(b"intercom-secret", body).as_str()),
        "a signature is no secret: forwarded like any provider header"
    );
}

/// Slack enables an Events API URL only once it answers the signed
/// `url_verification` request with its challenge: a `slack` source answers
/// it 200 `{"challenge": …}` and stores nothing; an unsigned one is refused
/// as any unsigned hook is; a signed event is taken as a hook.
#[test]
fn a_slack_source_answers_slacks_url_verification_with_its_challenge() {
    std::env::set_var("NODE_TEST_SLACK_CHECK_SECRET", "slack-secret");
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir.path());
    let url = receiver.url("/in");
    c.sources.push(signed_source(
        "slack",
        "slack",
        "NODE_TEST_SLACK_CHECK_SECRET",
        &url,
    ));
    let node = start(c);
    let addr = node.local_addr();
    let post = |body: &[u8], secret: &[u8]| {
        let ts = (goad::runtime::wall_ms() / 1_000).to_string();
        let sig = hex::encode(hmac_sha256(secret, &[b"v0:", ts.as_bytes(), b":", body]));
        let signature = format!("v0={sig}");
        let headers = [
            ("content-type", "application/json"),
            ("x-slack-signature", signature.as_str()),
            ("x-slack-request-timestamp", ts.as_str()),
        ];
        ingest(addr, "slack", body, &headers)
    };
    // Slack's documented example.
    let check = br#"{"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"}"#;
    let answer = post(check, b"slack-secret");
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(
        answer.json(),
        serde_json::json!({"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"})
    );
    let forged = post(check, b"not the secret");
    assert_eq!(
        (forged.status, forged.error_code()),
        (401, "bad_signature".to_string())
    );
    let engine = node.engine().unwrap();
    assert_eq!(engine.hook_count().unwrap(), 0, "the check is not a hook");
    let event = br#"{"type": "event_callback", "event": {"type": "app_mention"}}"#;
    assert_eq!(post(event, b"slack-secret").status, 202);
    assert!(receiver.wait_for(1, Duration::from_secs(20)));
    assert_eq!(receiver.received()[0].body, event.to_vec());
}

/// Meta (Facebook, Instagram, WhatsApp) checks a subscription with a `GET`
/// of the URL carrying the token it was made with: a source with
/// `ingest_verify_token_env` answers it with the challenge when the token
/// is its own (403 otherwise, 400 for a check that is not one, counted as
/// ingest answers); a source without one takes only `POST`. Its events
/// are signed as GitHub's are (`x-hub-signature-256`).
#[test]
fn a_source_answers_metas_subscription_check_with_its_verify_token() {
    std::env::set_var("NODE_TEST_META_VERIFY", "meatyhamhock");
    std::env::set_var("NODE_TEST_META_SECRET", "app-secret");
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir.path());
    let mut meta = signed_source(
        "meta",
        "github",
        "NODE_TEST_META_SECRET",
        &receiver.url("/in"),
    );
    meta.ingest_verify_token_env = Some("NODE_TEST_META_VERIFY".into());
    c.sources.push(meta);
    c.sources.push(source("plain", "t1", vec![]));
    let node = start(c);
    let addr = node.local_addr();
    // Meta's documented example.
    let check =
        |source: &str, query: &str| get(addr, &format!("/v1/sources/{source}/hooks?{query}"));
    let answer = check(
        "meta",
        "hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock",
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.text(), "1158201444");
    assert_eq!(
        answer.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    let wrong = check(
        "meta",
        "hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=guess",
    );
    assert_eq!(
        (wrong.status, wrong.error_code()),
        (403, "bad_verify_token".to_string())
    );
    assert_eq!(
        wrong.json()["message"],
        "hub.verify_token is not the token of the source's ingest_verify_token_env"
    );
    let no_challenge = check("meta", "hub.mode=subscribe&hub.verify_token=meatyhamhock");
    assert_eq!(no_challenge.error_code(), "bad_subscription_check");
    let other_mode = check(
        "meta",
        "hub.mode=unsubscribe&hub.challenge=1&hub.verify_token=meatyhamhock",
    );
    assert_eq!(
        other_mode.json()["message"],
        "a subscription check has hub.mode=subscribe, got \"unsubscribe\""
    );
    let plain = check(
        "plain",
        "hub.mode=subscribe&hub.challenge=1&hub.verify_token=x",
    );
    assert_eq!(plain.status, 405);
    assert_eq!(plain.header("allow"), Some("POST"));
    assert_eq!(check("nope", "hub.mode=subscribe").status, 404);
    assert_eq!(node.engine().unwrap().hook_count().unwrap(), 0);
    let checks = |status: &str| {
        metric(
            addr,
            "goad_ingest_requests_total",
            &format!("source=\"meta\",status=\"{status}\""),
        )
    };
    assert_eq!(
        (checks("200"), checks("403"), checks("400")),
        (1.0, 1.0, 2.0)
    );

    // An event, signed with the app secret as GitHub signs.
    let body = br#"{"object": "whatsapp_business_account", "entry": []}"#;
    let signature = format!(
        "sha256={}",
        hex::encode(hmac_sha256(b"app-secret", &[body]))
    );
    let headers = [("x-hub-signature-256", signature.as_str())];
    assert_eq!(ingest(addr, "meta", body, &headers).status, 202);
    assert!(receiver.wait_for(1, Duration::from_secs(20)));
}

/// Zoom validates an endpoint (when it is set, and every 72 hours) with a
/// signed `endpoint.url_validation`: a `zoom` source answers it 200 with
/// the plain token and its HMAC-SHA256 under the secret token Zoom signed
/// the request with, hex (while a secret is rotated, the new one where
/// Zoom signs with it, whatever its place in the list), and stores
/// nothing; an unsigned one is refused as any unsigned hook is.
#[test]
fn a_zoom_source_answers_zooms_url_validation() {
    std::env::set_var("NODE_TEST_ZOOM_SECRET", "zoom-secret-token");
    std::env::set_var("NODE_TEST_ZOOM_OLD_SECRET", "zoom-old-token");
    let dir = tempfile::tempdir().unwrap();
    let mut c = node_config(dir.path());
    let url = "http://127.0.0.1:9/x";
    c.sources
        .push(signed_source("zoom", "zoom", "NODE_TEST_ZOOM_SECRET", url));
    let mut rotating = signed_source("zoom-rotating", "zoom", "NODE_TEST_ZOOM_OLD_SECRET", url);
    rotating.ingest_secret_env = Some(goad::config::OneOrMany::Many(vec![
        "NODE_TEST_ZOOM_OLD_SECRET".into(),
        "NODE_TEST_ZOOM_SECRET".into(),
    ]));
    c.sources.push(rotating);
    let node = start(c);
    let addr = node.local_addr();
    let body = br#"{"payload": {"plainToken": "qgg8vlvZRS6UYooatFL8Aw"}, "event_ts": 1654503849680, "event": "endpoint.url_validation"}"#;
    let ts = (goad::runtime::wall_ms() / 1_000).to_string();
    let sig = hex::encode(hmac_sha256(
        b"zoom-secret-token",
        &[b"v0:", ts.as_bytes(), b":", body],
    ));
    let signature = format!("v0={sig}");
    let headers = [
        ("x-zm-signature", signature.as_str()),
        ("x-zm-request-timestamp", ts.as_str()),
    ];
    let encrypted = hex::encode(hmac_sha256(
        b"zoom-secret-token",
        &[b"qgg8vlvZRS6UYooatFL8Aw"],
    ));
    for source in ["zoom", "zoom-rotating"] {
        let answer = ingest(addr, source, body, &headers);
        assert_eq!(answer.status, 200, "{source}: {}", answer.text());
        assert_eq!(
            answer.json(),
            serde_json::json!({"plainToken": "qgg8vlvZRS6UYooatFL8Aw", "encryptedToken": encrypted}),
            "{source}"
        );
    }
    let unsigned = ingest(addr, "zoom", body, &[]);
    assert_eq!(
        (unsigned.status, unsigned.error_code()),
        (401, "bad_signature".to_string())
    );
    assert_eq!(node.engine().unwrap().hook_count().unwrap(), 0);
}

/// Microsoft's checks carry no secret, so a source answers them only when
/// its `ingest_handshake` names them, before its token check: Microsoft
/// Graph's `POST ?validationToken=…` gets the token back as `text/plain`;
/// Event Grid's `aeg-event-type: SubscriptionValidation` gets
/// `{"validationResponse"}`, and the CloudEvents `OPTIONS` handshake
/// `WebHook-Allowed-Origin`. Nothing is stored, and a source without the
/// handshake takes such a request as any other.
#[test]
fn a_source_answers_microsofts_endpoint_checks_when_its_handshake_names_them() {
    std::env::set_var("NODE_TEST_GRID_TOKEN", "grid-token");
    let dir = tempfile::tempdir().unwrap();
    let mut c = node_config(dir.path());
    let mut graph = source(
        "graph",
        "t1",
        vec![SinkConfig::http("http://127.0.0.1:9/x")],
    );
    graph.ingest_handshake = Some("microsoft_graph".into());
    let mut grid = source("grid", "t1", vec![SinkConfig::http("http://127.0.0.1:9/x")]);
    grid.ingest_handshake = Some("event_grid".into());
    grid.ingest_token_env = Some("NODE_TEST_GRID_TOKEN".into());
    c.sources
        .extend([graph, grid, source("plain", "t1", vec![])]);
    let node = start(c);
    let addr = node.local_addr();
    let engine = node.engine().unwrap();

    let token = "Validation%3A%20Testing%20client%20application%20reachability";
    let path = format!("/v1/sources/graph/hooks?validationToken={token}");
    let plain_text = [("content-type", "text/plain; charset=utf-8")];
    let answer = call(addr, "POST", &path, &plain_text, b"");
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(
        answer.text(),
        "Validation: Testing client application reachability"
    );
    assert_eq!(
        answer.header("content-type"),
        Some("text/plain; charset=utf-8")
    );

    // Event Grid's documented example.
    let validation = br#"[{"id": "2d1781af-3a4c-4d7c-bd0c-e34b19da4e66", "topic": "/subscriptions/xx/resourceGroups/yy", "subject": "", "data": {"validationCode": "512d38b6-c7b8-40c8-89fe-f46f9e9622b6", "validationUrl": "https://rp-eastus2.eventgrid.azure.net:553/eventsubscriptions/myeventsub/validate?id=0000000000-0000-0000-0000-00000000000000&t=2022-10-28T04:23:35.1981776Z&apiVersion=2018-05-01-preview&token=1A1A1A1A"}, "eventType": "Microsoft.EventGrid.SubscriptionValidationEvent", "eventTime": "2022-10-28T04:23:35.1981776Z", "metadataVersion": "1", "dataVersion": "1"}]"#;
    let grid_check = [("aeg-event-type", "SubscriptionValidation")];
    let answer = call(
        addr,
        "POST",
        "/v1/sources/grid/hooks",
        &grid_check,
        validation,
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(
        answer.json(),
        serde_json::json!({"validationResponse": "512d38b6-c7b8-40c8-89fe-f46f9e9622b6"})
    );
    // Sent head first (its client waits for `100 Continue`), it is not
    // refused on its head for want of the source's token.
    let waiting = [grid_check[0], ("expect", "100-continue")];
    let raw = raw_request("POST", "/v1/sources/grid/hooks", &waiting, validation);
    let mut split = Client::connect(addr);
    split.send(&raw[..raw.len() - validation.len()]);
    assert_eq!(split.reply().expect("100 Continue").status, 100);
    split.send(validation);
    assert_eq!(split.reply().expect("the check's answer").status, 200);
    let garbled = call(addr, "POST", "/v1/sources/grid/hooks", &grid_check, b"[]");
    assert_eq!(
        (garbled.status, garbled.error_code()),
        (400, "bad_subscription_check".to_string())
    );
    let origin = [("webhook-request-origin", "eventgrid.azure.net")];
    let answer = call(addr, "OPTIONS", "/v1/sources/grid/hooks", &origin, b"");
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(
        answer.header("webhook-allowed-origin"),
        Some("eventgrid.azure.net")
    );
    assert_eq!(answer.header("webhook-allowed-rate"), Some("*"));
    assert_eq!(engine.hook_count().unwrap(), 0, "no check is a hook");

    // An event still needs the source's token; the other sources take
    // none of these checks.
    let event = [("aeg-event-type", "Notification")];
    let refused = call(addr, "POST", "/v1/sources/grid/hooks", &event, b"[]");
    assert_eq!(refused.status, 401);
    let options = call(addr, "OPTIONS", "/v1/sources/plain/hooks", &origin, b"");
    assert_eq!(options.status, 405);
    let graph_like = call(
        addr,
        "POST",
        &format!("/v1/sources/plain/hooks?validationToken={token}"),
        &plain_text,
        b"x",
    );
    assert_eq!(
        graph_like.status, 202,
        "a hook of a source without the handshake"
    );
}

/// Twitch checks an EventSub callback with a signed
/// `webhook_callback_verification`: a `twitch` source answers its
/// challenge as plain text and stores nothing; a forged one is refused as
/// any unsigned hook is; a signed notification is a hook, its message id
/// its dedupe key, delivered with Twitch's headers.
#[test]
fn a_twitch_source_answers_twitchs_callback_verification() {
    std::env::set_var("NODE_TEST_TWITCH_SECRET", "twitch-secret-0123");
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = node_config(dir.path());
    let url = receiver.url("/in");
    let mut twitch = signed_source("twitch", "twitch", "NODE_TEST_TWITCH_SECRET", &url);
    twitch.dedupe_header = Some("twitch-eventsub-message-id".into());
    twitch.dedupe_window_ms = Some(600_000);
    c.sources.push(twitch);
    let node = start(c);
    let addr = node.local_addr();
    let post = |kind: &str, id: &str, body: &[u8], secret: &[u8]| {
        let sent = std::time::SystemTime::now();
        let ts = humantime::format_rfc3339_nanos(sent).to_string();
        let sig = hex::encode(hmac_sha256(secret, &[id.as_bytes(), ts.as_bytes(), body]));
        let signature = format!("sha256={sig}");
        let headers = [
            ("content-type", "application/json"),
            ("twitch-eventsub-message-id", id),
            ("twitch-eventsub-message-timestamp", ts.as_str()),
            ("twitch-eventsub-message-signature", signature.as_str()),
            ("twitch-eventsub-message-type", kind),
        ];
        ingest(addr, "twitch", body, &headers)
    };
    let check = br#"{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","status":"webhook_callback_verification_pending","type":"channel.follow","version":"2"}}"#;
    let verification = "webhook_callback_verification";
    let answer = post(verification, "m-1", check, b"twitch-secret-0123");
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.text(), "pogchamp-kappa-360noscope-vohiyo");
    assert_eq!(
        answer.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    let forged = post(verification, "m-2", check, b"not the secret");
    assert_eq!(
        (forged.status, forged.error_code()),
        (401, "bad_signature".to_string())
    );
    let engine = node.engine().unwrap();
    assert_eq!(engine.hook_count().unwrap(), 0, "the check is not a hook");
    let event = br#"{"subscription":{"type":"channel.follow"},"event":{"user_login":"cool_user"}}"#;
    let first = post("notification", "m-3", event, b"twitch-secret-0123");
    assert_eq!(first.status, 202, "{}", first.text());
    let again = post("notification", "m-3", event, b"twitch-secret-0123");
    assert_eq!(again.json()["id"], first.json()["id"], "a redelivery");
    assert!(receiver.wait_for(1, Duration::from_secs(20)));
    let delivered = &receiver.received()[0];
    assert_eq!(delivered.body, event.to_vec());
    assert_eq!(
        delivered.header("twitch-eventsub-message-type"),
        Some("notification")
    );
}

/// Dropbox checks a webhook URL with `GET ?challenge=…`, and Okta an
/// event hook with a `GET` carrying `x-okta-verification-challenge`;
/// neither carries a secret, so a source answers them only when its
/// `ingest_handshake` names them: Dropbox's echoed as `text/plain` that a
/// browser may not sniff, Okta's as `{"verification"}`, a `GET` without
/// the challenge 400. Nothing is stored, and a source without the
/// handshake takes only `POST`.
#[test]
fn a_source_answers_dropbox_and_okta_checks_when_its_handshake_names_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = node_config(dir.path());
    let unreachable = || vec![SinkConfig::http("http://127.0.0.1:9/x")];
    let mut dropbox = source("dropbox", "t1", unreachable());
    dropbox.ingest_handshake = Some("dropbox".into());
    let mut okta = source("okta", "t1", unreachable());
    okta.ingest_handshake = Some("okta".into());
    c.sources
        .extend([dropbox, okta, source("plain", "t1", unreachable())]);
    let node = start(c);
    let addr = node.local_addr();

    let answer = get(addr, "/v1/sources/dropbox/hooks?challenge=fNj2Ue7ZkHrsH4Vr");
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.text(), "fNj2Ue7ZkHrsH4Vr");
    assert_eq!(
        answer.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(answer.header("x-content-type-options"), Some("nosniff"));
    let bare = get(addr, "/v1/sources/dropbox/hooks");
    assert_eq!(
        (bare.status, bare.error_code()),
        (400, "bad_subscription_check".to_string())
    );

    // Okta's documented example.
    let challenge = [(
        "x-okta-verification-challenge",
        "j2xYlhq9ifomv9yAtf-DXGuF6fcnHbOzDhjntcWg",
    )];
    let answer = call(addr, "GET", "/v1/sources/okta/hooks", &challenge, b"");
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(
        answer.json(),
        serde_json::json!({"verification": "j2xYlhq9ifomv9yAtf-DXGuF6fcnHbOzDhjntcWg"})
    );
    let bare = get(addr, "/v1/sources/okta/hooks");
    assert_eq!(bare.status, 400);

    let plain = get(addr, "/v1/sources/plain/hooks?challenge=x");
    assert_eq!((plain.status, plain.header("allow")), (405, Some("POST")));
    assert_eq!(node.engine().unwrap().hook_count().unwrap(), 0);
}
