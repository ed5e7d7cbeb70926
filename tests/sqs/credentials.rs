//! Where AWS credentials come from, each with a real server: signatures moto
//! checks, the instance metadata service, an assumed role, web identity,
//! the shared credentials file, a profile's `credential_process`,
//! `credential_source` and IAM Identity Center role, and the container
//! endpoint.

use super::*;

/// The text of the first `<tag>` element of `xml`.
fn xml_text<'a>(xml: &'a str, tag: &str) -> &'a str {
    let start = xml.find(&format!("<{tag}>")).unwrap() + tag.len() + 2;
    let end = xml[start..].find(&format!("</{tag}>")).unwrap();
    &xml[start..start + end]
}

/// Scenario 41: moto checks every signature against the keys of its IAM
/// users. goad's signed `SendMessage` and the claim check's `PUT` and `GET`
/// are accepted; the same requests signed with a wrong secret are refused
/// (`SignatureDoesNotMatch`, retried until the attempts run out).
#[test]
fn moto_accepts_goads_signatures_and_refuses_a_wrong_secret() {
    // Five requests go unsigned: the user, its policy, its key, the queue
    // and the bucket.
    let moto = Moto::start_checking_signatures_after(Some(5));
    moto.iam("Action=CreateUser&UserName=goad");
    let everything =
        r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#;
    let policy: String = everything.bytes().map(|b| format!("%{b:02X}")).collect();
    moto.iam(&format!(
        "Action=PutUserPolicy&UserName=goad&PolicyName=all&PolicyDocument={policy}"
    ));
    let key = moto.iam("Action=CreateAccessKey&UserName=goad");
    std::env::set_var("GOAD_TEST_SIGNED_KEY", xml_text(&key, "AccessKeyId"));
    std::env::set_var("GOAD_TEST_SIGNED_SECRET", xml_text(&key, "SecretAccessKey"));
    std::env::set_var("GOAD_TEST_SIGNED_WRONG", "not-the-secret");
    let queue_url = moto.create_queue("signed.fifo");
    assert_eq!(moto.s3("PUT", "/signed").0, 200);

    let signed = |secret_env: &str| SinkConfig {
        inline_max_bytes: Some(100),
        access_key_id_env: Some("GOAD_TEST_SIGNED_KEY".into()),
        secret_access_key_env: Some(secret_env.into()),
        session_token_env: Some("GOAD_TEST_SIGNED_NO_TOKEN".into()),
        ..sqs_sink(&queue_url)
    };
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 2;
    c.sources.push(source(
        "good",
        "acme",
        vec![signed("GOAD_TEST_SIGNED_SECRET")],
    ));
    c.sources.push(source(
        "bad",
        "acme",
        vec![signed("GOAD_TEST_SIGNED_WRONG")],
    ));
    c.claim_check = s3_claims(
        &moto.url,
        "signed",
        [
            "GOAD_TEST_SIGNED_KEY",
            "GOAD_TEST_SIGNED_SECRET",
            "GOAD_TEST_SIGNED_NO_TOKEN",
        ],
    );
    let engine = Engine::open(c).unwrap();
    let body = vec![b's'; 1_000];
    engine.commit(NewHook::new("good", body.clone())).unwrap();
    engine.commit(NewHook::new("bad", "x")).unwrap();
    wait_until("one delivered, one dead", Duration::from_secs(20), || {
        engine.tick().unwrap();
        engine.stats()[0].core.delivered == 1 && dead(&engine).len() == 1
    });
    let reasons = dead_attempts_and_reasons(&engine);
    assert_eq!(reasons[0].0, 2, "{reasons:?}");
    assert_eq!(
        reasons[0].1,
        "sink sqs: HTTP status 403: SignatureDoesNotMatch: The request signature we calculated \
         does not match the signature you provided. Check your AWS Secret Access Key and signing \
         method. Consult the service documentation for details."
    );
    let sha256 = hex::encode(sha2::Sha256::digest(&body));
    assert_eq!(engine.redeem_claim("acme", &sha256).unwrap(), Some(body));
}

/// Source `stripe` sending to `queue_url` with credentials from `source`.
fn fetching_credentials(dir: &std::path::Path, queue_url: &str, source: &str) -> Config {
    let sink = SinkConfig {
        credentials: Some(source.into()),
        region: Some("us-east-1".into()),
        ..SinkConfig::sqs(queue_url)
    };
    stripe_to(dir, sink)
}

/// Creates queue `name`, records moto's requests from then on, and sends
/// one hook through an SQS sink whose credentials come from `source`;
/// returns the queue's URL.
fn send_one_with_credentials(
    moto: &Moto,
    name: &str,
    dir: &std::path::Path,
    source: &str,
) -> String {
    let queue_url = moto.create_queue(name);
    moto.start_recording();
    let engine = Engine::open(fetching_credentials(dir, &queue_url, source)).unwrap();
    engine.commit(NewHook::new("stripe", "x")).unwrap();
    engine.tick().unwrap();
    assert_eq!(moto.receive(&queue_url).len(), 1);
    queue_url
}

