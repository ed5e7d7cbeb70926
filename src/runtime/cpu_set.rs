//! The CPUs a thread may run on. On Linux a new thread inherits the
//! affinity of the thread that starts it, so a worker a pinned shard thread
//! starts (an IO worker replacing one stuck in a sink) would be pinned to
//! the shard's core. The pool records the CPUs of the thread that built it
//! and every worker takes them on as it starts.

/// A thread's allowed CPUs, as `sched_getaffinity(2)` reports them.
#[derive(Clone, Copy)]
pub struct CpuSet {
    #[cfg(target_os = "linux")]
    mask: libc::cpu_set_t,
}

impl CpuSet {
    /// The calling thread's CPUs; `None` where the OS does not say.
    #[cfg(target_os = "linux")]
    pub fn of_current_thread() -> Option<CpuSet> {
        // SAFETY: `cpu_set_t` is plain bits; the call writes at most its size.
        let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: pid 0 is the calling thread; `mask` is `size` bytes.
        let read = unsafe { libc::sched_getaffinity(0, size, &mut mask) };
        (read == 0).then_some(CpuSet { mask })
    }

    #[cfg(not(target_os = "linux"))]
    pub fn of_current_thread() -> Option<CpuSet> {
        None
    }

    /// Lets the calling thread run on these CPUs. A refusal (a container
    /// whose CPUs changed since) leaves the thread as it was, which costs
    /// only placement.
    #[cfg(target_os = "linux")]
    pub fn apply_to_current_thread(&self) {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: pid 0 is the calling thread; `mask` is `size` bytes.
        unsafe { libc::sched_setaffinity(0, size, &self.mask) };
    }

    #[cfg(not(target_os = "linux"))]
    pub fn apply_to_current_thread(&self) {}
}
