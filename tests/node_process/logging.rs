//! What a node logs: rows dead-lettered per key with the latest failure,
//! and the data directory it opened.

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
        let mut child = Command::new(env!("CARGO_BIN_EXE_goad"))
            .args(["serve", "--config"])
            .arg(&config)
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = lines_of(child.stderr.take().unwrap());
        let mut before_ready = Vec::new();
        let ready = loop {
            let line = log
                .recv_timeout(Duration::from_secs(30))
                .expect("the node got ready");
            if line.contains("msg=\"engine ready\"") {
                break line;
            }
            before_ready.push(line);
        };
        child.kill().unwrap();
        child.wait().unwrap();
        let said_made = before_ready.iter().any(|line| line.contains(&made));
        (ready, said_made)
    };
    let (ready, said_made) = start();
    let expected = format!("data_dir={}", data_dir.display());
    assert!(ready.contains(&expected), "{ready}");
    assert!(said_made, "the first start says it made the stores");
    assert!(data_dir.is_dir());
    let (_, said_made) = start();
    assert!(!said_made, "a start on stores does not");
}
