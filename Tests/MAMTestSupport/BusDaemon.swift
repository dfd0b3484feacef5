import Foundation
import Glibc

/// One private `dbus-daemon` (`--nofork --print-address`) with a generated configuration,
/// listening on `DIR/bus` in its own temp directory: what `SessionBus` and `SystemBus` share.
/// Stopped by its PID (SIGTERM, then SIGKILL) by `stop()` and deinit.
final class BusDaemon: @unchecked Sendable {
    let directory: TempDirectory
    /// The address as the daemon printed it ("unix:path=...,guid=...").
    let address: String
    private var pid: pid_t

    /// Starts the daemon with `<type>type</type>` and `policy` (the `<policy>` elements);
    /// returns once it printed its address.
    /// - Throws: `TestSupportError` when dbus-daemon does not start within 10 s.
    init(type: String, policy: String) throws {
        directory = try TempDirectory(prefix: "mamfs-bus")
        let config = directory.file("\(type).conf")
        let socketAddress = "unix:path=" + directory.file("bus")
        try Data("""
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>\(type)</type>
          <listen>\(socketAddress)</listen>
          <auth>EXTERNAL</auth>
          \(policy)
        </busconfig>
        """.utf8).write(to: URL(fileURLWithPath: config))
        let out = directory.file("address")
        pid = try spawnProcess(SessionBus.daemon, ["--config-file=" + config, "--address=" + socketAddress,
                                                   "--nofork", "--print-address"],
                               environment: testEnvironment(), stdin: "/dev/null", stdout: out, stderr: directory.file("daemon.log"))
        var printed = ""
        Patience.waitUntil(10, every: 0.01) {
            printed = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
            return printed.hasSuffix("\n")
        }
        address = printed.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !address.isEmpty else {
            let log = (try? String(contentsOfFile: directory.file("daemon.log"), encoding: .utf8)) ?? ""
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            throw TestSupportError("dbus-daemon (\(type)) did not start: \(log)")
        }
    }

    deinit { stop() }

    /// Stops the daemon (idempotent).
    func stop() {
        guard pid > 0 else { return }
        stopProcess(pid)
        pid = 0
    }

    /// The unix process id of the connection owning `name`, nil when nobody owns it.
    func ownerPID(of name: String) throws -> pid_t? {
        let result = try runProcess("/usr/bin/dbus-send", ["--bus=" + address, "--print-reply", "--dest=org.freedesktop.DBus",
                                                             "/org/freedesktop/DBus", "org.freedesktop.DBus.GetConnectionUnixProcessID",
                                                             "string:" + name], environment: testEnvironment(), timeout: 10)
        guard result.status == 0, let last = result.out.split(separator: " ").last else { return nil }
        return pid_t(last.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
