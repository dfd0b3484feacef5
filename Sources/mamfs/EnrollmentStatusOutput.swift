import Foundation
import MAMProtection

/// `--json` of `enroll`, `unenroll` and `wipe`: one enrollment-status object on stdout, on
/// success and on failure (then the error line still goes to stderr and the exit code is the
/// failure's):
/// `{"accountId": S, "upn": S|null, "status": NAME, "statusCode": N, "error": S|null}`.
enum EnrollmentStatusOutput {
    /// Runs a verb's `body` with the sink it attaches to its context. With `json`, prints the
    /// last status the sink saw, or, when the verb failed before the library reported one
    /// (no state, a `--root` that is not a directory), an InternalError status for
    /// `accountId`/`upn` with the failure's message.
    /// Usage errors print nothing.
    static func run(_ operation: EnrollmentStatus.Operation, json: Bool, accountId: String?, upn: String?,
                    _ invocation: Invocation, _ body: (CommandSession) throws -> Void) throws -> ExitCode {
        let session = CommandSession(invocation)
        do {
            try body(session)
        } catch let error as UsageError {
            throw error
        } catch {
            if json {
                let status = session.events?.lastStatus.flatMap { $0.didSucceed ? nil : $0 }
                    ?? EnrollmentStatus(operation: operation, accountId: accountId.map(AccountIdentity.canonical) ?? "",
                                        upn: upn.map(AccountIdentity.canonical) ?? "", code: .internalError,
                                        error: CommandFailure(subject: nil, error: error).message)
                Output.out(try JSON.line(object(status)))
            }
            throw error
        }
        if json, let status = session.events?.lastStatus {
            Output.out(try JSON.line(object(status)))
        }
        return ExitCode.ok
    }

    /// What a verb body gets: the context, opened with its sink attached.
    final class CommandSession {
        let invocation: Invocation
        private(set) var events: CommandEvents?

        init(_ invocation: Invocation) { self.invocation = invocation }

        func openContext() throws -> ProtectionContext {
            let context = try invocation.openContext()
            events = CommandEvents.attach(to: context, invocation)
            return context
        }
    }

    /// The JSON object of `status`.
    static func object(_ status: EnrollmentStatus) -> [String: Any] {
        ["accountId": status.accountId,
         "upn": status.upn.isEmpty ? NSNull() : status.upn as Any,
         "status": status.code.name,
         "statusCode": Int(status.code.rawValue),
         "error": status.error.isEmpty ? NSNull() : status.error as Any]
    }
}
