import Foundation
import MAMFileProvider
import MAMProtection

/// `provider sync`, `provider status`, `provider evict`, `provider import` and `provider reattach`: the file-provider
/// verbs. Each one maps its path arguments to the provider root (a path inside a running
/// `mamfs mount` is mapped to the same path in the mount's backing directory, see
/// `BackingPath`) and calls `MAMFileProvider.ProviderCommands`.
enum ProviderVerbs {
    static let sync = Verb(
        "provider sync",
        usage: ["mamfs provider sync BACKING [--remote DIR|URL] [--account ACCOUNT] [--remote-credentials FILE] [--remote-ca FILE] [--json] [--state DIR]"],
        summary: "Run one sync pass of the provider root BACKING with its remote: a replicated root (the default for a new one) exchanges changes both ways; a non-replicated one refreshes its placeholders. When stderr is a terminal one line shows items and bytes done of those expected, the rate and the time left. Exit \(ExitCode.ok) clean, \(ExitCode.tempFail) remote unreachable (retry later), \(ExitCode.noPerm) an upload was refused by policy, \(ExitCode.ioErr) other item errors.",
        options: ["--remote DIR|URL        the remote directory or WebDAV URL; needed the first time, must match afterwards",
                  "--account ACCOUNT       the domain's account the first time (default: unmanaged)",
                  "--remote-credentials FILE  WebDAV login (netrc file, mode 0600; default: MAMFS_REMOTE_USER",
                  "                        and MAMFS_REMOTE_PASSWORD)",
                  "--remote-ca FILE        a PEM CA bundle to trust for the WebDAV server",
                  "--json                  print JSON lines on stdout instead: at most 4 a second and a",
                  "                        last one {\"event\":\"progress\", items, itemsTotal, bytes,",
                  "                        bytesTotal, bytesPerSecond, etaSeconds (null: unknown), path},",
                  "                        then one {\"event\":\"done\", items, itemsTotal, bytes,",
                  "                        bytesTotal, elapsedSeconds, exitCode, fetched, placeholders,",
                  "                        deletedLocally, movedLocally, created, modified,",
                  "                        deletedRemotely, movedRemotely, conflicts, refused, errors",
                  "                        [{path, message, errno}], complete, anchor}"],
        spec: ArgumentSpec(flags: ["--json"], options: ["--remote", "--account", "--remote-credentials", "--remote-ca"], positionals: 1...1),
        run: runSync)

    static let status = Verb(
        "provider status",
        usage: ["mamfs provider status PATH [--json] [--state DIR]"],
        summary: "Show the file-provider state of PATH (in a mount or its backing directory, the root itself too): remote item, versions, whether the contents are present (materialized), pending upload, owner; for a non-replicated root its upload queue: the local changes not on the remote yet (count, age of the oldest, next retry, last error).",
        options: ["--json                  print one JSON object: path, root, kind, itemIdentifier,",
                  "                        parentItemIdentifier, filename, type, size, contentVersion,",
                  "                        metadataVersion, materialized, pendingUpload, owner,",
                  "                        localOwner, encrypted, queue (unknown values are null);",
                  "                        queue: count, oldestAgeSeconds, nextRetry (ISO 8601),",
                  "                        lastError, entries (\"KIND PATH\" in order), null for a",
                  "                        replicated root"],
        spec: ArgumentSpec(flags: ["--json"], positionals: 1...1),
        run: runStatus)

    static let evict = Verb(
        "provider evict",
        usage: ["mamfs provider evict PATH [--state DIR]"],
        summary: "Drop the local contents of the non-replicated provider file PATH and keep its placeholder; the next open downloads it again. Refused (exit \(ExitCode.cantCreate)) while it has changes not uploaded yet.",
        spec: ArgumentSpec(positionals: 1...1),
        run: runEvict)

    static let importFile = Verb(
        "provider import",
        usage: ["mamfs provider import FILE --to DIR [--remote-credentials FILE] [--remote-ca FILE] [--state DIR]"],
        summary: "Bring FILE into the provider directory DIR (inside a mount, or its backing directory) and upload it: a protected FILE is decrypted to a copy first and only the plain copy is uploaded; when the domain's account may not receive FILE (receiveData policy) nothing is uploaded, FILE is left as it is and the exit code is \(ExitCode.noPerm).",
        options: ["--to DIR                the destination directory, inside a provider mount or root",
                  "--remote-credentials FILE  WebDAV login (netrc file, mode 0600; default: MAMFS_REMOTE_USER",
                  "                        and MAMFS_REMOTE_PASSWORD)",
                  "--remote-ca FILE        a PEM CA bundle to trust for the WebDAV server"],
        spec: ArgumentSpec(options: ["--to", "--remote-credentials", "--remote-ca"], positionals: 1...1),
        run: runImport)

