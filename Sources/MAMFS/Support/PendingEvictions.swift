import Glibc

/// Counts, per directory, unlinked files whose backing inode is still to be freed (the entry's
/// O_PATH descriptor is closed when the kernel forgets the node), and lets rmdir wait for them.
///
/// Why: while another thread's close is freeing an unlinked child (ext4 truncate and discard),
/// rmdir of the backing directory spins in the kernel's shrink_dcache_parent until that child's
/// dentry is gone; on one CPU that spin took half the daemon's time during `rm -rf`. Waiting
/// here sleeps instead, and the closes run.
final class PendingEvictions: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var counts: [BackingKey: Int] = [:]

    init() {
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func add(directory: BackingKey) {
        pthread_mutex_lock(mutex)
        counts[directory, default: 0] += 1
        pthread_mutex_unlock(mutex)
    }

    func remove(directory: BackingKey) {
        pthread_mutex_lock(mutex)
        if let count = counts[directory] { counts[directory] = count > 1 ? count - 1 : nil }
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }

    /// The children of `directory` pending now.
    func count(directory: BackingKey) -> Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return counts[directory] ?? 0
    }

    /// Waits until no child of `directory` is pending, at most `milliseconds`. A node the kernel
    /// keeps (a client's O_PATH descriptor) only costs the timeout.
    func wait(directory: BackingKey, milliseconds: Int) {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let nanos = Int(deadline.tv_nsec) + milliseconds * 1_000_000
        deadline.tv_sec += nanos / 1_000_000_000
        deadline.tv_nsec = nanos % 1_000_000_000
        pthread_mutex_lock(mutex)
        while counts[directory] != nil {
            if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { break }
        }
        pthread_mutex_unlock(mutex)
    }
}