/// Asserts that of moto's `recorded` requests, those to the instance
/// metadata service fetched the role's credentials once (IMDSv2: a
/// session token, the role's name, its credentials).
fn assert_instance_credentials_fetched_once(recorded: &[Value]) {
    let metadata: Vec<String> = (recorded.iter().map(recorded_path))
        .filter(|path| path.starts_with("/latest/"))
        .collect();
    assert_eq!(
        metadata,
        [
            "/latest/api/token",
            "/latest/meta-data/iam/security-credentials/",
            "/latest/meta-data/iam/security-credentials/default-role"
        ]
    );
}

/// `credentials = "instance"`: the sink signs with the instance role's
/// credentials from the instance metadata service (moto's, at
/// `AWS_EC2_METADATA_SERVICE_ENDPOINT`), fetched once (IMDSv2: a session
/// token, the role's name, its credentials) and kept while fresh.
#[test]
fn instance_credentials_come_from_the_metadata_service_once_while_fresh() {
    let _instance = INSTANCE_VARIABLE.lock();
    let moto = Moto::start();
    std::env::set_var("AWS_EC2_METADATA_SERVICE_ENDPOINT", &moto.url);
    let queue_url = moto.create_queue("from-instance");
    moto.start_recording();
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(fetching_credentials(dir.path(), &queue_url, "instance")).unwrap();
    for body in ["a", "b"] {
        engine.commit(NewHook::new("stripe", body)).unwrap();
        engine.tick().unwrap();
    }
    assert_eq!(moto.receive(&queue_url).len(), 2);
    assert_instance_credentials_fetched_once(&moto.recorded());
    let sends = moto.recorded_sends();
    assert_eq!(sends.len(), 2);
    for send in &sends {
        let signed = signed_with(send);
        assert_eq!(signed, ("test-key".into(), "test-session-token".into()));
    }
}

/// Sinks taking their credentials from one place share them, with the
/// claim check's bucket: two sinks, the bucket and three roles assumed
/// with the instance's credentials (one of them an HTTP sink's, signing
/// for Lambda) fetch those once and assume each role once, and a
/// reconfiguration keeps them for the sinks it builds anew for another
/// queue or URL.
#[test]
fn sinks_share_credentials_from_one_place_across_a_reconfiguration() {
    let _instance = INSTANCE_VARIABLE.lock();
    let _sts = STS_ENDPOINT_VARIABLE.lock();
    let moto = Moto::start();
    std::env::set_var("AWS_EC2_METADATA_SERVICE_ENDPOINT", &moto.url);
    std::env::set_var("AWS_ENDPOINT_URL_STS", &moto.url);
    let queues: Vec<String> = ["shared-a", "shared-b", "shared-c", "shared-d", "shared-e"]
        .map(|name| moto.create_queue(name))
        .into();
    assert_eq!(moto.s3("PUT", "/shared-claims").0, 200);
    moto.start_recording();
    let sink = |queue_url: &str, role: Option<&str>| SinkConfig {
        credentials: Some("instance".into()),
        region: Some("us-east-1".into()),
        role_arn: role.map(|name| format!("arn:aws:iam::123456789012:role/{name}")),
        inline_max_bytes: Some(100),
        ..SinkConfig::sqs(queue_url)
    };
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.claim_check = goad::config::ClaimCheckConfig {
        s3_bucket: Some("shared-claims".into()),
        s3_region: Some("us-east-1".into()),
        s3_endpoint: Some(moto.url.clone()),
        credentials: Some("instance".into()),
        ..Default::default()
    };
    c.sources
        .push(source("a", "t", vec![sink(&queues[0], None)]));
    c.sources
        .push(source("b", "t", vec![sink(&queues[1], None)]));
    c.sources
        .push(source("c", "t", vec![sink(&queues[2], Some("writer"))]));
    c.sources
        .push(source("d", "t", vec![sink(&queues[3], Some("reader"))]));
    let function = Receiver::start(|_| Reply::status(200)).unwrap();
    let invoking = SinkConfig {
        kind: "http".into(),
        url: Some(function.url("/")),
        queue_url: None,
        inline_max_bytes: None,
        aws_service: Some("lambda".into()),
        ..sink(&queues[0], Some("invoker"))
    };
    c.sources.push(source("e", "t", vec![invoking]));
    let engine = Engine::open(c.clone()).unwrap();
    for id in ["a", "b", "c", "d", "e"] {
        engine.commit(NewHook::new(id, "x")).unwrap();
    }
    engine.commit(NewHook::new("b", vec![b'c'; 1_000])).unwrap();
    engine.tick().unwrap();
    c.sources[0].sinks[0].queue_url = Some(queues[4].clone());
    c.sources[4].sinks[0].url = Some(function.url("/moved"));
    engine.reconfigure(&c).unwrap();
    engine.commit(NewHook::new("a", "y")).unwrap();
    engine.commit(NewHook::new("e", "y")).unwrap();
    engine.tick().unwrap();
    let received: Vec<usize> = queues[1..].iter().map(|q| moto.receive(q).len()).collect();
    assert_eq!(received, [2, 1, 1, 1]);
    let invoked: Vec<String> = (function.received().into_iter()).map(|r| r.path).collect();
    assert_eq!(invoked, ["/", "/moved"]);
    let recorded = moto.recorded();
    let claims_put = (recorded.iter())
        .filter(|r| r["method"] == "PUT" && recorded_path(r).starts_with("/shared-claims/"));
    assert_eq!(claims_put.count(), 1);
    assert_instance_credentials_fetched_once(&recorded);
    let mut assumed: Vec<String> = (recorded.iter())
        .map(|r| String::from_utf8(recorded_body(r)).unwrap())
        .filter(|body| body.contains("Action=AssumeRole"))
        .map(|body| {
            body.split('&')
                .find(|p| p.starts_with("RoleArn="))
                .unwrap()
                .to_string()
        })
        .collect();
    assumed.sort();
    assert_eq!(
        assumed,
        [
            "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Finvoker",
            "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Freader",
            "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fwriter"
        ]
    );
}

