import Foundation
import Glibc
import MAMProtection

/// Mount points of this namespace, unmounting, and the `mamfs mount` daemons behind them: what
/// every test that mounts needs in its teardown, so a failed test never leaves a mount behind.
public enum FuseMounts {
    /// True when the mount table `table` (a mountinfo file of proc(5); this process's by
    /// default) lists `mountpoint` (as given: absolute, resolved); false when it cannot be read.
    public static func isMounted(_ mountpoint: String, in table: String = MountInfo.procPath) -> Bool {
        guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { return false }
        return MountInfo(parsing: text).entries.contains { $0.mountPoint == mountpoint }
    }

    /// `path` with the symbolic links of its parent resolved (as the kernel lists mount
    /// points). The path itself is never looked at: on a hung or dead FUSE mount that could
    /// block or fail.
    static func kernelPath(_ path: String) -> String {
        let url = URL(fileURLWithPath: path)
        guard let resolved = realpath(url.deletingLastPathComponent().path, nil) else { return path }
        defer { free(resolved) }
        let parent = String(cString: resolved)
        return (parent == "/" ? "" : parent) + "/" + url.lastPathComponent
    }

    /// Unmounts `path` (symbolic links resolved) until it is gone: `fusermount3 -u` (each try at most 20 s), every
    /// 200 ms, lazily (`-uz`) from the 11th try on; at most 20 tries (about 4 s plus the tries).
    /// Does nothing when nothing is mounted there.
    /// - Returns: true when `mountpoint` is no longer mounted.
    @discardableResult
    public static func unmount(_ path: String) -> Bool {
        let mountpoint = kernelPath(path)
        for attempt in 0..<20 {
            if !isMounted(mountpoint) { return true }
            let lazy = attempt >= 10 ? "z" : ""
            _ = try? shell("fusermount3 -u\(lazy) \(shellQuote(mountpoint)) 2>/dev/null", timeout: 20)
            if !isMounted(mountpoint) { return true }
            usleep(200_000)
        }
        return !isMounted(mountpoint)
    }

    /// PIDs of `mamfs mount` processes (other than this one) whose command line names
    /// `mountpoint` (from /proc/PID/cmdline).
    public static func daemonPIDs(serving mountpoint: String) -> [pid_t] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry), pid != getpid(),
                  let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { return nil }
            let args = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            return args.contains("mount") && args.contains(mountpoint) ? pid : nil
        }
    }

    /// Waits up to 10 s (nominal, stretched by `Patience`) for each of `pids` to exit (a
    /// provider mount stops its sync thread first), then sends SIGKILL to those still there.
    public static func reap(_ pids: [pid_t]) {
        for pid in pids where !Patience.waitUntil(10, { kill(pid, 0) != 0 }) {
            kill(pid, SIGKILL)
        }
    }

    /// Unmounts `mountpoint` and makes sure every daemon that served it (`daemons` plus those
    /// found now) is gone.
    public static func tearDown(_ mountpoint: String, daemons: [pid_t] = []) {
        let pids = Array(Set(daemons + daemonPIDs(serving: mountpoint)))
        unmount(mountpoint)
        reap(pids)
    }
}
