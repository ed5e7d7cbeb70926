//! Where an SQS sink whose config names no `endpoint` sends: where the
//! AWS profile says, as AWS's SDKs read it. Run in a child process: the
//! profile's variables are the process's, and the other tests' sinks
//! would read them too.

use super::*;

const CHILD_DIR: &str = "GOAD_TEST_ENDPOINT_DIR";
const CHILD_QUEUE: &str = "GOAD_TEST_ENDPOINT_QUEUE";

/// The child's role: one hook to an SQS sink for `queue_url`, its config
/// naming no endpoint, delivered within 30 s. Runs only when the parent
/// test starts this binary.
#[test]
fn profile_endpoint_child_role() {
    let (Ok(dir), Ok(queue_url)) = (std::env::var(CHILD_DIR), std::env::var(CHILD_QUEUE)) else {
        return;
    };
    let c = stripe_to(std::path::Path::new(&dir), sqs_sink(&queue_url));
    let engine = Engine::open(c).unwrap();
    engine
        .commit(NewHook::new("stripe", "by the profile's endpoint"))
        .unwrap();
    wait_until("the hook delivered", Duration::from_secs(30), || {
        rows(&engine).is_empty()
    });
}

/// The profile `AWS_PROFILE` names (in `AWS_CONFIG_FILE`) names an
/// `endpoint_url` for every service, unreachable, and moto's for SQS in
/// its `services` section: a sink for AWS's own URL of the queue sends
/// to moto, the service's own endpoint before the profile's.
#[test]
fn an_sqs_sink_sends_where_the_aws_profile_names_sqs_endpoint() {
    let moto = Moto::start();
    let moto_queue_url = moto.create_queue("profiled");
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("config");
    std::fs::write(
        &config_file,
        format!(
            "[default]\nregion = eu-west-1\n\n\
             [profile local]\nservices = moto\nendpoint_url = http://127.0.0.1:9/\n\n\
             [services moto]\ns3 =\n  endpoint_url = http://127.0.0.1:9/\n\
             sqs =\n  endpoint_url = {}/\n",
            moto.url
        ),
    )
    .unwrap();
    let queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/profiled";
    let env = [
        (CHILD_DIR, dir.path().join("data").display().to_string()),
        (CHILD_QUEUE, queue_url.to_string()),
        ("AWS_CONFIG_FILE", config_file.display().to_string()),
        ("AWS_PROFILE", "local".to_string()),
        // Empty, they name no endpoint, whatever the tests' process has.
        ("AWS_ENDPOINT_URL_SQS", String::new()),
        ("AWS_ENDPOINT_URL", String::new()),
        ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", String::new()),
    ];
    run_role("endpoints::profile_endpoint_child_role", &env);
    let messages = moto.receive(&moto_queue_url);
    let bodies: Vec<Vec<u8>> = (messages.iter())
        .map(|m| {
            let envelope: Value = serde_json::from_str(m["Body"].as_str().unwrap()).unwrap();
            let inline = envelope["body_base64"].as_str().unwrap();
            base64::engine::general_purpose::STANDARD
                .decode(inline)
                .unwrap()
        })
        .collect();
    assert_eq!(bodies, [b"by the profile's endpoint"]);
}
