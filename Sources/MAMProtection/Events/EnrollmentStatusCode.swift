/// The status code an enrollment, unenrollment, selective wipe or policy change reports, with
/// the numbers and names of the reference's `IntuneMAMEnrollmentStatusCode` (1xx success, 2xx
/// failure). Only the codes mamfs can produce are listed; the numbers are a public contract
/// (`mamfs events`, the D-Bus signals and `--json` carry them), so a case's value never changes.
public enum EnrollmentStatusCode: UInt32, Sendable, CaseIterable, CustomStringConvertible {
    /// 100: enrolled, or a policy set (the account has its new policy).
    case newPoliciesReceived = 100
    /// 101: a policy set that left the policy as it was.
    case policiesHaveNotChanged = 101
    /// 102: the selective wipe ran (keys destroyed, the account's files removed).
    case wipeReceived = 102
    /// 104: unenrolled (and deregistered unless asked to stay registered).
    case unenrollmentSuccess = 104
    /// 201: any other failure; the error string says what.
    case internalError = 201
    /// 207: neither an accountId nor a UPN was given.
    case nilAccount = 207
    /// 209: the allowed-accounts list does not name the account.
    case notEmmAccount = 209
    /// 213: the account is registered but not enrolled (a policy set of an unenrolled account).
    case appNotEnrolled = 213
    /// 214: the account named is not registered.
    case notEnrolledAccount = 214
    /// 215: the selective wipe failed part-way (the keys may already be gone).
    case failedToClearMamData = 215
    /// 227: another account is already managed (one managed account at a time).
    case singleManagedAccountMode = 227

    /// True for the 1xx codes.
    public var didSucceed: Bool { rawValue < 200 }

    /// The reference's name without its prefix: "NewPoliciesReceived", "SingleManagedAccountMode", ...
    public var name: String {
        switch self {
        case .newPoliciesReceived: return "NewPoliciesReceived"
        case .policiesHaveNotChanged: return "PoliciesHaveNotChanged"
        case .wipeReceived: return "WipeReceived"
        case .unenrollmentSuccess: return "UnenrollmentSuccess"
        case .internalError: return "InternalError"
        case .nilAccount: return "NilAccount"
        case .notEmmAccount: return "NotEmmAccount"
        case .appNotEnrolled: return "AppNotEnrolled"
        case .notEnrolledAccount: return "NotEnrolledAccount"
        case .failedToClearMamData: return "FailedToClearMamData"
        case .singleManagedAccountMode: return "SingleManagedAccountMode"
        }
    }

    public var description: String { "\(name) (\(rawValue))" }
}
