import CFuse
import Dispatch
import Glibc
import MAMFileProvider
import MAMProtection
import MAMSystem

/// The hooks of a non-replicated provider mount: placeholders materialized on open, and every
/// local change answered by remote work on one serial queue, in request order (see
/// `MountHooks`).
final class NonReplicatedMountHooks: MountHooks, @unchecked Sendable {
    private let provider: NonReplicatedProvider
    private let log: @Sendable (String) -> Void
    /// The provider work, one item at a time in request order.
    private let work = DispatchQueue(label: "mamfs-provider")
    /// Looks for remote changes every `--sync-interval` seconds (see `lookForRemoteChanges`).
    private var timer: RemoteChangeTimer?
    private let interval: Double
    /// Repoints entries whose file a pass replaced (set by `initialPass`).
    private var afterPass: (@Sendable () -> Void)?

    /// - Parameter interval: seconds between two looks for remote changes (> 0).
    init(provider: NonReplicatedProvider, interval: Double = MountOptions.defaultSyncInterval(.nonReplicated),
         log: @escaping @Sendable (String) -> Void) {
        self.provider = provider
        self.interval = interval
        self.log = log
    }

    /// Changes a previous mount could not upload (remote unreachable, killed) go first, then
    /// the placeholders are refreshed. Problems are logged; an unreachable remote does not stop
    /// the mount.
    func initialPass(afterPass: @escaping @Sendable () -> Void) {
        BoundProvider.report(provider.uploadPendingChanges(), what: "pending upload", log: log)
        do {
            BoundProvider.report(try provider.createPlaceholders(), what: "placeholders", log: log)
        } catch {
            log("provider: placeholders: \(error)")
        }
        self.afterPass = afterPass
    }

    /// Starts looking for remote changes.
    func start() {
        let timer = RemoteChangeTimer(interval: interval) { [weak self] _ in self?.lookForRemoteChanges() }
        self.timer = timer
        timer.start()
    }

    /// Stops looking for remote changes, then waits for the queued work.
    func stop() {
        timer?.stop()
        work.sync {}
    }

    /// What `mamfs provider sync` does, on the queue (in order with the requests' remote work):
    /// pending uploads, then the placeholders refreshed (new, changed, renamed and deleted
    /// remote items; see `NonReplicatedProvider.createPlaceholders`). Entries whose file was
    /// replaced are repointed after a pass that changed the local tree.
    private func lookForRemoteChanges() {
        work.sync {
            BoundProvider.report(provider.uploadPendingChanges(), what: "pending upload", log: log)
            do {
                let report = try provider.createPlaceholders()
                BoundProvider.report(report, what: "placeholders", log: log)
                if report.placeholders + report.deletedLocally + report.movedLocally + report.fetched > 0 { afterPass?() }
            } catch {
                log("provider: placeholders: \(error)")
            }
        }
    }

    func isReservedRootName(_ name: UnsafePointer<CChar>) -> Bool { ProviderNames.isMetadataName(name) }

    func isReservedAttribute(_ name: UnsafeRawBufferPointer) -> Bool { ProviderNames.isProviderAttribute(name) }

    func placeholderSize(path: () throws -> String) throws -> Int64? {
        NonReplicatedProvider.placeholderInfo(localPath: try path())?.size
    }

    /// `startProvidingItem` on the queue, after the remote work queued before it, under the
    /// entry's exclusive content lock; then the entry is pointed at the provided file (it
    /// replaced the placeholder by rename). On the queue because a queued rename changes the
    /// placeholder's item identifier after the remote move: a download running beside it would
    /// ask the remote for the old identifier, which no longer exists. The lock is taken inside
    /// the queue, in the order an upload takes it.
    func materializeIfPlaceholder(_ inode: Inode, in fs: OverlayFilesystem) throws {
        guard inode.isRegular else { return }
        var st = stat()
        guard fstatat(inode.fd, "", &st, SystemConstants.emptyPath | AT_SYMLINK_NOFOLLOW) == 0, st.st_size == 0 else { return }
        try work.sync {
            try inode.contentLock.writing {
                let path = try fs.backingPath(inode)
                guard NonReplicatedProvider.placeholderInfo(localPath: path) != nil else { return }
                try provider.startProvidingItem(localPath: path)
                fs.repoint(inode, toPath: path)
            }
        }
    }

    /// The upload is queued behind earlier provider work and finds the file by its entry (the
    /// path it has when the upload runs, after any rename; nothing when it was removed).
    func fileChanged(_ inode: Inode, in fs: OverlayFilesystem, wait: Bool) {
        let upload: @Sendable () -> Void = { [self] in
            DescriptorCache.withPins {
                inode.contentLock.reading {
                    var st = stat()
                    guard fstatat(inode.fd, "", &st, SystemConstants.emptyPath | AT_SYMLINK_NOFOLLOW) == 0, st.st_nlink > 0,
                          let path = try? fs.backingPath(inode) else { return }
                    do {
                        try provider.itemChanged(localPath: path)
                    } catch {
                        log("provider: \(path): not uploaded: \(error)")
                    }
                }
            }
        }
        if wait { work.sync(execute: upload) } else { work.async(execute: upload) }
    }

