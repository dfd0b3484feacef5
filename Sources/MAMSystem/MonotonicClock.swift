import Glibc

/// CLOCK_MONOTONIC in seconds: for deadlines and rate limits, which a change of the wall
/// clock must not move.
public enum MonotonicClock {
    /// Seconds since an arbitrary start (boot), from clock_gettime(CLOCK_MONOTONIC).
    public static func seconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}
