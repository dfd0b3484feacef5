import Foundation

/// The result of `AuditLog.verify`: the whole chain holds, or the first record that does not.
public enum AuditVerification: Sendable, Equatable {
    /// Every record is in place and unchanged, and the last one is the one `state.db` recorded.
    case verified(records: Int64)
    /// The first bad record: its seq (the seq that should be at that place for a record that is
    /// missing or cut) and why ("was edited", "is missing", ...).
    case broken(seq: Int64, reason: String)

    /// True for `.verified`.
    public var isVerified: Bool {
        if case .verified = self { return true }
        return false
    }
}
