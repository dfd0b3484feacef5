import Foundation

/// The last record of the audit log as the state remembers it: its seq and hash.
///
/// Kept beside `audit.log` so that removing records from the end of the log (or the whole
/// file) is noticed: `AuditLog.verify` compares the log's last record with it.
public struct AuditTail: Equatable, Sendable {
    /// The seq of the last record written (1 for the first).
    public let seq: Int64
    /// Its hash, 64 lowercase hex digits.
    public let hash: String

    public init(seq: Int64, hash: String) {
        self.seq = seq
        self.hash = hash
    }
}

extension StateStore {
    /// The audit log's last record, or nil when none was ever written.
    /// - Throws: `MAMError.damagedDatabase` for a malformed row.
    public func auditTail() throws -> AuditTail? {
        guard let row = try database.queryFirst("SELECT seq, hash FROM audit_tail WHERE id = 1") else { return nil }
        guard let seq = row.int64(0), let hash = row.string(1) else {
            throw MAMError.damagedDatabase("malformed row in audit_tail (restore the state from a backup)")
        }
        return AuditTail(seq: seq, hash: hash)
    }

    /// Records `tail` as the audit log's last record (the caller holds the log's lock).
    public func setAuditTail(_ tail: AuditTail) throws {
        try database.run("""
            INSERT INTO audit_tail(id, seq, hash) VALUES (1, ?, ?)
            ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash
            """, [.integer(tail.seq), .text(tail.hash)])
    }
}
