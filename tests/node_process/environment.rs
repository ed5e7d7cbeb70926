//! What a node takes from its environment beyond its config: the roots
//! its clients trust (`SSL_CERT_FILE`, `SSL_CERT_DIR`; `AWS_CA_BUNDLE`
//! for AWS's services), the endpoints AWS's SDKs and Google's libraries
//! read (`AWS_ENDPOINT_URL`…, `PUBSUB_EMULATOR_HOST`), and the machine's
//! addresses and ports.

use super::*;
use common::fixtures;
use std::ffi::OsStr;

/// A receiver over TLS whose certificate (for `localhost`) the test CA
/// signed.
fn localhost_tls_receiver() -> Receiver {
    Receiver::start_tls(
        include_bytes!("../fixtures/localhost-cert.pem"),
        include_bytes!("../fixtures/localhost-key.pem"),
        |_| Reply::status(200),
    )
    .unwrap()
}

/// `command` with `variable` set to `value` and no other variable naming
/// roots.
fn only_root_variable<'c>(
    command: &'c mut Command,
    variable: &str,
    value: &OsStr,
) -> &'c mut Command {
    for named in ["SSL_CERT_FILE", "SSL_CERT_DIR", "AWS_CA_BUNDLE"] {
        command.env_remove(named);
    }
    command.env(variable, value)
}

/// A node (its config left in `dir`) with `variable` set to `value`, and
/// no other variable naming roots, delivers a hook to a TLS receiver
/// whose certificate the test CA signed, from a sink with no `ca_file`.
fn delivers_over_tls_with(dir: &Path, variable: &str, value: &OsStr) {
    let receiver = localhost_tls_receiver();
    let node = serve_with(dir, &receiver.url("/hooks"), |command| {
        only_root_variable(command, variable, value);
    });
    let reply = Client::connect(node.addr).request("POST", "/v1/sources/a/hooks", &[], b"trusted");
    assert_eq!(reply.status, 202);
    wait_until("delivered over TLS", Duration::from_secs(20), || {
        receiver.count() == 1
    });
    assert_eq!(receiver.received()[0].body, b"trusted");
}

/// What `goad check --environment` says of `<dir>/goad.toml` with
/// `variable` set to `value` and no other variable naming roots, which it
/// refuses (exit 2).
fn check_environment(dir: &Path, variable: &str, value: &OsStr) -> String {
    refused_environment(dir, |command| {
        only_root_variable(command, variable, value);
    })
}

/// What `goad check --environment` says of `<dir>/goad.toml` in the
/// environment `setup` makes, which it refuses (exit 2).
fn refused_environment(dir: &Path, setup: impl FnOnce(&mut Command)) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_goad"));
    command
        .args(["check", "--environment", "--config"])
        .arg(dir.join("goad.toml"));
    setup(&mut command);
    let out = command.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    String::from_utf8(out.stderr).unwrap()
}

/// With `SSL_CERT_FILE` naming a private CA's certificate, a sink with no
/// `ca_file` trusts that CA (as a network that inspects TLS needs of
/// every client); a file that does not load is refused, naming the
/// variable and the file.
#[test]
fn ssl_cert_file_names_the_roots_every_client_trusts() {
    let dir = tempfile::tempdir().unwrap();
    let ca = fixtures().join("test-ca.pem");
    delivers_over_tls_with(dir.path(), "SSL_CERT_FILE", ca.as_os_str());

    for (file, why) in [
        (
            "missing.pem",
            "cannot read it: No such file or directory (os error 2)",
        ),
        ("localhost-key.pem", "no CERTIFICATE in it"),
    ] {
        let path = fixtures().join(file);
        let checked = check_environment(dir.path(), "SSL_CERT_FILE", path.as_os_str());
        assert_eq!(
            checked,
            format!("the environment's SSL_CERT_FILE must be a PEM file of root certificates ({why}), got {path:?}\n")
        );
    }
}

