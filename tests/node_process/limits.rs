//! A node at its limits: a full disk, its open-files limit (raised at
//! start, and connections refused with 503 when it runs out), and its
//! address-space limit.

use super::*;
use common::http::call;
use std::os::unix::process::CommandExt;

/// The file size limit of process `pid` (`RLIMIT_FSIZE`), in bytes.
fn limit_file_size(pid: libc::pid_t, bytes: libc::rlim_t) {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: prlimit(2) reads `limit` and writes nothing back (null old).
    let set = unsafe { libc::prlimit(pid, libc::RLIMIT_FSIZE, &limit, std::ptr::null_mut()) };
    assert_eq!(set, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// A full disk, made real with a file size limit on the node's process
/// (writes past it fail with EFBIG, as they would with ENOSPC): ingest is
/// refused with 503 `store_unavailable`, the node keeps serving (and
/// logs the failing store once, not once per refused batch), and once
/// there is room again it commits, says so, and every hook it
/// acknowledged, before and after, is delivered.
#[test]
fn a_full_disk_refuses_ingest_and_loses_no_acknowledged_hook() {
    const LIMIT_BYTES: libc::rlim_t = 512 * 1024;
    let dir = tempfile::tempdir().unwrap();
    // The sink fails until the disk is full, so committed rows pile up.
    let accepting = Arc::new(AtomicBool::new(false));
    let receiver = {
        let accepting = accepting.clone();
        Receiver::start(move |_| {
            Reply::status(if accepting.load(Ordering::SeqCst) {
                200
            } else {
                503
            })
        })
        .unwrap()
    };
    let node = serve_with(dir.path(), &receiver.url("/hooks"), |command| {
        // SAFETY: only async-signal-safe calls between fork and exec. With
        // SIGXFSZ ignored, a write past the limit fails instead of killing.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
    });
    let pid = node.child.id() as libc::pid_t;
    limit_file_size(pid, LIMIT_BYTES);
    let mut client = Client::connect(node.addr);
    let mut acked = HashSet::new();
    let failing_since = Instant::now();
    let refused = loop {
        let reply = client.request("POST", "/v1/sources/a/hooks", &[], &[b'x'; 1024]);
        match reply.status {
            202 => acked.insert(reply.json()["id"].as_str().unwrap().to_string()),
            _ => break reply,
        };
        assert!(acked.len() < 100_000, "the file size limit never bit");
    };
    assert_eq!(
        (refused.status, refused.error_code().as_str()),
        (503, "store_unavailable"),
        "{}",
        refused.text()
    );
    assert!(!acked.is_empty(), "some hooks fit before the disk filled");
    assert_eq!(get(node.addr, "/healthz").status, 200);
    // Each refused request is a batch that failed (a few fit in pages the
    // failed ones freed); the shard logs the first failure of the run and
    // then one line per 10 s at most.
    let mut refusals = 0;
    for _ in 0..2_000 {
        if refusals == 50 {
            break;
        }
        let reply = client.request("POST", "/v1/sources/a/hooks", &[], &[b'x'; 1024]);
        if reply.status == 202 {
            acked.insert(reply.json()["id"].as_str().unwrap().to_string());
        } else {
            refusals += 1;
        }
    }
    assert_eq!(refusals, 50, "refused requests in 2,000");
    let failing_s = failing_since.elapsed().as_secs();
    let store_errors = node
        .log
        .try_iter()
        .filter(|line| line.contains("level=error msg=\"shard store"))
        .count() as u64;
    let shards = 2;
    assert!(
        (1..=shards * (2 + failing_s / 10)).contains(&store_errors),
        "{store_errors} store failures logged in {failing_s} s"
    );

    limit_file_size(pid, libc::RLIM_INFINITY);
    accepting.store(true, Ordering::SeqCst);
    wait_until("ingest accepted again", Duration::from_secs(30), || {
        let reply = client.request("POST", "/v1/sources/a/hooks", &[], b"after");
        if reply.status == 202 {
            acked.insert(reply.json()["id"].as_str().unwrap().to_string());
        }
        reply.status == 202
    });
    node.logged("shard store writes succeed again");
    wait_all_delivered(&node, &receiver, &acked, Duration::from_secs(120));
    let metrics = get(node.addr, "/metrics").text();
    let failures: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("goad_store_failures_total"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert!(failures >= 1.0, "store failures counted: {failures}");
    eprintln!(
        "disk full after {} acknowledged hooks; {failures} store failures; all delivered",
        acked.len()
    );
    drop(node);
}

/// `serve`, the child's open-files limit (`RLIMIT_NOFILE`) set to `soft`
/// and `hard` before it starts.
fn serve_with_open_files(dir: &Path, soft: libc::rlim_t, hard: libc::rlim_t) -> ServeProcess {
    serve_with(dir, "http://127.0.0.1:9/unused", |command| {
        limited(command, libc::RLIMIT_NOFILE, soft, hard);
    })
}

/// `command`, its child's limit of `resource` set to `soft` and `hard`
/// before it starts.
fn limited(
    command: &mut Command,
    resource: libc::__rlimit_resource_t,
    soft: libc::rlim_t,
    hard: libc::rlim_t,
) -> &mut Command {
    // SAFETY: setrlimit(2) is async-signal-safe; it only reads `limit`.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            match libc::setrlimit(resource, &limit) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        })
    }
}

/// The descriptors `serve`'s config can take: 1,024 connections
/// (`http.max_connections`) and 64 being refused at that cap, 32 attempts
/// (`dispatch.concurrency`), two sinks' pools of 8 idle connections, and
/// the node's own: 16, and 4 for each of its 2 shards.
const NEEDED_FDS: u64 = 1_024 + 64 + 32 + 2 * 8 + 16 + 2 * 4;

/// The soft and hard open-files limits of process `pid`, from /proc.
fn open_files_limits(pid: u32) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("a Max open files line");
    let mut numbers = line.split_whitespace().filter_map(|w| w.parse().ok());
    (numbers.next().unwrap(), numbers.next().unwrap())
}

/// A service manager's usual soft limit of 1,024 (here 256) under a higher
/// hard one: `goad serve` raises its soft limit to the hard one, and then
/// has what its config can take, so it warns of nothing.
#[test]
fn goad_serve_raises_its_open_files_limit_to_the_hard_limit() {
    let dir = tempfile::tempdir().unwrap();
    let mut ours = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) fills `ours`.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut ours) },
        0
    );
    let hard = ours.rlim_max.min(4_096);
    assert!(
        hard > NEEDED_FDS,
        "the test needs a hard limit above a node's needs"
    );
    let node = serve_with_open_files(dir.path(), 256, hard);
    assert_eq!(open_files_limits(node.child.id()), (hard, hard));
    let raised = node
        .started
        .iter()
        .find(|l| l.contains("open-files limit raised"));
    let raised = raised.expect("the raise logged");
    assert!(
        raised.ends_with(&format!(" from=256 to={hard}")),
        "{raised}"
    );
    let warned = node.started.iter().find(|l| l.contains("level=warn"));
    assert_eq!(warned, None, "no warning with the limit raised");
}

