import Foundation

/// One entry of the policy key `compliance`: a condition the workstation must meet before the
/// account's keys are unwrapped (App Protection Conditional Access; see docs/POLICY.md).
public struct ComplianceCheck: Equatable, Sendable {
    /// What is checked.
    public enum Kind: Equatable, Sendable {
        /// The backing directory lives on a dm-crypt (LUKS or plain) block device.
        case encryptedBackingDevice
        /// The desktop locks the screen (`org.gnome.desktop.screensaver lock-enabled`).
        case screenLockEnabled
        /// apt's newest evidence of a package update is at most this many days old.
        case packagesUpdatedWithinDays(Int)
        /// An organisation's program: absolute path and arguments, killed after `timeoutSeconds`.
        case command([String], timeoutSeconds: Double)
    }

    public let kind: Kind
    /// The program `mamfs compliance remediate` runs when the check fails (absolute path and
    /// arguments), or nil.
    public let remediate: [String]?
    /// Whether remediating needs the user (a prompt, a password): `remediate --silent` answers
    /// InteractionRequired instead of running it. A failing check without `remediate` always
    /// needs the user.
    public let remediateNeedsUser: Bool

    public init(kind: Kind, remediate: [String]? = nil, remediateNeedsUser: Bool = false) {
        self.kind = kind
        self.remediate = remediate
        self.remediateNeedsUser = remediateNeedsUser
    }

    /// The `check` value: "encryptedBackingDevice", "screenLockEnabled",
    /// "packagesUpdatedWithinDays", "command".
    public var checkName: String {
        switch kind {
        case .encryptedBackingDevice: return "encryptedBackingDevice"
        case .screenLockEnabled: return "screenLockEnabled"
        case .packagesUpdatedWithinDays: return "packagesUpdatedWithinDays"
        case .command: return "command"
        }
    }

    /// How results and refusals name the check: the `check` value, for `command` followed by
    /// the program's path ("command /usr/local/bin/edr-status").
    public var displayName: String {
        if case .command(let argv, _) = kind, let program = argv.first { return "command \(program)" }
        return checkName
    }

    /// Default `timeoutSeconds` of a command check and of every remediation.
    public static let defaultTimeoutSeconds: Double = 30
    /// Largest `timeoutSeconds` accepted.
    public static let maximumTimeoutSeconds: Double = 3600
    /// Largest `days` accepted.
    public static let maximumDays = 36500

    static let allowedKeys: [String: Set<String>] = [
        "encryptedBackingDevice": ["check", "remediate", "remediateNeedsUser"],
        "screenLockEnabled": ["check", "remediate", "remediateNeedsUser"],
        "packagesUpdatedWithinDays": ["check", "days", "remediate", "remediateNeedsUser"],
        "command": ["check", "command", "timeoutSeconds", "remediate", "remediateNeedsUser"],
    ]

