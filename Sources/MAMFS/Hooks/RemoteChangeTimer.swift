import Foundation

/// Calls `tick` every `interval` seconds on a thread of its own until stopped: how a
/// non-replicated mount looks for remote changes by itself (`NonReplicatedMountHooks`).
/// A tick that is still running when the next one is due delays it; `stop` waits for a tick in
/// progress to end.
final class RemoteChangeTimer: @unchecked Sendable {
    private let interval: Double
    private let tick: @Sendable () -> Void
    private let condition = NSCondition()
    private var stopping = false
    private var running = false
    private let finished = DispatchSemaphore(value: 0)

    /// - Parameters:
    ///   - interval: seconds between the end of one tick and the start of the next (> 0).
    ///   - tick: the work.
    init(interval: Double, tick: @escaping @Sendable () -> Void) {
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
        thread.name = "mamfs-discovery"
        thread.start()
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
            while !stopping {
                if !condition.wait(until: deadline) { break }
            }
            let stop = stopping
            condition.unlock()
            if stop { return }
            tick()
        }
    }
}
