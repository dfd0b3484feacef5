import Foundation
import MAMProtection

/// `enroll`, `unenroll`, `accounts` and `wipe`: registering the managed account, removing it,
/// listing accounts and selective wipe.
enum AccountCommands {
    /// What `--json` of enroll, unenroll and wipe prints (`EnrollmentStatusOutput`).
    static let jsonHelp = [
        "--json                  print the enrollment status as one JSON object, also on failure:",
        "                        {accountId, upn, status, statusCode, error} (status and statusCode as",
        "                        the session-bus signals carry them: docs/NOTIFICATIONS.md)"]

    static let enroll = Verb(
        "enroll",
        usage: ["mamfs enroll ACCOUNT [--upn UPN] --policy POLICY.json [--json] [--state DIR]",
                "mamfs enroll --upn UPN --policy POLICY.json [--json] [--state DIR]"],
        summary: "Register ACCOUNT (an accountId GUID, or a homeAccountId OID.TID whose TID is recorded as the tenant) as the managed account with the policy in POLICY.json. Only one account can be managed at a time. With --upn alone the account is enrolled by its UPN and keyed by it (its files carry the UPN as owner) until a later enroll names both, which records the accountId. When the allowed-accounts list is set (see 'mamfs accounts allow'), any other account is refused (\(ExitCode.noPerm)) and the refusal is written to the audit log.",
        options: ["--upn UPN               the account's user principal name (user@contoso.com)",
                  "--policy POLICY.json    the account's policy (schema in docs/POLICY.md)",
                  jsonHelp[0], jsonHelp[1], jsonHelp[2]],
        spec: ArgumentSpec(flags: ["--json"], options: ["--upn", "--policy"], positionals: 0...1),
        run: runEnroll)

    static let unenroll = Verb(
        "unenroll",
        usage: ["mamfs unenroll ACCOUNT [--wipe] [--root DIR]... [--keep-registered] [--json] [--state DIR]"],
        summary: "Unenroll ACCOUNT (accountId, UPN or OID.TID): it is no longer managed, and no longer registered unless --keep-registered (its keys stay, so its encrypted files remain readable, and a later 'mamfs wipe' still finds it). With --wipe, also selectively wipe it (see 'mamfs wipe').",
        options: ["--wipe                  also remove every file the account owns and destroy its keys",
                  "--root DIR              with --wipe: also search DIR for the account's files (repeatable)",
                  "--keep-registered       leave the account registered",
                  jsonHelp[0], jsonHelp[1], jsonHelp[2]],
        spec: ArgumentSpec(flags: ["--wipe", "--keep-registered", "--json"], repeatable: ["--root"], positionals: 1...1),
        run: runUnenroll)

    static let accounts = Verb(
        "accounts",
        usage: ["mamfs accounts [--enrolled] [--json] [--state DIR]"],
        summary: "List the accounts the state knows: accountId, UPN, whether each is managed (enrolled) and registered. An account enrolled by its UPN alone has no accountId until one is recorded.",
        options: ["--enrolled              list only the enrolled (managed) accounts",
                  "--json                  print a JSON array of {accountId, upn, tenantId, managed, registered, wiped};",
                  "                        accountId, upn, tenantId are null when not known, wiped is the time of the",
                  "                        last selective wipe (ISO 8601) or null"],
        spec: ArgumentSpec(flags: ["--json", "--enrolled"]),
        run: runAccounts)

    static let wipe = Verb(
        "wipe",
        usage: ["mamfs wipe ACCOUNT [--root DIR]... [--json] [--state DIR]"],
        summary: "Selective wipe: remove every file ACCOUNT (accountId or UPN) owns under the known roots (mounted backing directories and protected paths) and every --root, and destroy the account's keys so copies elsewhere cannot be read. Directories of the account (tagged with it, or untagged below one that is) that are left empty are removed too; the roots themselves, directories of other owners, untagged ones and any that still hold something stay. Other files are left alone. Symbolic links are never followed and other filesystems mounted inside a root are not entered; exits \(ExitCode.ioErr) when another process keeps the deleted key bytes in the state files (run it again when it is closed).",
        options: ["--root DIR              also search DIR for the account's files (repeatable)",
                  jsonHelp[0], jsonHelp[1], jsonHelp[2]],
        spec: ArgumentSpec(flags: ["--json"], repeatable: ["--root"], positionals: 1...1),
        run: runWipe)

