/// At most one daemon log line per key every `interval` seconds, counting the ones held back.
///
/// Lines a client can cause at will (a read of a tampered file, a refused write, a refused
/// control request) would otherwise grow the log by a line per request: a loop in one shell
/// filled it with tens of thousands. Keys name the kind of line and its object (a backing
/// path, a nodeid, a uid), so one object's repeats do not hide another's first line.
struct LogRateLimit: Sendable {
    /// The daemon's interval: a minute.
    static let standardInterval = 60.0
    /// Seconds between two lines of one key.
    let interval: Double
    /// Keys remembered at most; past it, keys whose interval ended are forgotten (then all).
    let capacity: Int
    private var keys: [String: (last: Double, heldBack: Int)] = [:]

    init(interval: Double = standardInterval, capacity: Int = 4096) {
        self.interval = interval
        self.capacity = capacity
    }

    /// Whether a line of `key` may be written at `now` (monotonic seconds).
    /// - Returns: nil to hold it back (it is counted); otherwise the number of lines of `key`
    ///   held back since the last one written.
    mutating func admit(_ key: String, now: Double) -> Int? {
        if let known = keys[key], now - known.last < interval {
            keys[key] = (known.last, known.heldBack + 1)
            return nil
        }
        let heldBack = keys[key]?.heldBack ?? 0
        if keys[key] == nil && keys.count >= capacity {
            keys = keys.filter { now - $0.value.last < interval }
            if keys.count >= capacity { keys.removeAll() }
        }
        keys[key] = (now, 0)
        return heldBack
    }
}
