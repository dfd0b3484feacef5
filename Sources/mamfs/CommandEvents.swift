import Foundation
import MAMBus
import MAMProtection

/// The event sink of a verb that enrolls, unenrolls, wipes, sets a policy or records a
/// compliance result: each event is published on the session bus before the verb goes on
/// (`BusEventPublisher`, synchronous), and the last enrollment status is kept for `--json`. Without a session bus nothing is
/// published and, with `-v`, one line on stderr says so.
final class CommandEvents: ProtectionEventSink, ComplianceEventSink, @unchecked Sendable {
    private let publisher: BusEventPublisher
    private let lock = NSLock()
    private var status: EnrollmentStatus?

    /// Makes a sink for `invocation` and sets it as `context`'s.
    @discardableResult
    static func attach(to context: ProtectionContext, _ invocation: Invocation) -> CommandEvents {
        let events = CommandEvents(invocation)
        context.eventSink = events
        return events
    }

    private init(_ invocation: Invocation) {
        let verb = invocation.verb
        let verbose = invocation.verbose
        publisher = BusEventPublisher(environment: invocation.environment, options: .init(),
                                      log: { Output.error("mamfs: \(verb): \($0)") },
                                      debug: { if verbose { Output.error("mamfs: \(verb): \($0)") } })
    }

    func deliver(_ event: ProtectionEvent) {
        switch event {
        case .enrolled(let value), .unenrolled(let value), .policyChanged(let value), .wiped(let value, _, _):
            lock.lock()
            status = value
            lock.unlock()
        default:
            break
        }
        publisher.deliver(event)
    }

    /// `ComplianceResult`: the status's name and exit code (`ComplianceStatus.exitCode`), the
    /// failed check and its reason as the error ("" when Compliant).
    func complianceResultRecorded(account: AccountIdentity, result: ComplianceResult, wiped: Bool) {
        let error = result.status == .compliant ? "" : (result.failedCheck.map { "\($0): \(result.reason)" } ?? result.reason)
        publisher.publishComplianceResult(accountId: account.accountId, upn: account.upn ?? "", result: result.status.rawValue,
                                          code: UInt32(result.status.exitCode.rawValue), error: error)
    }

    /// The status of the last enrollment event (nil before any).
    var lastStatus: EnrollmentStatus? {
        lock.lock()
        defer { lock.unlock() }
        return status
    }
}
