/// What an enrollment, unenrollment, selective wipe or policy change reports: the account, the
/// status code and an error string (empty on success).
///
/// Mirrors `IntuneMAMEnrollmentStatus` (accountId, identity (UPN), didSucceed, statusCode,
/// errorString), which the reference hands to `IntuneMAMEnrollmentDelegate`.
public struct EnrollmentStatus: Sendable, Equatable {
    /// Which request the status answers.
    public enum Operation: String, Sendable {
        case enroll, unenroll, wipe, policy
    }

    public var operation: Operation
    /// The account's accountId as stored (the UPN for an account keyed by its UPN), or the
    /// name as given when the request failed before the account was found ("" when none).
    public var accountId: String
    /// The account's UPN, "" when not known.
    public var upn: String
    public var code: EnrollmentStatusCode
    /// Why it failed (the error's message, never key material); "" on success.
    public var error: String

    public init(operation: Operation, accountId: String, upn: String, code: EnrollmentStatusCode, error: String) {
        self.operation = operation
        self.accountId = accountId
        self.upn = upn
        self.code = code
        self.error = error
    }

    public var didSucceed: Bool { code.didSucceed }

    /// The success status of `operation` for `identity`: enroll 100, policy 100 (101 when the
    /// policy did not change: `unchanged`), wipe 102, unenroll 104.
    public static func succeeded(_ operation: Operation, _ identity: AccountIdentity, unchanged: Bool = false) -> EnrollmentStatus {
        let code: EnrollmentStatusCode
        switch operation {
        case .enroll: code = .newPoliciesReceived
        case .policy: code = unchanged ? .policiesHaveNotChanged : .newPoliciesReceived
        case .wipe: code = .wipeReceived
        case .unenroll: code = .unenrollmentSuccess
        }
        return EnrollmentStatus(operation: operation, accountId: identity.accountId, upn: identity.upn ?? "", code: code, error: "")
    }

    /// The failure status of `operation` for the account named `accountId`/`upn` that threw `error`.
    ///
    /// | error | code |
    /// |---|---|
    /// | `.unknownAccount` | 214 NotEnrolledAccount |
    /// | `.applicationNotManaged` | 213 AppNotEnrolled |
    /// | `.policyDenied` (allowed accounts) | 209 NotEmmAccount |
    /// | enroll: `.invalidArguments` with neither name given | 207 NilAccount |
    /// | enroll: `.invalidArguments` while another account is managed (`anotherManaged`) | 227 SingleManagedAccountMode |
    /// | wipe, or unenroll with a wipe: anything else | 215 FailedToClearMamData |
    /// | anything else | 201 InternalError |
    public static func failed(_ operation: Operation, accountId: String?, upn: String?, error: Error,
                              anotherManaged: Bool = false, wiping: Bool = false) -> EnrollmentStatus {
        let code: EnrollmentStatusCode
        switch error as? MAMError {
        case .unknownAccount?: code = .notEnrolledAccount
        case .applicationNotManaged?: code = .appNotEnrolled
        case .policyDenied?: code = .notEmmAccount
        case .invalidArguments? where operation == .enroll && (accountId ?? "").isEmpty && (upn ?? "").isEmpty:
            code = .nilAccount
        case .invalidArguments? where operation == .enroll && anotherManaged:
            code = .singleManagedAccountMode
        default:
            code = operation == .wipe || wiping ? .failedToClearMamData : .internalError
        }
        let message = (error as? MAMError)?.description ?? String(describing: error)
        return EnrollmentStatus(operation: operation, accountId: accountId.map(AccountIdentity.canonical) ?? "",
                                upn: upn.map(AccountIdentity.canonical) ?? "", code: code, error: message)
    }
}