    /// Parses one element of `compliance`.
    /// - Parameters: `value` the JSON value, `index` its position (for messages), `fail` builds
    ///   the error for a message.
    /// - Throws: what `fail` builds, for a non-object, a missing or unknown `check`, a key the
    ///   check does not take, `days` that is not an integer in 0...36500, a `command` or
    ///   `remediate` that is not a non-empty array of strings starting with an absolute path,
    ///   a `timeoutSeconds` that is not a number in (0, 3600], a `remediateNeedsUser` that is
    ///   not a boolean.
    static func parse(_ value: Any, index: Int, fail: (String) -> MAMError) throws -> ComplianceCheck {
        let at = "element \(index)"
        guard let object = value as? [String: Any] else {
            throw fail("\(at) must be an object, got \(Policy.describe(value))")
        }
        guard let nameValue = object["check"] else { throw fail("\(at): missing 'check'") }
        guard let name = nameValue as? String, !Policy.isJSONBool(nameValue) else {
            throw fail("\(at): 'check' must be a string, got \(Policy.describe(nameValue))")
        }
        guard let allowed = allowedKeys[name] else {
            throw fail("\(at): unknown check '\(InputQuote.short(name))' (allowed: \(allowedKeys.keys.sorted().joined(separator: ", ")))")
        }
        if let extra = object.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw fail("\(at): unknown key '\(InputQuote.short(extra))' for check '\(name)' (allowed keys: \(allowed.sorted().joined(separator: ", ")))")
        }
        let remediate = try object["remediate"].map { try program($0, key: "remediate", at: at, fail: fail) }
        var needsUser = false
        if let flag = object["remediateNeedsUser"] {
            guard Policy.isJSONBool(flag), let bool = flag as? Bool else {
                throw fail("\(at): 'remediateNeedsUser' must be true or false, got \(Policy.describe(flag))")
            }
            needsUser = bool
        }
        let kind: Kind
        switch name {
        case "encryptedBackingDevice": kind = .encryptedBackingDevice
        case "screenLockEnabled": kind = .screenLockEnabled
        case "packagesUpdatedWithinDays":
            guard let daysValue = object["days"] else { throw fail("\(at): check 'packagesUpdatedWithinDays' needs 'days'") }
            guard let days = integer(daysValue), (0...maximumDays).contains(days) else {
                throw fail("\(at): 'days' must be an integer from 0 to \(maximumDays), got \(Policy.describe(daysValue))")
            }
            kind = .packagesUpdatedWithinDays(days)
        default:
            guard let argvValue = object["command"] else { throw fail("\(at): check 'command' needs 'command'") }
            let argv = try program(argvValue, key: "command", at: at, fail: fail)
            var timeout = defaultTimeoutSeconds
            if let timeoutValue = object["timeoutSeconds"] {
                guard let number = timeoutValue as? NSNumber, !Policy.isJSONBool(timeoutValue),
                      number.doubleValue > 0, number.doubleValue <= maximumTimeoutSeconds else {
                    throw fail("\(at): 'timeoutSeconds' must be a number above 0 and at most \(Int(maximumTimeoutSeconds)), got \(Policy.describe(timeoutValue))")
                }
                timeout = number.doubleValue
            }
            kind = .command(argv, timeoutSeconds: timeout)
        }
        return ComplianceCheck(kind: kind, remediate: remediate, remediateNeedsUser: needsUser)
    }

    /// A JSON integer (not a boolean, not a fraction).
    static func integer(_ value: Any) -> Int? {
        guard let number = value as? NSNumber, !Policy.isJSONBool(value) else { return nil }
        let double = number.doubleValue
        guard double.rounded() == double, abs(double) < 1e15 else { return nil }
        return Int(double)
    }

    /// A program and its arguments: a non-empty array of strings, the first an absolute path.
    private static func program(_ value: Any, key: String, at: String, fail: (String) -> MAMError) throws -> [String] {
        guard let array = value as? [Any], !array.isEmpty, array.allSatisfy({ $0 is String && !Policy.isJSONBool($0) }) else {
            throw fail("\(at): '\(key)' must be a non-empty array of strings (the program's absolute path, then its arguments), got \(Policy.describe(value))")
        }
        let argv = array.compactMap { $0 as? String }
        guard argv[0].hasPrefix("/"), !argv.contains(where: { $0.contains("\0") }) else {
            throw fail("\(at): '\(key)': the program '\(InputQuote.short(argv[0]))' must be an absolute path")
        }
        return argv
    }

    /// The check as a JSON object (keys sorted, compact), for `Policy.jsonData()`.
    func jsonText() -> String {
        var members: [String] = ["\"check\": \"\(checkName)\""]
        switch kind {
        case .encryptedBackingDevice, .screenLockEnabled: break
        case .packagesUpdatedWithinDays(let days): members.append("\"days\": \(days)")
        case .command(let argv, let timeout):
            members.append("\"command\": [" + argv.map(Policy.jsonString).joined(separator: ", ") + "]")
            members.append("\"timeoutSeconds\": \(Self.numberText(timeout))")
        }
        if let remediate { members.append("\"remediate\": [" + remediate.map(Policy.jsonString).joined(separator: ", ") + "]") }
        if remediateNeedsUser { members.append("\"remediateNeedsUser\": true") }
        return "{" + members.sorted().joined(separator: ", ") + "}"
    }

    static func numberText(_ value: Double) -> String {
        value.rounded() == value ? String(Int(value)) : String(value)
    }
}
