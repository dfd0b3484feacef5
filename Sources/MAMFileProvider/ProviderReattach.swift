import Foundation
import MAMProtection
import MAMSystem

/// What `mamfs provider reattach ROOT` did. Counts are local items.
public struct ReattachReport: Codable, Equatable, Sendable {
    /// Items found on the remote as they are locally (same path and type; a file with the
    /// same size and SHA-256 of its plain bytes, a placeholder with the same size): their
    /// records now name the remote item as it is now, nothing is transferred.
    public var matched = 0
    /// Items whose remote file differs from the clean local copy: a non-replicated copy
    /// becomes a placeholder of the remote file, a replicated one is fetched by the next sync.
    public var changedRemotely = 0
    /// Local files with changes the remote does not have, or not on the remote at all: kept
    /// as they are and uploaded by the next sync.
    public var pendingUpload = 0
    /// Placeholders whose remote file is gone (they held no contents).
    public var removedPlaceholders = 0

    public init() {}
}

/// Re-binds a provider root to its remote after the remote was replaced (deleted and
/// restored from a copy: its `volumeIdentity` changed, so every pass refuses it, see
/// `ProviderBinding.checkBeforePass`).
///
/// Each local item is looked for on the remote at its local path. A file matches when the
/// remote file has the size and the SHA-256 of the local copy's plain bytes (decrypted in
/// memory, never written in the clear); a directory by type; a symlink by target; a
/// placeholder, which holds no bytes, by size. A matched item's record (attributes or item
/// row) takes the remote item's identifier and versions, and keeps its stable identifier.
/// Nothing local is lost: a file with local changes keeps them, and the next sync uploads
/// them over the remote file when the remote file still has the size the change was made on
/// (the restored copy is taken for the version the change was made from), else beside it as
/// a conflict copy; a local file not on the remote is uploaded as a new item; a clean copy of a
/// changed remote file gives way to the remote contents. Finally the remote's current volume
/// identity is stored, so passes run again.
///
/// Errors: `MAMError` (`.keyUnavailable` for a wiped account; remote errors mapped, e.g.
/// `.system(EHOSTUNREACH)` when the remote is missing: nothing changed then).
enum ProviderReattach {
    /// - Parameters:
    ///   - binding: the root's binding (its database, remote and account).
    ///   - provider: the non-replicated provider of a non-replicated root (it writes the
    ///     placeholders), nil for a replicated one.
    static func run(binding: ProviderBinding, provider: NonReplicatedProvider?) throws -> ReattachReport {
        try ProviderError.mapped {
            if binding.context.isWiped(owner: binding.accountId) {
                throw MAMError.keyUnavailable("account \(binding.accountId) was wiped; the provider at \(binding.layout.root) does not sync any more")
            }
            let items = try binding.remote.enumerateTree()
            let paths = ProviderBinding.localPaths(of: items)
            var byPath = ExactDictionary<RemoteItem>()
            for item in items { if let path = paths[item.identifier] { byPath[path] = item } }
            // File ids of the old remote mean nothing on the new one (an inode number may be
            // reused there); the matched items record theirs, the listing the others'.
            try binding.database.clearFileIDs()
            let matcher = Matcher(binding: binding, provider: provider, tree: try binding.layout.confined())
            var report = ReattachReport()
            switch binding.kind {
            case .nonReplicated: try matcher.nonReplicated("", remote: byPath, report: &report)
            case .replicated: try matcher.replicated(remote: byPath, report: &report)
            }
            try binding.database.reconcileIdentities(with: items)
            if var configuration = try binding.database.configuration() {
                configuration.remoteVolume = try binding.remote.volumeIdentity()
                try binding.database.setConfiguration(configuration)
            }
            return report
        }
    }

    /// The per-item work, confined to the local root.
    private struct Matcher {
        let binding: ProviderBinding
        let provider: NonReplicatedProvider?
        let tree: ConfinedDirectory

        var database: ProviderDatabase { binding.database }

        /// The size and SHA-256 (hex) of the plain bytes of the local file `relative`, nil when
        /// they cannot be had (then it matches nothing).
        func localDigest(_ relative: String) -> (size: Int64, hash: String)? {
            guard let (copy, _) = try? ProviderRules.plainCopyForUpload(relative: relative, in: tree, receiver: binding.accountId,
                                                                        context: binding.context) else { return nil }
            var st = stat()
            guard fstat(copy.fd, &st) == 0, let hash = try? SHA256.hex(ofDescriptor: copy.fd) else { return nil }
            return (Int64(st.st_size), hash)
        }

        /// The remote file as read (its version names the bytes hashed) when its bytes have
        /// `digest`, else nil.
        func remoteMatch(_ item: RemoteItem, _ digest: (size: Int64, hash: String)?) throws -> RemoteItem? {
            guard let digest, item.size == digest.size else { return nil }
            let download = try PlainBuffer(name: "mamfs-reattach")
            let read = try binding.remote.readContents(of: item.identifier, into: download.url)
            return try SHA256.hex(ofDescriptor: download.fd) == digest.hash ? read : nil
        }

        // MARK: Non-replicated: the attributes of every local item

