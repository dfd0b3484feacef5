import Dispatch
import Foundation

/// Jobs run beside the calling thread, at most `width` at once and at most `backlog` submitted
/// and not yet finished, each producing one output the caller collects on its own thread
/// (`take`, `finish`). The replicated pass downloads and encrypts files this way while it goes
/// on listing, staging and committing.
///
/// One caller submits and collects; the jobs run on an `OperationQueue` of `width` operations.
final class BoundedJobs<Output: Sendable>: @unchecked Sendable {
    private let queue = OperationQueue()
    private let backlog: DispatchSemaphore
    private let lock = NSLock()
    private var finished: [Output] = []

    /// - Parameters:
    ///   - width: jobs running at once (at least 1).
    ///   - backlog: jobs submitted and not yet finished, at most (at least `width`); `submit`
    ///     waits while there are this many.
    ///   - label: the operation queue's name.
    init(width: Int, backlog: Int, label: String) {
        queue.maxConcurrentOperationCount = max(1, width)
        queue.name = label
        self.backlog = DispatchSemaphore(value: max(backlog, width, 1))
    }

    /// Queues `job`; waits first while `backlog` jobs are queued or running.
    func submit(_ job: @escaping @Sendable () -> Output) {
        backlog.wait()
        queue.addOperation { [self] in
            let output = job()
            lock.withLock { finished.append(output) }
            backlog.signal()
        }
    }

    /// The outputs of the jobs that finished since the last call, in the order they finished.
    func take() -> [Output] {
        lock.withLock {
            defer { finished = [] }
            return finished
        }
    }

    /// Waits until every submitted job has finished, then `take()`.
    func finish() -> [Output] {
        queue.waitUntilAllOperationsAreFinished()
        return take()
    }
}
