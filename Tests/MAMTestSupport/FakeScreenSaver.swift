import Foundation
import MAMBus

/// A test-owned screensaver on a session bus: it owns `interface` (org.freedesktop.ScreenSaver,
/// as KDE and Xfce do, or org.gnome.ScreenSaver, as GNOME does) and sends the ScreenSaver
/// specification's `ActiveChanged(b active)` from the owning connection, from the object
/// path named after the interface (/org/freedesktop/ScreenSaver, /org/gnome/ScreenSaver).
public final class FakeScreenSaver: @unchecked Sendable {
    public static let freedesktop = "org.freedesktop.ScreenSaver"
    public static let gnome = "org.gnome.ScreenSaver"

    /// The interface and well-known name.
    public let interface: String
    /// The object path its signals come from.
    public let path: String
    private let service: BusServiceFixture

    /// Connects to `address`, owns `interface` and reads its messages on a thread of its own.
    /// - Throws: `TestSupportError` when the name is taken; `BusError` when the bus cannot be reached.
    public init(address: String, interface: String = FakeScreenSaver.freedesktop) throws {
        self.interface = interface
        path = "/" + interface.replacingOccurrences(of: ".", with: "/")
        service = try BusServiceFixture(address: address, name: interface) { _ in nil }
    }

    deinit { stop() }

    /// Its unique name on the bus, the sender of its signals.
    public var uniqueName: String { service.bus.uniqueName }

    /// Sends `ActiveChanged(active)`: true when the screen locks, false when it unlocks.
    /// - Throws: `BusError` when the connection is gone.
    public func activeChanged(_ active: Bool) throws {
        try emitActiveChanged([.bool(active)])
    }

    /// Sends `ActiveChanged` with any `arguments`, to test what a listener makes of a malformed one.
    /// - Throws: `BusError` when the connection is gone.
    public func emitActiveChanged(_ arguments: [BusValue]) throws {
        try service.emit(path: path, interface: interface, member: "ActiveChanged", arguments: arguments)
    }

    /// Leaves the bus (releasing the name). Idempotent.
    public func stop() { service.stop() }
}
