import Foundation
import Glibc

/// A real session bus for one test: `dbus-daemon` with a temporary session configuration,
/// listening on a socket in its own temp directory (`--address=unix:path=DIR/bus`, `--nofork
/// --print-address`), stopped by its PID (SIGTERM, then SIGKILL) by `stop()` and deinit, so no
/// bus is left behind.
public final class SessionBus: @unchecked Sendable {
    public static let daemon = "/usr/bin/dbus-daemon"
    public static let monitor = "/usr/bin/dbus-monitor"

    public let directory: TempDirectory
    /// The address as the daemon printed it ("unix:path=...,guid=...").
    public let address: String
    private var pid: pid_t

    /// The environment that points a program at this bus.
    public var environment: [String: String] { ["DBUS_SESSION_BUS_ADDRESS": address, "XDG_RUNTIME_DIR": ""] }

    /// The environment of a program with no session bus at all (an empty runtime directory).
    public static func noBusEnvironment(runtimeDirectory: String) -> [String: String] {
        ["DBUS_SESSION_BUS_ADDRESS": "", "XDG_RUNTIME_DIR": runtimeDirectory]
    }

    /// Starts the bus; returns once it printed its address.
    /// - Throws: `TestSupportError` when dbus-daemon does not start within 10 s.
    public init() throws {
        directory = try TempDirectory(prefix: "mamfs-bus")
        let config = directory.file("session.conf")
        let socketAddress = "unix:path=" + directory.file("bus")
        try Data("""
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>\(socketAddress)</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
        </busconfig>
        """.utf8).write(to: URL(fileURLWithPath: config))
        let out = directory.file("address")
        pid = try spawnProcess(Self.daemon, ["--config-file=" + config, "--address=" + socketAddress,
                                             "--nofork", "--print-address"],
                               environment: testEnvironment(), stdin: "/dev/null", stdout: out, stderr: directory.file("daemon.log"))
        let deadline = Date().addingTimeInterval(10)
        var printed = ""
        while Date() < deadline {
            printed = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
            if printed.hasSuffix("\n") { break }
            usleep(10_000)
        }
        address = printed.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !address.isEmpty else {
            let log = (try? String(contentsOfFile: directory.file("daemon.log"), encoding: .utf8)) ?? ""
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            throw TestSupportError("dbus-daemon did not start: \(log)")
        }
    }

    deinit { stop() }

    /// Stops the daemon (idempotent).
    public func stop() {
        guard pid > 0 else { return }
        stopProcess(pid)
        pid = 0
    }

    /// The unix process id of the connection owning `name` on this bus, nil when nobody owns it.
    public func ownerPID(of name: String) throws -> pid_t? {
        let result = try runProcess("/usr/bin/dbus-send", ["--bus=" + address, "--print-reply", "--dest=org.freedesktop.DBus",
                                                             "/org/freedesktop/DBus", "org.freedesktop.DBus.GetConnectionUnixProcessID",
                                                             "string:" + name], environment: testEnvironment(), timeout: 10)
        guard result.status == 0, let last = result.out.split(separator: " ").last else { return nil }
        return pid_t(last.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

/// SIGTERM to `pid`, SIGKILL after 5 s, and reaps it.
public func stopProcess(_ pid: pid_t) {
    kill(pid, SIGTERM)
    var status: Int32 = 0
    let deadline = Date().addingTimeInterval(5)
    while waitpid(pid, &status, WNOHANG) == 0 {
        if Date() > deadline {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
            return
        }
        usleep(10_000)
    }
}
