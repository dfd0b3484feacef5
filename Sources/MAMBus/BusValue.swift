/// One argument of a D-Bus message, as mamfs writes and reads them: the basic types it uses,
/// arrays of strings, and `a{sv}` dictionaries of strings (`Notify`'s hints).
public enum BusValue: Sendable, Equatable {
    case string(String)
    case uint32(UInt32)
    case int32(Int32)
    case strings([String])
    /// `a{sv}` with string variants.
    case stringDictionary([String: String])
    /// An argument of another type, read and skipped; its D-Bus signature.
    case other(String)

    /// The string of a `.string`, else nil.
    public var string: String? { if case .string(let value) = self { return value } else { return nil } }
    /// The number of a `.uint32`, else nil.
    public var uint32: UInt32? { if case .uint32(let value) = self { return value } else { return nil } }
    /// The number of an `.int32`, else nil.
    public var int32: Int32? { if case .int32(let value) = self { return value } else { return nil } }
}
