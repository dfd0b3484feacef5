import Foundation

/// The last compliance result of an account, as the state records it (table
/// `compliance_results`) and the gate reads it.
public struct ComplianceResult: Equatable, Sendable {
    public let status: ComplianceStatus
    /// When the checks ran (millisecond precision).
    public let checkedAt: Date
    /// The first check (in policy order) that was not Compliant, nil when all were.
    public let failedCheck: String?
    /// That check's reason, or a summary when all passed.
    public let reason: String

    public init(status: ComplianceStatus, checkedAt: Date, failedCheck: String?, reason: String) {
        self.status = status
        self.checkedAt = Date(timeIntervalSince1970: (checkedAt.timeIntervalSince1970 * 1000).rounded(.down) / 1000)
        self.failedCheck = failedCheck
        self.reason = reason
    }

    /// The result of a run: the first outcome that is not Compliant decides.
    public init(outcomes: [ComplianceOutcome], at date: Date) {
        if let failed = outcomes.first(where: { $0.status != .compliant }) {
            self.init(status: failed.status, checkedAt: date, failedCheck: failed.check, reason: failed.reason)
        } else {
            self.init(status: .compliant, checkedAt: date, failedCheck: nil,
                      reason: "\(outcomes.count) check\(outcomes.count == 1 ? "" : "s") passed")
        }
    }

    /// "not compliant: CHECK: REASON" (for NotCompliant), "not compliant (STATUS): CHECK:
    /// REASON" for the other statuses; nil for Compliant.
    public var refusal: String? {
        guard status != .compliant else { return nil }
        let what = status == .notCompliant ? "not compliant" : "not compliant (\(status.rawValue))"
        return "\(what): \(failedCheck ?? "compliance"): \(reason)"
    }
}