/// `credentials = "instance"` with a metadata service that takes the
/// session token's request and never answers, as a container's is lost
/// on an instance whose metadata hop limit is 1: the attempt fails
/// saying what to change, and nothing is sent.
#[test]
fn a_session_token_that_never_comes_is_told_with_the_hop_limit() {
    let _instance = INSTANCE_VARIABLE.lock();
    let moto = Moto::start();
    let silent = Receiver::start(|_| Reply::hang()).unwrap();
    std::env::set_var("AWS_EC2_METADATA_SERVICE_ENDPOINT", silent.url(""));
    let queue_url = moto.create_queue("hop-limited");
    let dir = tempfile::tempdir().unwrap();
    let mut c = fetching_credentials(dir.path(), &queue_url, "instance");
    c.retry.max_attempts = 1;
    let engine = Engine::open(c).unwrap();
    commit_refused(&engine, "stripe", 1);
    assert_eq!(
        dead_attempts_and_reasons(&engine),
        [(
            1,
            "sink sqs: cannot get AWS credentials from the instance metadata service: \
             no IMDSv2 session token (timeout: receive response): from a container, the \
             instance's metadata hop limit must be 2 or more (aws ec2 \
             modify-instance-metadata-options --http-put-response-hop-limit 2)"
                .to_string()
        )]
    );
    assert!(moto.receive(&queue_url).is_empty(), "nothing was sent");
}