        func nonReplicated(_ relative: String, remote: ExactDictionary<RemoteItem>, report: inout ReattachReport) throws {
            guard let names = tree.names(in: relative) else { return }
            for name in names.sorted() {
                if relative.isEmpty && name == ProviderLayout.metadataDirectoryName { continue }
                if FileSystem.isTemporaryName(name) { continue }
                let child = relative.isEmpty ? name : relative + "/" + name
                guard let st = tree.lstat(child) else { continue }
                if FileSystem.isDirectory(st) {
                    if let old = tree.getAttribute(child, LocalItemAttributes.itemAttribute) {
                        if let item = remote[child], item.type == .directory {
                            try tree.setAttribute(child, LocalItemAttributes.itemAttribute, item.identifier.rawValue)
                            try database.recordIdentity(store: item.identifier, fileID: item.fileID, movedFrom: ItemIdentifier(old))
                            report.matched += 1
                        } else {
                            // Made again on the remote by the next upload of a file below it.
                            tree.removeAttributes(child, [LocalItemAttributes.itemAttribute])
                        }
                    }
                    try nonReplicated(child, remote: remote, report: &report)
                } else if FileSystem.isRegular(st), let attributes = LocalItemAttributes.read(child, in: tree) {
                    try nonReplicatedFile(child, st: st, attributes: attributes, remote: remote[child].flatMap { $0.type == .file ? $0 : nil },
                                          report: &report)
                }
            }
        }

        private func nonReplicatedFile(_ relative: String, st: stat, attributes: LocalItemAttributes, remote item: RemoteItem?,
                                       report: inout ReattachReport) throws {
            let old = attributes.identifier
            guard let item else {
                try? database.remove(old)
                if attributes.isPlaceholder {
                    if tree.unlink(relative) == 0 { report.removedPlaceholders += 1 }
                } else {
                    // Not on the remote: uploaded as a new item by the next sync.
                    LocalItemAttributes.clear(relative, in: tree)
                    report.pendingUpload += 1
                }
                return
            }
            guard let provider else { throw MAMError.internalError("a non-replicated root without its provider") }
            if attributes.isPlaceholder {
                var updated = attributes
                updated.identifier = item.identifier
                updated.contentVersion = item.version.contentVersion
                updated.size = item.size
                try updated.write(relative, in: tree)
                if item.size == attributes.size { report.matched += 1 } else { report.changedRemotely += 1 }
            } else if let read = try remoteMatch(item, localDigest(relative)) {
                let updated = LocalItemAttributes(identifier: read.identifier, contentVersion: read.version.contentVersion,
                                                  size: read.size, isPlaceholder: false, stamp: LocalStamp(st))
                try updated.write(relative, in: tree)
                report.matched += 1
            } else if attributes.hasLocalChanges(st) {
                var updated = attributes
                updated.identifier = item.identifier
                if item.size == attributes.size { updated.contentVersion = item.version.contentVersion }
                try updated.write(relative, in: tree)
                report.pendingUpload += 1
            } else {
                try provider.writePlaceholder(for: item, at: relative, in: tree, replacing: true)
                report.changedRemotely += 1
            }
            if old != item.identifier { try? database.remove(old) }
            provider.remember(item, relative: relative, movedFrom: old)
        }

        // MARK: Replicated: the item rows

        func replicated(remote: ExactDictionary<RemoteItem>, report: inout ReattachReport) throws {
            for row in try database.allItems() {
                let st = tree.lstat(row.localPath)
                let local = st.flatMap { FileSystem.itemType($0) == row.type ? LocalStamp($0) : nil }
                guard let item = remote[row.localPath], item.type == row.type else {
                    // Not on the remote: the next sync uploads what is here as a new item.
                    try database.remove(row.identifier)
                    if local != nil && row.type != .directory { report.pendingUpload += 1 }
                    continue
                }
                var updated = row
                updated.identifier = item.identifier
                updated.parent = item.parentIdentifier
                updated.filename = item.filename
                updated.version.metadataVersion = item.version.metadataVersion
                switch row.type {
                case .directory:
                    updated.version = item.version
                    report.matched += 1
                case .symlink:
                    if let local, tree.readLink(row.localPath) == item.symlinkTarget {
                        updated.version = item.version
                        updated.local = local
                        report.matched += 1
                    } else {
                        report.changedRemotely += 1
                    }
                case .file:
                    if let local {
                        if let read = try remoteMatch(item, localDigest(row.localPath)) {
                            updated.version = read.version
                            updated.size = read.size
                            updated.local = local
                            report.matched += 1
                        } else if local != row.local {
                            if item.size == row.size { updated.version.contentVersion = item.version.contentVersion }
                            report.pendingUpload += 1
                        } else {
                            report.changedRemotely += 1
                        }
                    } else {
                        // Deleted locally before the remote was replaced: the delete goes up.
                        updated.version = item.version
                    }
                }
                try database.database.transaction {
                    if updated.identifier != row.identifier { try database.remove(row.identifier) }
                    try database.upsert(updated)
                    try database.recordIdentity(store: updated.identifier, fileID: item.fileID, movedFrom: row.identifier)
                }
            }
        }
    }
}
