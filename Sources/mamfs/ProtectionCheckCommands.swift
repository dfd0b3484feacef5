import Foundation
import MAMProtection

/// `verify-protect` and `can-receive`: yes/no questions about one file, answered by the exit code.
enum ProtectionCheckCommands {
    static let verifyProtect = Verb(
        "verify-protect",
        usage: ["mamfs verify-protect PATH [--account ACCOUNT] [--state DIR]"],
        summary: "Exit \(ExitCode.ok) when PATH is protected for ACCOUNT (accountId, UPN or OID.TID): tagged with it and, for a file whose owner's policy requires file encryption, encrypted. Without --account, whether PATH is protected so for its own owner (an untagged or unmanaged-tagged PATH is not). An encrypted file counts only when every block authenticates (else \(ExitCode.dataErr), naming the block). Otherwise one line saying why and exit \(ExitCode.noPerm).",
        options: ["--account ACCOUNT       the account PATH should be protected for (default: its owner)"],
        spec: ArgumentSpec(options: ["--account"], positionals: 1...1),
        run: runVerify)

    static let canReceive = Verb(
        "can-receive",
        usage: ["mamfs can-receive PATH --account ACCOUNT [--state DIR]"],
        summary: "Exit \(ExitCode.ok) when ACCOUNT's policy lets it receive the file PATH: receiveData for the file's owner (canReceiveSharedFile), then openFromLocations for the file's location (the policy's 'locations'; LocalDrive/LocalStorage when unlisted). An unmanaged account receives anything, an account its own files. Otherwise one line naming the refusing key and exit \(ExitCode.noPerm).",
        options: ["--account ACCOUNT       the receiving account"],
        spec: ArgumentSpec(options: ["--account"], positionals: 1...1),
        run: runCanReceive)

    static func runVerify(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let path = arguments.positionals[0]
        let context = try invocation.openContext()
        let check = try attempt(path) {
            try context.files.verifyProtection(path: BackingPath.forFileVerb(path), account: arguments.value("--account"))
        }
        guard check.isProtected else {
            throw CommandFailure(subject: path, message: check.reason ?? "not protected", exitCode: .noPerm)
        }
        Output.line("\(path): protected for \(check.account ?? "")")
        return ExitCode.ok
    }

    static func runCanReceive(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let path = arguments.positionals[0]
        guard let account = arguments.value("--account") else { throw UsageError("missing --account ACCOUNT") }
        let context = try invocation.openContext()
        let check = try attempt(path) { try context.files.receiveCheck(path: BackingPath.forFileVerb(path), receiver: account) }
        let owner = check.owner.map { $0.isEmpty ? "the unmanaged identity" : $0 } ?? "nobody (untagged)"
        if let key = check.deniedBy {
            let why = key == "receiveData" ? "a file owned by \(owner)" : "a file in \(check.location.name)"
            throw CommandFailure(subject: path, message: "denied by policy (\(key)): \(account) may not receive \(why)",
                                 exitCode: .noPerm)
        }
        Output.line("\(path): \(account) may receive it (owner \(owner), location \(check.location.name))")
        return ExitCode.ok
    }
}
