import Foundation
import Glibc

/// How long a test waits for something that should happen by itself (an upload after close, a
/// sync pass, a daemon's reply, a descriptor count settling, a listener's line).
///
/// Such a wait is a bound against a hang, never a measurement: it returns as soon as its
/// condition holds, so a passing run takes no longer however generous the bound. Every such
/// bound in the tests is nominal seconds stretched by `factor`, so a slow or loaded machine
/// (CI beside four other test shards) fails nothing that would pass on an idle one. A wait
/// that expects a timeout (a condition that must not happen) does not use this.
public enum Patience {
    /// The stretch: `MAMFS_TEST_PATIENCE` (a number from 1 to 100), 4 when it is unset or not
    /// such a number.
    public static let factor: Double = {
        guard let text = ProcessInfo.processInfo.environment["MAMFS_TEST_PATIENCE"],
              let value = Double(text), value >= 1, value <= 100 else { return 4 }
        return value
    }()

    /// `seconds` (nominal) stretched by `factor`, in seconds.
    public static func bound(_ seconds: TimeInterval) -> TimeInterval { seconds * factor }

    /// A `DispatchTime` `bound(seconds)` from now, for semaphore and group waits.
    public static func deadline(_ seconds: TimeInterval) -> DispatchTime { .now() + bound(seconds) }

    /// Checks `condition` every `interval` seconds until it holds or `bound(seconds)` pass,
    /// then once more; returns whether it held.
    @discardableResult
    public static func waitUntil(_ seconds: TimeInterval, every interval: TimeInterval = 0.1,
                                 _ condition: () throws -> Bool) rethrows -> Bool {
        let end = Date().addingTimeInterval(bound(seconds))
        while Date() < end {
            if try condition() { return true }
            usleep(useconds_t(interval * 1_000_000))
        }
        return try condition()
    }
}
