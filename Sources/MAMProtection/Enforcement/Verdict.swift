import Foundation

/// The outcome of a caller-aware decision.
public enum Verdict: Sendable, Equatable {
    /// Allowed by the rules (or no rule applies, or the level is `off`).
    case allowed
    /// Denied: the relevant policy's `protectionLevel` is `block`.
    case denied
    /// Would be denied, but the level is `audit`: allowed and recorded.
    case allowedAudited

    /// The audit log's decision word: "allowed", "denied" or "audited".
    public var auditName: String {
        switch self {
        case .allowed: return "allowed"
        case .denied: return "denied"
        case .allowedAudited: return "audited"
        }
    }
}