/// Tests that point `AWS_EC2_METADATA_SERVICE_ENDPOINT` somewhere take
/// turns: the variable is the process's.
static INSTANCE_VARIABLE: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// Tests that point `AWS_ENDPOINT_URL_STS` at their moto take turns: the
/// variable is the process's.
static STS_ENDPOINT_VARIABLE: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// `role_arn`: an IAM user that may only assume a role writes to a queue
/// and a bucket through that role. moto checks the signatures and the
/// policies: the user's own `SendMessage` is refused (`AccessDenied`); the
/// sink and the claim bucket each assume the role once (with the external
/// id and session name configured, signed with the user's key) and sign
/// every request with the role's temporary credentials; a sink whose user
/// secret is wrong cannot assume the role, and its row is dead-lettered
/// saying so.
#[test]
fn a_role_to_assume_signs_the_queues_and_the_buckets_requests() {
    let _sts = STS_ENDPOINT_VARIABLE.lock();
    // Seven requests go unsigned: the user, its policy, its key, the
    // role, the role's policy, the queue and the bucket.
    let moto = Moto::start_checking_signatures_after(Some(7));
    std::env::set_var("AWS_ENDPOINT_URL_STS", &moto.url);
    let encoded = |json: &str| -> String { json.bytes().map(|b| format!("%{b:02X}")).collect() };
    let allow = |action: &str| {
        encoded(&format!(
            r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Action":"{action}","Resource":"*"}}]}}"#
        ))
    };
    moto.iam("Action=CreateUser&UserName=hooks");
    moto.iam(&format!(
        "Action=PutUserPolicy&UserName=hooks&PolicyName=assume&PolicyDocument={}",
        allow("sts:AssumeRole")
    ));
    let key = moto.iam("Action=CreateAccessKey&UserName=hooks");
    let key_id = xml_text(&key, "AccessKeyId").to_string();
    std::env::set_var("GOAD_TEST_ROLE_KEY", &key_id);
    std::env::set_var("GOAD_TEST_ROLE_SECRET", xml_text(&key, "SecretAccessKey"));
    std::env::set_var("GOAD_TEST_ROLE_WRONG", "not-the-secret");
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"sts:AssumeRole"}]}"#;
    moto.iam(&format!(
        "Action=CreateRole&RoleName=writer&AssumeRolePolicyDocument={}",
        encoded(trust)
    ));
    moto.iam(&format!(
        "Action=PutRolePolicy&RoleName=writer&PolicyName=write&PolicyDocument={}",
        allow("*")
    ));
    let queue_url = moto.create_queue("cross");
    assert_eq!(moto.s3("PUT", "/cross-claims").0, 200);
    moto.start_recording();

    let role_arn = Some("arn:aws:iam::123456789012:role/writer".to_string());
    let sink = |secret_env: &str, role_arn: &Option<String>| SinkConfig {
        inline_max_bytes: Some(100),
        access_key_id_env: Some("GOAD_TEST_ROLE_KEY".into()),
        secret_access_key_env: Some(secret_env.into()),
        session_token_env: Some("GOAD_TEST_ROLE_NO_TOKEN".into()),
        role_arn: role_arn.clone(),
        external_id: role_arn.as_ref().map(|_| "ext-1".into()),
        role_session_name: role_arn.as_ref().map(|_| "goad-test".into()),
        ..sqs_sink(&queue_url)
    };
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 2;
    let sources = [
        ("assumed", sink("GOAD_TEST_ROLE_SECRET", &role_arn)),
        ("direct", sink("GOAD_TEST_ROLE_SECRET", &None)),
        ("wrong", sink("GOAD_TEST_ROLE_WRONG", &role_arn)),
    ];
    for (id, sink) in sources {
        c.sources.push(source(id, "acme", vec![sink]));
    }
    c.claim_check = s3_claims(
        &moto.url,
        "cross-claims",
        [
            "GOAD_TEST_ROLE_KEY",
            "GOAD_TEST_ROLE_SECRET",
            "GOAD_TEST_ROLE_NO_TOKEN",
        ],
    );
    c.claim_check.role_arn = role_arn.clone();
    let engine = Engine::open(c).unwrap();
    let large = vec![b'r'; 1_000];
    for body in [b"a".to_vec(), b"b".to_vec(), large.clone()] {
        engine.commit(NewHook::new("assumed", body)).unwrap();
    }
    engine.commit(NewHook::new("direct", "d")).unwrap();
    engine.commit(NewHook::new("wrong", "w")).unwrap();
    wait_until("3 delivered, 2 dead", Duration::from_secs(30), || {
        engine.tick().unwrap();
        engine.stats()[0].core.delivered == 3 && dead(&engine).len() == 2
    });

    let mut reasons: Vec<(String, String)> = dead(&engine)
        .into_iter()
        .map(|r| (r.source_id, r.record.error.unwrap_or_default()))
        .collect();
    reasons.sort();
    assert_eq!(reasons[0].0, "direct");
    assert_eq!(
        reasons[0].1,
        "sink sqs: HTTP status 403: AccessDenied: User: arn:aws:iam::123456789012:user/hooks \
         is not authorized to perform: sqs:SendMessageBatch"
    );
    assert_eq!(reasons[1].0, "wrong");
    assert_eq!(
        reasons[1].1,
        "sink sqs: cannot assume role arn:aws:iam::123456789012:role/writer: HTTP status 403: \
         SignatureDoesNotMatch: The request signature we calculated does not match the signature \
         you provided. Check your AWS Secret Access Key and signing method. Consult the service \
         documentation for details."
    );

    let recorded = moto.recorded();
    let assumed: Vec<(String, (String, String))> = recorded
        .iter()
        .map(|r| (String::from_utf8(recorded_body(r)).unwrap(), r))
        .filter(|(body, _)| body.contains("Action=AssumeRole"))
        .map(|(body, r)| (body, signed_with(r)))
        .collect();
    // The sink and the bucket once each; the wrong secret once per attempt.
    assert_eq!(assumed.len(), 4, "{assumed:?}");
    for (body, (signer, token)) in &assumed {
        for part in [
            "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fwriter",
            "DurationSeconds=3600",
        ] {
            assert!(body.contains(part), "{part} in {body}");
        }
        assert_eq!((signer, token.as_str()), (&key_id, ""));
    }
    let with_sink_options = assumed
        .iter()
        .filter(|(body, _)| {
            body.contains("RoleSessionName=goad-test&") && body.ends_with("&ExternalId=ext-1")
        })
        .count();
    assert_eq!(
        with_sink_options, 3,
        "the bucket's session is goad's default"
    );
    assert!(assumed
        .iter()
        .any(|(body, _)| body.contains("RoleSessionName=goad&")));

    let role_signed = |r: &&Value| {
        let (signer, token) = signed_with(r);
        signer.starts_with("ASIA") && !token.is_empty()
    };
    let sends = moto.recorded_sends();
    let by_role = sends.iter().filter(role_signed).count();
    assert!(by_role >= 1, "{sends:?}");
    assert_eq!(sends.len() - by_role, 2, "the direct sink's two attempts");
    let puts: Vec<&Value> = recorded
        .iter()
        .filter(|r| r["method"] == "PUT" && recorded_path(r).starts_with("/cross-claims/"))
        .collect();
    assert_eq!(puts.len(), 1);
    assert!(role_signed(&puts[0]), "{:?}", puts[0]);
    let sha256 = hex::encode(sha2::Sha256::digest(&large));
    assert_eq!(engine.redeem_claim("acme", &sha256).unwrap(), Some(large));
}

