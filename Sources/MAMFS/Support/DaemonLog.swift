import CFuse
import MAMProtection
import MAMSystem
import Synchronization

/// The mount daemon's diagnostic lines ("mamfs: ..." on stderr, or in the mount's `-o log=FILE`)
/// with every value of the state's scrub list (`mamfs scrub`: UPNs, paths, any text) replaced by
/// `Scrubber.placeholder`, as `mamfs diagnose` replaces them.
///
/// The list is read when the mount starts and again whenever the state changes (`update`), so a
/// value added while mounted is scrubbed from the next line on. A list that cannot be read keeps
/// the one read before (a value is never unscrubbed by a failed read).
final class DaemonLog: Sendable {
    private let scrubber = Mutex(Scrubber(values: []))
    private let limit = Mutex(LogRateLimit())

    init() {}

    /// Reads the scrub list of `context`'s state; on failure keeps the current list and says so
    /// once in the log.
    func update(from context: ProtectionContext) {
        do {
            let values = try context.state.scrubValues()
            scrubber.withLock { $0 = Scrubber(values: values) }
        } catch {
            write("the scrub list cannot be read (\(error)); the previous one stays in use")
        }
    }

    /// `write(message)` unless a line of `key` was written in the last `LogRateLimit.interval`
    /// seconds (then it is only counted); a line written after some were held back says how
    /// many. For lines a client can cause at will.
    func write(_ message: String, limitedBy key: String) {
        guard let heldBack = limit.withLock({ $0.admit(key, now: MonotonicClock.seconds()) }) else { return }
        write(heldBack == 0 ? message : "\(message) (\(heldBack) more like it since the last one were not logged)")
    }

    /// Writes one line: `message` with the scrub values replaced and its control and invisible
    /// characters escaped (`InputQuote.escaped`): a backing file's name cannot forge a line.
    func write(_ message: String) {
        let scrubber = scrubber.withLock { $0 }
        mamfs_log_line("mamfs: \(InputQuote.escaped(scrubber.values.isEmpty ? message : scrubber.scrub(message)))\n")
    }
}
