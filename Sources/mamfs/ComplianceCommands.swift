import Foundation
import MAMProtection

/// `compliance check`, `compliance remediate` and `compliance status`: App Protection
/// Conditional Access for a managed account whose policy has `compliance` checks.
enum ComplianceCommands {
    static let statusCodes = ComplianceStatus.allCases.map { "\($0.exitCode) \($0.rawValue)" }.joined(separator: ", ")

    static let check = Verb(
        "compliance check",
        usage: ["mamfs compliance check ACCOUNT [--path DIR]... [--json] [--state DIR]"],
        summary: "Run the compliance checks of ACCOUNT's policy, record the result (status, time, the first failing check and its reason) in the state and the audit log, and print it. While the last result is not Compliant or is older than complianceMaxAge, ACCOUNT's keys are refused (\(ExitCode.noPerm)). With wipeOnNonCompliance a NotCompliant result starts ACCOUNT's selective wipe. Exit status: \(statusCodes).",
        options: pathAndJSONHelp,
        spec: ArgumentSpec(flags: ["--json"], repeatable: ["--path"], positionals: 1...1),
        run: { try runCheck($0, $1, remediate: false) })

    static let remediate = Verb(
        "compliance remediate",
        usage: ["mamfs compliance remediate ACCOUNT [--silent] [--path DIR]... [--json] [--state DIR]"],
        summary: "Run the remediation program of each failing check of ACCOUNT's policy, then check again and record the result as 'compliance check' does. A check without a remediation program, or one marked remediateNeedsUser with --silent, needs the user: its result is InteractionRequired while it fails. Exit status: \(statusCodes).",
        options: ["--silent                never run a remediation that needs the user (InteractionRequired instead)"] + pathAndJSONHelp,
        spec: ArgumentSpec(flags: ["--json", "--silent"], repeatable: ["--path"], positionals: 1...1),
        run: { try runCheck($0, $1, remediate: true) })

    static let status = Verb(
        "compliance status",
        usage: ["mamfs compliance status ACCOUNT [--json] [--state DIR]"],
        summary: "Show ACCOUNT's last recorded compliance result. Exit status: \(statusCodes); \(ExitCode.noInput) when it was never checked.",
        options: ["--json                  print {account, status, checkedAt, failedCheck, reason}"],
        spec: ArgumentSpec(flags: ["--json"], positionals: 1...1),
        run: runStatus)

    static let pathAndJSONHelp = [
        "--path DIR              a directory the encryptedBackingDevice check looks at (repeatable; default:",
        "                        the account's backing directories and protected paths the state knows)",
        "--json                  print {account, status, checkedAt, failedCheck, reason, checks, remediations, wiped}",
    ]

    /// The `mamfs compliance --help` text.
    static var groupHelp: String {
        """
        usage: mamfs compliance check ACCOUNT [--path DIR]... [--json] [--state DIR]
               mamfs compliance remediate ACCOUNT [--silent] [--path DIR]... [--json] [--state DIR]
               mamfs compliance status ACCOUNT [--json] [--state DIR]

        Check, remediate and show the compliance of a managed account whose policy has
        'compliance' checks (exit status: \(statusCodes)). See 'mamfs compliance check --help'.

        """
    }

    static func runCheck(_ arguments: ParsedArguments, _ invocation: Invocation, remediate: Bool) throws -> ExitCode {
        let account = arguments.positionals[0]
        let paths = arguments.values("--path").map(CommandAudit.absolute)
        let context = try invocation.openContext()
        // The result (and the Wiped of wipeOnNonCompliance) on the session bus.
        context.complianceEvents = CommandEvents.attach(to: context, invocation)
        let report = try attempt(account) {
            remediate ? try context.compliance.remediate(account, silent: arguments.flag("--silent"), paths: paths)
                      : try context.compliance.check(account, paths: paths)
        }
        if arguments.flag("--json") {
            var object = resultObject(report.account, report.result)
            object["checks"] = report.outcomes.map(outcomeObject)
            object["remediations"] = report.remediations.map(outcomeObject)
            object["wiped"] = report.wipe != nil
            Output.out(try JSON.text(object))
        } else {
            for outcome in report.remediations { Output.line("remediate \(outcome.check): \(outcome.status.rawValue): \(outcome.reason)") }
            for outcome in report.outcomes { Output.line("\(outcome.check): \(outcome.status.rawValue): \(outcome.reason)") }
            Output.line(summary(report.account, report.result))
            if let wipe = report.wipe {
                Output.line("wipeOnNonCompliance: selective wipe of \(report.account.accountId): removed \(wipe.removedFiles) file\(wipe.removedFiles == 1 ? "" : "s"), destroyed \(wipe.keysDestroyed) key\(wipe.keysDestroyed == 1 ? "" : "s")")
            }
        }
        return report.result.status.exitCode
    }

    static func runStatus(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let account = arguments.positionals[0]
        let context = try invocation.openContext()
        let (identity, result) = try attempt(account) { try context.compliance.status(account) }
        guard let result else {
            if arguments.flag("--json") {
                Output.out(try JSON.text(["account": identity.accountId, "status": NSNull()] as [String: Any]))
            } else {
                Output.line("\(identity.upn ?? identity.accountId): compliance never checked")
            }
            return .noInput
        }
        if arguments.flag("--json") {
            Output.out(try JSON.text(resultObject(identity, result)))
        } else {
            Output.line(summary(identity, result))
        }
        return result.status.exitCode
    }

    /// "ACCOUNT: STATUS (CHECK: REASON), checked TIME".
    static func summary(_ identity: AccountIdentity, _ result: ComplianceResult) -> String {
        let detail = result.failedCheck.map { "\($0): \(result.reason)" } ?? result.reason
        return "\(identity.upn ?? identity.accountId): \(result.status.rawValue) (\(detail)), checked \(timestamp(result.checkedAt))"
    }

    static func resultObject(_ identity: AccountIdentity, _ result: ComplianceResult) -> [String: Any] {
        ["account": identity.accountId, "status": result.status.rawValue, "checkedAt": timestamp(result.checkedAt),
         "failedCheck": result.failedCheck.map { $0 as Any } ?? NSNull(), "reason": result.reason]
    }

    static func outcomeObject(_ outcome: ComplianceOutcome) -> [String: Any] {
        ["check": outcome.check, "status": outcome.status.rawValue, "reason": outcome.reason]
    }

    /// ISO 8601 UTC with milliseconds, as the audit log writes times.
    static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }
}
