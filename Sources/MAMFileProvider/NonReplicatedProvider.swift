import Foundation
import MAMProtection
import MAMSystem

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
/// serialized by the caller, renames included: `itemMoved` changes the item's identifier on
/// the remote before it writes the new one locally, so a `startProvidingItem` between the
/// two asks for an identifier that is gone (the mount runs every call on one serial queue,
/// under the item's content lock where it has one). Materializing and
/// evicting replace the local file by rename, so its inode changes: a mount holding O_PATH
/// descriptors must re-key the node afterwards.
///
/// Errors: every method throws `MAMError` (remote failures mapped with `RemoteError.mamError`).
///
/// Confinement: every local operation goes through `ConfinedDirectory` on the local root (no
/// symlink followed, nothing outside the root reached, no FIFO or device opened); remote
/// names are compared as exact bytes (see `ItemIdentifier`).
public final class NonReplicatedProvider: Sendable {
    let binding: ProviderBinding
    /// The durable upload queue (see `NonReplicatedProvider+Queue`).
    let queue: UploadQueue

    /// The domain (remote + account).
    public var domain: FileProviderDomain { binding.domain }
    /// The local root.
    public var layout: ProviderLayout { binding.layout }

    /// Opens the provider on `localRoot` (created if missing) for `domain`.
    /// - Throws: `.invalidArguments` when the root belongs to another kind, account or remote;
    ///   `.cannotCreateOutput`.
    public init(localRoot: String, domain: FileProviderDomain) throws {
        binding = try ProviderBinding(localRoot: localRoot, domain: domain, kind: .nonReplicated)
        queue = try UploadQueue(binding.database)
    }

    /// The local root, opened for confined calls.
    func tree() throws -> ConfinedDirectory { try layout.confined() }

    /// `localPath` relative to the root.
    /// - Throws: `.invalidArguments` for a path outside the root.
    func relative(_ localPath: String) throws -> String {
        guard let relative = layout.relativePath(of: localPath) else {
            throw MAMError.invalidArguments("\(localPath) is not inside \(layout.root)")
        }
        return relative
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
        try startProvidingItem(localPath: localPath, prefetched: nil)
    }

