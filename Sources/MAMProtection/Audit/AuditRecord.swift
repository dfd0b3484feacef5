import Foundation

/// One line of `audit.log`: an `AuditEvent` (or `count` identical ones) with its place in the
/// hash chain.
///
/// On disk a record is its canonical JSON (`canonicalJSON(includingHash: true)`) and a newline.
/// `hash` is the lowercase hex SHA-256 of the previous record's `hash` as its 64 hex characters
/// (64 "0"s before the first record) followed by this record's canonical JSON without the
/// `hash` key. Canonical JSON: one object, keys sorted by their bytes, no whitespace, integers
/// in decimal, strings as UTF-8 with only `"`, `\` and control characters escaped (`\b \f \n \r
/// \t`, else `\u00XX` in lowercase hex): what Python's `json.dumps(r, sort_keys=True,
/// separators=(",", ":"), ensure_ascii=False)` writes.
public struct AuditRecord: Codable, Sendable, Equatable {
    /// Position in the log: 1, 2, 3, ... without gaps.
    public var seq: Int64
    /// When the (first counted) event happened: ISO 8601 UTC with milliseconds,
    /// "2026-12-01T14:55:37.123Z".
    public var time: String
    public var uid: UInt32
    public var pid: Int32
    public var executable: String
    public var action: String
    public var path: String
    public var owner: String
    /// "denied", "audited", "allowed" or "failed".
    public var decision: String
    public var rule: String
    /// How many identical events (see `AuditLog`) this record stands for; `path` is the first one's.
    public var count: Int64
    /// The chain hash (see the type's documentation).
    public var hash: String

    /// The hash before the first record: 64 "0"s.
    public static let initialHash = String(repeating: "0", count: 64)

    /// A record of `event` (with `count` and the time `date`), not yet chained (`hash` empty).
    init(seq: Int64, date: Date, event: AuditEvent, count: Int64) {
        self.seq = seq
        self.time = AuditTime.format(date)
        self.uid = event.uid
        self.pid = event.pid
        self.executable = event.executable
        self.action = event.action
        self.path = event.path
        self.owner = event.owner
        self.decision = event.decision
        self.rule = event.rule
        self.count = count
        self.hash = ""
    }

    /// `time` as a date, nil when it is not in the log's format.
    public var date: Date? { AuditTime.parse(time) }

    /// The record as canonical JSON (see the type's documentation), with or without `hash`.
    public func canonicalJSON(includingHash: Bool) -> [UInt8] {
        var members: [(String, String)] = [
            ("action", Self.quoted(action)), ("count", String(count)), ("decision", Self.quoted(decision)),
            ("executable", Self.quoted(executable)), ("owner", Self.quoted(owner)), ("path", Self.quoted(path)),
            ("pid", String(pid)), ("rule", Self.quoted(rule)), ("seq", String(seq)), ("time", Self.quoted(time)),
            ("uid", String(uid)),
        ]
        if includingHash { members.append(("hash", Self.quoted(hash))) }
        members.sort { Array($0.0.utf8).lexicographicallyPrecedes(Array($1.0.utf8)) }
        let text = "{" + members.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
        return Array(text.utf8)
    }

    /// The chain hash of this record after a record whose hash is `previous`.
    /// - Throws: `MAMError.internalError` when OpenSSL fails.
    public func chainHash(after previous: String) throws -> String {
        try SHA256.hex(of: Array(previous.utf8), canonicalJSON(includingHash: false))
    }

    /// The record with `hash` set for its place after `previous`.
    func chained(after previous: String) throws -> AuditRecord {
        var record = self
        record.hash = try chainHash(after: previous)
        return record
    }

    /// Parses one line of the log (without its newline); nil when it is not a record.
    static func parse(_ line: some Collection<UInt8>) -> AuditRecord? {
        try? JSONDecoder().decode(AuditRecord.self, from: Data(line))
    }

    /// `text` as a canonical JSON string literal.
    private static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