/// With `SSL_CERT_DIR` listing a directory that holds a private CA's
/// certificate (behind a link, as an OpenSSL directory's hashed names
/// are) beside a file that is no certificate and a directory, a sink
/// with no `ca_file` trusts that CA; a directory that cannot be read, or
/// holds no certificate, is refused, naming the variable and the
/// directory.
#[test]
fn ssl_cert_dir_lists_directories_of_the_roots_every_client_trusts() {
    let dir = tempfile::tempdir().unwrap();
    let roots = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        fixtures().join("test-ca.pem"),
        roots.path().join("1a2b3c4d.0"),
    )
    .unwrap();
    std::fs::copy(
        fixtures().join("localhost-key.pem"),
        roots.path().join("key.pem"),
    )
    .unwrap();
    std::fs::create_dir(roots.path().join("private")).unwrap();
    let listed = format!(":{}", roots.path().display());
    delivers_over_tls_with(dir.path(), "SSL_CERT_DIR", listed.as_ref());

    let empty = tempfile::tempdir().unwrap();
    let missing = roots.path().join("missing");
    for (listed, refused, why) in [
        (
            format!("{}", empty.path().display()),
            empty.path(),
            "no PEM certificate in any file in it",
        ),
        (
            format!("{}:{}", roots.path().display(), missing.display()),
            missing.as_path(),
            "cannot read it: No such file or directory (os error 2)",
        ),
    ] {
        let checked = check_environment(dir.path(), "SSL_CERT_DIR", listed.as_ref());
        assert_eq!(
            checked,
            format!(
                "the environment's SSL_CERT_DIR must be directories of PEM files of root \
                 certificates, separated by ':' ({why}), got {refused:?}\n"
            )
        );
    }
}

/// With `AWS_CA_BUNDLE` naming a private CA's certificate, the clients of
/// AWS's services trust it (and only it), as the AWS SDKs do: an SQS
/// sink whose endpoint (an SQS-compatible server) has a certificate that
/// CA signed reaches it, where the default roots refuse it. A file that
/// does not load is refused where an AWS service's client is built.
#[test]
fn aws_ca_bundle_names_the_roots_of_aws_services_clients() {
    let endpoint = localhost_tls_receiver();
    let dir = tempfile::tempdir().unwrap();
    let queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/hooks";
    let sink = format!("endpoint = {:?}\n", endpoint.url(""));
    let node = serve_config(
        dir.path(),
        &sqs_config(dir.path(), queue_url, &sink),
        |command| {
            with_aws_test_keys(command).env("AWS_CA_BUNDLE", fixtures().join("test-ca.pem"));
        },
    );
    queue_one_hook(&node, &endpoint, "the endpoint reached over TLS");
    drop(node);

    let key = fixtures().join("localhost-key.pem");
    assert_eq!(
        check_environment(dir.path(), "AWS_CA_BUNDLE", key.as_os_str()),
        format!(
            "the environment's AWS_CA_BUNDLE must be a PEM file of root certificates (no \
             CERTIFICATE in it), got {key:?}\n"
        )
    );
}

/// The same with the AWS profile's `ca_bundle` (`AWS_CA_BUNDLE` unset),
/// as the AWS SDKs read it; a file that does not load is refused, naming
/// the setting and the file.
#[test]
fn an_aws_profiles_ca_bundle_names_the_roots_of_aws_services_clients() {
    let endpoint = localhost_tls_receiver();
    let dir = tempfile::tempdir().unwrap();
    let profiles = dir.path().join("aws-config");
    let bundle_in_profile = |bundle: &Path| {
        let text = format!("[default]\nca_bundle = {}\n", bundle.display());
        std::fs::write(&profiles, text).unwrap();
    };
    let in_profile = |command: &mut Command| {
        with_aws_test_keys(command)
            .env_remove("AWS_CA_BUNDLE")
            .env("AWS_CONFIG_FILE", &profiles);
    };
    bundle_in_profile(&fixtures().join("test-ca.pem"));
    let queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/hooks";
    let sink = format!("endpoint = {:?}\n", endpoint.url(""));
    let config = sqs_config(dir.path(), queue_url, &sink);
    let node = serve_config(dir.path(), &config, in_profile);
    queue_one_hook(&node, &endpoint, "the endpoint reached over TLS");
    drop(node);

    let key = fixtures().join("localhost-key.pem");
    bundle_in_profile(&key);
    assert_eq!(
        refused_environment(dir.path(), in_profile),
        format!(
            "the AWS profile's ca_bundle must be a PEM file of root certificates (no CERTIFICATE \
             in it), got {key:?}\n"
        )
    );
}

