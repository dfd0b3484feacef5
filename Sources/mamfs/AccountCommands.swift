import Foundation
import MAMProtection

/// `enroll`, `unenroll`, `accounts` and `wipe`: registering the managed account, removing it,
/// listing accounts and selective wipe.
enum AccountCommands {
    static let enroll = Verb(
        "enroll",
        usage: ["mamfs enroll ACCOUNT [--upn UPN] --policy POLICY.json [--state DIR]"],
        summary: "Register ACCOUNT (an accountId GUID) as the managed account with the policy in POLICY.json. Only one account can be managed at a time.",
        options: ["--upn UPN               the account's user principal name (user@contoso.com)",
                  "--policy POLICY.json    the account's policy (schema in docs/POLICY.md)"],
        spec: ArgumentSpec(options: ["--upn", "--policy"], positionals: 1...1),
        run: runEnroll)

    static let unenroll = Verb(
        "unenroll",
        usage: ["mamfs unenroll ACCOUNT [--wipe] [--root DIR]... [--state DIR]"],
        summary: "Unenroll ACCOUNT (accountId or UPN): it is no longer managed. With --wipe, also selectively wipe it (see 'mamfs wipe').",
        options: ["--wipe                  also remove every file the account owns and destroy its keys",
                  "--root DIR              with --wipe: also search DIR for the account's files (repeatable)"],
        spec: ArgumentSpec(flags: ["--wipe"], repeatable: ["--root"], positionals: 1...1),
        run: runUnenroll)

    static let accounts = Verb(
        "accounts",
        usage: ["mamfs accounts [--json] [--state DIR]"],
        summary: "List the registered accounts: accountId, UPN and whether each is managed.",
        options: ["--json                  print a JSON array of {accountId, upn, managed}"],
        spec: ArgumentSpec(flags: ["--json"]),
        run: runAccounts)

    static let wipe = Verb(
        "wipe",
        usage: ["mamfs wipe ACCOUNT [--root DIR]... [--state DIR]"],
        summary: "Selective wipe: remove every file ACCOUNT (accountId or UPN) owns under the known roots (mounted backing directories and protected paths) and every --root, and destroy the account's keys so copies elsewhere cannot be read. Directories of the account (tagged with it, or untagged below one that is) that are left empty are removed too; the roots themselves, directories of other owners, untagged ones and any that still hold something stay. Other files are left alone. Symbolic links are never followed and other filesystems mounted inside a root are not entered; exits \(ExitCode.ioErr) when another process keeps the deleted key bytes in the state files (run it again when it is closed).",
        options: ["--root DIR              also search DIR for the account's files (repeatable)"],
        spec: ArgumentSpec(repeatable: ["--root"], positionals: 1...1),
        run: runWipe)

    static func runEnroll(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let account = arguments.positionals[0]
        guard let policyPath = arguments.value("--policy") else {
            throw UsageError("missing --policy POLICY.json")
        }
        let policy = try PolicyCommands.readPolicy(policyPath)
        let context = try invocation.openContext()
        let identity = try attempt(account) {
            try context.enrollment.enroll(accountId: account, upn: arguments.value("--upn"), policy: policy)
        }
        CommandAudit.record(context, action: "enroll", path: identity.accountId, owner: identity.accountId)
        Output.line("Enrolled \(identity) as the managed account (policy from \(policyPath))")
        return ExitCode.ok
    }

    static func runUnenroll(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let account = arguments.positionals[0]
        let wipe = arguments.flag("--wipe")
        let roots = arguments.values("--root")
        if !roots.isEmpty && !wipe {
            throw UsageError("--root is only used with --wipe")
        }
        try requireDirectories(roots)
        let context = try invocation.openContext()
        let accountId = (try? context.resolveAccount(account))?.accountId ?? AccountIdentity.canonical(account)
        let progress = ProgressLine(prefix: "mamfs: unenroll: wiping: ")
        defer { progress.finish() }
        let report = try attempt(account) {
            try context.enrollment.unenroll(account, wipe: wipe, roots: roots,
                                            progress: wipe ? { progress.update(describe($0)) } : nil)
        }
        progress.finish()
        CommandAudit.record(context, action: "unenroll", path: accountId, owner: accountId)
        Output.line("Unenrolled \(account)")
        if let report {
            printNotes(report, verb: "unenroll")
            Output.line(summary(of: report, account: account))
        }
        return ExitCode.ok
    }

