import CFuse
import Dispatch
import Glibc
import Synchronization

/// Tells the kernel to drop a name -> nodeid entry of a directory (libfuse's
/// `fuse_lowlevel_notify_inval_entry`, FUSE_NOTIFY_INVAL_ENTRY), so that its next use looks
/// the name up again.
///
/// Sent from a serial queue of its own, never from the thread serving a request: the kernel
/// takes the directory's lock to drop the name, and a request holding that lock (an unlink of
/// the same name, waiting for the file's lock that the current request's caller holds) may be
/// waiting on the very request that asked. `settle` waits for the invalidations asked for so
/// far, but only for a bounded time, for the same reason.
final class EntryInvalidator: @unchecked Sendable {
    private let session: OpaquePointer
    private let queue = DispatchQueue(label: "mamfs-entry-invalidation")
    private let pending = DispatchGroup()
    private let stopped = Atomic<Bool>(false)

    /// `session`: the FUSE session, which must outlive `stop()`.
    init(session: OpaquePointer) {
        self.session = session
    }

    /// Queues the invalidation of `name` in the directory `parent` (a nodeid); returns at once.
    /// Errors are not reported: ENOENT (the kernel has no such entry, or no such directory) is
    /// the common one, and there is nothing to invalidate then.
    func invalidate(parent: UInt64, name: String) {
        guard !stopped.load(ordering: .acquiring) else { return }
        pending.enter()
        queue.async { [self] in
            defer { pending.leave() }
            guard !stopped.load(ordering: .acquiring) else { return }
            name.withCString { _ = fuse_lowlevel_notify_inval_entry(session, parent, $0, strlen($0)) }
        }
    }

    /// Waits until the invalidations queued so far were sent, for at most `seconds`.
    /// - Returns: false when the time ran out first.
    @discardableResult
    func settle(within seconds: Double) -> Bool {
        pending.wait(timeout: .now() + seconds) == .success
    }

    /// No more invalidations are sent; waits (at most `seconds`) for the one being sent.
    func stop(within seconds: Double = 2) {
        stopped.store(true, ordering: .releasing)
        settle(within: seconds)
    }
}