    static func runEnroll(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let account = arguments.positionals.first
        let upn = arguments.value("--upn")
        guard account != nil || upn != nil else {
            throw UsageError("missing ACCOUNT (or --upn UPN to enroll by UPN alone)")
        }
        guard let policyPath = arguments.value("--policy") else {
            throw UsageError("missing --policy POLICY.json")
        }
        let json = arguments.flag("--json")
        return try EnrollmentStatusOutput.run(.enroll, json: json, accountId: account, upn: upn, invocation) { session in
            let policy = try PolicyCommands.readPolicy(policyPath)
            let context = try session.openContext()
            let named = account ?? upn ?? ""
            do {
                try CommandAudit.requireAllowed(context, action: "enroll", names: [upn, account])
            } catch let failure as CommandFailure {
                // The library's enroll is not reached: the refusal is the enrollment's status.
                context.report(.enrolled(.failed(.enroll, accountId: account, upn: upn, error: MAMError.policyDenied(failure.message))))
                throw failure
            }
            let identity = try attempt(named) { try context.enrollment.enroll(accountId: account, upn: upn, policy: policy) }
            CommandAudit.record(context, action: "enroll", path: identity.accountId, owner: identity.accountId)
            if !json { Output.line("Enrolled \(displayName(identity)) as the managed account (policy from \(policyPath))") }
        }
    }

    static func runUnenroll(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let account = arguments.positionals[0]
        let wipe = arguments.flag("--wipe")
        let roots = arguments.values("--root")
        if !roots.isEmpty && !wipe {
            throw UsageError("--root is only used with --wipe")
        }
        let json = arguments.flag("--json")
        return try EnrollmentStatusOutput.run(.unenroll, json: json, accountId: account, upn: nil, invocation) { session in
            try requireDirectories(roots)
            let context = try session.openContext()
            let accountId = (try? context.resolveAccount(account))?.accountId ?? AccountIdentity.canonical(account)
            let progress = ProgressLine(prefix: "mamfs: unenroll: wiping: ")
            defer { progress.finish() }
            let keep = arguments.flag("--keep-registered")
            let report = try attempt(account) {
                try context.enrollment.unenroll(account, wipe: wipe, keepRegistered: keep, roots: roots,
                                                progress: wipe ? { progress.update(describe($0)) } : nil)
            }
            progress.finish()
            CommandAudit.record(context, action: "unenroll", path: accountId, owner: accountId)
            if let report { printNotes(report, verb: "unenroll") }
            guard !json else { return }
            Output.line(keep ? "Unenrolled \(account) (still registered)" : "Unenrolled and deregistered \(account)")
            if let report { Output.line(summary(of: report, account: account)) }
        }
    }

    static func runAccounts(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let context = try invocation.openContext()
        let enrolledOnly = arguments.flag("--enrolled")
        let records = try attempt(nil) {
            try enrolledOnly ? context.enrollment.enrolledAccounts() : context.enrollment.accounts()
        }
        if arguments.flag("--json") {
            let objects: [[String: Any]] = records.map { record in
                ["accountId": record.knownAccountId.map { $0 as Any } ?? NSNull(),
                 "upn": record.upn.map { $0 as Any } ?? NSNull(),
                 "tenantId": record.tenantId.map { $0 as Any } ?? NSNull(),
                 "managed": record.managed,
                 "registered": record.registered,
                 "wiped": record.wipedAt.map { formatTime($0) as Any } ?? NSNull()]
            }
            Output.out(try JSON.text(objects))
            return ExitCode.ok
        }
        if records.isEmpty {
            Output.line(enrolledOnly ? "No enrolled accounts." : "No accounts.")
            return ExitCode.ok
        }
        var rows = [["ACCOUNT ID", "UPN", "MANAGED", "REGISTERED", "WIPED"]]
        for record in records {
            rows.append([record.knownAccountId ?? "-", record.upn ?? "-", record.managed ? "yes" : "no",
                         record.registered ? "yes" : "no", record.wipedAt.map(formatTime) ?? "-"])
        }
        Output.out(Output.table(rows))
        return ExitCode.ok
    }

    /// How an enrolled identity is named to the user: "UPN (accountId)", the accountId, or the
    /// UPN alone for an account keyed by its UPN.
    static func displayName(_ identity: AccountIdentity) -> String {
        identity.upn == identity.accountId ? identity.accountId : identity.description
    }

    static func runWipe(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let account = arguments.positionals[0]
        let roots = arguments.values("--root")
        let json = arguments.flag("--json")
        return try EnrollmentStatusOutput.run(.wipe, json: json, accountId: account, upn: nil, invocation) { session in
            try requireDirectories(roots)
            let context = try session.openContext()
            let progress = ProgressLine(prefix: "mamfs: wipe: ")
            defer { progress.finish() }
            let report = try attempt(account) {
                try context.enrollment.wipe(account, roots: roots, progress: { progress.update(describe($0)) },
                                            removed: invocation.verbose && !json ? { Output.line("removed \($0)") } : nil)
            }
            progress.finish()
            let accountId = (try? context.resolveAccount(account))?.accountId ?? AccountIdentity.canonical(account)
            CommandAudit.record(context, action: "wipe", path: accountId, owner: accountId)
            printNotes(report, verb: "wipe")
            if !json { Output.line(summary(of: report, account: account)) }
        }
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
            + (report.unexamined == 0 ? "" : "; \(report.unexamined) entr\(report.unexamined == 1 ? "y" : "ies") not examined (see the notes)")
    }

    static func describe(_ progress: WipeProgress) -> String {
        "\(progress.examined) files examined, \(progress.removed) removed"
    }

    static func formatTime(_ seconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }
}
