import Foundation
import Glibc

/// Waiting for processes that are not our children to exit (the daemons `mamfs unmount` stops).
enum ProcessExit {
    /// How long an exited process may stay a zombie before it counts as gone: its parent (init
    /// for a mount daemon) reaps it on its own schedule, and a parent that never does must not
    /// make the wait fail.
    static let reapGrace: Double = 5

    /// Waits until every one of `pids` is gone (kill(pid, 0) fails with ESRCH), at most
    /// `timeout` seconds. A process that has exited but is not reaped yet (a zombie) counts as
    /// exited; the wait goes on for it up to `reapGrace` seconds (within `timeout`) so that it
    /// is gone, not only dead, when this returns.
    /// - Returns: the PIDs still running (not zombies) when the time was up; empty when all exited.
    static func wait(for pids: [pid_t], timeout: Double) -> [pid_t] {
        let start = Date()
        var exitedAt: Date?
        while true {
            let present = pids.filter { !isGone($0) }
            let running = present.filter { !isZombie($0) }
            if present.isEmpty { return [] }
            let elapsed = Date().timeIntervalSince(start)
            if running.isEmpty {
                let since = exitedAt ?? Date()
                exitedAt = since
                if Date().timeIntervalSince(since) >= reapGrace || elapsed >= timeout { return [] }
            } else if elapsed >= timeout {
                return running
            }
            usleep(10_000)
        }
    }

    /// True when no process `pid` exists (not even a zombie).
    static func isGone(_ pid: pid_t) -> Bool {
        kill(pid, 0) != 0 && errno == ESRCH
    }

    /// True when `pid` has exited and waits to be reaped (state Z or X in /proc/PID/stat).
    static func isZombie(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        let state = stat[stat.index(after: close)...].drop { $0 == " " }.first
        return state == "Z" || state == "X"
    }
}