/// `credentials = "web_identity"`: the service account's token (in
/// `AWS_WEB_IDENTITY_TOKEN_FILE`) is exchanged for `AWS_ROLE_ARN`'s
/// credentials by moto's STS (`AWS_ENDPOINT_URL_STS`), which the sink signs
/// with.
#[test]
fn web_identity_credentials_come_from_sts_for_the_service_accounts_token() {
    let moto = Moto::start();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "eyJ.service-account.token\n").unwrap();
    std::env::set_var("AWS_WEB_IDENTITY_TOKEN_FILE", &token_file);
    std::env::set_var("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/hooks");
    let _sts = STS_ENDPOINT_VARIABLE.lock();
    std::env::set_var("AWS_ENDPOINT_URL_STS", &moto.url);
    send_one_with_credentials(&moto, "from-sts", &dir.path().join("data"), "web_identity");
    let recorded = moto.recorded();
    let assumed: Vec<String> = recorded
        .iter()
        .map(|r| String::from_utf8(recorded_body(r)).unwrap())
        .filter(|body| body.contains("Action=AssumeRoleWithWebIdentity"))
        .collect();
    assert_eq!(assumed.len(), 1, "{assumed:?}");
    for part in [
        "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fhooks",
        "RoleSessionName=goad",
        "WebIdentityToken=eyJ.service-account.token",
    ] {
        assert!(assumed[0].contains(part), "{part} in {}", assumed[0]);
    }
    let (key_id, token) = signed_with(&moto.recorded_sends()[0]);
    assert!(key_id.starts_with("ASIA") && !token.is_empty(), "{key_id}");
}

/// `credentials = "profile"`: the sink signs with the keys of the
/// `AWS_PROFILE` section of the shared credentials file
/// (`AWS_SHARED_CREDENTIALS_FILE`), session token included; a profile the
/// file lacks fails the attempt, naming the profile and the file.
#[test]
fn profile_credentials_come_from_the_shared_credentials_file() {
    let _profile = PROFILE_VARIABLES.lock();
    let moto = Moto::start();
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("config");
    std::env::set_var("AWS_CONFIG_FILE", &config_file);
    let file = dir.path().join("credentials");
    std::fs::write(
        &file,
        "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = d\n\n\
         [hooks]\naws_access_key_id = AKIAHOOKS\naws_secret_access_key = h\n\
         aws_session_token = hooks-token\n",
    )
    .unwrap();
    std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", &file);
    std::env::set_var("AWS_PROFILE", "hooks");
    let queue_url =
        send_one_with_credentials(&moto, "from-profile", &dir.path().join("data"), "profile");
    let sends = moto.recorded_sends();
    assert_eq!(
        signed_with(&sends[0]),
        ("AKIAHOOKS".to_string(), "hooks-token".to_string())
    );

    assert_eq!(
        dead_reason_with_profile("missing", &dir.path().join("data2"), &queue_url),
        format!(
            "sink sqs: cannot get AWS credentials from the AWS profile: \
             no aws_access_key_id in profile [missing] of {} \
             nor an SSO role or a credential_process in [profile missing] of {}",
            file.display(),
            config_file.display()
        )
    );
}

/// The dead-letter reason of a hook sent with `profile`'s credentials,
/// its one attempt failed.
fn dead_reason_with_profile(profile: &str, dir: &std::path::Path, queue_url: &str) -> String {
    std::env::set_var("AWS_PROFILE", profile);
    let mut c = fetching_credentials(dir, queue_url, "profile");
    c.retry.max_attempts = 1;
    let engine = Engine::open(c).unwrap();
    commit_refused(&engine, "stripe", 1);
    let mut reasons = dead_attempts_and_reasons(&engine);
    assert_eq!(reasons.len(), 1);
    assert_eq!(reasons[0].0, 1, "one attempt");
    reasons.remove(0).1
}

