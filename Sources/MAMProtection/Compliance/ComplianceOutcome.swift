/// What one check found: its status and the reason a person reads ("/srv/work is on tmpfs,
/// not on a dm-crypt device").
public struct ComplianceOutcome: Equatable, Sendable {
    /// `ComplianceCheck.displayName` of the check.
    public let check: String
    public let status: ComplianceStatus
    /// One line; for a command check the first line of its stdout.
    public let reason: String

    public init(check: String, status: ComplianceStatus, reason: String) {
        self.check = check
        self.status = status
        self.reason = reason
    }
}
