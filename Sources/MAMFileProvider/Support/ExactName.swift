import Foundation

/// Names and relative paths compared as the bytes the filesystem stores.
///
/// Swift `String` equality, hashing and `hasPrefix` use Unicode canonical equivalence, so
/// `cafe` + U+0301 (NFD) and `caf` + U+00E9 (NFC) are "equal" although they name two different
/// files on Linux. The providers key every remote name and local path by its exact UTF-8 bytes
/// instead (`ExactKey`, `ExactDictionary`), and a name that is not valid UTF-8 is never decoded
/// lossily: `decode` refuses it and the caller skips the entry with a log line.
enum ExactName {
    /// The name as a `String` holding exactly `bytes`, nil when they are not valid UTF-8.
    static func decode(_ bytes: [UInt8]) -> String? {
        String(validating: bytes, as: UTF8.self)
    }

    /// `bytes` for a message: printable ASCII kept, every other byte as `\xNN`.
    static func escaped(_ bytes: [UInt8]) -> String {
        var text = ""
        for byte in bytes.prefix(255) {
            if byte >= 0x20 && byte < 0x7F && byte != 0x5C {
                text.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                text += "\\x" + String(byte, radix: 16, uppercase: false).leftPadded(to: 2)
            }
        }
        return text
    }

    /// True when `a` and `b` are the same bytes.
    static func equal(_ a: String, _ b: String) -> Bool { a.utf8.elementsEqual(b.utf8) }

    /// True when the relative path `path` is `directory` or lies below it (bytes compared).
    static func isSelfOrBelow(_ path: String, _ directory: String) -> Bool {
        equal(path, directory) || isBelow(path, directory)
    }

    /// True when the relative path `path` lies below `directory` (bytes compared).
    static func isBelow(_ path: String, _ directory: String) -> Bool {
        path.utf8.starts(with: directory.utf8 + [0x2F])
    }

    /// `path` without its first `prefix.utf8.count` bytes (call only when `isBelow`/`isSelfOrBelow`).
    static func dropPrefix(_ path: String, _ prefix: String) -> String {
        String(decoding: path.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}

/// A `String` key hashed and compared by its UTF-8 bytes.
struct ExactKey: Hashable, Sendable {
    let value: String
    init(_ value: String) { self.value = value }
    static func == (a: ExactKey, b: ExactKey) -> Bool { ExactName.equal(a.value, b.value) }
    func hash(into hasher: inout Hasher) {
        for byte in value.utf8 { hasher.combine(byte) }
        hasher.combine(0xFF as UInt8)
    }
}

/// A dictionary from relative paths to `Value` whose keys are compared as bytes
/// (`ExactKey`), with the few `Dictionary` operations the providers use.
struct ExactDictionary<Value>: Sequence {
    private var storage: [ExactKey: Value] = [:]

    init() {}

    subscript(key: String) -> Value? {
        get { storage[ExactKey(key)] }
        set { storage[ExactKey(key)] = newValue }
    }

    var keys: [String] { storage.keys.map(\.value) }
    var values: Dictionary<ExactKey, Value>.Values { storage.values }
    var count: Int { storage.count }
    var isEmpty: Bool { storage.isEmpty }

    @discardableResult
    mutating func removeValue(forKey key: String) -> Value? { storage.removeValue(forKey: ExactKey(key)) }

    func makeIterator() -> AnyIterator<(key: String, value: Value)> {
        var inner = storage.makeIterator()
        return AnyIterator { inner.next().map { (key: $0.key.value, value: $0.value) } }
    }
}
