/// One argument of a D-Bus message, as mamfs writes and reads them: the basic types it uses,
/// arrays of strings, `a{sv}` dictionaries of strings (`Notify`'s hints) and arrays of
/// structures of basic types.
public enum BusValue: Sendable, Equatable {
    case string(String)
    case uint32(UInt32)
    case int32(Int32)
    /// `b` (the ScreenSaver's `ActiveChanged(b)`).
    case bool(Bool)
    /// `o`, a D-Bus object path ("/org/freedesktop/login1/session/_31"); appending a malformed
    /// path throws instead of reaching libdbus.
    case objectPath(String)
    case strings([String])
    /// `a{sv}` with string variants.
    case stringDictionary([String: String])
    /// An array of structures of basic types, `a(...)` (logind's `ListSessions` answer,
    /// `a(susso)`): `signature` is one structure's, e.g. "(susso)", so an empty array can be
    /// written too.
    case structures(signature: String, [[BusValue]])
    /// An argument of another type, read and skipped; its D-Bus signature.
    case other(String)

    /// The string of a `.string`, else nil.
    public var string: String? { if case .string(let value) = self { return value } else { return nil } }
    /// The number of a `.uint32`, else nil.
    public var uint32: UInt32? { if case .uint32(let value) = self { return value } else { return nil } }
    /// The number of an `.int32`, else nil.
    public var int32: Int32? { if case .int32(let value) = self { return value } else { return nil } }
    /// The truth value of a `.bool`, else nil.
    public var bool: Bool? { if case .bool(let value) = self { return value } else { return nil } }
    /// The structures of a `.structures`, else nil.
    public var structures: [[BusValue]]? { if case .structures(_, let value) = self { return value } else { return nil } }
    /// The path of an `.objectPath`, else nil.
    public var objectPath: String? { if case .objectPath(let value) = self { return value } else { return nil } }
}
