import Foundation
import MAMFileProvider

/// The rate and time left of a sync pass, from its `SyncProgress` reports, and the throttle of
/// its progress output. The clock is injected (seconds, monotonic) so the arithmetic can be
/// checked without waiting.
struct SyncProgressMeter {
    /// One report with its rate and time left.
    struct Reading: Equatable {
        var progress: SyncProgress
        /// Content bytes per second over the last `window` seconds (0 until time has passed).
        var bytesPerSecond: Double
        /// Items per second over the same window.
        var itemsPerSecond: Double
        /// Seconds left at the current rate: bytes left / byte rate while bytes are left,
        /// else items left / item rate; 0 when nothing is left; nil when the rate is 0.
        var etaSeconds: Double?
        /// Seconds since the meter was made.
        var elapsed: Double
    }

    private struct Sample {
        var time: Double
        var items: Int
        var bytes: Int64
    }

    /// Seconds of history the rates are taken over.
    let window: Double
    /// Least seconds between two outputs (`shouldEmit`).
    let interval: Double
    private let clock: () -> Double
    private let start: Double
    /// Oldest first; `samples[0]` is the last one at or before the window's start.
    private var samples: [Sample]
    private var lastEmit: Double?

    /// - Parameters:
    ///   - window: seconds the rates are averaged over.
    ///   - interval: least seconds between two outputs (4 a second by default).
    ///   - clock: seconds on a monotonic clock; read now for the start (no items, no bytes).
    init(window: Double = 5, interval: Double = 0.25, clock: @escaping () -> Double = { ProcessInfo.processInfo.systemUptime }) {
        self.window = window
        self.interval = interval
        self.clock = clock
        start = clock()
        samples = [Sample(time: start, items: 0, bytes: 0)]
    }

    /// Records `progress` at the clock's time and returns it with the rates and time left.
    mutating func record(_ progress: SyncProgress) -> Reading {
        let now = clock()
        let sample = Sample(time: now, items: progress.done, bytes: progress.bytesDone)
        // Samples closer than a twentieth of a second replace each other: the history stays
        // small however many items a second go by.
        if samples.count > 1, let last = samples.last, now - last.time < 0.05 {
            samples[samples.count - 1] = sample
        } else {
            samples.append(sample)
        }
        while samples.count > 2 && samples[1].time <= now - window { samples.removeFirst() }
        let oldest = samples[0]
        let span = now - oldest.time
        let bytesPerSecond = span > 0 ? Double(progress.bytesDone - oldest.bytes) / span : 0
        let itemsPerSecond = span > 0 ? Double(progress.done - oldest.items) / span : 0
        let bytesLeft = max(0, progress.bytesTotal - progress.bytesDone)
        let itemsLeft = max(0, progress.total - progress.done)
        let eta: Double?
        if bytesLeft > 0 {
            eta = bytesPerSecond > 0 ? Double(bytesLeft) / bytesPerSecond : nil
        } else if itemsLeft > 0 {
            eta = itemsPerSecond > 0 ? Double(itemsLeft) / itemsPerSecond : nil
        } else {
            eta = 0
        }
        return Reading(progress: progress, bytesPerSecond: bytesPerSecond, itemsPerSecond: itemsPerSecond,
                       etaSeconds: eta, elapsed: now - start)
    }

    /// True for the first call and then once `interval` seconds have passed since the last
    /// true (the output is rate-limited; the last report is written regardless, by the caller).
    mutating func shouldEmit() -> Bool {
        let now = clock()
        if let lastEmit, now - lastEmit < interval { return false }
        lastEmit = now
        return true
    }
}
