import Foundation

/// A value bound to, or read from, a SQLite statement.
///
/// Binding is typed: `.integer` (64-bit), `.text` (UTF-8), `.blob` (bytes, may be empty) and
/// `.null`. `.real` exists so that rows read back are faithful; mamfs itself stores no floats.
public enum SQLiteValue: Sendable, Hashable {
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)
    case null

    /// `.integer(value)`, or `.null` when `value` is nil.
    public init(_ value: Int64?) {
        self = value.map { .integer($0) } ?? .null
    }

    /// `.text(value)`, or `.null` when `value` is nil.
    public init(_ value: String?) {
        self = value.map { .text($0) } ?? .null
    }

    /// `.blob(value)`, or `.null` when `value` is nil.
    public init(_ value: Data?) {
        self = value.map { .blob($0) } ?? .null
    }

    /// `.integer(1)` for true, `.integer(0)` for false (SQLite has no boolean type).
    public init(_ value: Bool) {
        self = .integer(value ? 1 : 0)
    }
}

extension SQLiteValue: ExpressibleByIntegerLiteral, ExpressibleByStringLiteral, ExpressibleByNilLiteral {
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(stringLiteral value: String) { self = .text(value) }
    public init(nilLiteral: ()) { self = .null }
}

/// One result row: the column values in SELECT order, copied out of the statement so the row
/// stays valid after the statement is reset.
public struct SQLiteRow: Sendable, Hashable {
    /// Column values, index 0 = first column.
    public let values: [SQLiteValue]

    public init(values: [SQLiteValue]) {
        self.values = values
    }

    /// Number of columns.
    public var count: Int { values.count }

    /// The value of column `index`, `.null` when the index is out of range.
    public subscript(_ index: Int) -> SQLiteValue {
        values.indices.contains(index) ? values[index] : .null
    }

    /// Column `index` as an integer; nil when NULL, out of range or not an integer.
    public func int64(_ index: Int) -> Int64? {
        if case .integer(let v) = self[index] { return v }
        return nil
    }

    /// Column `index` as text; nil when NULL, out of range or not text.
    public func string(_ index: Int) -> String? {
        if case .text(let v) = self[index] { return v }
        return nil
    }

    /// Column `index` as bytes; nil when NULL or out of range. Text columns are returned as their UTF-8 bytes.
    public func data(_ index: Int) -> Data? {
        switch self[index] {
        case .blob(let v): return v
        case .text(let v): return Data(v.utf8)
        default: return nil
        }
    }

    /// True when column `index` is NULL or out of range.
    public func isNull(_ index: Int) -> Bool {
        self[index] == .null
    }
}
