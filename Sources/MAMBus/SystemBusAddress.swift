import Glibc

/// Where the system bus is, found the way libdbus does: `DBUS_SYSTEM_BUS_ADDRESS`, else the
/// standard socket `/run/dbus/system_bus_socket` when it exists.
///
/// (libdbus would hand out its default address even when no socket is there; checking first
/// lets a caller say "no system bus" in one line instead of a connection error.)
public enum SystemBusAddress {
    /// The socket the D-Bus specification names for the system bus.
    public static let standardSocket = "/run/dbus/system_bus_socket"

    /// The address, or nil when there is no system bus (an empty variable counts as unset).
    /// - Parameter environment: the process environment.
    public static func resolve(_ environment: [String: String]) -> String? {
        if let address = environment["DBUS_SYSTEM_BUS_ADDRESS"], !address.isEmpty { return address }
        var st = stat()
        guard stat(standardSocket, &st) == 0, (st.st_mode & S_IFMT) == S_IFSOCK else { return nil }
        return "unix:path=" + standardSocket
    }

    /// Why `resolve` found nothing, for the one line that says so.
    public static let missingReason = "no system bus (DBUS_SYSTEM_BUS_ADDRESS is not set and \(standardSocket) does not exist)"
}
