import Foundation
import MAMProtection

/// `protect-data` and `unprotect-data`: buffer protection from stdin to stdout.
enum DataCommands {
    static let protectData = Verb(
        "protect-data",
        usage: ["mamfs protect-data --account ACCOUNT [--base64] [--state DIR]"],
        summary: "Protect the bytes on stdin for ACCOUNT (accountId or UPN; '' for unmanaged) and write the result to stdout. Data of a managed account is encrypted; for an unmanaged one a header naming the identity is added and the data stays plain.",
        options: ["--account ACCOUNT       the owner of the data; '' for unmanaged",
                  "--base64                write the result as base64 text (one line)"],
        spec: ArgumentSpec(flags: ["--base64"], options: ["--account"]),
        run: runProtect)

    static let unprotectData = Verb(
        "unprotect-data",
        usage: ["mamfs unprotect-data [--base64] [--state DIR]"],
        summary: "Read protected bytes from stdin and write the plaintext to stdout. Input that was never protected is written back unchanged. Data of a managed account is a declassification, as for decrypt: its policy's allowUserDecrypt decides (\(ExitCode.noPerm) when denied), and the audit log records it.",
        options: ["--base64                the input is base64 text (as written by protect-data --base64)"],
        spec: ArgumentSpec(flags: ["--base64"]),
        run: runUnprotect)

    static func runProtect(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        guard let account = arguments.value("--account") else {
            throw UsageError("missing --account ACCOUNT (use --account '' for unmanaged)")
        }
        let context = try invocation.openContext()
        let accountId = try ProtectCommands.resolve(account, in: context)
        let input = try Output.readStandardInput()
        let protected = try attempt("stdin") { try context.data.protect(input, accountId: accountId) }
        if arguments.flag("--base64") {
            Output.line(protected.base64EncodedString())
        } else {
            Output.bytes(protected)
        }
        return ExitCode.ok
    }

    static func runUnprotect(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let context = try invocation.openContext()
        var input = try Output.readStandardInput()
        if arguments.flag("--base64") {
            let text = String(decoding: input, as: UTF8.self).filter { !$0.isWhitespace }
            guard let decoded = Data(base64Encoded: text) else {
                throw CommandFailure(subject: "stdin", message: "input is not base64", exitCode: ExitCode.dataErr)
            }
            input = decoded
        }
        // Data of a managed account written out as plaintext is a declassification, as
        // `decrypt -o -` of the same bytes in a file is: its policy's allowUserDecrypt decides,
        // and the log records it (the path is "-", stdin). Personal data is not recorded.
        let owner = try attempt("stdin") { try context.data.protectionInfo(input) }
            .flatMap { context.policyEvaluator.isManaged(accountId: $0) ? $0 : nil }
        var audited = false
        if let owner {
            audited = try !CommandAudit.requireDeclassifyAllowed(context, action: "unprotect-data", owners: [("-", owner)],
                                                                  newOwner: "", recorded: { $0 }) { _ in "stdin" }.isEmpty
        }
        if let owner, !audited {
            try CommandAudit.recordDeclassification(context, action: "unprotect-data", path: "-", owner: owner, subject: "stdin")
        }
        let plain: Data
        do {
            plain = try attempt("stdin") { try context.data.unprotect(input) }
        } catch let failure as CommandFailure where owner != nil {
            // Recorded first (allowed or audited): the record is followed by the failure.
            CommandAudit.recordFailure(context, action: "unprotect-data", objects: [("-", owner)], failure: failure)
            throw failure
        }
        Output.bytes(plain)
        return ExitCode.ok
    }
}
