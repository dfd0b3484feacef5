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

    /// Waits up to `timeout` seconds until `condition` holds; returns whether it did.
    @discardableResult
    public func wait(timeout: TimeInterval = 10, until condition: (BackgroundProcess) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition(self) { return true }
            usleep(20_000)
        }
        return condition(self)
    }

    /// Waits up to `timeout` seconds for the process to exit; its exit status, nil when it is
    /// still running (it is then left running: `stop()` ends it).
    public func waitForExit(timeout: TimeInterval = 10) -> Int32? {
        if let status { return status }
        let deadline = Date().addingTimeInterval(timeout)
        var raw: Int32 = 0
        while Date() < deadline {
            if waitpid(pid, &raw, WNOHANG) == pid {
                status = (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
                pid = 0
                return status
            }
            usleep(20_000)
        }
        return nil
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
