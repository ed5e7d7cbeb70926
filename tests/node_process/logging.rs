//! What a node logs: rows dead-lettered per key with the latest failure,
//! the data directory it opened, and an admin API open to the network.

use super::*;

/// Rows a sink's answers dead-letter are logged per sink key, at most a
/// line every 10 s with how many and the latest failure (the receiver's
/// answer quoted), not a line per row: three refused hooks add up to three
/// rows over the lines, all of source `a`'s one sink.
#[test]
fn rows_dead_lettered_by_a_sink_are_logged_per_key_with_its_latest_failure() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(400).with_body("unknown event\n")).unwrap();
    let node = serve(dir.path(), &receiver.url("/hooks"));
    let mut client = Client::connect(node.addr);
    for n in 0..3 {
        let reply = client.request(
            "POST",
            "/v1/sources/a/hooks",
            &[],
            format!("{n}").as_bytes(),
        );
        assert_eq!(reply.status, 202);
    }
    let (mut rows, mut lines) = (0, 0);
    while rows < 3 {
        let line = node.logged("rows dead-lettered by their sink's answers");
        lines += 1;
        let (fields, count) = line
            .split_once(" rows=")
            .unwrap_or_else(|| panic!("no count in {line}"));
        assert!(
            fields.ends_with("tenant=t1 source=a sink_index=0 sink_type=http"),
            "{line}"
        );
        let (count, rest) = count.split_once(' ').unwrap();
        rows += count.parse::<u64>().unwrap();
        assert_eq!(
            rest, "latest_failure=\"permanent: HTTP status 400: unknown event\"",
            "{line}"
        );
    }
    assert_eq!(rows, 3);
    // The first line comes at once; the rows refused within the next 10 s
    // share the second.
    assert!(lines <= 2, "{lines} lines for 3 rows");
}

/// A relative `data_dir` is the working directory's (not the config
/// file's), and the node logs it as the absolute path it opened; the
/// first start says it made the stores (a mistyped path shows as such),
/// the next does not.
#[test]
fn the_node_logs_the_data_directory_it_opened() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("elsewhere.toml");
    std::fs::write(
        &config,
        "data_dir = \"relative-data\"\nlisten = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let data_dir = dir.path().join("relative-data");
    let made = format!(
        "msg=\"the data directory held no stores: made new, empty ones\" data_dir={} shards=",
        data_dir.display()
    );
    let start = || {
        let mut logged = log_until_ready(&config, &[], dir.path());
        let ready = logged.pop().expect("the ready line");
        (ready, logged.iter().any(|line| line.contains(&made)))
    };
    let (ready, said_made) = start();
    let expected = format!("data_dir={}", data_dir.display());
    assert!(ready.contains(&expected), "{ready}");
    assert!(said_made, "the first start says it made the stores");
    assert!(data_dir.is_dir());
    let (_, said_made) = start();
    assert!(!said_made, "a start on stores does not");
}

/// A node told to serve its admin API without a token beyond loopback
/// (`--allow-open-admin`) says so as it starts; one on loopback does not.
#[test]
fn a_node_serving_its_admin_api_open_beyond_loopback_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let open = "the admin API is open";
    for (listen, warned) in [("0.0.0.0:0", true), ("127.0.0.1:0", false)] {
        let config = dir.path().join("goad.toml");
        let data_dir = dir.path().join(format!("data-{warned}"));
        let text = format!("data_dir = {data_dir:?}\nlisten = {listen:?}\n");
        std::fs::write(&config, text).unwrap();
        let logged = log_until_ready(&config, &["--allow-open-admin"], dir.path());
        let said = logged.iter().find(|line| line.contains(open));
        assert_eq!(said.is_some(), warned, "{listen}: {logged:?}");
        if let Some(line) = said {
            assert!(
                line.contains("level=warn") && line.contains("--allow-open-admin"),
                "{line}"
            );
        }
    }
}

/// The lines `goad serve --config <config> <args>`, run in `cwd`, logs
/// up to and including its `engine ready`; the node is killed then.
fn log_until_ready(config: &Path, args: &[&str], cwd: &Path) -> Vec<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_goad"))
        .args(["serve", "--config"])
        .arg(config)
        .args(args)
        .current_dir(cwd)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = lines_of(child.stderr.take().unwrap());
    let mut logged = Vec::new();
    loop {
        let line = log
            .recv_timeout(Duration::from_secs(30))
            .expect("the node got ready");
        let ready = line.contains("msg=\"engine ready\"");
        logged.push(line);
        if ready {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    logged
}