    static func runAccounts(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let context = try invocation.openContext()
        let records = try attempt(nil) { try context.enrollment.accounts() }
        if arguments.flag("--json") {
            let objects: [[String: Any]] = records.map { record in
                ["accountId": record.accountId,
                 "upn": record.upn.map { $0 as Any } ?? NSNull(),
                 "managed": record.managed]
            }
            Output.out(try JSON.text(objects))
            return ExitCode.ok
        }
        if records.isEmpty {
            Output.line("No accounts.")
            return ExitCode.ok
        }
        var rows = [["ACCOUNT ID", "UPN", "MANAGED", "WIPED"]]
        for record in records {
            rows.append([record.accountId, record.upn ?? "-", record.managed ? "yes" : "no",
                         record.wipedAt.map(formatTime) ?? "-"])
        }
        Output.out(Output.table(rows))
        return ExitCode.ok
    }

    static func runWipe(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let account = arguments.positionals[0]
        let roots = arguments.values("--root")
        try requireDirectories(roots)
        let context = try invocation.openContext()
        let progress = ProgressLine(prefix: "mamfs: wipe: ")
        defer { progress.finish() }
        let report = try attempt(account) {
            try context.enrollment.wipe(account, roots: roots, progress: { progress.update(describe($0)) },
                                        removed: invocation.verbose ? { Output.line("removed \($0)") } : nil)
        }
        progress.finish()
        let accountId = (try? context.resolveAccount(account))?.accountId ?? AccountIdentity.canonical(account)
        CommandAudit.record(context, action: "wipe", path: accountId, owner: accountId)
        printNotes(report, verb: "wipe")
        Output.line(summary(of: report, account: account))
        return ExitCode.ok
    }

    /// Every `--root` must be an existing directory and not a symbolic link (`.noInput` otherwise): a
    /// typo must not make a wipe silently skip the tree it was meant for, and a wipe never
    /// follows symbolic links.
    static func requireDirectories(_ roots: [String]) throws {
        for root in roots {
            var st = stat()
            guard lstat(root, &st) == 0 else {
                if errno == EACCES {
                    throw CommandFailure(subject: root, message: "permission denied", exitCode: ExitCode.noPerm)
                }
                throw CommandFailure(subject: root, message: "no such directory", exitCode: ExitCode.noInput)
            }
            if (st.st_mode & S_IFMT) == S_IFLNK {
                throw CommandFailure(subject: root, message: "is a symbolic link; a wipe does not follow symbolic links (give the directory it points to)",
                                     exitCode: ExitCode.noInput)
            }
            guard (st.st_mode & S_IFMT) == S_IFDIR else {
                throw CommandFailure(subject: root, message: "not a directory", exitCode: ExitCode.noInput)
            }
        }
    }

    /// Prints what a wipe skipped, one `mamfs: VERB: note: ...` line each on stderr.
    static func printNotes(_ report: WipeReport, verb: String) {
        for note in report.notes { Output.error("mamfs: \(verb): note: \(note)") }
    }

    static func summary(of report: WipeReport, account: String) -> String {
        "Wiped \(account): removed \(report.removedFiles) file\(report.removedFiles == 1 ? "" : "s") and \(report.removedDirectories) director\(report.removedDirectories == 1 ? "y" : "ies"), destroyed \(report.keysDestroyed) key\(report.keysDestroyed == 1 ? "" : "s")"
    }

    static func describe(_ progress: WipeProgress) -> String {
        "\(progress.examined) files examined, \(progress.removed) removed"
    }

    static func formatTime(_ seconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }
}
