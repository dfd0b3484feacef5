import Foundation
import MAMProtection

/// `protect`, `info`, `encrypt` and `decrypt`: file protection on real paths.
enum ProtectCommands {
    static let protect = Verb(
        "protect",
        usage: ["mamfs protect PATH... --account ACCOUNT [-R] [--state DIR]"],
        summary: "Set the owner of each PATH to ACCOUNT (accountId, UPN or OID.TID). When the allowed-accounts list is set, any other account is refused (\(ExitCode.noPerm), written to the audit log). Files of a managed account whose policy requires encryption are encrypted; --account '' makes files unmanaged (decrypting them). A protected directory passes its owner to new files created in it.",
        options: ["--account ACCOUNT       the new owner; '' for unmanaged",
                  "-R                      also protect everything below each directory"],
        spec: ArgumentSpec(flags: ["-R"], options: ["--account"], atLeast: 1),
        run: runProtect)

    static let info = Verb(
        "info",
        usage: ["mamfs info PATH... [--json] [--state DIR]"],
        summary: "Show the owner, encryption state, plaintext size and stored size of each PATH.",
        options: ["--json                  print a JSON array of {path, owner, encrypted, size, storedSize};",
                  "                        owner is null for untagged files and \"\" for unmanaged ones"],
        spec: ArgumentSpec(flags: ["--json"], atLeast: 1),
        run: runInfo)

    static let encrypt = Verb(
        "encrypt",
        usage: ["mamfs encrypt FILE --account ACCOUNT [-o OUT] [--state DIR]"],
        summary: "Encrypt FILE for the managed account ACCOUNT (accountId or UPN), in place unless -o is given.",
        options: ["--account ACCOUNT       the managed account that will own the file",
                  "-o OUT                  write the encrypted file to OUT and leave FILE as it is; OUT must be",
                  "                        absent or a regular file (\(ExitCode.cantCreate) otherwise); -o - writes to stdout"],
        spec: ArgumentSpec(options: ["--account", "-o"], positionals: 1...1),
        run: runEncrypt)

    static let decrypt = Verb(
        "decrypt",
        usage: ["mamfs decrypt FILE [-o COPY] [--state DIR]"],
        summary: "Decrypt FILE, in place unless -o is given.",
        options: ["-o COPY                 write the plaintext to COPY and leave FILE as it is; COPY must be",
                  "                        absent or a regular file (\(ExitCode.cantCreate) otherwise); -o - writes to stdout"],
        spec: ArgumentSpec(options: ["-o"], positionals: 1...1),
        run: runDecrypt)

