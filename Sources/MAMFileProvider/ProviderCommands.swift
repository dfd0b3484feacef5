import Foundation
import MAMProtection

/// What the `mamfs provider ...` commands call. The CLI only parses and prints; every function
/// throws `MAMError` (use `.exitCode` / `.description`).
///
/// A local root remembers its kind, remote and account (`ProviderConfiguration`), so after the
/// first use only the path is needed.
public enum ProviderCommands {
    /// `mamfs provider sync BACKING [--remote DIR] [--account A]`: one pass. A replicated root
    /// runs `ReplicatedProvider.syncOnce`; a non-replicated one runs `NonReplicatedProvider.syncPass`:
    /// its upload queue first (a queue left waiting for an unreachable remote: `.tempFail`), then
    /// its pending local changes (`NonReplicatedProvider.uploadPendingChanges`: counted as created/modified, a
    /// file that could not be uploaded is an error in the report, so the exit status is `.ioErr`,
    /// or `.noPerm` for a policy refusal, `.tempFail` when the remote is unreachable) and then refreshes its
    /// placeholders (`NonReplicatedProvider.createPlaceholders`). A root never used before becomes a
    /// replicated one.
    /// - Parameters:
    ///   - localPath: the local root (the mount's backing directory or a replica).
    ///   - remote: the remote directory; required the first time, must match afterwards.
    ///   - account: the domain's account (accountId or UPN) the first time; nil = the stored one
    ///     (or "" = unmanaged for a new root).
    ///   - progress: called after each item (for a progress line on a tty).
    ///   - access: credentials and CA file for a WebDAV remote (`RemoteAccess`).
    /// - Returns: the report (see `SyncReport.exitCode` for the CLI's exit status).
    /// - Throws: `.invalidArguments` (no remote known, root bound to another remote or
    ///   account), `.unknownAccount`, `.cannotCreateOutput`.
    public static func sync(localPath: String, remote: String?, context: ProtectionContext, account: String? = nil,
                            access: RemoteAccess = RemoteAccess(),
                            progress: ((SyncProgress) -> Void)? = nil) throws -> SyncReport {
        try ProviderError.mapped {
            let (kind, domain) = try openDomain(localPath: localPath, remote: remote, account: account,
                                                context: context, defaultKind: .replicated, access: access)
            switch kind {
            case .replicated:
                return try ReplicatedProvider(replicaRoot: localPath, domain: domain).syncOnce(progress: progress)
            case .nonReplicated:
                return try NonReplicatedProvider(localRoot: localPath, domain: domain).syncPass(progress: progress)
            }
        }
    }

    /// `mamfs provider status PATH [--json]`: item, versions, materialized, owner; for a
    /// non-replicated root also its upload queue (`ProviderItemStatus.queue`).
    /// - Parameter path: a path inside a provider root (backing directory or replica).
    /// - Throws: `.fileNotFound`; `.invalidArguments` when the path is in no provider root.
    public static func status(path: String) throws -> ProviderItemStatus {
        try ProviderError.mapped {
            let (layout, database, configuration) = try openRoot(containing: path)
            defer { database.close() }
            switch configuration.kind {
            case .nonReplicated:
                var status = try ProviderItemStatus.nonReplicated(localPath: path, layout: layout, database: database,
                                                                  accountId: configuration.accountId)
                status.queue = try UploadQueue(database).status()
                return status
            case .replicated:
                return try ProviderItemStatus.replicated(localPath: path, layout: layout, database: database,
                                                         accountId: configuration.accountId)
            }
        }
    }