/// A node's config (`shards = 1`, one attempt a row) of source `a`
/// delivering to an SQS sink of `queue_url` signing for us-east-1, the
/// sink's own keys `sink` (lines) added.
fn sqs_config(dir: &Path, queue_url: &str, sink: &str) -> String {
    sqs_config_of(dir, queue_url, &format!("region = \"us-east-1\"\n{sink}"))
}

/// As [`sqs_config`], with no `region` but one `sink` may set.
fn sqs_config_of(dir: &Path, queue_url: &str, sink: &str) -> String {
    format!(
        "data_dir = {:?}\nlisten = \"127.0.0.1:0\"\nshards = 1\n[retry]\nmax_attempts = 1\n\
         [[sources]]\nid = \"a\"\ntenant = \"t\"\n[[sources.sinks]]\ntype = \"sqs\"\n\
         queue_url = {queue_url:?}\n{sink}",
        dir.join("data"),
    )
}

/// `command` with made-up AWS keys in the variables an SQS sink reads by
/// default, and no endpoint or region variable but those the test sets.
fn with_aws_test_keys(command: &mut Command) -> &mut Command {
    for variable in [
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_SQS",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
        "AWS_CONFIG_FILE",
    ] {
        command.env_remove(variable);
    }
    command.env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE").env(
        "AWS_SECRET_ACCESS_KEY",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    )
}

/// Ingests one hook to source `a` of `node`, and waits until `endpoint`
/// (an SQS sink's) has one `SendMessageBatch` request, posted to `/`.
fn queue_one_hook(node: &ServeProcess, endpoint: &Receiver, reached: &str) {
    let reply = Client::connect(node.addr).request("POST", "/v1/sources/a/hooks", &[], b"queued");
    assert_eq!(reply.status, 202);
    wait_until(reached, Duration::from_secs(20), || endpoint.count() == 1);
    let sent = &endpoint.received()[0];
    assert_eq!((sent.method.as_str(), sent.path.as_str()), ("POST", "/"));
    let target = sent.header("x-amz-target");
    assert_eq!(target, Some("AmazonSQS.SendMessageBatch"));
}

/// An SQS sink with no `endpoint` sends where the environment says, as
/// AWS's SDKs do: to `AWS_ENDPOINT_URL_SQS`, else `AWS_ENDPOINT_URL` (a
/// LocalStack or moto server named once for every program of a
/// machine), else its queue URL's origin, which is also where it sends
/// while `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS` is `true`. A variable in
/// use that is no URL is refused, naming it.
#[test]
fn an_sqs_sink_sends_to_the_endpoint_aws_endpoint_url_names() {
    let answer = |_: &goad::demo::receiver::Received| Reply::status(200);
    let [queue, sqs_only, every] = [(); 3].map(|_| Receiver::start(answer).unwrap());
    let cases = [
        (
            "AWS_ENDPOINT_URL_SQS and AWS_ENDPOINT_URL",
            &sqs_only,
            false,
        ),
        ("AWS_ENDPOINT_URL alone", &every, false),
        ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", &queue, true),
    ];
    for (i, (case, reached, ignore)) in cases.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let queue_url = queue.url("/123456789012/hooks");
        let config = sqs_config(dir.path(), &queue_url, "");
        let node = serve_config(dir.path(), &config, |command| {
            with_aws_test_keys(command).env("AWS_ENDPOINT_URL", every.url("/"));
            if i == 0 {
                command.env("AWS_ENDPOINT_URL_SQS", sqs_only.url(""));
            }
            if ignore {
                command.env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true");
            }
        });
        queue_one_hook(&node, reached, case);
        let counts = [&queue, &sqs_only, &every].map(|r| r.count());
        assert_eq!(
            counts.iter().sum::<u64>(),
            i as u64 + 1,
            "{case}: {counts:?}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let config = sqs_config(
        dir.path(),
        "https://sqs.us-east-1.amazonaws.com/1/hooks",
        "",
    );
    std::fs::write(dir.path().join("goad.toml"), config).unwrap();
    let refusal = refused_environment(dir.path(), |command| {
        with_aws_test_keys(command).env("AWS_ENDPOINT_URL_SQS", "localhost:4566");
    });
    assert_eq!(
        refusal,
        "the environment's AWS_ENDPOINT_URL_SQS must be an http:// or https:// URL with a host \
         (an AWS service's endpoint, or a server that speaks its API), as AWS's SDKs read it, \
         got \"localhost:4566\"\n"
    );
}

