import Foundation

/// One thing that happened, as the audit log records it: who (uid, pid, executable) did what
/// (action) to which object (path, owner), what was decided and by which rule.
///
/// Mirrors the audit events of endpoint DLP and Windows Information Protection
/// (app, action, file, enterprise ID, decision).
public struct AuditEvent: Sendable, Equatable {
    /// The caller's user id.
    public var uid: UInt32
    /// The caller's process id.
    public var pid: Int32
    /// The caller's executable path ("/usr/bin/cat"; for the CLI its own binary).
    public var executable: String
    /// What was asked: an `AccessAction.auditName` ("open-read", "declassify", ...) or a CLI
    /// verb's administrative action ("protect", "decrypt", "wipe", "enroll", "policy set",
    /// "provider import", ...).
    public var action: String
    /// The object's path (for an account action: the account).
    public var path: String
    /// The object's owner: an accountId, or "" for an object that is unmanaged or untagged.
    public var owner: String
    /// "denied", "audited" (would be denied, level audit), "allowed", or "failed" (a change
    /// recorded before it was made whose command then failed).
    public var decision: String
    /// The rule that denied ("allowUserDecrypt=false", "receiveData", ...), "" when allowed,
    /// "exit=N" when failed (the exit code of the command).
    public var rule: String

    public init(uid: UInt32, pid: Int32, executable: String, action: String, path: String,
                owner: String, decision: String, rule: String) {
        self.uid = uid
        self.pid = pid
        self.executable = executable
        self.action = action
        self.path = path
        self.owner = owner
        self.decision = decision
        self.rule = rule
    }

    /// An event of this process (`getuid()`, `getpid()`), e.g. of a CLI verb.
    public static func ofThisProcess(executable: String, action: String, path: String, owner: String,
                                     decision: String, rule: String) -> AuditEvent {
        AuditEvent(uid: getuid(), pid: getpid(), executable: executable, action: action, path: path,
                   owner: owner, decision: decision, rule: rule)
    }

    /// What makes two events the same for burst coalescing: everything but the pid and path.
    struct BurstKey: Hashable {
        let uid: UInt32
        let executable: String
        let action: String
        let owner: String
        let decision: String
        let rule: String
    }

    var burstKey: BurstKey {
        BurstKey(uid: uid, executable: executable, action: action, owner: owner, decision: decision, rule: rule)
    }
}
