import Foundation

/// The decision made before an account's key is unwrapped when its policy has `compliance`
/// (App Protection Conditional Access: the account's keys are the protected resource).
///
/// Refused while the last result is missing, not Compliant or older than `complianceMaxAge`;
/// with an `encryptedBackingDevice` check also while the directory being worked on (a mount's
/// backing directory, the CLI's file's directory) is not on dm-crypt.
enum ComplianceGate {
    /// Why a key may not be unwrapped, or nil when it may. `siteDevice` is asked (only when the
    /// policy has `encryptedBackingDevice`) for the check of the directory being worked on, nil
    /// when none is known.
    /// - Returns: the message ("compliance never checked ...", "not compliant: CHECK: REASON",
    ///   "compliance result older than ...") and the audit rule for it.
    static func refusal(policy: Policy, result: ComplianceResult?, now: Date, account: String,
                        siteDevice: () -> ComplianceOutcome?) -> (message: String, rule: String)? {
        guard let checks = policy.compliance else { return nil }
        guard let result else {
            return ("compliance never checked (run 'mamfs compliance check \(account)')", "compliance=never-checked")
        }
        if let refusal = result.refusal { return (refusal, "compliance=\(result.status.rawValue)") }
        let age = now.timeIntervalSince(result.checkedAt)
        if age > Double(policy.complianceMaxAge) {
            return ("compliance result older than complianceMaxAge (\(policy.complianceMaxAge) s): checked \(AuditTime.format(result.checkedAt)), \(Int(age)) s ago; run 'mamfs compliance check \(account)'",
                    "compliance=expired")
        }
        if checks.contains(where: { $0.kind == .encryptedBackingDevice }),
           let outcome = siteDevice(), outcome.status != .compliant {
            return ("not compliant: encryptedBackingDevice: \(outcome.reason)", "compliance=NotCompliant")
        }
        return nil
    }
}