/// A node whose limit covers its config warns of nothing as it starts,
/// nor after a reload adding 300 sources whose sinks post to the host the
/// others post to (they share its pool of connections); a reload that
/// raises `dispatch.concurrency` past what the limit covers is applied, and
/// warned of with what the new config needs.
#[test]
fn a_reload_that_needs_more_descriptors_than_the_limit_is_warned_of() {
    let dir = tempfile::tempdir().unwrap();
    let limit = NEEDED_FDS + 20;
    let node = serve_with_open_files(dir.path(), limit, limit);
    let warned = node.started.iter().find(|l| l.contains("level=warn"));
    assert_eq!(warned, None, "nothing to warn of at start");
    let config = dir.path().join("goad.toml");
    let mut file = std::fs::read_to_string(&config).unwrap();
    for i in 0..300 {
        let source = format!("[[sources]]\nid = \"more{i}\"\ntenant = \"t{i}\"\n[[sources.sinks]]\ntype = \"http\"\nurl = \"http://127.0.0.1:9/more/{i}\"\n");
        file.push_str(&source);
    }
    std::fs::write(&config, &file).unwrap();
    let reply = call(node.addr, "POST", "/v1/reload", &[], b"");
    assert_eq!(reply.status, 200, "{}", reply.text());
    let lines = node.lines_up_to("config reloaded");
    let warned = lines.iter().find(|l| l.contains("level=warn"));
    assert_eq!(
        warned, None,
        "300 more sinks of one host: nothing to warn of"
    );
    let raised = file.replace("[dispatch]\n", "[dispatch]\nconcurrency = 200\n");
    std::fs::write(&config, raised).unwrap();
    let reply = call(node.addr, "POST", "/v1/reload", &[], b"");
    assert_eq!(
        (reply.status, reply.json()["applied"].to_string()),
        (200, "[\"dispatch.concurrency\"]".into())
    );
    let warned = node.logged("the open-files limit is below what http.max_connections, dispatch.concurrency and the sinks' kept-alive connections can take: past it, new connections are refused with 503 (raise LimitNOFILE or ulimit -n, or lower http.max_connections)");
    // 200 attempts, and the pool the 302 sinks share keeps 200 idle.
    let needed = NEEDED_FDS - 32 - 2 * 8 + 200 + 200;
    let expected = format!("open_files_limit={limit} needed={needed}");
    assert!(warned.contains(&expected), "{warned}");
}

