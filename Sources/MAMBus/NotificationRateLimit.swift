import Foundation

/// At most one desktop notification per key (a file's path) every `interval` seconds.
/// Not thread-safe: used on the publisher's queue.
struct NotificationRateLimit {
    let interval: TimeInterval
    private var last: [String: Date] = [:]

    init(interval: TimeInterval) {
        self.interval = interval
    }

    /// True (and the key's time is now `now`) when `key` had no notification in the last
    /// `interval` seconds.
    mutating func allows(_ key: String, at now: Date) -> Bool {
        if let previous = last[key], now.timeIntervalSince(previous) < interval { return false }
        if last.count >= 4096 { last = last.filter { now.timeIntervalSince($0.value) < interval } }
        last[key] = now
        return true
    }
}
