import Foundation
import Glibc

/// A program started in the background (`spawnProcess`), its stdout and stderr in files, for
/// listeners such as `mamfs events` and `dbus-monitor`; stopped by its PID by `stop()` or deinit.
public final class BackgroundProcess: @unchecked Sendable {
    public let directory: TempDirectory
    private var pid: pid_t
    private var status: Int32?

    /// Starts `executable` with `arguments` and the whole `environment`.
    public init(_ executable: String, _ arguments: [String], environment: [String: String]) throws {
        directory = try TempDirectory(prefix: "mamfs-bg")
        pid = try spawnProcess(executable, arguments, environment: environment, stdin: "/dev/null",
                               stdout: directory.file("stdout"), stderr: directory.file("stderr"))
    }

    deinit { stop() }

    public var out: String { (try? String(contentsOfFile: directory.file("stdout"), encoding: .utf8)) ?? "" }
    public var err: String { (try? String(contentsOfFile: directory.file("stderr"), encoding: .utf8)) ?? "" }

    /// Waits up to `timeout` seconds (nominal, stretched by `Patience`) until `condition`
    /// holds; returns whether it did.
    @discardableResult
    public func wait(timeout: TimeInterval = 10, until condition: (BackgroundProcess) -> Bool) -> Bool {
        Patience.waitUntil(timeout, every: 0.02) { condition(self) }
    }

    /// Waits up to `timeout` seconds (nominal, stretched by `Patience`) for the process to
    /// exit; its exit status, nil when it is still running (it is then left running: `stop()`
    /// ends it).
    public func waitForExit(timeout: TimeInterval = 10) -> Int32? {
        if let status { return status }
        var raw: Int32 = 0
        Patience.waitUntil(timeout, every: 0.02) {
            guard waitpid(pid, &raw, WNOHANG) == pid else { return false }
            status = (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
            pid = 0
            return true
        }
        return status
    }

    /// Sends `signal` (the process keeps running until it reacts).
    public func signal(_ number: Int32) {
        if pid > 0 { kill(pid, number) }
    }

    /// Ends it (SIGTERM, then SIGKILL) unless it exited. Idempotent.
    public func stop() {
        guard pid > 0 else { return }
        stopProcess(pid)
        pid = 0
    }
}
