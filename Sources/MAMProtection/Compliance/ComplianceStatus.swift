/// The outcome of a compliance check or remediation, with the names of App Protection
/// Conditional Access (the reference's remediation statuses: `IntuneMAMComplianceStatus`
/// Compliant, NotCompliant, NetworkFailure, ServiceFailure, UserCancelled, InteractionRequired).
///
/// Each status has its own exit code (`exitCode`) for `mamfs compliance check|remediate|status`;
/// only `compliant` lets an account's key be unwrapped.
public enum ComplianceStatus: String, CaseIterable, Sendable, Equatable {
    case compliant = "Compliant"
    case notCompliant = "NotCompliant"
    case networkFailure = "NetworkFailure"
    case serviceFailure = "ServiceFailure"
    case userCancelled = "UserCancelled"
    case interactionRequired = "InteractionRequired"

    /// The exit code of the compliance verbs for this status: 0, 80, 81, 82, 83, 84.
    public var exitCode: ExitCode {
        switch self {
        case .compliant: return .ok
        case .notCompliant: return .notCompliant
        case .networkFailure: return .networkFailure
        case .serviceFailure: return .serviceFailure
        case .userCancelled: return .userCancelled
        case .interactionRequired: return .interactionRequired
        }
    }

    /// The status a `command` check's (or remediation's) exit status stands for: 0 Compliant,
    /// 1 NotCompliant, 2 NetworkFailure, 3 ServiceFailure, 4 UserCancelled, 5
    /// InteractionRequired; any other status (and death by a signal) ServiceFailure.
    public static func forCommandExit(_ status: Int32) -> ComplianceStatus {
        switch status {
        case 0: return .compliant
        case 1: return .notCompliant
        case 2: return .networkFailure
        case 3: return .serviceFailure
        case 4: return .userCancelled
        case 5: return .interactionRequired
        default: return .serviceFailure
        }
    }
}