/// An endpoint the AWS profile names that is no URL is refused as a
/// variable's is, naming the setting, the profile and its file.
#[test]
fn an_aws_profiles_endpoint_that_is_no_url_is_refused_naming_where_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let profiles = dir.path().join("aws-config");
    std::fs::write(&profiles, "[default]\nendpoint_url = localhost:4566\n").unwrap();
    let queue_url = "https://sqs.us-east-1.amazonaws.com/1/hooks";
    let config = sqs_config(dir.path(), queue_url, "");
    std::fs::write(dir.path().join("goad.toml"), config).unwrap();
    let refusal = refused_environment(dir.path(), |command| {
        with_aws_test_keys(command).env("AWS_CONFIG_FILE", &profiles);
    });
    assert_eq!(
        refusal,
        format!(
            "the endpoint_url of AWS profile \"default\" in {} must be an http:// or https:// \
             URL with a host (an AWS service's endpoint, or a server that speaks its API), as \
             AWS's SDKs read it, got \"localhost:4566\"\n",
            profiles.display()
        )
    );
}

/// An SQS sink whose config and queue URL name no region (a LocalStack or
/// moto queue, a VPC endpoint's) signs for the one the environment names,
/// as AWS's SDKs find it: `AWS_REGION`, else `AWS_DEFAULT_REGION`, else
/// the `region` of the profile (`AWS_PROFILE`, else `default`) in the
/// config file. Where none does, or one is no region's name, the node is
/// refused, naming the key or the variable.
#[test]
fn an_sqs_sink_with_no_region_signs_for_the_one_the_environment_names() {
    let answer = |_: &goad::demo::receiver::Received| Reply::status(200);
    let dir = tempfile::tempdir().unwrap();
    let profiles = dir.path().join("aws-config");
    let text = "[default]\nregion = us-west-2\n\n[profile hooks]\nregion = ap-south-1\n";
    std::fs::write(&profiles, text).unwrap();
    let both = [
        ("AWS_REGION", "eu-west-1"),
        ("AWS_DEFAULT_REGION", "us-east-2"),
    ];
    let cases: [(&[(&str, &str)], &str); 4] = [
        (&both, "eu-west-1"),
        (&both[1..], "us-east-2"),
        (&[], "us-west-2"),
        (&[("AWS_PROFILE", "hooks")], "ap-south-1"),
    ];
    for (variables, region) in cases {
        let queue = Receiver::start(answer).unwrap();
        let data = tempfile::tempdir().unwrap();
        let config = sqs_config_of(data.path(), &queue.url("/123456789012/hooks"), "");
        let node = serve_config(data.path(), &config, |command| {
            with_aws_test_keys(command)
                .env("AWS_CONFIG_FILE", &profiles)
                .envs(variables.iter().copied());
        });
        queue_one_hook(&node, &queue, region);
        let signed = queue.received()[0]
            .header("authorization")
            .unwrap()
            .to_string();
        let scope = format!("/{region}/sqs/aws4_request");
        assert!(signed.contains(&scope), "{variables:?}: {signed}");
    }

    let none = |command: &mut Command| {
        with_aws_test_keys(command).env("AWS_CONFIG_FILE", dir.path().join("no-such-file"));
    };
    let config = sqs_config_of(dir.path(), "http://127.0.0.1:1/123456789012/hooks", "");
    std::fs::write(dir.path().join("goad.toml"), config).unwrap();
    assert_eq!(
        refused_environment(dir.path(), none),
        "sources[0].sinks[0].region must be set where the queue URL's host names no AWS region, \
         or named by AWS_REGION, AWS_DEFAULT_REGION or the AWS profile's `region`, got \"absent\"\n"
    );
    let refusal = refused_environment(dir.path(), |command| {
        none(command);
        command.env("AWS_REGION", "EU West");
    });
    assert_eq!(
        refusal,
        "the environment's AWS_REGION must be an AWS region name of lowercase letters, digits \
         and '-', got \"EU West\"\n"
    );
    let claims = "[claim_check]\ns3_bucket = \"claims\"\n";
    let config = sqs_config(dir.path(), "http://127.0.0.1:1/123456789012/hooks", "");
    std::fs::write(dir.path().join("goad.toml"), format!("{config}{claims}")).unwrap();
    assert_eq!(
        refused_environment(dir.path(), none),
        "claim_check.s3_region must be set with claim_check.s3_bucket, or named by AWS_REGION, \
         AWS_DEFAULT_REGION or the AWS profile's `region`, got \"absent\"\n"
    );
}

