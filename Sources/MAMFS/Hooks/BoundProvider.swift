import MAMFileProvider
import MAMProtection

/// The file provider a `--remote DIR --provider KIND` mount binds its backing directory to.
enum BoundProvider {
    case nonReplicated(NonReplicatedProvider)
    case replicated(ReplicatedProvider)

    /// Binds `rootPath` to the remote `remote` (a directory, or a WebDAV URL reached with
    /// `access`) for `account` (canonical accountId, "" unmanaged).
    /// - Throws: `MAMError` (`.invalidArguments` when the root belongs to another kind, remote or
    ///   account; `.unknownAccount`).
    init(kind: ProviderKind, rootPath: String, remote: String, access: RemoteAccess = RemoteAccess(), account: String,
         context: ProtectionContext, log: @escaping @Sendable (String) -> Void) throws {
        let store = try access.store(for: remote, log: { line in log("provider: \(line)") })
        let domain = try FileProviderDomain(account: account, remote: store, context: context)
        switch kind {
        case .nonReplicated:
            self = .nonReplicated(try NonReplicatedProvider(localRoot: rootPath, domain: domain))
        case .replicated:
            self = .replicated(try ReplicatedProvider(replicaRoot: rootPath, domain: domain))
        }
    }

    /// Logs each problem of a pass, one line each.
    static func report(_ report: SyncReport, what: String, log: (String) -> Void) {
        for issue in report.errors { log("provider: \(what): \(issue)") }
    }
}
