import CFuse
import Dispatch
import Glibc
import MAMFileProvider
import MAMProtection
import MAMSystem

/// The hooks of a non-replicated provider mount: placeholders materialized on open, and every
/// local change recorded in the provider's durable upload queue before the request returns,
/// then replayed on the remote in request order on one serial queue (`UploadQueueRunner`; see
/// `MountHooks`). While the remote is unreachable the changes wait and are retried on a
/// `RetrySchedule`; a change that fails for good is logged and dropped.
final class NonReplicatedMountHooks: MountHooks, @unchecked Sendable {
    private let provider: NonReplicatedProvider
    private let schedule: RetrySchedule
    private let log: @Sendable (String) -> Void
    private let runner: UploadQueueRunner
    /// The provider work, one item at a time in request order.
    private var work: DispatchQueue { runner.work }
    /// Looks for remote changes every `--sync-interval` seconds (see `lookForRemoteChanges`).
    private var timer: RemoteChangeTimer?
    private let interval: Double
    /// Repoints entries whose file a pass replaced (set by `initialPass`).
    private var afterPass: (@Sendable () -> Void)?

    /// - Parameter interval: seconds between two looks for remote changes (> 0).
    init(provider: NonReplicatedProvider, schedule: RetrySchedule,
         interval: Double = MountOptions.defaultSyncInterval(.nonReplicated), log: @escaping @Sendable (String) -> Void) {
        self.provider = provider
        self.schedule = schedule
        self.interval = interval
        self.log = log
        runner = UploadQueueRunner(provider: provider, schedule: schedule, log: log)
    }

    /// The queue a previous mount left (remote unreachable, daemon killed) is replayed first,
    /// then files with changes no queued change covers are uploaded, then the placeholders are
    /// refreshed (`NonReplicatedProvider.syncPass`). Problems are logged; an unreachable remote
    /// does not stop the mount (the queue is retried once it is mounted).
    func initialPass(afterPass: @escaping @Sendable () -> Void) {
        BoundProvider.report(provider.syncPass(schedule: schedule, log: log), what: "initial pass", log: log)
        self.afterPass = afterPass
    }

    /// Starts the queue's retries and looking for remote changes.
    func start() {
        runner.start()
        let timer = RemoteChangeTimer(interval: interval) { [weak self] _ in self?.lookForRemoteChanges() }
        self.timer = timer
        timer.start()
    }

    /// Stops looking for remote changes, then waits for the remote work in progress.
    func stop() {
        timer?.stop()
        runner.stop()
    }

    /// `relative` of a backing path (the path itself when outside the root).
    private func relative(_ path: String) -> String { provider.queuePath(of: path) }

    /// What `mamfs provider sync` does, on the queue (in order with the requests' remote work):
    /// the upload queue replayed, pending uploads, then the placeholders refreshed (new,
    /// changed, renamed and deleted remote items; see `NonReplicatedProvider.syncPass`).
    /// Entries whose file was replaced are superseded after a pass that changed the local tree.
    private func lookForRemoteChanges() {
        work.sync {
            let report = provider.syncPass(schedule: schedule, log: log)
            BoundProvider.report(report, what: "remote changes", log: log)
            if report.placeholders + report.deletedLocally + report.movedLocally + report.fetched > 0 { afterPass?() }
        }
    }

    func isReservedRootName(_ name: UnsafePointer<CChar>) -> Bool { ProviderNames.isMetadataName(name) }

    func isReservedAttribute(_ name: UnsafeRawBufferPointer) -> Bool { ProviderNames.isProviderAttribute(name) }

    func placeholderSize(path: () throws -> String) throws -> Int64? {
        NonReplicatedProvider.placeholderInfo(localPath: try path())?.size
    }

    /// The contents are downloaded first, beside the queue (`prefetchPlaceholder`, at most
    /// `concurrentDownloads` at once), so a slow download holds neither other opens nor the
    /// remote work queued meanwhile; then `startProvidingItem(localPath:prefetched:)` runs on
    /// the queue, after the remote work queued before it, under the entry's exclusive content
    /// lock, and the entry is pointed at the provided file (it replaced the placeholder by
    /// rename). The placeholder is replaced on the queue because a queued rename changes its
    /// item identifier after the remote move: a download made for the old identifier is used
    /// only while the placeholder still has it, else the item is downloaded again there. The
    /// lock is taken inside the queue, in the order an upload takes it.
    func materializeIfPlaceholder(_ inode: Inode, in fs: OverlayFilesystem) throws {
        guard inode.isRegular else { return }
        var st = stat()
        guard fstatat(inode.fd, "", &st, SystemConstants.emptyPath | AT_SYMLINK_NOFOLLOW) == 0, st.st_size == 0 else { return }
        let prefetched: PlaceholderDownload? = (try? fs.backingPath(inode)).flatMap { path in
            downloadSlots.wait()
            defer { downloadSlots.signal() }
            return provider.prefetchPlaceholder(localPath: path)
        }
        try work.sync {
            runner.drain(force: true)
            try inode.contentLock.writing {
                let path = try fs.backingPath(inode)
                guard NonReplicatedProvider.placeholderInfo(localPath: path) != nil else { return }
                try provider.startProvidingItem(localPath: path, prefetched: prefetched)
                fs.repoint(inode, toPath: path, handles: .moveEntry)
            }
        }
    }

