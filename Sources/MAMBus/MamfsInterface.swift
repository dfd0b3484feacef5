import Glibc
import MAMProtection

/// The D-Bus interface mamfs publishes on the session bus (docs/NOTIFICATIONS.md): the
/// well-known name, object path and interface, and one signal per `ProtectionEvent`.
///
/// Every signal starts with the same four arguments, `accountId s, upn s, status u, error s`,
/// then the event's own:
///
/// | signal | status | more |
/// |---|---|---|
/// | `Enrolled`, `Unenrolled`, `PolicyChanged` | `EnrollmentStatusCode` | |
/// | `Wiped` | `EnrollmentStatusCode` | `removedFiles u`, `keysDestroyed u` |
/// | `AccessBlocked` | the errno the request got (13 EACCES, 1 EPERM) | `path s`, `executable s`, `action s`, `rule s` |
/// | `KeysDropped` | 0 | `reason s` |
/// | `ComplianceResult` | the result's code | `result s` |
public enum MamfsInterface {
    /// The well-known name a mount daemon owns while it is mounted.
    public static let busName = "org.mamfs.Mamfs1"
    public static let objectPath = "/org/mamfs/Mamfs1"
    public static let interface = "org.mamfs.Mamfs1"
    /// The match rule for every signal of the interface.
    public static let matchRule = "type='signal',interface='\(interface)',path='\(objectPath)'"

    /// The signals, by member name.
    public enum Signal: String, CaseIterable, Sendable {
        case enrolled = "Enrolled"
        case unenrolled = "Unenrolled"
        case wiped = "Wiped"
        case policyChanged = "PolicyChanged"
        case accessBlocked = "AccessBlocked"
        case keysDropped = "KeysDropped"
        case complianceResult = "ComplianceResult"

        /// The names of the arguments after the common four, in order.
        public var extraArguments: [String] {
            switch self {
            case .enrolled, .unenrolled, .policyChanged: return []
            case .wiped: return ["removedFiles", "keysDestroyed"]
            case .accessBlocked: return ["path", "executable", "action", "rule"]
            case .keysDropped: return ["reason"]
            case .complianceResult: return ["result"]
            }
        }

        /// The D-Bus signature of its arguments ("ssus", "ssusuu", ...).
        public var signature: String {
            "ssus" + (self == .wiped ? "uu" : String(repeating: "s", count: extraArguments.count))
        }
    }

    /// The common arguments' names.
    public static let commonArguments = ["accountId", "upn", "status", "error"]

    /// The signal and its arguments for `event`.
    public static func signal(for event: ProtectionEvent) -> (Signal, [BusValue]) {
        func common(_ status: EnrollmentStatus) -> [BusValue] {
            [.string(status.accountId), .string(status.upn), .uint32(status.code.rawValue), .string(status.error)]
        }
        switch event {
        case .enrolled(let status):
            return (.enrolled, common(status))
        case .unenrolled(let status):
            return (.unenrolled, common(status))
        case .policyChanged(let status):
            return (.policyChanged, common(status))
        case .wiped(let status, let files, let keys):
            return (.wiped, common(status) + [.uint32(UInt32(clamping: files)), .uint32(UInt32(clamping: keys))])
        case .accessBlocked(let blocked):
            return (.accessBlocked, [.string(blocked.accountId), .string(blocked.upn), .uint32(UInt32(clamping: blocked.errno)),
                                     .string("denied by policy (\(blocked.rule))"),
                                     .string(blocked.path), .string(blocked.executable), .string(blocked.action), .string(blocked.rule)])
        case .keysDropped(let accountId, let upn, let reason):
            return (.keysDropped, [.string(accountId), .string(upn), .uint32(0), .string(""), .string(reason)])
        case .complianceResult(let accountId, let upn, let result, let code, let error):
            return (.complianceResult, [.string(accountId), .string(upn), .uint32(code), .string(error), .string(result)])
        }
    }

    /// The signal message for `event`.
    /// - Throws: `BusError` when libdbus cannot make it (out of memory).
    public static func message(for event: ProtectionEvent) throws -> BusMessage {
        let (signal, arguments) = self.signal(for: event)
        return try BusMessage.signal(path: objectPath, interface: interface, member: signal.rawValue, arguments: arguments)
    }

    /// The name of a signal's status: an `EnrollmentStatusCode`'s name, an errno's
    /// ("EACCES"), a compliance result's; "" for `KeysDropped`.
    public static func statusName(_ signal: Signal, code: UInt32, arguments: [BusValue]) -> String {
        switch signal {
        case .enrolled, .unenrolled, .policyChanged, .wiped:
            return EnrollmentStatusCode(rawValue: code)?.name ?? "\(code)"
        case .accessBlocked:
            switch Int32(clamping: code) {
            case EACCES: return "EACCES"
            case EPERM: return "EPERM"
            default: return "errno \(code)"
            }
        case .keysDropped:
            return ""
        case .complianceResult:
            return arguments.count > 4 ? arguments[4].string ?? "" : ""
        }
    }
}
