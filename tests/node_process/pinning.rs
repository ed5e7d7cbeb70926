//! The cores `goad serve`'s shard threads may run on (`pin_shards`).

use super::*;

/// The CPUs a `/proc/.../status` file's `Cpus_allowed_list` names
/// (`0-1`, `0,2-3`), in order.
fn cpus_allowed(status_path: &Path) -> Vec<usize> {
    let status = std::fs::read_to_string(status_path).unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("a Cpus_allowed_list line")
        .trim();
    let ranges = list.split(',').map(|range| match range.split_once('-') {
        Some((from, to)) => from.parse().unwrap()..=to.parse().unwrap(),
        None => range.parse().unwrap()..=range.parse().unwrap(),
    });
    ranges.flatten().collect()
}

/// The CPUs each shard thread of process `pid` may run on, by shard.
fn shard_cpus(pid: u32) -> Vec<Vec<usize>> {
    let mut shards = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap().path();
        // A thread of the node's that ended since the listing (a look-up's).
        let Ok(name) = std::fs::read_to_string(task.join("comm")) else {
            continue;
        };
        if let Some(k) = name.trim().strip_prefix("goad-shard-") {
            shards.push((
                k.parse::<usize>().unwrap(),
                cpus_allowed(&task.join("status")),
            ));
        }
    }
    shards.sort();
    shards.into_iter().map(|(_, cpus)| cpus).collect()
}

/// By default each shard thread is pinned to one core, shard k to the
/// k-th the process may run on; with `pin_shards = false` each may run on
/// any of them, as the kernel says of the node's threads.
#[test]
fn shard_threads_are_pinned_to_a_core_unless_pin_shards_is_off() {
    let ours = cpus_allowed(Path::new("/proc/self/status"));
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let url = receiver.url("/");
    let dir = tempfile::tempdir().unwrap();
    let pinned = serve(dir.path(), &url);
    let expected: Vec<Vec<usize>> = (0..2).map(|k| vec![ours[k % ours.len()]]).collect();
    assert_eq!(shard_cpus(pinned.child.id()), expected);
    drop(pinned);
    let dir = tempfile::tempdir().unwrap();
    let free = serve_configured(dir.path(), &url, "pin_shards = false\n", |_| {});
    assert_eq!(shard_cpus(free.child.id()), vec![ours.clone(), ours]);
}
