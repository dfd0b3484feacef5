import Glibc

/// Where the session bus is, found the way libdbus does without ever starting one:
/// `DBUS_SESSION_BUS_ADDRESS`, else the socket `$XDG_RUNTIME_DIR/bus` when it exists.
///
/// (libdbus' own lookup would go on to X11 autolaunch and start a bus; a mount daemon or a
/// script must not.)
public enum SessionBusAddress {
    /// The address, or nil when there is no session bus (empty variables count as unset).
    /// - Parameter environment: the process environment.
    public static func resolve(_ environment: [String: String]) -> String? {
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty { return address }
        guard let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty else { return nil }
        let socketPath = runtime.hasSuffix("/") ? runtime + "bus" : runtime + "/bus"
        var st = stat()
        guard stat(socketPath, &st) == 0, (st.st_mode & S_IFMT) == S_IFSOCK else { return nil }
        return "unix:path=" + escaped(socketPath)
    }

    /// Why `resolve` found nothing, for the one line that says so.
    public static let missingReason = "no session bus (DBUS_SESSION_BUS_ADDRESS is not set and $XDG_RUNTIME_DIR/bus does not exist)"

    /// A path as a D-Bus address value: bytes outside [-0-9A-Za-z_/.\*] percent-encoded.
    static func escaped(_ path: String) -> String {
        var result = ""
        for byte in path.utf8 {
            let c = Character(Unicode.Scalar(byte))
            if c.isASCII && (c.isLetter || c.isNumber || "-_/.\\*".contains(c)) {
                result.append(c)
            } else {
                result += "%" + String(byte, radix: 16, uppercase: false).leftPadded(2)
            }
        }
        return result
    }
}

private extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