    /// `mamfs provider reattach ROOT`: re-binds the provider root ROOT to its remote after the
    /// remote was replaced (restored from a copy; passes refuse it until then), see
    /// `ProviderReattach`: items matched by path, type, size and the SHA-256 of their plain
    /// bytes keep their records, local changes are kept for the next sync.
    /// - Parameter localPath: the provider root (a mount's backing directory or a replica).
    /// - Returns: the counts.
    /// - Throws: `.invalidArguments` (not a provider root); `.keyUnavailable` (account wiped);
    ///   remote errors as `MAMError` (`.system(EHOSTUNREACH)`: the remote is missing).
    public static func reattach(localPath: String, context: ProtectionContext,
                                access: RemoteAccess = RemoteAccess()) throws -> ReattachReport {
        try ProviderError.mapped {
            let layout = ProviderLayout(root: localPath)
            guard layout.exists else { throw MAMError.invalidArguments("\(layout.root) is not a file-provider root") }
            let (kind, domain) = try openDomain(localPath: localPath, remote: nil, account: nil, context: context,
                                                defaultKind: .replicated, access: access)
            switch kind {
            case .nonReplicated: return try NonReplicatedProvider(localRoot: localPath, domain: domain).reattach()
            case .replicated: return try ReplicatedProvider(replicaRoot: localPath, domain: domain).reattach()
            }
        }
    }

    /// `mamfs provider evict PATH`: drops the local contents of a materialized non-replicated
    /// item, keeping its placeholder (`NonReplicatedProvider.stopProvidingItem`).
    /// - Throws: `.invalidArguments` (not a non-replicated provider file, `ExitCode.usage`),
    ///   `.cannotCreateOutput` "PATH has a pending upload" (`ExitCode.cantCreate`: the
    ///   placeholder cannot be made while the contents are not on the remote; run it again after
    ///   the upload, e.g. after `mamfs provider sync`), `.fileNotFound`.
    public static func evict(path: String) throws {
        try ProviderError.mapped {
            let (layout, database, configuration) = try openRoot(containing: path)
            defer { database.close() }
            guard configuration.kind == .nonReplicated else {
                throw MAMError.invalidArguments("\(layout.root) is a replicated provider: its items are always materialized")
            }
            do {
                try NonReplicatedProvider.evict(localPath: path, layout: layout, database: database)
            } catch MAMError.system(let message, let code) where code == EBUSY {
                throw MAMError.cannotCreateOutput(message)
            }
        }
    }

    /// `mamfs provider import FILE --to DIR`: `NonReplicatedProvider.importDocument` for a
    /// non-replicated root; for a replicated one the plain copy is placed in the replica and
    /// a sync pass uploads it (same receive check first).
    /// - Returns: the new item (nil for a replicated root when the pass could not upload it;
    ///   the error is thrown then).
    /// - Throws: `.policyDenied` (EACCES, `ExitCode.noPerm`: nothing uploaded, source intact),
    ///   `.cannotCreateOutput` (name taken), `.fileNotFound`, `.invalidArguments`, remote
    ///   errors as `MAMError`.
    @discardableResult
    public static func importFile(_ source: String, toDirectory directory: String, context: ProtectionContext,
                                  access: RemoteAccess = RemoteAccess()) throws -> FileProviderItem {
        try ProviderError.mapped {
            let (layout, database, configuration) = try openRoot(containing: directory)
            database.close()
            let domain = try FileProviderDomain(account: configuration.accountId,
                                                remote: access.store(for: configuration.remote), context: context)
            switch configuration.kind {
            case .nonReplicated:
                return try NonReplicatedProvider(localRoot: layout.root, domain: domain)
                    .importDocument(sourcePath: source, toLocalDirectory: directory)
            case .replicated:
                return try ReplicatedImport.importDocument(sourcePath: source, toLocalDirectory: directory,
                                                           provider: ReplicatedProvider(replicaRoot: layout.root, domain: domain))
            }
        }
    }

    // MARK: Helpers

    private static func openRoot(containing path: String) throws -> (ProviderLayout, ProviderDatabase, ProviderConfiguration) {
        guard let layout = ProviderLayout.enclosing(path) else {
            throw MAMError.invalidArguments("\(path) is not inside a file-provider root")
        }
        let database = try ProviderDatabase(layout: layout, create: false)
        guard let configuration = try database.configuration() else {
            database.close()
            throw MAMError.invalidArguments("\(layout.root) has no provider configuration")
        }
        return (layout, database, configuration)
    }

