import CDBus

/// A D-Bus failure: the error name libdbus or the peer gave (`org.freedesktop.DBus.Error.NoReply`,
/// ...) and its message.
public struct BusError: Error, CustomStringConvertible, Sendable {
    public let name: String
    public let message: String

    public init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    public var description: String { "\(message) (\(name))" }

    /// Runs `body` with an initialised `DBusError`; throws it when `body` left it set, frees it.
    static func check<T>(_ body: (UnsafeMutablePointer<DBusError>) -> T) throws -> T {
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        let result = body(&error)
        if dbus_error_is_set(&error) != 0 {
            throw BusError(name: error.name.map { String(cString: $0) } ?? "org.freedesktop.DBus.Error.Failed",
                           message: error.message.map { String(cString: $0) } ?? "D-Bus error")
        }
        return result
    }
}
