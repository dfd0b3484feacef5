import CSystem
import Glibc

/// The number of glibc malloc arenas the mount daemon allocates from.
///
/// glibc gives each new thread an arena of its own, up to eight per CPU, and an arena keeps
/// what its thread freed for that thread alone. The daemon's FUSE workers (up to
/// `MountDaemon.workerThreads`) are started as bursts of parallel requests need them, so with
/// one arena each the daemon's resident memory rose with every burst that woke one more worker,
/// although no more than a CPU's worth of them ever runs at once. Capped at the CPUs, threads
/// share arenas (a busy one sends a thread to the next) and freed memory is reused across them.
enum MallocArenas {
    /// The cap for a machine with `cpus` online CPUs: one arena per CPU, at least two.
    static func cap(cpus: Int) -> Int32 {
        Int32(clamping: max(2, cpus))
    }

    /// Sets the cap (mallopt M_ARENA_MAX) for this process from the online CPUs, unless the
    /// environment chose one (MALLOC_ARENA_MAX, glibc's own tunable, which then applies as set).
    /// Call before the worker threads start.
    /// - Returns: the cap set, or nil when the environment's is kept or glibc refused.
    @discardableResult
    static func limitToCPUs() -> Int32? {
        guard getenv("MALLOC_ARENA_MAX") == nil else { return nil }
        let cap = cap(cpus: sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        return mamfs_set_malloc_arena_max(cap) == 1 ? cap : nil
    }
}