    /// The remote item is read before the local one goes (its attributes go with it), in order
    /// with the queued work (an upload queued by a close before this unlink has written its
    /// attributes); a file that keeps other hard links keeps its remote item.
    func removing(_ name: UnsafePointer<CChar>, in dir: Inode, directory: Bool, fs: OverlayFilesystem,
                  remove: () throws -> Void) throws {
        let path = try fs.childPath(dir, name)
        let (lastLink, item) = try work.sync { () throws -> (Bool, RemovedItem?) in
            var st = stat()
            let lastLink = fstatat(dir.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && (directory || st.st_nlink <= 1)
            let item = lastLink ? itemBeforeRemoval(path: path) : nil
            try remove()
            return (lastLink, item)
        }
        if lastLink { work.async { [self] in itemRemoved(item, path: path) } }
    }

    /// The local rename runs in order with the queued work (the upload queued by the close of a
    /// temp file is done before it is renamed over its target). The replaced target's item is
    /// read before it goes, unless it is the same item (a rename onto itself or onto another
    /// hard link of it); the renamed objects are held by identity so the queued remote work
    /// finds them wherever they are then.
    func renaming(_ move: RenameRequest, fs: OverlayFilesystem, rename: () throws -> Void) throws {
        let oldPath = try fs.childPath(move.from, move.name)
        let newPath = try fs.childPath(move.to, move.newName)
        let (source, target, replaced) = try work.sync { () throws -> (LocalObject?, LocalObject?, RemovedItem?) in
            var replaced = move.exchange ? nil : itemBeforeRemoval(path: newPath)
            if let target = replaced, itemBeforeRemoval(path: oldPath)?.identifier == target.identifier { replaced = nil }
            let source = LocalObject(directory: move.from.fd, name: move.name)
            let target = move.exchange ? LocalObject(directory: move.to.fd, name: move.newName) : nil
            try rename()
            return (source, target, replaced)
        }
        let exchange = move.exchange
        work.async { [self] in
            itemRenamed(source, path: newPath, replaced: replaced)
            if exchange { itemRenamed(target, path: oldPath, replaced: nil) }
        }
    }

    // MARK: Remote items

    /// What an unlink or a rename-over needs to know, read before the local item goes.
    struct RemovedItem: Sendable {
        let identifier: ItemIdentifier
        let baseVersion: String?
        /// The attributes of a file (nil for a directory or an item without them).
        let attributes: LocalItemAttributes?
    }

    /// The remote item of the local object at `path` (nil: not a provider item).
    private func itemBeforeRemoval(path: String) -> RemovedItem? {
        if let attributes = LocalItemAttributes.read(path: path) {
            return RemovedItem(identifier: attributes.identifier, baseVersion: attributes.contentVersion, attributes: attributes)
        }
        let attributes = ExtendedAttributes(path: path, followSymlink: false)
        guard let identifier = (try? attributes.string(LocalItemAttributes.itemAttribute)) ?? nil, !identifier.isEmpty else { return nil }
        return RemovedItem(identifier: ItemIdentifier(identifier), baseVersion: nil, attributes: nil)
    }

    /// The local object was unlinked or removed through the mount (call it on the queue).
    private func itemRemoved(_ item: RemovedItem?, path: String) {
        guard let item else { return }
        do {
            try provider.deleteItem(withIdentifier: item.identifier, baseVersion: item.baseVersion)
        } catch {
            log("provider: \(path): remote item not deleted: \(error)")
        }
    }

    /// A local object was renamed or moved through the mount (call it on the queue). `object`
    /// finds it by identity (it may have been renamed again or removed since); `path` is its
    /// name right after the rename, for messages; `replaced` is the item the rename replaced.
    private func itemRenamed(_ object: LocalObject?, path: String, replaced: RemovedItem?) {
        guard let current = object?.currentPath(expecting: object?.identifier) else {
            // Gone since (removed by a later request): so is what it replaced.
            if let replaced { itemRemoved(replaced, path: path) }
            return
        }
        do {
            if let replaced, replaced.attributes == nil {
                // A directory (or an item without file attributes) was replaced.
                try provider.deleteItem(withIdentifier: replaced.identifier, baseVersion: replaced.baseVersion)
                if LocalItemAttributes.read(path: current) != nil || itemBeforeRemoval(path: current) != nil {
                    try provider.itemRenamed(localPath: current, replaced: nil)
                }
                return
            }
            let isItem = LocalItemAttributes.read(path: current) != nil || itemBeforeRemoval(path: current) != nil
            var st = stat()
            let isFile = lstat(current, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
            guard isItem || isFile || replaced != nil else { return }
            try provider.itemRenamed(localPath: current, replaced: replaced?.attributes)
        } catch {
            log("provider: \(current): remote rename not done: \(error)")
        }
    }
}
