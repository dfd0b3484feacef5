import Foundation
import Glibc

/// A real session bus for one test: `dbus-daemon` with a temporary session configuration,
/// listening on a socket in its own temp directory (`--address=unix:path=DIR/bus`, `--nofork
/// --print-address`), stopped by its PID (SIGTERM, then SIGKILL) by `stop()` and deinit, so no
/// bus is left behind.
public final class SessionBus: @unchecked Sendable {
    public static let daemon = "/usr/bin/dbus-daemon"
    public static let monitor = "/usr/bin/dbus-monitor"

    private let daemonProcess: BusDaemon
    public var directory: TempDirectory { daemonProcess.directory }
    /// The address as the daemon printed it ("unix:path=...,guid=...").
    public var address: String { daemonProcess.address }

    /// The environment that points a program at this bus.
    public var environment: [String: String] { ["DBUS_SESSION_BUS_ADDRESS": address, "XDG_RUNTIME_DIR": ""] }

    /// The environment of a program with no session bus at all (an empty runtime directory).
    public static func noBusEnvironment(runtimeDirectory: String) -> [String: String] {
        ["DBUS_SESSION_BUS_ADDRESS": "", "XDG_RUNTIME_DIR": runtimeDirectory]
    }

    /// Starts the bus; returns once it printed its address.
    /// - Throws: `TestSupportError` when dbus-daemon does not start within 10 s.
    public init() throws {
        daemonProcess = try BusDaemon(type: "session", policy: """
        <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
        """)
    }

    /// Stops the daemon (idempotent).
    public func stop() { daemonProcess.stop() }

    /// The unix process id of the connection owning `name` on this bus, nil when nobody owns it.
    public func ownerPID(of name: String) throws -> pid_t? { try daemonProcess.ownerPID(of: name) }
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