/// A node whose descriptors run out (a limit of 128, which the node warns
/// of as it starts) answers each connection it cannot take 503
/// `too_many_connections` at once, saying why, instead of leaving it
/// unanswered in the listener's backlog; once connections close, it
/// serves new ones.
#[test]
fn a_node_out_of_file_descriptors_refuses_connections_with_503_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let node = serve_with_open_files(dir.path(), 128, 128);
    let warned = node
        .started
        .iter()
        .find(|l| l.contains("the open-files limit is below"));
    let warned = warned.expect("the node warned of its limit as it started");
    let expected = format!("open_files_limit=128 needed={NEEDED_FDS}");
    assert!(warned.contains(&expected), "{warned}");
    // More connections than descriptors: those past the limit are refused.
    let held: Vec<std::net::TcpStream> = (0..150)
        .map(|_| std::net::TcpStream::connect(node.addr).unwrap())
        .collect();
    // Refused without a request (which, unread, could reset the answer).
    let refused = Client::connect(node.addr)
        .reply()
        .expect("an answer, not a connection left waiting");
    assert_eq!(
        (refused.status, refused.error_code().as_str()),
        (503, "too_many_connections"),
        "{}",
        refused.text()
    );
    let message = refused.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with("the node is out of file descriptors"),
        "{message}"
    );
    let logged = node.logged("out of file descriptors: new connections are refused with 503 until some close (raise the open-files limit, or lower http.max_connections)");
    assert!(logged.contains("open_files_limit=128"), "{logged}");
    drop(held);
    let mut tries = 0;
    wait_until("a new connection served", Duration::from_secs(30), || {
        tries += 1;
        get(node.addr, "/healthz").status == 200
    });
    // Every connection made was taken or refused for want of descriptors:
    // the 150, the refused one, the tries and this scrape.
    let metrics = get(node.addr, "/metrics").text();
    let value = |series: &str| -> f64 {
        let line = metrics.lines().find(|l| l.starts_with(series));
        line.and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap()
    };
    let taken = value("goad_http_connections_total ");
    let refused = value("goad_http_connections_refused_total{reason=\"file_descriptors\"} ");
    assert!(refused >= 1.0, "{metrics}");
    assert_eq!(taken + refused, f64::from(150 + 1 + tries + 1), "{metrics}");
    assert_eq!(
        value("goad_http_connections_refused_total{reason=\"max_connections\"} "),
        0.0
    );
}

/// A node whose shards' maps do not fit its address-space limit (`ulimit
/// -v`: 8 GB here, for two shards of the default 64 GiB) stops at once
/// saying so and what to change, where LMDB said "Cannot allocate memory"
/// of a machine with memory to spare.
#[test]
fn shards_that_do_not_fit_the_address_space_limit_are_refused_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("goad.toml");
    let data_dir = dir.path().join("data");
    std::fs::write(
        &config,
        format!("listen = \"127.0.0.1:0\"\nshards = 2\ndata_dir = {data_dir:?}\n"),
    )
    .unwrap();
    let limit_bytes = 8_000_000_000;
    let mut command = Command::new(env!("CARGO_BIN_EXE_goad"));
    command.args(["serve", "--config"]).arg(&config);
    let out = limited(&mut command, libc::RLIMIT_AS, limit_bytes, limit_bytes)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let refused = format!(
        "error=\"cannot open the engine: store: {}: its 2 shards map 137438953472 bytes of \
         address space (2 × max_shard_bytes 68719476736), more than this process may map (its \
         address-space limit, ulimit -v or systemd's LimitAS=: 8000000000 bytes): lower \
         max_shard_bytes, or raise the limit\"",
        data_dir.display()
    );
    assert_eq!(stderr.matches(&refused).count(), 1, "{stderr}");
}
