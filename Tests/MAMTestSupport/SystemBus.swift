import Foundation
import Glibc

/// A private system bus for one test: `dbus-daemon` with `<type>system</type>` and a policy
/// that lets any connection own any name (the test runs as root, as logind does) and send and
/// receive anything, on a socket in its own temp directory; stopped by its PID by `stop()` and
/// deinit. Programs reach it through `environment` (`DBUS_SYSTEM_BUS_ADDRESS`), never the
/// host's /run/dbus/system_bus_socket.
public final class SystemBus: @unchecked Sendable {
    private let daemonProcess: BusDaemon
    public var directory: TempDirectory { daemonProcess.directory }
    /// The address as the daemon printed it ("unix:path=...,guid=...").
    public var address: String { daemonProcess.address }

    /// The environment that points a program at this bus.
    public var environment: [String: String] { ["DBUS_SYSTEM_BUS_ADDRESS": address] }

    /// Starts the bus; returns once it printed its address.
    /// - Throws: `TestSupportError` when dbus-daemon does not start within 10 s.
    public init() throws {
        daemonProcess = try BusDaemon(type: "system", policy: """
        <policy context="default">
            <allow user="*"/>
            <allow own="*"/>
            <allow send_type="method_call"/>
            <allow send_type="signal"/>
            <allow send_requested_reply="true" send_type="method_return"/>
            <allow send_requested_reply="true" send_type="error"/>
            <allow send_destination="*" eavesdrop="true"/>
            <allow receive_type="method_call"/>
            <allow receive_type="signal"/>
            <allow receive_sender="*"/>
            <allow eavesdrop="true"/>
          </policy>
        """)
    }

    /// Stops the daemon (idempotent).
    public func stop() { daemonProcess.stop() }

    /// The unix process id of the connection owning `name` on this bus, nil when nobody owns it.
    public func ownerPID(of name: String) throws -> pid_t? { try daemonProcess.ownerPID(of: name) }
}
