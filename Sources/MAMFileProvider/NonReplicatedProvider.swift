import CSystem
import Foundation
import MAMProtection

/// A file provider with `NSFileProviderExtension` semantics over a local root (the mount's
/// backing directory) and a remote store.
///
/// Every remote item appears locally at once (`createPlaceholders`): directories and symlinks
/// as themselves, files as placeholders (see `LocalItemAttributes`). Contents arrive on first
/// open (`startProvidingItem`), go back to the remote when changed (`itemChanged`), can be
/// dropped again (`stopProvidingItem`), and files from elsewhere enter through
/// `importDocument`. Every local item belongs to the domain's account.
///
/// The remote is never modified by providing; what is uploaded is always the plain copy made
/// by `ProviderRules.plainCopyForUpload`.
///
/// Concurrency: calls on different items may run in parallel; calls on the same item must be
/// serialized by the caller (the mount holds the item's content lock). Materializing and
/// evicting replace the local file by rename, so its inode changes: a mount holding O_PATH
/// descriptors must re-key the node afterwards.
///
/// Errors: every method throws `MAMError` (remote failures mapped with `RemoteError.mamError`).
public final class NonReplicatedProvider: Sendable {
    let binding: ProviderBinding

    /// The domain (remote + account).
    public var domain: FileProviderDomain { binding.domain }
    /// The local root.
    public var layout: ProviderLayout { binding.layout }

    /// Opens the provider on `localRoot` (created if missing) for `domain`.
    /// - Throws: `.invalidArguments` when the root belongs to another kind, account or remote;
    ///   `.cannotCreateOutput`.
    public init(localRoot: String, domain: FileProviderDomain) throws {
        binding = try ProviderBinding(localRoot: localRoot, domain: domain, kind: .nonReplicated)
    }

    // MARK: Queries the mount makes

    /// The placeholder at `localPath`, nil when the path is not a placeholder (materialized,
    /// not a provider item, or missing). The mount reports `size` for it and calls
    /// `startProvidingItem` before opening it.
    public static func placeholderInfo(localPath: String) -> PlaceholderInfo? {
        guard let attributes = LocalItemAttributes.read(path: localPath), attributes.isPlaceholder else { return nil }
        return PlaceholderInfo(identifier: attributes.identifier, size: attributes.size)
    }

    /// True when the local file has changes not uploaded yet (eviction is refused then).
    public static func hasPendingChanges(localPath: String) -> Bool {
        guard let st = FileSystem.lstatPath(localPath), FileSystem.isRegular(st) else { return false }
        guard let attributes = LocalItemAttributes.read(path: localPath) else { return true }
        return attributes.hasLocalChanges(st)
    }

    // MARK: Placeholders

    /// Makes the local root show the remote tree: missing directories created, missing files
    /// as placeholders, placeholders of changed items refreshed, clean materialized copies of
    /// changed items turned back into placeholders (fresh contents on next open), items gone
    /// from the remote removed locally unless they hold un-uploaded changes (those lose their
    /// item attributes and are uploaded as new items by the next `itemChanged`). A remote
    /// rename shows as the old name removed and the new one added.
    ///
    /// Enumerates under the domain's account (`FileProviderDomain.enumerator(for:)`).
    /// - Parameter progress: called after each item.
    /// - Returns: the report; an unreachable remote is an error in it (`complete == false`) and
    ///   nothing local is touched.
    /// - Throws: only local failures that stop the whole pass (`.cannotCreateOutput`).
    @discardableResult
    public func createPlaceholders(progress: ((SyncProgress) -> Void)? = nil) throws -> SyncReport {
        var report = SyncReport()
        let items: [FileProviderItem]
        let remoteItems: [RemoteItem]
        do {
            try binding.checkBeforePass()
            remoteItems = try binding.remote.enumerateTree()
            let enumerator = domain.enumerator(for: .rootContainer)
            items = remoteItems.map(enumerator.domain.protectFileProviderItem)
        } catch {
            report.errors.append(SyncIssue(path: "", error: error))
            report.complete = false
            return report
        }
        let paths = ProviderBinding.localPaths(of: remoteItems)
        let byId = Dictionary(remoteItems.map { ($0.identifier, $0) }, uniquingKeysWith: { a, _ in a })
        var seen = Set<ItemIdentifier>()
        var done = 0
        for item in items {
            guard let relative = paths[item.itemIdentifier], let remote = byId[item.itemIdentifier] else { continue }
            seen.insert(item.itemIdentifier)
            do {
                try placeItem(remote, relative: relative, report: &report)
            } catch {
                report.errors.append(SyncIssue(path: relative, error: error))
            }
            done += 1
            progress?(SyncProgress(done: done, total: items.count, path: relative))
        }
        removeVanished(directory: "", remoteIds: seen, report: &report)
        report.anchor = (try? binding.database.anchor()) ?? 0
        return report
    }