    private static func openDomain(localPath: String, remote: String?, account: String?, context: ProtectionContext,
                                   defaultKind: ProviderKind, access: RemoteAccess) throws -> (ProviderKind, FileProviderDomain) {
        let layout = ProviderLayout(root: localPath)
        var stored: ProviderConfiguration?
        if layout.exists {
            let database = try ProviderDatabase(layout: layout, create: false)
            stored = try database.configuration()
            database.close()
        }
        guard let remotePath = remote ?? stored?.remote else {
            throw MAMError.invalidArguments("\(layout.root) has no remote yet: give --remote DIR")
        }
        let accountName = account ?? stored?.accountId ?? ""
        let domain = try FileProviderDomain(account: accountName, remote: access.store(for: remotePath), context: context)
        return (stored?.kind ?? defaultKind, domain)
    }
}

extension SyncReport {
    /// The CLI's exit status for this report: `.ok` clean; `.noPerm` when the pass stopped
    /// early because it was denied as a whole (EACCES: the remote refused the credentials, the
    /// account was wiped); `.tempFail` when it stopped early because the remote was unreachable
    /// (EHOSTUNREACH: retry later); when it stopped early for a fault that retrying does not
    /// cure (a reply that is not WebDAV, a damaged database), the exit status of that fault's
    /// errno (`.ioErr` for EIO); `.noPerm` when an upload was refused by policy; `.ioErr` for
    /// other item errors.
    public var exitCode: ExitCode {
        if isClean { return .ok }
        if !complete {
            if errors.contains(where: { $0.path.isEmpty && $0.errno == EACCES }) { return .noPerm }
            let whole = errors.filter { $0.path.isEmpty }
            if whole.isEmpty || errors.contains(where: { $0.errno == EHOSTUNREACH }) { return .tempFail }
            return MAMError.system("", errno: whole[0].errno).exitCode
        }
        if errors.contains(where: { $0.errno == EACCES }) { return .noPerm }
        return .ioErr
    }
}

/// Import into a replicated root: the receive check and decryption happen as for any local
/// change (`ProviderRules.plainCopyForUpload`), but first, so a refusal leaves nothing behind.
enum ReplicatedImport {
    static func importDocument(sourcePath: String, toLocalDirectory directory: String,
                               provider: ReplicatedProvider) throws -> FileProviderItem {
        let layout = provider.layout
        guard let directoryRelative = layout.relativePath(of: directory) else {
            throw MAMError.invalidArguments("\(directory) is not inside \(layout.root)")
        }
        let name = PathName.lastComponent(of: sourcePath)
        let relative = directoryRelative.isEmpty ? name : directoryRelative + "/" + name
        let target = layout.absolutePath(relative)
        let tree = try layout.confined()
        guard tree.lstat(relative) == nil else { throw MAMError.cannotCreateOutput("\(target) already exists") }
        let (copy, _) = try ProviderRules.plainCopyForUpload(localPath: sourcePath, receiver: provider.domain.accountId,
                                                             layout: layout, context: provider.domain.context)
        let provided = try layout.makeTemporaryFile(name: name) { fd in
            try ProviderRules.writeProvidedCopy(plain: copy, owner: provider.domain.accountId, into: fd,
                                                context: provider.domain.context)
            fchmod(fd, 0o644)
            guard fsync(fd) == 0 else { throw MAMError.fromErrno("fsync the provided copy of \(relative)") }
        }
        try provided.move(to: relative, in: tree, noReplace: true)
        let report = provider.syncOnce()
        if let issue = report.errors.first(where: { $0.path == relative || $0.path.isEmpty }) {
            throw MAMError.system(issue.message, errno: issue.errno)
        }
        let status = try provider.status(localPath: target)
        guard let id = status.itemIdentifier, let version = status.contentVersion else {
            throw MAMError.internalError("\(relative) was not uploaded")
        }
        return FileProviderItem(remote: RemoteItem(identifier: id, parentIdentifier: status.parentItemIdentifier ?? .rootContainer,
                                                   filename: name, type: .file, size: status.size,
                                                   version: ItemVersion(contentVersion: version, metadataVersion: status.metadataVersion ?? "")),
                                owner: provider.domain.accountId)
    }
}