    /// Placeholder downloads running beside the queue at most (each holds a whole file in memory).
    static let concurrentDownloads = 4
    private let downloadSlots = DispatchSemaphore(value: NonReplicatedMountHooks.concurrentDownloads)

    /// The change is recorded under the file's current name and replayed behind earlier
    /// changes; the replay finds the file by its entry (the path it has then, after any rename;
    /// nothing when it was removed). `wait` (fsync): returns once the queue got that far.
    func fileChanged(_ inode: Inode, in fs: OverlayFilesystem, wait: Bool) {
        var st = stat()
        guard fstatat(inode.fd, "", &st, SystemConstants.emptyPath | AT_SYMLINK_NOFOLLOW) == 0, st.st_nlink > 0,
              let path = try? fs.backingPath(inode) else { return }
        runner.record(QueuedChange(kind: .changed, path: relative(path))) { apply in
            try DescriptorCache.withPins {
                try inode.contentLock.reading {
                    var st = stat()
                    guard fstatat(inode.fd, "", &st, SystemConstants.emptyPath | AT_SYMLINK_NOFOLLOW) == 0, st.st_nlink > 0,
                          let path = try? fs.backingPath(inode) else { return try apply(nil, nil) }
                    try apply(path, nil)
                }
            }
        }
        if wait { work.sync { runner.drain(force: false) } }
    }

    /// The remote item is read before the local one goes (its attributes go with it), in order
    /// with the queued work (an upload queued by a close before this unlink has written its
    /// attributes); a file that keeps other hard links keeps its remote item.
    func removing(_ name: UnsafePointer<CChar>, in dir: Inode, directory: Bool, fs: OverlayFilesystem,
                  remove: () throws -> Void) throws {
        let path = try fs.childPath(dir, name)
        let item = try work.sync { () throws -> RemovedItem? in
            var st = stat()
            let lastLink = fstatat(dir.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && (directory || st.st_nlink <= 1)
            var item = lastLink ? itemBeforeRemoval(name, in: dir) : nil
            if !lastLink, !directory, let linked = provider.linkedItem(localPath: path) {
                // A hard link uploaded as its own item goes with its name.
                item = RemovedItem(identifier: linked, baseVersion: nil, attributes: nil)
            }
            try remove()
            return item
        }
        if let item {
            runner.record(QueuedChange(kind: .removed, path: relative(path), item: item.identifier,
                                       baseVersion: item.baseVersion), locator: nil)
        }
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
            var replaced = move.exchange ? nil : itemBeforeRemoval(move.newName, in: move.to)
            if let target = replaced, itemBeforeRemoval(move.name, in: move.from)?.identifier == target.identifier { replaced = nil }
            let source = LocalObject(directory: move.from.fd, name: move.name)
            let target = move.exchange ? LocalObject(directory: move.to.fd, name: move.newName) : nil
            try rename()
            return (source, target, replaced)
        }
        if move.exchange {
            runner.record(QueuedChange(kind: .exchanged, path: relative(newPath), otherPath: relative(oldPath))) { apply in
                try apply(source?.currentPath(expecting: source?.identifier), target?.currentPath(expecting: target?.identifier))
            }
        } else {
            runner.record(QueuedChange(kind: .renamed, path: relative(newPath), otherPath: relative(oldPath),
                                       item: replaced?.identifier, baseVersion: replaced?.baseVersion,
                                       replacedSize: replaced?.attributes?.size)) { apply in
                try apply(source?.currentPath(expecting: source?.identifier), nil)
            }
        }
    }

    /// mkdir: the directory is made remotely; link: the new name is uploaded as its own item
    /// (the remote has no hard links). Found by identity when the change is replayed.
    func made(_ made: MadeEntry, kind: MadeKind, fs: OverlayFilesystem) {
        let recorded: (String, LocalObject?)? = made.name.withUnsafeBufferPointer { name in
            guard let base = name.baseAddress, let path = try? fs.childPath(made.directory, base) else { return nil }
            return (path, LocalObject(directory: made.directory.fd, name: base))
        }
        guard let (path, object) = recorded else { return }
        let change = QueuedChange(kind: kind == .directory ? .madeDirectory : .linked, path: relative(path))
        runner.record(change) { apply in try apply(object?.currentPath(expecting: nil), nil) }
    }

    // MARK: Remote items

    /// What an unlink or a rename-over needs to know, read before the local item goes.
    struct RemovedItem: Sendable {
        let identifier: ItemIdentifier
        let baseVersion: String?
        /// The attributes of a file (nil for a directory or an item without them).
        let attributes: LocalItemAttributes?
    }

    /// The remote item of the local object `name` in `dir` (nil: not a provider item), read
    /// through a descriptor of the object itself (O_PATH, O_NOFOLLOW: a name or a parent
    /// swapped for a symlink never lends another object's item).
    private func itemBeforeRemoval(_ name: UnsafePointer<CChar>, in dir: Inode) -> RemovedItem? {
        guard let object = try? FileDescriptor.openPath(in: dir.fd, name, flags: O_NOFOLLOW),
              let st = try? object.stat(), (st.st_mode & S_IFMT) == S_IFREG || (st.st_mode & S_IFMT) == S_IFDIR,
              let attributes = LocalItemAttributes.read(descriptor: object.rawValue) else { return nil }
        return RemovedItem(identifier: attributes.identifier, baseVersion: attributes.contentVersion, attributes: attributes)
    }
}