    static func runProtect(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        guard let account = arguments.value("--account") else {
            throw UsageError("missing --account ACCOUNT (use --account '' for unmanaged)")
        }
        let recursive = arguments.flag("-R")
        let context = try invocation.openContext()
        let accountId = try resolve(account, in: context)
        try CommandAudit.requireAllowed(context, action: "protect", names: [account])
        var exitCode = ExitCode.ok
        let checked = CommandAudit.declassifyIsChecked(context)
        let mounts = BackingPath.current()
        for path in arguments.positionals {
            let progress = ProgressLine(prefix: "mamfs: protect: \(path): ")
            do {
                let backing = mounts.forFileVerb(path)
                context.complianceSite = complianceSite(of: backing)
                let oldOwner = try? context.files.protectionInfo(path: backing)
                let action = isDeclassification(from: oldOwner, to: accountId, in: context) ? "declassify" : "protect"
                var audited: [(path: String, owner: String?)] = []
                // The managed objects this protect gives another owner: below an untagged or
                // personal directory too (protect -R --account '' of a tree holding work files).
                let declassified = DeclassifyTargets.managedObjects(at: backing, recursive: recursive, context: context)
                    .filter { AccountIdentity.canonical($0.owner ?? "") != AccountIdentity.canonical(accountId) }
                if checked {
                    audited = try CommandAudit.requireDeclassifyAllowed(context, action: "declassify", owners: declassified,
                                                                         newOwner: accountId) { $0 == backing ? path : $0 }
                }
                // Managed data made personal is recorded before it is changed: never unrecorded.
                let recordedFirst = !declassified.isEmpty && audited.isEmpty
                if recordedFirst {
                    try CommandAudit.recordDeclassifications(context, objects: declassified, subject: path)
                }
                var started = false, finished = false
                defer {
                    // A tree protect that failed after it did a file has changed the files
                    // before the failure: that is recorded too.
                    if started && !finished && recursive && audited.isEmpty && !(recordedFirst && action == "declassify") {
                        CommandAudit.record(context, action: action, path: CommandAudit.absolute(backing),
                                            owner: action == "declassify" ? oldOwner : accountId)
                    }
                }
                do {
                    try attempt(path) {
                        try context.files.protect(path: backing, accountId: accountId, recursive: recursive,
                                                  progress: recursive ? { started = true; progress.update("\($0) files") } : nil)
                    }
                } catch let failure as CommandFailure where recordedFirst || !audited.isEmpty {
                    // The declassifications recorded first said allowed and begun.
                    CommandAudit.recordFailure(context, action: "declassify",
                                               objects: recordedFirst ? declassified.map { (CommandAudit.absolute($0.path), $0.owner) } : audited,
                                               failure: failure)
                    throw failure
                }
                finished = true
                progress.finish()
                // A declassification is the old owner's event, any other protect the new owner's.
                if audited.isEmpty && !(recordedFirst && action == "declassify") {
                    CommandAudit.record(context, action: action, path: CommandAudit.absolute(backing),
                                        owner: action == "declassify" ? oldOwner : accountId)
                }
            } catch let failure as CommandFailure {
                progress.finish()
                invocation.report(failure)
                if exitCode == ExitCode.ok { exitCode = failure.exitCode }
            }
        }
        return exitCode
    }

    static func runInfo(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let context = try invocation.openContext()
        var exitCode = ExitCode.ok
        var infos: [FileProtectionInfo] = []
        let mounts = BackingPath.current()
        for path in arguments.positionals {
            do {
                let info = try attempt(path) { try context.files.info(path: mounts.forFileVerb(path)) }
                infos.append(FileProtectionInfo(path: path, owner: info.owner, encrypted: info.encrypted, size: info.size,
                                                storedSize: info.storedSize, isDirectory: info.isDirectory))
            } catch let failure as CommandFailure {
                invocation.report(failure)
                if exitCode == ExitCode.ok { exitCode = failure.exitCode }
            }
        }
        if arguments.flag("--json") {
            let objects: [[String: Any]] = infos.map { info in
                ["path": info.path,
                 "owner": info.owner.map { $0 as Any } ?? NSNull(),
                 "encrypted": info.encrypted,
                 "size": info.size,
                 "storedSize": info.storedSize]
            }
            Output.out(try JSON.text(objects))
        } else if !infos.isEmpty {
            let upns = Dictionary((try? context.enrollment.accounts())?.compactMap { record in
                record.upn.map { (record.accountId, $0) }
            } ?? [], uniquingKeysWith: { first, _ in first })
            var rows = [["OWNER", "ENCRYPTED", "SIZE", "STORED", "PATH"]]
            for info in infos {
                rows.append([ownerText(info.owner, upns: upns), info.encrypted ? "yes" : "no",
                             String(info.size), String(info.storedSize), info.path])
            }
            Output.out(Output.table(rows))
        }
        return exitCode
    }

