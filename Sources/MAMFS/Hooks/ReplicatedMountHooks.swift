import Foundation
import Glibc
import MAMFileProvider
import MAMProtection

/// The hooks of a replicated provider mount: the backing directory is a full replica, synced by
/// `syncOnce` on a background thread every `interval` seconds and soon after a local change
/// (close after writing, fsync, truncate, unlink, rename), stopped at unmount.
final class ReplicatedMountHooks: MountHooks, @unchecked Sendable {
    private let provider: ReplicatedProvider
    private let interval: Double
    private let log: @Sendable (String) -> Void

    private var timer: RemoteChangeTimer?
    /// Guards `timer` and `afterPass`.
    private let lock = NSLock()
    /// Called after a pass that changed the local tree (repoints replaced entries).
    private var afterPass: (@Sendable () -> Void)?

    init(provider: ReplicatedProvider, interval: Double, log: @escaping @Sendable (String) -> Void) {
        self.provider = provider
        self.interval = interval
        self.log = log
    }

    /// The first pass, before the mount appears: every remote item is there once `mamfs mount`
    /// returns. Problems are logged; an unreachable remote does not stop the mount.
    func initialPass(afterPass: @escaping @Sendable () -> Void) {
        BoundProvider.report(provider.syncOnce(), what: "sync", log: log)
        lock.withLock { self.afterPass = afterPass }
    }

    /// Starts the background thread.
    func start() {
        let timer = RemoteChangeTimer(interval: interval) { [weak self] scheduled in self?.pass(scheduled: scheduled) }
        lock.withLock { self.timer = timer }
        timer.start()
    }

    /// Stops the background thread, waiting for a pass in progress to end.
    func stop() {
        lock.withLock { timer }?.stop()
    }

    func isReservedRootName(_ name: UnsafePointer<CChar>) -> Bool { ProviderNames.isMetadataName(name) }

    func isReservedAttribute(_ name: UnsafeRawBufferPointer) -> Bool { ProviderNames.isProviderAttribute(name) }

    /// A replica holds every file's contents: no placeholders.
    func placeholderSize(path: () throws -> String) throws -> Int64? { nil }

    func materializeIfPlaceholder(_ inode: Inode, in fs: OverlayFilesystem) throws {}

    func fileChanged(_ inode: Inode, in fs: OverlayFilesystem, wait: Bool) { schedulePass() }

    func made(_ made: MadeEntry, kind: MadeKind, fs: OverlayFilesystem) { schedulePass() }

    func removing(_ name: UnsafePointer<CChar>, in dir: Inode, directory: Bool, fs: OverlayFilesystem,
                  remove: () throws -> Void) throws {
        _ = try fs.childPath(dir, name)
        var st = stat()
        let lastLink = fstatat(dir.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && (directory || st.st_nlink <= 1)
        try remove()
        if lastLink { schedulePass() }
    }

    func renaming(_ move: RenameRequest, fs: OverlayFilesystem, rename: () throws -> Void) throws {
        _ = try fs.childPath(move.from, move.name)
        _ = try fs.childPath(move.to, move.newName)
        try provider.renamingLocally(rename)
        schedulePass()
    }

    /// Asks for a pass soon.
    private func schedulePass() {
        lock.withLock { timer }?.schedule()
    }

    /// One pass; `scheduled` after a local change.
    private func pass(scheduled: Bool) {
        if scheduled {
            // Let a burst of closes (cp -r, tar x) finish before the pass looks at the tree.
            usleep(100_000)
        }
        let result = provider.syncOnce()
        BoundProvider.report(result, what: "sync", log: log)
        if result.fetched + result.deletedLocally + result.movedLocally + result.conflicts > 0 {
            lock.withLock { afterPass }?()
        }
    }
}