    static let reattach = Verb(
        "provider reattach",
        usage: ["mamfs provider reattach ROOT [--remote-credentials FILE] [--remote-ca FILE] [--state DIR]"],
        summary: "Re-bind the provider root ROOT (a mount's backing directory, or the mount) to its remote after the remote was replaced, e.g. restored from a copy: until then every sync refuses it (exit \(ExitCode.tempFail), 'not the volume it was'). Local items found on the remote at their path with the same type, size and SHA-256 of their plain bytes keep their records and identifiers; local changes the remote does not have are kept and uploaded by the next sync; a clean copy of a file that differs on the remote gives way to the remote version. Nothing local is lost.",
        options: ["--remote-credentials FILE  WebDAV login (netrc file, mode 0600; default: MAMFS_REMOTE_USER",
                  "                        and MAMFS_REMOTE_PASSWORD)",
                  "--remote-ca FILE        a PEM CA bundle to trust for the WebDAV server"],
        spec: ArgumentSpec(options: ["--remote-credentials", "--remote-ca"], positionals: 1...1),
        run: runReattach)

    /// Every provider verb, in `mamfs --help` order.
    static let all = [sync, status, evict, importFile, reattach]

    /// The `mamfs provider --help` text.
    static var groupHelp: String {
        var lines = ["usage: " + all[0].usage[0]]
        for verb in all.dropFirst() { lines.append("       " + verb.usage[0]) }
        lines += [
            "",
            "File providers: a remote directory made available in a mount (mamfs mount --remote DIR",
            "--provider non-replicated|replicated). See 'mamfs provider VERB --help'.",
            "",
        ]
        return lines.joined(separator: "\n")
    }

    static func runSync(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let backing = arguments.positionals[0]
        if let remote = arguments.value("--remote"), remote.isEmpty { throw UsageError("--remote needs a directory") }
        let context = try invocation.openContext()
        let root = BackingPath.resolve(backing)
        let json = arguments.flag("--json")
        let progress = SyncProgressOutput(prefix: "mamfs: provider sync: ", json: json)
        let report: SyncReport
        do {
            report = try attempt(backing) {
                try MAMFileProvider.ProviderCommands.sync(localPath: root, remote: arguments.value("--remote"), context: context,
                                                          account: arguments.value("--account"),
                                                          access: MountVerbs.remoteAccess(arguments)) { step in
                    progress.update(step)
                }
            }
            progress.finish()
        } catch {
            progress.abandon()
            throw error
        }
        for issue in report.errors {
            invocation.report(CommandFailure(subject: issue.path.isEmpty ? backing : issue.path, message: issue.message,
                                             exitCode: report.exitCode))
        }
        if json {
            try progress.done(report)
            return report.exitCode
        }
        var counts: [String] = []
        let pairs: [(String, Int)] = [("fetched", report.fetched), ("placeholders", report.placeholders),
                                      ("deleted locally", report.deletedLocally), ("moved locally", report.movedLocally),
                                      ("created", report.created), ("modified", report.modified),
                                      ("deleted remotely", report.deletedRemotely), ("moved remotely", report.movedRemotely),
                                      ("conflicts", report.conflicts), ("refused", report.refused)]
        for (name, count) in pairs where count > 0 { counts.append("\(count) \(name)") }
        let summary = counts.isEmpty ? "no changes" : counts.joined(separator: ", ")
        let state = report.complete ? "" : " (stopped early: run it again)"
        Output.line("Synced \(backing): \(summary)\(report.errors.isEmpty ? "" : ", \(report.errors.count) errors")\(state)")
        return report.exitCode
    }