    static func runEncrypt(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        guard let account = arguments.value("--account") else {
            throw UsageError("missing --account ACCOUNT")
        }
        let path = arguments.positionals[0]
        let output = arguments.value("-o")
        if output == "" { throw UsageError("-o needs a file name") }
        let context = try invocation.openContext()
        let accountId = try resolve(account, in: context)
        let mounts = BackingPath.current()
        let source = mounts.forFileVerb(path)
        context.complianceSite = complianceSite(of: source)
        try attempt(path) {
            if output == "-" {
                try context.files.encryptFile(path: source, forAccountId: accountId, toStream: STDOUT_FILENO)
            } else {
                try context.files.encryptFile(path: source, forAccountId: accountId,
                                              output: output.map(mounts.forFileVerb))
            }
        }
        return ExitCode.ok
    }

    static func runDecrypt(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let path = arguments.positionals[0]
        let copy = arguments.value("-o")
        if copy == "" { throw UsageError("-o needs a file name") }
        let context = try invocation.openContext()
        let mounts = BackingPath.current()
        let target = mounts.forFileVerb(path)
        context.complianceSite = complianceSite(of: target)
        let owner = try? context.files.protectionInfo(path: target)
        let audited = try !CommandAudit.requireDeclassifyAllowed(context, action: "decrypt", owners: [(target, owner)],
                                                                  newOwner: "") { _ in path }.isEmpty
        // A managed account's file made plaintext is recorded before it is: never unrecorded.
        let recordedFirst = !audited && owner.map { context.policyEvaluator.isManaged(accountId: $0) } == true
        if recordedFirst {
            try CommandAudit.recordDeclassification(context, action: "decrypt", path: CommandAudit.absolute(target),
                                                    owner: owner, subject: path)
        }
        do {
            try attempt(path) {
                if copy == "-" {
                    try context.files.decryptFile(path: target, toStream: STDOUT_FILENO)
                } else {
                    try context.files.decryptFile(path: target, toCopyPath: copy.map(mounts.forFileVerb))
                }
            }
        } catch let failure as CommandFailure where audited || recordedFirst {
            // The record written first said allowed and begun: it is followed by the failure.
            CommandAudit.recordFailure(context, action: "decrypt", objects: [(CommandAudit.absolute(target), owner)],
                                       failure: failure)
            throw failure
        }
        if !audited && !recordedFirst {
            CommandAudit.record(context, action: "decrypt", path: CommandAudit.absolute(target), owner: owner)
        }
        return ExitCode.ok
    }

    /// The directory the compliance gate's `encryptedBackingDevice` check looks at for a file
    /// verb: a directory itself, a file's directory (absolute).
    static func complianceSite(of path: String) -> String {
        var isDirectory: ObjCBool = false
        let absolute = CommandAudit.absolute(path)
        if FileManager.default.fileExists(atPath: absolute, isDirectory: &isDirectory), isDirectory.boolValue { return absolute }
        return (absolute as NSString).deletingLastPathComponent
    }

    /// True when protecting an object owned by `oldOwner` for `newOwner` takes it from a
    /// managed account (recorded as "declassify" rather than "protect").
    private static func isDeclassification(from oldOwner: String?, to newOwner: String, in context: ProtectionContext) -> Bool {
        guard let oldOwner, context.policyEvaluator.isManaged(accountId: oldOwner) else { return false }
        return AccountIdentity.canonical(oldOwner) != AccountIdentity.canonical(newOwner)
    }

    /// The owner for an `--account` value: "" stays "" (unmanaged), a registered accountId or UPN
    /// (any case) becomes its accountId, an unregistered accountId is an unmanaged identity, an
    /// unregistered UPN is an unknown account (`.noPerm`).
    static func resolve(_ account: String, in context: ProtectionContext) throws -> String {
        try attempt(account) { try context.resolveOwner(account) }
    }

    /// The owner column of `info`: "-" untagged, "(unmanaged)" for the empty identity, else the
    /// accountId with its UPN when known.
    static func ownerText(_ owner: String?, upns: [String: String]) -> String {
        guard let owner else { return "-" }
        if owner.isEmpty { return "(unmanaged)" }
        if let upn = upns[owner.lowercased()] { return "\(owner) (\(upn))" }
        return owner
    }
}