    /// Makes the provided copy of `plain` for `item` and renames it to `relative` when
    /// `stillWanted()` holds just before the rename (`noReplace`: never over an existing file).
    func installProvidedCopy(plain: PlainBuffer, item: RemoteItem, at relative: String, in tree: ConfinedDirectory,
                                     noReplace: Bool = false, stillWanted: () -> Bool = { true }) throws {
        let provided = try layout.makeTemporaryFile(name: item.filename) { fd in
            try ProviderRules.writeProvidedCopy(plain: plain, owner: binding.accountId, into: fd, context: binding.context)
            fchmod(fd, mode_t(item.mode ?? 0o644) & 0o777)
            var st = stat()
            guard fstat(fd, &st) == 0 else { throw MAMError.fromErrno("stat the provided copy of \(relative)") }
            let attributes = LocalItemAttributes(identifier: item.identifier, contentVersion: item.version.contentVersion,
                                                 size: item.size, isPlaceholder: false, stamp: LocalStamp(st))
            try attributes.write(fd: fd)
            // One file on its own (an open waits for it): durable before it replaces the placeholder.
            guard fsync(fd) == 0 else { throw MAMError.fromErrno("fsync the provided copy of \(relative)") }
        }
        remember(item, relative: relative)
        guard stillWanted() else {
            throw MAMError.system("\(relative) changed while it was being provided", errno: EAGAIN)
        }
        try provided.move(to: relative, in: tree, noReplace: noReplace)
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
            let relative = try relative(localPath)
            guard !relative.isEmpty else { throw MAMError.invalidArguments("\(localPath) is the local root") }
            let tree = try tree()
            guard let st = tree.lstat(relative) else { throw MAMError.fileNotFound(localPath) }
            guard FileSystem.isRegular(st) else { return nil }
            guard let attributes = LocalItemAttributes.read(relative, in: tree) ?? recalled(relative) else {
                return try uploadNew(relative: relative, in: tree, stamp: LocalStamp(st))
            }
            guard attributes.hasLocalChanges(st), let base = attributes.contentVersion else { return nil }
            let stamp = LocalStamp(st)
            let (copy, _) = try ProviderRules.plainCopyForUpload(relative: relative, in: tree, receiver: binding.accountId,
                                                                 context: binding.context)
            do {
                let item = try binding.remote.modify(attributes.identifier, baseVersion: base, contentsURL: copy.url)
                try markUploaded(relative, in: tree, item: item, stamp: stamp)
                return binding.providedItem(item)
            } catch RemoteError.notFound {
                return try uploadNew(relative: relative, in: tree, stamp: stamp, plainCopy: copy)
            } catch RemoteError.conflict {
                return try keepBoth(relative: relative, in: tree, remoteId: attributes.identifier,
                                    plainCopy: copy, stamp: stamp)
            }
        }
    }

    private func markUploaded(_ relative: String, in tree: ConfinedDirectory, item: RemoteItem, stamp: LocalStamp) throws {
        let attributes = LocalItemAttributes(identifier: item.identifier, contentVersion: item.version.contentVersion,
                                             size: item.size, isPlaceholder: false, stamp: stamp)
        try attributes.write(relative, in: tree)
        remember(item, relative: relative)
    }

    /// Keeps a copy of an item's identity by local path in the database. The xattrs are the
    /// primary record; this copy lets `itemChanged` recognise a file replaced by an editor's
    /// save-by-rename (a new inode without the xattrs) as a change of the same item.
    /// The item's stable identifier is recorded too, carried from `movedFrom` (its store
    /// identifier before a move) when given.
    private func remember(_ item: RemoteItem, at path: String, movedFrom: ItemIdentifier? = nil) {
        guard let relative = layout.relativePath(of: path) else { return }
        remember(item, relative: relative, movedFrom: movedFrom)
    }

    func remember(_ item: RemoteItem, relative: String, movedFrom: ItemIdentifier? = nil) {
        let record = ItemRecord(identifier: item.identifier, parent: item.parentIdentifier, filename: item.filename,
                                type: item.type, size: item.size, version: item.version, owner: binding.accountId,
                                localPath: relative, local: LocalStamp(inode: 0, size: 0, mtime: 0))
        try? binding.database.upsert(record)
        _ = try? binding.database.recordIdentity(store: item.identifier, fileID: item.fileID, movedFrom: movedFrom)
    }

    /// The identity last recorded for `relative`, as attributes of a changed materialized file.
    private func recalled(_ relative: String) -> LocalItemAttributes? {
        guard let record = try? binding.database.item(localPath: relative), record.type == .file else { return nil }
        return LocalItemAttributes(identifier: record.identifier, contentVersion: record.version.contentVersion,
                                   size: record.size, isPlaceholder: false, stamp: nil)
    }

    /// Uploads a local file that has no remote item yet (created in the mount, or its item was
    /// deleted remotely while it had changes).
    private func uploadNew(relative: String, in tree: ConfinedDirectory, stamp: LocalStamp,
                           plainCopy: PlainBuffer? = nil) throws -> FileProviderItem {
        let copy = try plainCopy ?? ProviderRules.plainCopyForUpload(relative: relative, in: tree, receiver: binding.accountId,
                                                                      context: binding.context).copy
        let parent = try ensureRemoteDirectory(PathName.parent(of: relative), in: tree)
        let name = FileSystem.lastComponent(relative)
        do {
            let item = try binding.remote.create(parent: parent, name: name, contents: .file(copy.url))
            try markUploaded(relative, in: tree, item: item, stamp: stamp)
            return binding.providedItem(item)
        } catch RemoteError.conflict(let existing, _) {
            return try keepBoth(relative: relative, in: tree, remoteId: existing, plainCopy: copy, stamp: stamp)
        }
    }

    /// Both sides changed: the local file goes up as a new item under a conflict name and
    /// moves to that name locally; the remote item keeps the original name (as a placeholder).
    private func keepBoth(relative: String, in tree: ConfinedDirectory, remoteId: ItemIdentifier,
                          plainCopy: PlainBuffer, stamp: LocalStamp) throws -> FileProviderItem {
        let parentRelative = PathName.parent(of: relative)
        let parent = try ensureRemoteDirectory(parentRelative, in: tree)
        let siblings = Set(((try? binding.remote.enumerate(container: parent))?.map(\.filename) ?? []).map(ExactKey.init))
        let name = ConflictName.make(for: FileSystem.lastComponent(relative)) { candidate in
            siblings.contains(ExactKey(candidate)) || tree.lstat(ConfinedDirectory.child(parentRelative, candidate)) != nil
        }
        let item = try binding.remote.create(parent: parent, name: name, contents: .file(plainCopy.url))
        let conflictRelative = parentRelative.isEmpty ? name : parentRelative + "/" + name
        guard tree.rename(relative, conflictRelative, flags: SystemConstants.renameNoReplace) == 0 else {
            throw MAMError.fromErrno("rename \(relative) to its conflict name")
        }
        try markUploaded(conflictRelative, in: tree, item: item, stamp: stamp)
        if let current = try? binding.remote.item(remoteId), current.type == .file {
            try? writePlaceholder(for: current, at: relative, in: tree, replacing: false)
        }
        return binding.providedItem(item)
    }

    /// The remote identifier of a local directory, creating it (and its missing parents) on
    /// the remote when it has none yet.
    func ensureRemoteDirectory(_ relative: String, in tree: ConfinedDirectory) throws -> ItemIdentifier {
        if relative.isEmpty { return .rootContainer }
        guard let st = tree.lstat(relative), FileSystem.isDirectory(st) else {
            throw MAMError.fromErrno("\(relative) is not a local directory")
        }
        if let id = tree.getAttribute(relative, LocalItemAttributes.itemAttribute) { return ItemIdentifier(id) }
        let parent = try ensureRemoteDirectory(PathName.parent(of: relative), in: tree)
        let name = FileSystem.lastComponent(relative)
        let item: RemoteItem
        do {
            item = try binding.remote.create(parent: parent, name: name, contents: .directory)
        } catch RemoteError.conflict(let existing, _) {
            item = try binding.remote.item(existing)
            guard item.type == .directory else { throw RemoteError.conflict(existing, current: item.version) }
        }
        try tree.setAttribute(relative, LocalItemAttributes.itemAttribute, item.identifier.rawValue)
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
            let tree = try tree()
            guard let relative = layout.relativePath(of: localPath), !relative.isEmpty,
                  let id = tree.getAttribute(relative, LocalItemAttributes.itemAttribute) else {
                throw MAMError.invalidArguments("\(localPath) is not a file-provider item")
            }
            let parent = try ensureRemoteDirectory(PathName.parent(of: relative), in: tree)
            let name = FileSystem.lastComponent(relative)
            if let current = try? binding.remote.item(ItemIdentifier(id)), current.parentIdentifier == parent,
               ExactName.equal(current.filename, name) {
                // Already there (a rename back, or a move already made): nothing to do.
                remember(current, at: localPath)
                return binding.providedItem(current)
            }
            let item = try binding.remote.move(ItemIdentifier(id), toParent: parent, newName: name)
            try tree.setAttribute(relative, LocalItemAttributes.itemAttribute, item.identifier.rawValue)
            try? binding.database.remove(ItemIdentifier(id))
            remember(item, at: localPath, movedFrom: ItemIdentifier(id))
            if item.type == .directory {
                var relativeIds: [ItemIdentifier: String] = [item.identifier: ""]
                for child in try binding.remote.enumerateTree(from: item.identifier) {
                    guard let parentPath = relativeIds[child.parentIdentifier] else { continue }
                    let childRelative = parentPath.isEmpty ? child.filename : parentPath + "/" + child.filename
                    relativeIds[child.identifier] = childRelative
                    let childPath = relative + "/" + childRelative
                    guard let old = tree.getAttribute(childPath, LocalItemAttributes.itemAttribute) else { continue }
                    try tree.setAttribute(childPath, LocalItemAttributes.itemAttribute, child.identifier.rawValue)
                    if child.type == .file {
                        try? binding.database.remove(ItemIdentifier(old))
                        remember(child, relative: childPath, movedFrom: ItemIdentifier(old))
                    } else {
                        _ = try? binding.database.recordIdentity(store: child.identifier, fileID: child.fileID, movedFrom: ItemIdentifier(old))
                    }
                }
            }
            return binding.providedItem(item)
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
            let relative = try relative(localPath)
            let tree = try tree()
            guard let st = tree.lstat(relative) else { throw MAMError.fileNotFound(localPath) }
            let own = tree.getAttribute(relative, LocalItemAttributes.itemAttribute)
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
                    try adopted.write(relative, in: tree)
                    try itemChanged(localPath: localPath)
                    if let id = tree.getAttribute(relative, LocalItemAttributes.itemAttribute),
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
            if tree.getAttribute(relative, LocalItemAttributes.itemAttribute) != nil {
                try itemMoved(localPath: localPath)
            }
        }
    }

    /// Uploads every local file with changes the remote does not have (files never uploaded,
    /// files written since their last upload, files a save-by-rename replaced): what a
    /// mount does at start and `mamfs provider sync` does before refreshing placeholders.
    /// Placeholders and clean copies are not touched.
    /// - Returns: the report (`created` / `modified` counts; one error per file not uploaded,
    ///   `refused` for policy refusals); an unreachable remote stops the walk early, and a
    ///   remote that is not the volume it was (`ProviderBinding.checkBeforePass`) stops it
    ///   before anything is uploaded.
    public func uploadPendingChanges(progress: ((SyncProgress) -> Void)? = nil) -> SyncReport {
        uploadPendingChanges(counter: SyncProgressCounter(progress))
    }

    /// `uploadPendingChanges` counting into `counter` (items: the files with local changes;
    /// bytes: their stat sizes, corrected to the plain bytes uploaded).
    func uploadPendingChanges(counter: SyncProgressCounter) -> SyncReport {
        var report = SyncReport()
        do { try binding.checkBeforePass() } catch {
            report.errors.append(SyncIssue(path: "", error: error))
            report.complete = false
            return report
        }
        var pending: [(relative: String, size: Int64)] = []
        let tree: ConfinedDirectory
        do { tree = try self.tree() } catch {
            report.errors.append(SyncIssue(path: "", error: error))
            report.complete = false
            return report
        }
        func walk(_ relative: String) {
            let names = tree.names(in: relative) { escaped in
                report.errors.append(SyncIssue(path: ConfinedDirectory.child(relative, escaped),
                                               error: MAMError.invalidArguments("the local name is not valid UTF-8; not uploaded")))
            }
            guard let names else { return }
            for name in names.sorted() {
                if relative.isEmpty && name == ProviderLayout.metadataDirectoryName { continue }
                if FileSystem.isTemporaryName(name) { continue }
                let childRelative = relative.isEmpty ? name : relative + "/" + name
                guard let st = tree.lstat(childRelative) else { continue }
                if FileSystem.isDirectory(st) {
                    walk(childRelative)
                } else if FileSystem.isRegular(st) {
                    let attributes = LocalItemAttributes.read(childRelative, in: tree)
                    if attributes?.hasLocalChanges(st) ?? true { pending.append((childRelative, Int64(st.st_size))) }
                }
            }
        }
        walk("")
        counter.expect(items: pending.count, bytes: pending.reduce(0) { $0 + $1.size })
        for (relative, size) in pending {
            let path = layout.absolutePath(relative)
            let existed = LocalItemAttributes.read(relative, in: tree) != nil
            var uploaded: Int64 = 0
            defer {
                counter.transferred(uploaded, estimated: size)
                counter.advance(relative)
            }
            do {
                if let item = try itemChanged(localPath: path) {
                    uploaded = item.size
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
        guard let relative = layout.relativePath(of: localPath), !relative.isEmpty else {
            throw MAMError.invalidArguments("\(localPath) is not a file-provider file")
        }
        let tree = try layout.confined()
        guard let st = tree.lstat(relative) else { throw MAMError.fileNotFound(localPath) }
        guard FileSystem.isRegular(st), let attributes = LocalItemAttributes.read(relative, in: tree) else {
            if FileSystem.isRegular(st) {
                // Created (or replaced by a save-by-rename) and not uploaded yet.
                throw pendingUpload(localPath)
            }
            throw MAMError.invalidArguments("\(localPath) is not a file-provider file")
        }
        guard !attributes.isPlaceholder else { return }
        guard !attributes.hasLocalChanges(st) else { throw pendingUpload(localPath) }
        let temp = try layout.makeTemporaryFile(name: PathName.lastComponent(of: localPath))
        let opened = try FileSystem.openFile(temp.path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        let fd = opened.rawValue
        var placeholder = attributes
        placeholder.isPlaceholder = true
        placeholder.stamp = nil
        try placeholder.write(fd: fd)
        fchmod(fd, st.st_mode & 0o777)
        try temp.move(to: relative, in: tree)
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
    /// - Throws: `.policyDenied` (EACCES, `ExitCode.noPerm`) when the domain's account may not receive
    ///   the file — nothing uploaded, nothing created; `.cannotCreateOutput` when the name is
    ///   taken locally or remotely; `.invalidArguments` for a directory outside the root;
    ///   `.fileNotFound`; remote errors mapped to `MAMError`.
    @discardableResult
    public func importDocument(sourcePath: String, toLocalDirectory directory: String) throws -> FileProviderItem {
        try ProviderError.mapped {
            guard let directoryRelative = layout.relativePath(of: directory) else {
                throw MAMError.invalidArguments("\(directory) is not inside \(layout.root)")
            }
            let tree = try tree()
            guard let dirStat = tree.lstat(directoryRelative), FileSystem.isDirectory(dirStat) else {
                throw MAMError.fileNotFound(directory)
            }
            guard let sourceStat = FileSystem.lstatPath(sourcePath) else { throw MAMError.fileNotFound(sourcePath) }
            guard !FileSystem.isDirectory(sourceStat) else { throw MAMError.operationOnDirectory(sourcePath) }
            let name = PathName.lastComponent(of: sourcePath)
            let targetRelative = directoryRelative.isEmpty ? name : directoryRelative + "/" + name
            let target = layout.absolutePath(targetRelative)
            guard tree.lstat(targetRelative) == nil else {
                throw MAMError.cannotCreateOutput("\(target) already exists")
            }
            let (copy, _) = try ProviderRules.plainCopyForUpload(localPath: sourcePath, receiver: binding.accountId,
                                                                 layout: layout, context: binding.context)
            let parent = try ensureRemoteDirectory(directoryRelative, in: tree)
            let item: RemoteItem
            do {
                item = try binding.remote.create(parent: parent, name: name, contents: .file(copy.url))
            } catch RemoteError.conflict {
                throw MAMError.cannotCreateOutput("'\(name)' already exists on the remote in \(directoryRelative.isEmpty ? "/" : directoryRelative)")
            }
            try installProvidedCopy(plain: copy, item: item, at: targetRelative, in: tree, noReplace: true)
            return binding.providedItem(item)
        }
    }

    /// Re-binds the local root to its remote after the remote was replaced (see
    /// `ProviderReattach`).
    /// - Throws: `MAMError` (`.keyUnavailable`, remote errors mapped).
    public func reattach() throws -> ReattachReport {
        try ProviderReattach.run(binding: binding, provider: self)
    }

    /// The status of a local path (see `ProviderItemStatus`).
    /// - Throws: `.fileNotFound`, `.invalidArguments` (not a provider item).
    public func status(localPath: String) throws -> ProviderItemStatus {
        try ProviderItemStatus.nonReplicated(localPath: localPath, layout: layout, database: binding.database,
                                             accountId: binding.accountId)
    }
}