/// `credentials = "profile"` with a profile that names a role
/// (`role_arn`, `source_profile`, `external_id`, `role_session_name` in the
/// config file, as `aws configure` writes a role profile): the role is
/// assumed at STS (moto's) with the source profile's keys, and the sink
/// signs with the role's temporary credentials; a chain of source
/// profiles that loops fails the attempt saying so.
#[test]
fn a_profiles_role_is_assumed_with_its_source_profiles_keys() {
    let _profile = PROFILE_VARIABLES.lock();
    let _sts = STS_ENDPOINT_VARIABLE.lock();
    let moto = Moto::start();
    std::env::set_var("AWS_ENDPOINT_URL_STS", &moto.url);
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials");
    let base = "[base]\naws_access_key_id = AKIABASE\naws_secret_access_key = b\n";
    std::fs::write(&credentials, base).unwrap();
    std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", &credentials);
    let config = dir.path().join("config");
    std::fs::write(
        &config,
        "[profile chained]\nrole_arn = arn:aws:iam::123456789012:role/writer\n\
         source_profile = base\nexternal_id = ext-1\nrole_session_name = goad-dev\n\n\
         [profile loop-a]\nrole_arn = arn:aws:iam::123456789012:role/a\nsource_profile = loop-b\n\n\
         [profile loop-b]\nrole_arn = arn:aws:iam::123456789012:role/b\nsource_profile = loop-a\n",
    )
    .unwrap();
    std::env::set_var("AWS_CONFIG_FILE", &config);
    std::env::set_var("AWS_PROFILE", "chained");
    let queue_url =
        send_one_with_credentials(&moto, "from-role", &dir.path().join("data"), "profile");
    let assumed = assume_role_requests(&moto);
    assert_eq!(assumed.len(), 1);
    let body = String::from_utf8(recorded_body(&assumed[0])).unwrap();
    for part in [
        "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fwriter",
        "RoleSessionName=goad-dev&",
        "&ExternalId=ext-1",
    ] {
        assert!(body.contains(part), "{part} in {body}");
    }
    assert_eq!(
        signed_with(&assumed[0]),
        ("AKIABASE".to_string(), String::new())
    );
    let (key_id, token) = signed_with(&moto.recorded_sends()[0]);
    assert!(key_id.starts_with("ASIA") && !token.is_empty(), "{key_id}");

    assert_eq!(
        dead_reason_with_profile("loop-a", &dir.path().join("data2"), &queue_url),
        "sink sqs: cannot get AWS credentials from the AWS profile: the source_profile \
         chain from [loop-b] is longer than 8 profiles (a loop?)"
    );
}

/// `credentials = "profile"` with a role profile whose
/// `credential_source` is `EcsContainer`: the role is assumed at STS
/// (moto's) with the container endpoint's credentials, and the sink signs
/// with the role's; a `credential_source` goad does not know fails the
/// attempt naming the ones it does, and so does a role profile naming
/// both a source profile and a credential source, or neither.
#[test]
fn a_profiles_role_may_be_assumed_with_its_credential_source() {
    let _profile = PROFILE_VARIABLES.lock();
    let _sts = STS_ENDPOINT_VARIABLE.lock();
    let _container = CONTAINER_VARIABLES.lock();
    let moto = Moto::start();
    std::env::set_var("AWS_ENDPOINT_URL_STS", &moto.url);
    let endpoint = Receiver::start(|_| {
        let document = json!({"AccessKeyId": "CONTAINERKEY", "SecretAccessKey": "s", "Token": "container-token"});
        Reply::status(200).with_body(document.to_string())
    })
    .unwrap();
    std::env::set_var(
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        endpoint.url("/v2/credentials"),
    );
    std::env::remove_var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", dir.path().join("none"));
    let config = dir.path().join("config");
    std::fs::write(
        &config,
        "[profile on-ecs]\nrole_arn = arn:aws:iam::123456789012:role/writer\n\
         credential_source = EcsContainer\n\n\
         [profile on-lambda]\nrole_arn = arn:aws:iam::123456789012:role/writer\n\
         credential_source = Lambda\n\n\
         [profile both]\nrole_arn = arn:aws:iam::123456789012:role/writer\n\
         source_profile = on-ecs\ncredential_source = EcsContainer\n\n\
         [profile orphan]\nrole_arn = arn:aws:iam::123456789012:role/writer\n",
    )
    .unwrap();
    std::env::set_var("AWS_CONFIG_FILE", &config);
    std::env::set_var("AWS_PROFILE", "on-ecs");
    let queue_url =
        send_one_with_credentials(&moto, "from-ecs-role", &dir.path().join("data"), "profile");
    let assumed = assume_role_requests(&moto);
    assert_eq!(assumed.len(), 1);
    assert_eq!(
        signed_with(&assumed[0]),
        ("CONTAINERKEY".to_string(), "container-token".to_string())
    );
    let (key_id, token) = signed_with(&moto.recorded_sends()[0]);
    assert!(key_id.starts_with("ASIA") && !token.is_empty(), "{key_id}");

    let reason = dead_reason_with_profile("on-lambda", &dir.path().join("data2"), &queue_url);
    let expected = format!(
        "sink sqs: cannot get AWS credentials from the AWS profile: profile [on-lambda] of {}: \
         credential_source Lambda: \"Lambda\" is not one of Environment, Ec2InstanceMetadata, \
         EcsContainer",
        config.display()
    );
    assert_eq!(reason, expected);
    for (profile, data, why) in [
        (
            "both",
            "data3",
            "names both a source_profile and a credential_source",
        ),
        (
            "orphan",
            "data4",
            "names a role_arn but no source_profile or credential_source",
        ),
    ] {
        let reason = dead_reason_with_profile(profile, &dir.path().join(data), &queue_url);
        let expected = format!(
            "sink sqs: cannot get AWS credentials from the AWS profile: profile [{profile}] of {} {why}",
            config.display()
        );
        assert_eq!(reason, expected);
    }
}