    static func runStatus(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let path = arguments.positionals[0]
        let local = BackingPath.resolve(path)
        let status = try attempt(path) { try MAMFileProvider.ProviderCommands.status(path: local) }
        if arguments.flag("--json") {
            func value(_ optional: String?) -> Any { optional.map { $0 as Any } ?? NSNull() }
            let object: [String: Any] = [
                "path": path,
                "root": status.root,
                "kind": status.kind.rawValue,
                "itemIdentifier": value(status.itemIdentifier?.rawValue),
                "parentItemIdentifier": value(status.parentItemIdentifier?.rawValue),
                "filename": status.filename,
                "type": status.type.rawValue,
                "size": status.size,
                "contentVersion": value(status.contentVersion),
                "metadataVersion": value(status.metadataVersion),
                "materialized": status.materialized,
                "pendingUpload": status.pendingUpload,
                "owner": status.owner,
                "localOwner": value(status.localOwner),
                "encrypted": status.encrypted,
                "queue": status.queue.map { queue -> Any in
                    [
                        "count": queue.count,
                        "oldestAgeSeconds": queue.oldestAge.map { ($0 * 10).rounded() / 10 as Any } ?? NSNull(),
                        "nextRetry": value(queue.nextRetry.map(timestamp)),
                        "lastError": value(queue.lastError),
                        "entries": queue.entries,
                    ] as [String: Any]
                } ?? NSNull(),
            ]
            Output.out(try JSON.text(object))
            return ExitCode.ok
        }
        func show(_ owner: String?) -> String {
            guard let owner else { return "-" }
            return owner.isEmpty ? "(unmanaged)" : owner
        }
        var rows: [[String]] = [
            ["path:", path],
            ["root:", "\(status.root) (\(status.kind.rawValue))"],
            ["item:", status.itemIdentifier?.rawValue ?? "- (not uploaded yet)"],
            ["type:", status.type.rawValue],
            ["size:", String(status.size)],
            ["contentVersion:", status.contentVersion ?? "-"],
            ["metadataVersion:", status.metadataVersion ?? "-"],
            ["materialized:", status.materialized ? "yes" : "no (placeholder)"],
            ["pendingUpload:", status.pendingUpload ? "yes" : "no"],
            ["owner:", show(status.owner)],
            ["encrypted:", status.encrypted ? "yes" : "no"],
        ]
        if let queue = status.queue {
            rows += [
                ["queued changes:", String(queue.count)],
                ["oldest queued:", queue.oldestAge.map { String(format: "%.1f s ago", $0) } ?? "-"],
                ["next retry:", queue.nextRetry.map(timestamp) ?? "-"],
                ["last error:", queue.lastError ?? "-"],
            ]
        }
        Output.out(Output.table(rows))
        return ExitCode.ok
    }

    /// Seconds since 1970 as ISO 8601 (UTC, seconds).
    private static func timestamp(_ seconds: Double) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: Date(timeIntervalSince1970: seconds))
    }

    static func runEvict(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let path = arguments.positionals[0]
        let local = BackingPath.resolve(path)
        try attempt(path) { try MAMFileProvider.ProviderCommands.evict(path: local) }
        return ExitCode.ok
    }

    static func runReattach(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let root = arguments.positionals[0]
        let context = try invocation.openContext()
        let local = BackingPath.resolve(root)
        let report = try attempt(root) { try MAMFileProvider.ProviderCommands.reattach(localPath: local, context: context,
                                                                                        access: MountVerbs.remoteAccess(arguments)) }
        Output.line("Reattached \(root): \(report.matched) matched, \(report.changedRemotely) changed remotely, \(report.pendingUpload) to upload, \(report.removedPlaceholders) placeholders removed")
        return ExitCode.ok
    }

    static func runImport(_ arguments: ParsedArguments, _ invocation: Invocation) throws -> ExitCode {
        let source = arguments.positionals[0]
        guard let directory = arguments.value("--to") else { throw UsageError("missing --to DIR") }
        guard !directory.isEmpty else { throw UsageError("--to needs a directory") }
        let context = try invocation.openContext()
        let local = BackingPath.resolve(directory)
        let item = try attempt(source) {
            do {
                return try MAMFileProvider.ProviderCommands.importFile(source, toDirectory: local, context: context,
                                                                         access: MountVerbs.remoteAccess(arguments))
            } catch MAMError.policyDenied(let reason) {
                // The receive check refused it: nothing was uploaded; the refusal is recorded.
                CommandAudit.record(context, action: "provider import", path: CommandAudit.absolute(source),
                                    owner: try? context.files.protectionInfo(path: source), verdict: .denied, rule: "receiveData")
                throw MAMError.policyDenied(reason)
            }
        }
        Output.line("Imported \(source) into \(directory) as item \(item.itemIdentifier.rawValue)")
        return ExitCode.ok
    }
}
