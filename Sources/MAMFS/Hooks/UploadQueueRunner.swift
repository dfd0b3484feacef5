import Dispatch
import Foundation
import MAMFileProvider

/// Runs a non-replicated mount's upload queue: changes are recorded in the provider database
/// (`NonReplicatedProvider.record`) by the request that made them, and replayed in order on
/// one serial queue (`work`). While the remote is unreachable the first change waits on the
/// provider's `RetrySchedule` and a retry is scheduled at its due time; the changes behind it
/// wait with it. Objects recorded in this process are found by identity (`locator` given to
/// `record`), others by the paths in the queue.
final class UploadQueueRunner: @unchecked Sendable {
    typealias Locator = @Sendable (_ apply: (_ path: String?, _ otherPath: String?) throws -> Void) throws -> Void

    private let provider: NonReplicatedProvider
    private let schedule: RetrySchedule
    private let log: @Sendable (String) -> Void
    /// The provider work, one change at a time in recording order.
    let work = DispatchQueue(label: "mamfs-provider")

    private let lock = NSLock()
    private var locators: [Int64: Locator] = [:]
    private var retryDue: Double?
    private var stopped = false

    init(provider: NonReplicatedProvider, schedule: RetrySchedule, log: @escaping @Sendable (String) -> Void) {
        self.provider = provider
        self.schedule = schedule
        self.log = log
    }

    /// Records `change` (durably, before returning) and queues its replay.
    func record(_ change: QueuedChange, locator: Locator?) {
        do {
            let sequence = try provider.record(change)
            if let locator {
                lock.lock()
                if locators[sequence] == nil { locators[sequence] = locator }
                lock.unlock()
            }
        } catch {
            log("provider: \(change.path): change not recorded: \(error)")
            return
        }
        work.async { [self] in drain(force: false) }
    }

    /// Replays the waiting changes (call it on `work`). `force`: the first one runs even when
    /// its retry is not due yet.
    func drain(force: Bool) {
        lock.lock()
        let isStopped = stopped
        lock.unlock()
        guard !isStopped else { return }
        let outcome = provider.replayQueue(schedule: schedule, ignoringBackoff: force, locate: { [self] entry, apply in
            lock.lock()
            let locator = locators[entry.sequence]
            lock.unlock()
            guard let locator else { return false }
            try locator(apply)
            return true
        }, log: log)
        let first = (try? provider.queuedEntries().first?.sequence) ?? Int64.max
        lock.lock()
        locators = locators.filter { $0.key >= first }
        lock.unlock()
        if case .waiting(let until) = outcome { scheduleRetry(at: until) }
    }

    /// Replays the queue once the retry is due (one timer for the earliest due time).
    private func scheduleRetry(at due: Double) {
        lock.lock()
        if let current = retryDue, current <= due {
            lock.unlock()
            return
        }
        retryDue = due
        lock.unlock()
        let delay = max(0, due - Date().timeIntervalSince1970)
        work.asyncAfter(deadline: .now() + delay) { [self] in
            lock.lock()
            if retryDue == due { retryDue = nil }
            lock.unlock()
            drain(force: false)
        }
    }

    /// Starts replaying what the queue holds (left by an earlier mount that could not reach
    /// the remote).
    func start() {
        work.async { [self] in drain(force: false) }
    }

    /// Waits for the replay in progress; later retries do nothing (the queue keeps what is left
    /// for the next mount or `mamfs provider sync`).
    func stop() {
        work.sync {
            lock.lock()
            stopped = true
            lock.unlock()
        }
    }
}
