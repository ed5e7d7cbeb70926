//! The process's own gauges under the names every Prometheus client
//! library exports (`process_cpu_seconds_total`, `process_open_fds`,
//! `process_max_fds`, `process_resident_memory_bytes`, …), read from
//! `/proc` at each scrape, so the dashboards and alerts written for them
//! (descriptors near the limit, memory growth) work on a node as they do
//! on any service. Linux only; elsewhere none are exported.

use super::open_files;

pub(super) struct ProcessStats {
    pub cpu_seconds: f64,
    pub open_fds: u64,
    /// The soft open-files limit (none when unlimited).
    pub max_fds: Option<u64>,
    pub virtual_memory_bytes: u64,
    pub resident_memory_bytes: u64,
    /// When the process started, in seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

/// The figures now; `None` where `/proc` cannot be read.
pub(super) fn read() -> Option<ProcessStats> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which may hold spaces and parentheses.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split(' ').collect();
    let field = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse().ok() };
    // SAFETY: sysconf only reads the system's configuration.
    let (ticks_per_s, page_bytes) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let ticks_per_s = u64::try_from(ticks_per_s).ok().filter(|&t| t > 0)? as f64;
    let boot_s: u64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("btime ")?.trim().parse().ok())?;
    // proc(5): utime 14, stime 15, starttime 22 (ticks), vsize 23 (bytes),
    // rss 24 (pages).
    Some(ProcessStats {
        cpu_seconds: (field(14)? + field(15)?) as f64 / ticks_per_s,
        open_fds: std::fs::read_dir("/proc/self/fd").ok()?.count() as u64,
        max_fds: open_files::soft_limit(),
        virtual_memory_bytes: field(23)?,
        resident_memory_bytes: field(24)? * u64::try_from(page_bytes).ok()?,
        start_time_seconds: boot_s as f64 + field(22)? as f64 / ticks_per_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Figures in the ranges this test process must be in.
    #[test]
    fn this_process_reads_as_itself() {
        let stats = read().expect("/proc is there on Linux");
        let now_s = crate::runtime::wall_ms() as f64 / 1_000.0;
        assert!(
            stats.start_time_seconds <= now_s,
            "{}",
            stats.start_time_seconds
        );
        assert!(
            stats.start_time_seconds > now_s - 3_600.0,
            "{}",
            stats.start_time_seconds
        );
        assert!(
            stats.open_fds >= 3,
            "stdin, stdout, stderr: {}",
            stats.open_fds
        );
        assert!(stats.max_fds.is_none_or(|max| max >= stats.open_fds));
        assert!(stats.resident_memory_bytes > 1 << 20);
        assert!(stats.virtual_memory_bytes >= stats.resident_memory_bytes);
        assert!(stats.cpu_seconds >= 0.0);
    }
}