/// `credentials = "profile"` with an IAM Identity Center profile, as
/// `aws configure sso` writes one (`sso_session`, `sso_account_id`,
/// `sso_role_name`, and the session's `sso_region`): the portal (a
/// stand-in at `AWS_ENDPOINT_URL_SSO`) gives the role's credentials for
/// the token `aws sso login` cached under the SHA-1 of the session's name,
/// and the sink signs with them; an expired token fails the attempt
/// saying to log in again.
#[test]
fn an_sso_profiles_role_credentials_come_from_the_portal_with_the_cached_token() {
    let _profile = PROFILE_VARIABLES.lock();
    let moto = Moto::start();
    let portal = Receiver::start(|r| {
        if r.header("x-amz-sso_bearer_token") != Some("sso-access-token") {
            return Reply::status(401).with_body("{\"message\": \"Session token not found\"}");
        }
        let role = json!({"roleCredentials": {"accessKeyId": "ASIASSOKEY", "secretAccessKey": "s",
                          "sessionToken": "sso-session-token", "expiration": 4_102_444_800_000u64}});
        Reply::status(200).with_body(role.to_string())
    })
    .unwrap();
    std::env::set_var("AWS_ENDPOINT_URL_SSO", portal.url(""));
    let dir = tempfile::tempdir().unwrap();
    let home = Home::set(&dir.path().join("home"));
    let cache = dir.path().join("home/.aws/sso/cache");
    std::fs::create_dir_all(&cache).unwrap();
    // `printf my-sso | sha1sum`: where the CLI caches the session's token.
    let token_file = cache.join("0ad374308c5a4e22f723adf10145eafad7c4031c.json");
    let cached = |expires_at: &str| {
        let token = json!({"startUrl": "https://example.awsapps.com/start", "region": "us-east-1",
                           "accessToken": "sso-access-token", "expiresAt": expires_at});
        std::fs::write(&token_file, token.to_string()).unwrap();
    };
    cached("2099-01-01T00:00:00Z");
    let config = dir.path().join("config");
    std::fs::write(
        &config,
        "[profile dev]\nsso_session = my-sso\nsso_account_id = 111122223333\n\
         sso_role_name = Writer\n\n\
         [sso-session my-sso]\nsso_region = us-east-1\n\
         sso_start_url = https://example.awsapps.com/start\n",
    )
    .unwrap();
    std::env::set_var("AWS_CONFIG_FILE", &config);
    std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", dir.path().join("none"));
    std::env::set_var("AWS_PROFILE", "dev");
    let queue_url =
        send_one_with_credentials(&moto, "from-sso", &dir.path().join("data"), "profile");
    let (key_id, token) = signed_with(&moto.recorded_sends()[0]);
    assert_eq!(
        (key_id.as_str(), token.as_str()),
        ("ASIASSOKEY", "sso-session-token")
    );
    assert_eq!(
        portal.received()[0].path,
        "/federation/credentials?account_id=111122223333&role_name=Writer"
    );

    cached("2020-01-01T00:00:00Z");
    assert_eq!(
        dead_reason_with_profile("dev", &dir.path().join("data2"), &queue_url),
        format!(
            "sink sqs: cannot get AWS credentials from the AWS profile: the SSO token {} \
             expired at 2020-01-01T00:00:00Z: run `aws sso login`",
            token_file.display()
        )
    );
    drop(home);
}

/// `HOME` set for a test, and put back as it was when dropped.
struct Home(Option<std::ffi::OsString>);

impl Home {
    fn set(path: &std::path::Path) -> Home {
        let before = std::env::var_os("HOME");
        std::env::set_var("HOME", path);
        Home(before)
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        match &self.0 {
            Some(home) => std::env::set_var("HOME", home),
            None => std::env::remove_var("HOME"),
        }
    }
}

/// Tests that set the container endpoint's variables take turns.
static CONTAINER_VARIABLES: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// The `AssumeRole` requests moto recorded.
fn assume_role_requests(moto: &Moto) -> Vec<Value> {
    let recorded = moto.recorded().into_iter();
    recorded
        .filter(|r| {
            String::from_utf8(recorded_body(r))
                .unwrap()
                .contains("Action=AssumeRole")
        })
        .collect()
}