/// A Pub/Sub sink with no `endpoint` publishes to the emulator
/// `PUBSUB_EMULATOR_HOST` names, as Google's libraries do: over plain
/// HTTP, with no token (its `credentials = "metadata"` unused: a
/// developer's machine has no metadata server). A value that is not
/// `HOST:PORT` is refused, naming the variable.
#[test]
fn a_pubsub_sink_publishes_to_the_emulator_pubsub_emulator_host_names() {
    let emulator = Receiver::start(|_| Reply::status(200)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "data_dir = {:?}\nlisten = \"127.0.0.1:0\"\nshards = 1\n[retry]\nmax_attempts = 1\n\
         [[sources]]\nid = \"a\"\ntenant = \"t\"\n[[sources.sinks]]\ntype = \"pubsub\"\n\
         project = \"p\"\ntopic = \"t\"\ncredentials = \"metadata\"\n",
        dir.path().join("data"),
    );
    let host = emulator.url("").trim_start_matches("http://").to_string();
    let node = serve_config(dir.path(), &config, |command| {
        command.env("PUBSUB_EMULATOR_HOST", &host);
    });
    let reply =
        Client::connect(node.addr).request("POST", "/v1/sources/a/hooks", &[], b"published");
    assert_eq!(reply.status, 202);
    wait_until("published to the emulator", Duration::from_secs(20), || {
        emulator.count() == 1
    });
    let sent = &emulator.received()[0];
    let request = (sent.method.as_str(), sent.path.as_str());
    assert_eq!(request, ("POST", "/v1/projects/p/topics/t:publish"));
    assert_eq!(sent.header("authorization"), None);
    drop(node);

    let refusal = refused_environment(dir.path(), |command| {
        command.env("PUBSUB_EMULATOR_HOST", format!("http://{host}"));
    });
    assert_eq!(
        refusal,
        format!(
            "the environment's PUBSUB_EMULATOR_HOST must be the emulator's HOST:PORT (as \
             localhost:8085), as Google's libraries read it, got \"http://{host}\"\n"
        )
    );
}

/// A `listen` address the node cannot take is refused saying what most
/// often makes it so: a port another process holds, an address no
/// interface of this machine has, a privileged port to a user without
/// the capability (run as `nobody` when the test runs as root).
#[test]
fn a_listen_address_the_node_cannot_take_says_why() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // Its data directory made by whoever runs it.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let held = held.local_addr().unwrap().to_string();
    let first_unprivileged: u16 =
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_unprivileged_port_start")
            .map_or(1024, |text| text.trim().parse().unwrap());
    assert!(
        first_unprivileged > 1,
        "this machine has no privileged port to try"
    );
    let privileged = format!("127.0.0.1:{}", first_unprivileged - 1);
    for (listen, why) in [
        (
            held.as_str(),
            "Address already in use (os error 98) (another process listens there, perhaps a \
             node on the same config: ss -ltnp names it)",
        ),
        (
            "192.0.2.1:7878",
            "Cannot assign requested address (os error 99) (no network interface of this \
             machine has that address: 0.0.0.0 listens on all)",
        ),
        (
            privileged.as_str(),
            "Permission denied (os error 13) (a port below net.ipv4.ip_unprivileged_port_start, \
             1024 by default, takes root or CAP_NET_BIND_SERVICE: under systemd, \
             AmbientCapabilities=CAP_NET_BIND_SERVICE)",
        ),
    ] {
        let config = dir.path().join("goad.toml");
        let data_dir = dir.path().join("data");
        std::fs::write(
            &config,
            format!("listen = {listen:?}\ndata_dir = {data_dir:?}\n"),
        )
        .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_goad"));
        command
            .args(["serve", "--allow-open-admin", "--config"])
            .arg(&config);
        let out = unprivileged(&mut command).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        let logged =
            format!("msg=\"cannot start the node\" error=\"cannot listen on {listen}: {why}\"");
        assert_eq!(stderr.matches(&logged).count(), 1, "{stderr}");
    }
}