    private func placeItem(_ item: RemoteItem, relative: String, report: inout SyncReport) throws {
        let path = layout.absolutePath(relative)
        let st = FileSystem.lstatPath(path)
        switch item.type {
        case .directory:
            if st == nil {
                guard mkdir(path, 0o755) == 0 else { throw MAMError.fromErrno("mkdir \(path)") }
                report.fetched += 1
            } else if let st, !FileSystem.isDirectory(st) {
                throw MAMError.cannotCreateOutput("\(relative) exists locally and is not a directory")
            }
            try FileSystem.setAttribute(path, LocalItemAttributes.itemAttribute, item.identifier.rawValue)
        case .symlink:
            let target = item.symlinkTarget ?? ""
            if let st {
                guard FileSystem.isSymlink(st), FileSystem.readLink(path) != target else { return }
                unlink(path)
            }
            guard symlink(target, path) == 0 else { throw MAMError.fromErrno("symlink \(path)") }
            report.fetched += 1
        case .file:
            guard let st else {
                try writePlaceholder(for: item, at: path, replacing: false)
                report.placeholders += 1
                return
            }
            guard FileSystem.isRegular(st), let attributes = LocalItemAttributes.read(path: path),
                  attributes.identifier == item.identifier else {
                // A local file not uploaded yet under the same name: it is uploaded (and the
                // clash resolved) by its own itemChanged.
                return
            }
            guard attributes.contentVersion != item.version.contentVersion else { return }
            if attributes.isPlaceholder || !attributes.hasLocalChanges(st) {
                try writePlaceholder(for: item, at: path, replacing: true)
                report.placeholders += 1
            }
        }
    }

