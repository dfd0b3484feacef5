import Foundation

/// The answer of `AccessRules.decide`.
public struct AccessDecision: Sendable, Equatable {
    /// Allowed, denied, or allowed but recorded (level `audit`).
    public var verdict: Verdict
    /// The rule that denies (or would deny): "sendData=managedApps", "allowUserDecrypt=false",
    /// "saveToLocations", "openFromLocations", "receiveData" or "workDirectory"; "" when allowed.
    public var rule: String
    /// For `.create`: the owner the new file gets (an accountId, "" or nil for untagged);
    /// nil for every other action.
    public var newOwner: String?
    /// The errno a filesystem answers when `verdict` is `.denied`: EACCES, EPERM for
    /// `.declassify` (an owner change); 0 when the rule allows.
    public var errno: Int32

    public init(verdict: Verdict, rule: String, newOwner: String?, errno: Int32) {
        self.verdict = verdict
        self.rule = rule
        self.newOwner = newOwner
        self.errno = errno
    }

    /// An allowed decision without a record.
    public static func allowed(newOwner: String? = nil) -> AccessDecision {
        AccessDecision(verdict: .allowed, rule: "", newOwner: newOwner, errno: 0)
    }

    /// True when the decision goes to the audit log (denied, or allowed at level `audit`).
    public var isRecorded: Bool { verdict != .allowed }

    /// True when the operation may go ahead (allowed, or allowed at level `audit`).
    public var permits: Bool { verdict != .denied }
}
