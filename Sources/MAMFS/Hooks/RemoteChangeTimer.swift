import Foundation

/// Calls `tick` on a thread of its own every `interval` seconds, and soon after `schedule()`,
/// until stopped: the background passes of a provider mount (a replicated mount's sync passes,
/// a non-replicated mount's looks for remote changes). A tick that is still running when the
/// next one is due delays it; `stop` waits for a tick in progress to end.
final class RemoteChangeTimer: @unchecked Sendable {
    private let interval: Double
    private let tick: @Sendable (_ scheduled: Bool) -> Void
    private let condition = NSCondition()
    private var stopping = false
    private var pending = false
    private var running = false
    private let finished = DispatchSemaphore(value: 0)

    /// - Parameters:
    ///   - interval: seconds between the end of one tick and the start of the next (> 0).
    ///   - tick: the work; `scheduled` is true when `schedule()` asked for it.
    init(interval: Double, tick: @escaping @Sendable (_ scheduled: Bool) -> Void) {
        self.interval = interval
        self.tick = tick
    }

    /// Starts the thread (once).
    func start() {
        condition.lock()
        guard !running, !stopping else { condition.unlock(); return }
        running = true
        condition.unlock()
        let thread = Thread { [self] in self.loop() }
        thread.name = "mamfs-sync"
        thread.start()
    }

    /// Asks for a tick soon (at once when none is running).
    func schedule() {
        condition.lock()
        pending = true
        condition.signal()
        condition.unlock()
    }

    /// Stops the thread, waiting for a tick in progress.
    func stop() {
        condition.lock()
        let wasRunning = running
        stopping = true
        condition.signal()
        condition.unlock()
        if wasRunning { finished.wait() }
    }

    private func loop() {
        defer { finished.signal() }
        while true {
            condition.lock()
            let deadline = Date(timeIntervalSinceNow: interval)
            while !stopping && !pending {
                if !condition.wait(until: deadline) { break }
            }
            let stop = stopping
            let scheduled = pending
            pending = false
            condition.unlock()
            if stop { return }
            tick(scheduled)
        }
    }
}
