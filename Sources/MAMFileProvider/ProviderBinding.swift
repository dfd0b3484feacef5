import Foundation
import MAMProtection

/// What both providers share: the local root's layout and database, bound once to one domain
/// (remote + account), with the checks that keep a sync from mistaking a vanished remote or a
/// wiped account for deletions.
final class ProviderBinding: @unchecked Sendable {
    let layout: ProviderLayout
    let domain: FileProviderDomain
    let database: ProviderDatabase
    let kind: ProviderKind

    /// Opens (creating) the provider files in `localRoot` and binds them to `domain`.
    /// - Throws: `.invalidArguments` when the root is already bound to another kind, account or
    ///   remote; `.cannotCreateOutput`; SQLite errors.
    init(localRoot: String, domain: FileProviderDomain, kind: ProviderKind) throws {
        layout = ProviderLayout(root: localRoot)
        self.domain = domain
        self.kind = kind
        database = try ProviderDatabase(layout: layout, create: true)
        if let existing = try database.configuration() {
            guard existing.kind == kind else {
                throw MAMError.invalidArguments("\(layout.root) holds a \(existing.kind.rawValue) provider, not a \(kind.rawValue) one")
            }
            guard existing.accountId == domain.accountId else {
                let shown = existing.accountId.isEmpty ? "the unmanaged identity" : existing.accountId
                throw MAMError.invalidArguments("\(layout.root) belongs to \(shown)")
            }
            guard existing.remote == domain.remote.location else {
                throw MAMError.invalidArguments("\(layout.root) is bound to the remote \(existing.remote), not \(domain.remote.location)")
            }
        } else {
            try database.setConfiguration(ProviderConfiguration(kind: kind, remote: domain.remote.location, accountId: domain.accountId))
        }
        // Selective wipe walks known roots, so provided copies are found and removed with the account.
        try? domain.context.state.addKnownRoot(layout.root, kind: .root,
                                                accountId: domain.accountId.isEmpty ? nil : domain.accountId)
    }

    var remote: any RemoteStore { domain.remote }
    var context: ProtectionContext { domain.context }
    var accountId: String { domain.accountId }

    /// `item` tagged with the domain's account (`FileProviderDomain.protectFileProviderItem`),
    /// with the stable identifiers of the item and its parent in place of the store's.
    func providedItem(_ item: RemoteItem) -> FileProviderItem {
        var provided = domain.protectFileProviderItem(item)
        provided.itemIdentifier = database.stableIdentifier(ofStore: item.identifier)
        provided.parentItemIdentifier = database.stableIdentifier(ofStore: item.parentIdentifier)
        return provided
    }

    /// Checks, before a pass acts on a remote listing, that the remote is the volume it was and
    /// that the account was not wiped.
    /// - Throws: `RemoteError.unreachable` for a different volume (an unmounted share showing
    ///   its empty mount point would otherwise look like "everything was deleted"; the message
    ///   names `mamfs provider reattach ROOT`, which re-binds a remote replaced on purpose);
    ///   `MAMError.keyUnavailable` for a wiped account (its files were removed locally on
    ///   purpose and must not be deleted from the remote).
    func checkBeforePass() throws {
        if context.isWiped(owner: accountId) {
            throw MAMError.keyUnavailable("account \(accountId) was wiped; the provider at \(layout.root) does not sync any more")
        }
        let current = try remote.volumeIdentity()
        let stored = try database.configuration()?.remoteVolume
        if let stored, let current, stored != current {
            throw RemoteError.unreachable("\(remote.location) is not the volume it was when first synced (unmounted or replaced?); if it was replaced on purpose (restored from a copy), run 'mamfs provider reattach \(layout.root)'")
        }
        if stored == nil, let current, var configuration = try database.configuration() {
            configuration.remoteVolume = current
            try database.setConfiguration(configuration)
        }
    }

    /// Checks, before a pass of a remote that has no volume identity (WebDAV), that the remote
    /// root was not emptied under the replica: an empty collection put in place of the old one
    /// cannot be told from the old volume there, and a pass would take it for "everything was
    /// deleted" and delete the local copies.
    /// - Parameter knownLocalItems: how many items synced from the remote before are still in
    ///   the local tree (0: nothing to lose, no check).
    /// - Throws: `RemoteError.unreachable` when the remote root lists nothing while
    ///   `knownLocalItems` > 0 (the message names `mamfs provider reattach ROOT`, which uploads
    ///   the local copies to the new collection; deleting the local copies too ends it as well).
    func checkRemoteNotEmptied(knownLocalItems: Int) throws {
        guard knownLocalItems > 0, try remote.volumeIdentity() == nil,
              try remote.enumerate(container: .rootContainer).isEmpty else { return }
        throw RemoteError.unreachable("\(remote.location) is empty, but \(knownLocalItems) item\(knownLocalItems == 1 ? "" : "s") synced from it \(knownLocalItems == 1 ? "is" : "are") still in \(layout.root) (the collection replaced by an empty one?); nothing was deleted locally. If it was emptied on purpose, delete the local copies too; to upload them to it, run 'mamfs provider reattach \(layout.root)'")
    }

    /// The local path (relative) for each remote item, built from the remote tree: the local
    /// tree mirrors the remote one. Items whose parent is unknown, and items whose name could
    /// not be one directory entry ("", ".", "..", a "/" or NUL in it), are left out, and so is
    /// a top-level item named `.mamfs-provider` (it would land in the provider's own files).
    static func localPaths(of items: [RemoteItem]) -> [ItemIdentifier: String] {
        var paths: [ItemIdentifier: String] = [.rootContainer: ""]
        var pending = items
        var progress = true
        while progress && !pending.isEmpty {
            progress = false
            var next: [RemoteItem] = []
            for item in pending {
                guard isPlainName(item.filename) else { continue }
                if item.parentIdentifier == .rootContainer && isReservedTopName(item.filename) { continue }
                if let parent = paths[item.parentIdentifier] {
                    paths[item.identifier] = parent.isEmpty ? item.filename : parent + "/" + item.filename
                    progress = true
                } else {
                    next.append(item)
                }
            }
            pending = next
        }
        paths[.rootContainer] = nil
        return paths
    }

    /// True for a name that is exactly one directory entry.
    static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.utf8.contains(0x2F) && !name.utf8.contains(0)
            && name.utf8.count <= 255
    }

    /// True for `.mamfs-provider` (`ProviderLayout.metadataDirectoryName`, exact bytes): at the
    /// top of the local root that name is the provider's own, never a remote item's.
    static func isReservedTopName(_ name: String) -> Bool {
        ExactName.equal(name, ProviderLayout.metadataDirectoryName)
    }
}
