/// Something the library did that running components and the desktop are told about: the
/// enrollment delegate's statuses, a denied access, keys dropped, a compliance result.
///
/// Mirrors the reference's `IntuneMAMEnrollmentDelegate` callbacks (enrollmentRequestWithStatus:,
/// unenrollRequestWithStatus:, policyRequestWithStatus:, the wipe notification) and its
/// data-protection change notifications. The library hands events to the context's
/// `ProtectionEventSink`; how they travel (D-Bus) is the upper layer's business.
public enum ProtectionEvent: Sendable, Equatable {
    /// An enroll succeeded or failed.
    case enrolled(EnrollmentStatus)
    /// An unenroll succeeded or failed.
    case unenrolled(EnrollmentStatus)
    /// A selective wipe ran or failed; `removedFiles` and `keysDestroyed` are 0 after a failure.
    case wiped(EnrollmentStatus, removedFiles: Int, keysDestroyed: Int)
    /// A policy was replaced (or the replacement failed).
    case policyChanged(EnrollmentStatus)
    /// A mount refused a program access to a file (a "denied" audit record).
    case accessBlocked(AccessBlocked)
    /// An account's keys were dropped from memory (e.g. the session locked); `reason` says why.
    case keysDropped(accountId: String, upn: String, reason: String)
    /// A compliance remediation finished: `result` is the reference's name (Compliant,
    /// NotCompliant, NetworkFailure, ServiceFailure, UserCancelled, InteractionRequired) and
    /// `code` its number; `error` is "" unless it failed.
    case complianceResult(accountId: String, upn: String, result: String, code: UInt32, error: String)

    /// A denied access, as the audit log records it.
    public struct AccessBlocked: Sendable, Equatable {
        /// The file's owner (the work account whose data was protected).
        public var accountId: String
        /// The owner's UPN, "" when not known.
        public var upn: String
        /// The file's path in the mount.
        public var path: String
        /// The executable of the refused process.
        public var executable: String
        /// The audit action ("open-read", "create", "save", "declassify", ...).
        public var action: String
        /// The rule that denied ("sendData=managedApps", ...).
        public var rule: String
        /// The errno the request got (EACCES, or EPERM for a declassify).
        public var errno: Int32

        public init(accountId: String, upn: String, path: String, executable: String, action: String, rule: String, errno: Int32) {
            self.accountId = accountId
            self.upn = upn
            self.path = path
            self.executable = executable
            self.action = action
            self.rule = rule
            self.errno = errno
        }
    }

    /// The event with its path and executable passed through `scrubber` (what leaves the
    /// process never shows a value of the state's scrub list).
    public func scrubbed(by scrubber: Scrubber) -> ProtectionEvent {
        guard case .accessBlocked(var blocked) = self, !scrubber.values.isEmpty else { return self }
        blocked.path = scrubber.scrub(blocked.path)
        blocked.executable = scrubber.scrub(blocked.executable)
        return .accessBlocked(blocked)
    }
}