/// Tests that set `AWS_PROFILE` and the files it is read from take turns:
/// the variables are the process's.
static PROFILE_VARIABLES: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// `credentials = "profile"` with a profile that has no keys in the
/// credentials file but a `credential_process` in the config file (as IAM
/// Roles Anywhere's signing helper is set up): the command runs once, and
/// its credentials, fresh until their `Expiration`, sign both hooks'
/// requests; a process that fails fails the attempt with its exit status
/// and what it wrote to its standard error.
#[test]
fn a_profiles_credential_process_gives_credentials_kept_until_they_expire() {
    let _profile = PROFILE_VARIABLES.lock();
    let moto = Moto::start();
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let helper = dir.path().join("helper.sh");
    std::fs::write(
        &helper,
        "echo run >> \"$1\"\n\
         printf '{\"Version\": 1, \"AccessKeyId\": \"AKPROC\", \"SecretAccessKey\": \"s\", \
         \"SessionToken\": \"proc-token\", \"Expiration\": \"2099-01-01T00:00:00Z\"}'\n",
    )
    .unwrap();
    let failing = dir.path().join("failing.sh");
    std::fs::write(&failing, "echo the trust anchor is gone >&2\nexit 2\n").unwrap();
    let credentials_file = dir.path().join("credentials");
    std::fs::write(
        &credentials_file,
        "[default]\naws_access_key_id = AKIADEFAULT\n",
    )
    .unwrap();
    let config_file = dir.path().join("config");
    std::fs::write(
        &config_file,
        format!(
            "[default]\nregion = us-east-1\n\n[profile roles-anywhere]\n\
             credential_process = sh {} {}\n[profile broken]\ncredential_process = sh {}\n",
            helper.display(),
            runs.display(),
            failing.display()
        ),
    )
    .unwrap();
    std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", &credentials_file);
    std::env::set_var("AWS_CONFIG_FILE", &config_file);
    std::env::set_var("AWS_PROFILE", "roles-anywhere");
    let queue_url = moto.create_queue("from-process");
    moto.start_recording();
    let engine = Engine::open(fetching_credentials(
        &dir.path().join("data"),
        &queue_url,
        "profile",
    ))
    .unwrap();
    for body in ["a", "b"] {
        engine.commit(NewHook::new("stripe", body)).unwrap();
        engine.tick().unwrap();
    }
    assert_eq!(moto.receive(&queue_url).len(), 2);
    let sends = moto.recorded_sends();
    assert_eq!(sends.len(), 2);
    for send in &sends {
        assert_eq!(signed_with(send), ("AKPROC".into(), "proc-token".into()));
    }
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\n", "run once");
    engine.shutdown();

    assert_eq!(
        dead_reason_with_profile("broken", &dir.path().join("data2"), &queue_url),
        "sink sqs: cannot get AWS credentials from the AWS profile: \
         credential_process failed (exit status: 2): the trust anchor is gone"
    );
}

/// `credentials = "container"`: credentials come from the container
/// endpoint (`AWS_CONTAINER_CREDENTIALS_FULL_URI`) with the token of
/// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`; an endpoint that fails fails
/// the attempt (transient), naming it, and nothing is sent.
#[test]
fn container_credentials_come_from_the_endpoint_and_its_failure_fails_the_attempt() {
    let _container = CONTAINER_VARIABLES.lock();
    let moto = Moto::start();
    let serving = Arc::new(AtomicBool::new(false));
    let on = serving.clone();
    let endpoint = Receiver::start(move |r| {
        if !on.load(Ordering::SeqCst) {
            return Reply::status(500).with_body("nope");
        }
        if r.header("authorization") != Some("task-token") {
            return Reply::status(401);
        }
        let document = json!({"AccessKeyId": "CONTAINERKEY", "SecretAccessKey": "s", "Token": "container-token"});
        Reply::status(200).with_body(document.to_string())
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "task-token\n").unwrap();
    std::env::set_var(
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        endpoint.url("/v2/credentials"),
    );
    std::env::set_var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", &token_file);
    let queue_url = moto.create_queue("from-container");
    moto.start_recording();
    let mut c = fetching_credentials(&dir.path().join("data"), &queue_url, "container");
    c.retry.max_attempts = 1;
    let engine = Engine::open(c).unwrap();
    let reasons = {
        commit_refused(&engine, "stripe", 1);
        dead_attempts_and_reasons(&engine)
    };
    assert_eq!(
        reasons,
        [(
            1,
            "sink sqs: cannot get AWS credentials from the container credentials endpoint: \
             HTTP status 500: nope"
                .to_string()
        )]
    );
    assert!(moto.receive(&queue_url).is_empty(), "nothing was sent");
    serving.store(true, Ordering::SeqCst);
    replay_until_delivered(&engine, 1);
    let (key_id, token) = signed_with(&moto.recorded_sends()[0]);
    assert_eq!(
        (key_id.as_str(), token.as_str()),
        ("CONTAINERKEY", "container-token")
    );
    assert_eq!(endpoint.received()[1].path, "/v2/credentials");
}