    /// Removes local items whose remote item is gone (keeping those with local changes).
    private func removeVanished(directory relative: String, remoteIds: Set<ItemIdentifier>, report: inout SyncReport) {
        let path = layout.absolutePath(relative)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return }
        for name in names {
            if relative.isEmpty && name == ProviderLayout.metadataDirectoryName { continue }
            if FileSystem.isTemporaryName(name) { continue }
            let childRelative = relative.isEmpty ? name : relative + "/" + name
            let child = layout.absolutePath(childRelative)
            guard let st = FileSystem.lstatPath(child) else { continue }
            if FileSystem.isDirectory(st) {
                removeVanished(directory: childRelative, remoteIds: remoteIds, report: &report)
                if let id = FileSystem.getAttribute(child, LocalItemAttributes.itemAttribute), !remoteIds.contains(ItemIdentifier(id)) {
                    if rmdir(child) == 0 { report.deletedLocally += 1 } else { LocalItemAttributes.clear(path: child) }
                }
            } else if FileSystem.isRegular(st), let attributes = LocalItemAttributes.read(path: child),
                      !remoteIds.contains(attributes.identifier) {
                try? binding.database.remove(attributes.identifier)
                if attributes.hasLocalChanges(st) {
                    LocalItemAttributes.clear(path: child)
                } else if unlink(child) == 0 {
                    report.deletedLocally += 1
                }
            }
        }
    }

    /// Writes an empty placeholder file for `item` at `path` (atomically; `replacing` an
    /// existing file or refusing to clobber one).
    private func writePlaceholder(for item: RemoteItem, at path: String, replacing: Bool) throws {
        let temp = try layout.makeTemporaryFile(name: item.filename)
        let fd = open(temp.path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw MAMError.fromErrno("open \(temp.path)") }
        defer { close(fd) }
        let attributes = LocalItemAttributes(identifier: item.identifier, contentVersion: item.version.contentVersion,
                                             size: item.size, isPlaceholder: true, stamp: nil)
        try attributes.write(fd: fd)
        fchmod(fd, mode_t(item.mode ?? 0o644) & 0o777)
        remember(item, at: path)
        if replacing {
            try temp.move(to: path)
        } else {
            guard mamfs_renameat2(AT_FDCWD, temp.path, AT_FDCWD, path, mamfs_RENAME_NOREPLACE) == 0 else {
                throw MAMError.fromErrno("create placeholder \(path)")
            }
            temp.release()
            FileSystem.syncDirectory(PathName.directory(of: path))
        }
    }

    // MARK: Providing

    /// Materializes a placeholder: downloads the remote contents to a temp file, makes the
    /// provided copy (`ProviderRules.writeProvidedCopy`: encrypted for the domain's account
    /// exactly when its policy says `shouldFileProviderEncryptFiles`, plain-tagged otherwise)
    /// and renames it over the placeholder. Does nothing for a file already materialized.
    /// Mirrors `NSFileProviderExtension startProvidingItemAtURL:completionHandler:`.
    /// - Throws: `.invalidArguments` (not a provider item); remote errors mapped to `MAMError`
    ///   (`.system(EHOSTUNREACH)` unreachable, `.fileNotFound` deleted remotely);
    ///   `.keyUnavailable` (account wiped). The placeholder is left as it was on failure.
    public func startProvidingItem(localPath: String) throws {
        try ProviderError.mapped {
            guard let attributes = LocalItemAttributes.read(path: localPath) else {
                throw MAMError.invalidArguments("\(localPath) is not a file-provider item")
            }
            guard attributes.isPlaceholder else { return }
            let download = try layout.makeTemporaryFile(name: PathName.lastComponent(of: localPath))
            let item = try binding.remote.readContents(of: attributes.identifier, into: download.url)
            try installProvidedCopy(plainFile: download.path, item: item, at: localPath) {
                // Only replace what is still the same placeholder.
                LocalItemAttributes.read(path: localPath).map { $0.isPlaceholder && $0.identifier == attributes.identifier } ?? false
            }
        }
    }

    /// Makes the provided copy of `plainFile` for `item` and renames it to `path` when
    /// `stillWanted()` holds just before the rename (`noReplace`: never over an existing file).
    private func installProvidedCopy(plainFile: String, item: RemoteItem, at path: String,
                                     noReplace: Bool = false, stillWanted: () -> Bool = { true }) throws {
        let provided = try layout.makeTemporaryFile(name: item.filename)
        try ProviderRules.writeProvidedCopy(plainFile: plainFile, owner: binding.accountId,
                                            destination: provided.path, context: binding.context)
        let fd = open(provided.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw MAMError.fromErrno("open \(provided.path)") }
        defer { close(fd) }
        fchmod(fd, mode_t(item.mode ?? 0o644) & 0o777)
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw MAMError.fromErrno("stat \(provided.path)") }
        let attributes = LocalItemAttributes(identifier: item.identifier, contentVersion: item.version.contentVersion,
                                             size: item.size, isPlaceholder: false, stamp: LocalStamp(st))
        try attributes.write(fd: fd)
        remember(item, at: path)
        guard stillWanted() else {
            throw MAMError.system("\(path) changed while it was being provided", errno: EAGAIN)
        }
        if noReplace {
            guard mamfs_renameat2(AT_FDCWD, provided.path, AT_FDCWD, path, mamfs_RENAME_NOREPLACE) == 0 else {
                throw MAMError.fromErrno("create \(path)")
            }
            provided.release()
            FileSystem.syncDirectory(PathName.directory(of: path))
        } else {
            try provided.move(to: path)
        }
    }

    /// Uploads the changes of a local file: its plain copy (`ProviderRules.plainCopyForUpload`,
    /// which also asks `canReceiveSharedFile`) replaces the remote contents if the remote is
    /// still at the version the local copy came from. When both changed, both are kept: the
    /// local file is uploaded as a new item named `name (conflict HOST DATE).ext` and renamed
    /// to that name locally, and a placeholder for the remote version takes the original name.
    /// A file with no item attributes (created in the mount) is uploaded as a new item. A
    /// placeholder or an unchanged file uploads nothing.
    /// Mirrors `NSFileProviderExtension itemChangedAtURL:`.
    /// - Returns: the item as it is on the remote now.
    /// - Throws: `.policyDenied` (not uploaded), remote errors mapped to `MAMError` (the file
    ///   stays marked as changed and a later call retries), `.fileNotFound`.
    @discardableResult
    public func itemChanged(localPath: String) throws -> FileProviderItem? {
        try ProviderError.mapped {
            guard let relative = layout.relativePath(of: localPath), !relative.isEmpty else {
                throw MAMError.invalidArguments("\(localPath) is not inside \(layout.root)")
            }
            guard let st = FileSystem.lstatPath(localPath) else { throw MAMError.fileNotFound(localPath) }
            guard FileSystem.isRegular(st) else { return nil }
            guard let attributes = LocalItemAttributes.read(path: localPath) ?? recalled(relative) else {
                return try uploadNew(localPath: localPath, relative: relative, stamp: LocalStamp(st))
            }
            guard attributes.hasLocalChanges(st), let base = attributes.contentVersion else { return nil }
            let stamp = LocalStamp(st)
            let (copy, _) = try ProviderRules.plainCopyForUpload(localPath: localPath, receiver: binding.accountId,
                                                                 layout: layout, context: binding.context)
            do {
                let item = try binding.remote.modify(attributes.identifier, baseVersion: base, contentsURL: copy.url)
                try markUploaded(localPath: localPath, item: item, stamp: stamp)
                return domain.protectFileProviderItem(item)
            } catch RemoteError.notFound {
                return try uploadNew(localPath: localPath, relative: relative, stamp: stamp, plainCopy: copy)
            } catch RemoteError.conflict {
                return try keepBoth(localPath: localPath, relative: relative, remoteId: attributes.identifier,
                                    plainCopy: copy, stamp: stamp)
            }
        }
    }

    private func markUploaded(localPath: String, item: RemoteItem, stamp: LocalStamp) throws {
        let attributes = LocalItemAttributes(identifier: item.identifier, contentVersion: item.version.contentVersion,
                                             size: item.size, isPlaceholder: false, stamp: stamp)
        try attributes.write(path: localPath)
        remember(item, at: localPath)
    }

    /// Keeps a copy of an item's identity by local path in the database. The xattrs are the
    /// primary record; this copy lets `itemChanged` recognise a file replaced by an editor's
    /// save-by-rename (a new inode without the xattrs) as a change of the same item.
    private func remember(_ item: RemoteItem, at path: String) {
        guard let relative = layout.relativePath(of: path) else { return }
        let record = ItemRecord(identifier: item.identifier, parent: item.parentIdentifier, filename: item.filename,
                                type: item.type, size: item.size, version: item.version, owner: binding.accountId,
                                localPath: relative, local: LocalStamp(inode: 0, size: 0, mtime: 0))
        try? binding.database.upsert(record)
    }

    /// The identity last recorded for `relative`, as attributes of a changed materialized file.
    private func recalled(_ relative: String) -> LocalItemAttributes? {
        guard let record = try? binding.database.item(localPath: relative), record.type == .file else { return nil }
        return LocalItemAttributes(identifier: record.identifier, contentVersion: record.version.contentVersion,
                                   size: record.size, isPlaceholder: false, stamp: nil)
    }

    /// Uploads a local file that has no remote item yet (created in the mount, or its item was
    /// deleted remotely while it had changes).
    private func uploadNew(localPath: String, relative: String, stamp: LocalStamp, plainCopy: TemporaryFile? = nil) throws -> FileProviderItem {
        let copy = try plainCopy ?? ProviderRules.plainCopyForUpload(localPath: localPath, receiver: binding.accountId,
                                                                      layout: layout, context: binding.context).copy
        let parent = try ensureRemoteDirectory(FileSystem.parentPath(relative))
        let name = FileSystem.lastComponent(relative)
        do {
            let item = try binding.remote.create(parent: parent, name: name, contents: .file(copy.url))
            try markUploaded(localPath: localPath, item: item, stamp: stamp)
            return domain.protectFileProviderItem(item)
        } catch RemoteError.conflict(let existing, _) {
            return try keepBoth(localPath: localPath, relative: relative, remoteId: existing, plainCopy: copy, stamp: stamp)
        }
    }

    /// Both sides changed: the local file goes up as a new item under a conflict name and
    /// moves to that name locally; the remote item keeps the original name (as a placeholder).
    private func keepBoth(localPath: String, relative: String, remoteId: ItemIdentifier,
                          plainCopy: TemporaryFile, stamp: LocalStamp) throws -> FileProviderItem {
        let parentRelative = FileSystem.parentPath(relative)
        let parent = try ensureRemoteDirectory(parentRelative)
        let siblings = Set((try? binding.remote.enumerate(container: parent))?.map(\.filename) ?? [])
        let name = ConflictName.make(for: FileSystem.lastComponent(relative)) { candidate in
            siblings.contains(candidate) || FileSystem.lstatPath(layout.absolutePath(FileSystem.join(parentRelative, candidate))) != nil
        }
        let item = try binding.remote.create(parent: parent, name: name, contents: .file(plainCopy.url))
        let conflictPath = layout.absolutePath(parentRelative.isEmpty ? name : parentRelative + "/" + name)
        guard mamfs_renameat2(AT_FDCWD, localPath, AT_FDCWD, conflictPath, mamfs_RENAME_NOREPLACE) == 0 else {
            throw MAMError.fromErrno("rename \(localPath) to its conflict name")
        }
        try markUploaded(localPath: conflictPath, item: item, stamp: stamp)
        if let current = try? binding.remote.item(remoteId), current.type == .file {
            try? writePlaceholder(for: current, at: localPath, replacing: false)
        }
        return domain.protectFileProviderItem(item)
    }

    /// The remote identifier of a local directory, creating it (and its missing parents) on
    /// the remote when it has none yet.
    private func ensureRemoteDirectory(_ relative: String) throws -> ItemIdentifier {
        if relative.isEmpty { return .rootContainer }
        let path = layout.absolutePath(relative)
        if let id = FileSystem.getAttribute(path, LocalItemAttributes.itemAttribute) { return ItemIdentifier(id) }
        let parent = try ensureRemoteDirectory(FileSystem.parentPath(relative))
        let name = FileSystem.lastComponent(relative)
        let item: RemoteItem
        do {
            item = try binding.remote.create(parent: parent, name: name, contents: .directory)
        } catch RemoteError.conflict(let existing, _) {
            item = try binding.remote.item(existing)
            guard item.type == .directory else { throw RemoteError.conflict(existing, current: item.version) }
        }
        try FileSystem.setAttribute(path, LocalItemAttributes.itemAttribute, item.identifier.rawValue)
        return item.identifier
    }

    // MARK: Deletes and moves

    /// Deletes the remote item of a local item the mount removed (read the identifier and
    /// version with `LocalItemAttributes.read` before unlinking). If the remote changed since
    /// `baseVersion` it is kept (the next `createPlaceholders` shows it again): a local delete
    /// never destroys remote changes the user has not seen.
    /// Mirrors `NSFileProviderExtension deleteItemWithIdentifier:completionHandler:`.
    /// - Throws: remote errors as `MAMError` (`.system(EBUSY)` for the kept-because-changed case,
    ///   `.system(EHOSTUNREACH)`, `.system(EROFS)`); a missing remote item is not an error.
    public func deleteItem(withIdentifier identifier: ItemIdentifier, baseVersion: String?) throws {
        try ProviderError.mapped {
            do {
                try binding.remote.delete(identifier, baseVersion: baseVersion)
            } catch RemoteError.notFound {
            }
            try? binding.database.remove(identifier)
        }
    }

    /// Moves the remote item after the mount renamed or moved a local item to `localPath`
    /// (the xattrs moved with it): a metadata change on the remote, the contents are not sent
    /// again. Identifiers the remote changes (path-keyed stores) are written back, for a
    /// directory to everything below it too.
    /// Mirrors `renameItemWithIdentifier:toName:` and `reparentItemWithIdentifier:toParentItemWithIdentifier:newName:`.
    /// - Returns: the item at its new place.
    /// - Throws: `.invalidArguments` (not a provider item), remote errors as `MAMError`
    ///   (`.system(EBUSY)` when the new name is taken on the remote).
    @discardableResult
    public func itemMoved(localPath: String) throws -> FileProviderItem {
        try ProviderError.mapped {
            guard let relative = layout.relativePath(of: localPath), !relative.isEmpty,
                  let id = FileSystem.getAttribute(localPath, LocalItemAttributes.itemAttribute) else {
                throw MAMError.invalidArguments("\(localPath) is not a file-provider item")
            }
            let parent = try ensureRemoteDirectory(FileSystem.parentPath(relative))
            let name = FileSystem.lastComponent(relative)
            if let current = try? binding.remote.item(ItemIdentifier(id)), current.parentIdentifier == parent,
               current.filename == name {
                // Already there (a rename back, or a move already made): nothing to do.
                remember(current, at: localPath)
                return domain.protectFileProviderItem(current)
            }
            let item = try binding.remote.move(ItemIdentifier(id), toParent: parent, newName: name)
            try FileSystem.setAttribute(localPath, LocalItemAttributes.itemAttribute, item.identifier.rawValue)
            try? binding.database.remove(ItemIdentifier(id))
            remember(item, at: localPath)
            if item.type == .directory {
                var relativeIds: [ItemIdentifier: String] = [item.identifier: ""]
                for child in try binding.remote.enumerateTree(from: item.identifier) {
                    guard let parentPath = relativeIds[child.parentIdentifier] else { continue }
                    let childRelative = parentPath.isEmpty ? child.filename : parentPath + "/" + child.filename
                    relativeIds[child.identifier] = childRelative
                    let childPath = localPath + "/" + childRelative
                    guard FileSystem.getAttribute(childPath, LocalItemAttributes.itemAttribute) != nil else { continue }
                    try FileSystem.setAttribute(childPath, LocalItemAttributes.itemAttribute, child.identifier.rawValue)
                    if child.type == .file { remember(child, at: childPath) }
                }
            }
            return domain.protectFileProviderItem(item)
        }
    }

    /// The remote side of a local rename or move to `localPath` (where the renamed object is
    /// now, found by the caller from its identity, not from the name it had), `replaced` being
    /// the attributes of the local item the rename replaced (read before renaming; nil when
    /// nothing was replaced or it was the same item):
    ///
    /// | renamed object                    | replaced          | remote                                          |
    /// |-----------------------------------|-------------------|-------------------------------------------------|
    /// | provider item S                   | none              | S moved (metadata only, no re-upload)            |
    /// | provider item S                   | item R            | S's pending changes uploaded, R deleted, S moved |
    /// | regular file without an item      | file R            | the file takes R's identity and is uploaded as a new version of R (editor save: write temp, rename over) |
    /// | regular file without an item      | none              | uploaded as a new item under its current name    |
    /// | anything else                     | item R            | R deleted                                        |
    ///
    /// A remote item is never deleted before what replaced it is on the remote: when the upload
    /// fails the error is thrown, the local file stays pending (retried by the next close,
    /// fsync, `provider sync` or mount) and R is left as it was.
    /// - Throws: as `itemChanged` and `itemMoved`.
    public func itemRenamed(localPath: String, replaced: LocalItemAttributes?) throws {
        try ProviderError.mapped {
            guard let st = FileSystem.lstatPath(localPath) else { throw MAMError.fileNotFound(localPath) }
            let own = FileSystem.getAttribute(localPath, LocalItemAttributes.itemAttribute)
            if let replaced, replaced.identifier.rawValue == own {
                try itemMoved(localPath: localPath)
                return
            }
            if own == nil, FileSystem.isRegular(st) {
                if let replaced, replaced.contentVersion != nil {
                    // Save by rename: the new file is the next version of the item it replaced.
                    var adopted = replaced
                    adopted.isPlaceholder = false
                    adopted.stamp = nil
                    try adopted.write(path: localPath)
                    try itemChanged(localPath: localPath)
                    if let id = FileSystem.getAttribute(localPath, LocalItemAttributes.itemAttribute),
                       id == replaced.identifier.rawValue {
                        try itemMoved(localPath: localPath)
                    }
                    return
                }
                // Never uploaded (its close raced with the rename, or its upload failed).
                try itemChanged(localPath: localPath)
                if let replaced { try deleteItem(withIdentifier: replaced.identifier, baseVersion: replaced.contentVersion) }
                return
            }
            if own != nil, FileSystem.isRegular(st) {
                // Its last changes go up first, so the item that takes the name is complete.
                try itemChanged(localPath: localPath)
            }
            if let replaced { try deleteItem(withIdentifier: replaced.identifier, baseVersion: replaced.contentVersion) }
            if FileSystem.getAttribute(localPath, LocalItemAttributes.itemAttribute) != nil {
                try itemMoved(localPath: localPath)
            }
        }
    }

    /// Uploads every local file with changes the remote does not have (files never uploaded,
    /// files written since their last upload, files a save-by-rename replaced): what a
    /// mount does at start and `mamfs provider sync` does before refreshing placeholders.
    /// Placeholders and clean copies are not touched.
    /// - Returns: the report (`created` / `modified` counts; one error per file not uploaded,
    ///   `refused` for policy refusals); an unreachable remote stops the walk early.
    public func uploadPendingChanges(progress: ((SyncProgress) -> Void)? = nil) -> SyncReport {
        var report = SyncReport()
        var pending: [String] = []
        func walk(_ relative: String) {
            let path = layout.absolutePath(relative)
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return }
            for name in names.sorted() {
                if relative.isEmpty && name == ProviderLayout.metadataDirectoryName { continue }
                if FileSystem.isTemporaryName(name) { continue }
                let childRelative = relative.isEmpty ? name : relative + "/" + name
                guard let st = FileSystem.lstatPath(layout.absolutePath(childRelative)) else { continue }
                if FileSystem.isDirectory(st) {
                    walk(childRelative)
                } else if Self.hasPendingChanges(localPath: layout.absolutePath(childRelative)) {
                    pending.append(childRelative)
                }
            }
        }
        walk("")
        for (index, relative) in pending.enumerated() {
            let path = layout.absolutePath(relative)
            let existed = LocalItemAttributes.read(path: path) != nil
            do {
                if try itemChanged(localPath: path) != nil {
                    if existed { report.modified += 1 } else { report.created += 1 }
                }
            } catch {
                let issue = SyncIssue(path: relative, error: error)
                if issue.errno == EACCES { report.refused += 1 }
                report.errors.append(issue)
                if issue.errno == EHOSTUNREACH {
                    report.complete = false
                    break
                }
            }
            progress?(SyncProgress(done: index + 1, total: pending.count, path: relative))
        }
        return report
    }

    // MARK: Eviction

    /// Drops the local contents of a materialized file and leaves a placeholder (same name,
    /// size and version). Does nothing for a placeholder.
    /// Mirrors `NSFileProviderExtension stopProvidingItemAtURL:` / `evictItem`.
    /// - Throws: `.invalidArguments` (not a provider item, or a directory);
    ///   `.system(EBUSY)` "has a pending upload" when the file has changes not uploaded yet,
    ///   including a file created locally and never uploaded (nothing is dropped).
    public func stopProvidingItem(localPath: String) throws {
        try Self.evict(localPath: localPath, layout: layout, database: binding.database)
    }

    /// Eviction without an open provider (for `mamfs provider evict`).
    static func evict(localPath: String, layout: ProviderLayout, database: ProviderDatabase) throws {
        guard let st = FileSystem.lstatPath(localPath) else { throw MAMError.fileNotFound(localPath) }
        guard FileSystem.isRegular(st), let attributes = LocalItemAttributes.read(path: localPath) else {
            if FileSystem.isRegular(st), layout.relativePath(of: localPath).map({ !$0.isEmpty }) == true {
                // Created (or replaced by a save-by-rename) and not uploaded yet.
                throw pendingUpload(localPath)
            }
            throw MAMError.invalidArguments("\(localPath) is not a file-provider file")
        }
        guard !attributes.isPlaceholder else { return }
        guard !attributes.hasLocalChanges(st) else { throw pendingUpload(localPath) }
        let temp = try layout.makeTemporaryFile(name: PathName.lastComponent(of: localPath))
        let fd = open(temp.path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw MAMError.fromErrno("open \(temp.path)") }
        defer { close(fd) }
        var placeholder = attributes
        placeholder.isPlaceholder = true
        placeholder.stamp = nil
        try placeholder.write(fd: fd)
        fchmod(fd, st.st_mode & 0o777)
        try temp.move(to: localPath)
    }

    /// The refusal to evict a file whose contents are not on the remote yet (EBUSY).
    static func pendingUpload(_ localPath: String) -> MAMError {
        .system("\(localPath) has a pending upload (changes not on the remote yet); not evicted", errno: EBUSY)
    }

    // MARK: Import

    /// Brings a file from outside the domain into `toLocalDirectory` (a directory inside the
    /// local root): the receive check and the decryption of a protected source to a copy
    /// (`ProviderRules.plainCopyForUpload`), the plain copy uploaded as a new remote item, and
    /// the local copy provided for the domain's account (`ProviderRules.writeProvidedCopy`).
    /// The source is only read.
    /// Mirrors `NSFileProviderExtension importDocumentAtURL:toParentItemIdentifier:`.
    /// - Returns: the new item.
    /// - Throws: `.policyDenied` (EACCES, exit 77) when the domain's account may not receive
    ///   the file — nothing uploaded, nothing created; `.cannotCreateOutput` when the name is
    ///   taken locally or remotely; `.invalidArguments` for a directory outside the root;
    ///   `.fileNotFound`; remote errors mapped to `MAMError`.
    @discardableResult
    public func importDocument(sourcePath: String, toLocalDirectory directory: String) throws -> FileProviderItem {
        try ProviderError.mapped {
            guard let directoryRelative = layout.relativePath(of: directory) else {
                throw MAMError.invalidArguments("\(directory) is not inside \(layout.root)")
            }
            guard let dirStat = FileSystem.lstatPath(layout.absolutePath(directoryRelative)), FileSystem.isDirectory(dirStat) else {
                throw MAMError.fileNotFound(directory)
            }
            guard let sourceStat = FileSystem.lstatPath(sourcePath) else { throw MAMError.fileNotFound(sourcePath) }
            guard !FileSystem.isDirectory(sourceStat) else { throw MAMError.operationOnDirectory(sourcePath) }
            let name = PathName.lastComponent(of: sourcePath)
            let targetRelative = directoryRelative.isEmpty ? name : directoryRelative + "/" + name
            let target = layout.absolutePath(targetRelative)
            guard FileSystem.lstatPath(target) == nil else {
                throw MAMError.cannotCreateOutput("\(target) already exists")
            }
            let (copy, _) = try ProviderRules.plainCopyForUpload(localPath: sourcePath, receiver: binding.accountId,
                                                                 layout: layout, context: binding.context)
            let parent = try ensureRemoteDirectory(directoryRelative)
            let item: RemoteItem
            do {
                item = try binding.remote.create(parent: parent, name: name, contents: .file(copy.url))
            } catch RemoteError.conflict {
                throw MAMError.cannotCreateOutput("'\(name)' already exists on the remote in \(directoryRelative.isEmpty ? "/" : directoryRelative)")
            }
            try installProvidedCopy(plainFile: copy.path, item: item, at: target, noReplace: true)
            return domain.protectFileProviderItem(item)
        }
    }

    /// The status of a local path (see `ProviderItemStatus`).
    /// - Throws: `.fileNotFound`, `.invalidArguments` (not a provider item).
    public func status(localPath: String) throws -> ProviderItemStatus {
        try ProviderItemStatus.nonReplicated(localPath: localPath, layout: layout, accountId: binding.accountId)
    }
}
