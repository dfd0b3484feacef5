import CFuse
import Foundation
import Glibc
import MAMFileProvider
import MAMProtection

/// The file provider of a mount started with `--remote DIR --provider KIND`: the backing
/// directory is the provider's local root. The overlay calls in at a few points (each one
/// branch on `OverlayFilesystem.provider` for plain mounts):
///
/// | overlay request                         | provider call                                          |
/// |-----------------------------------------|--------------------------------------------------------|
/// | mount                                   | bind the root, first pass (`createPlaceholders` / `syncOnce`) |
/// | lookup / readdir of `.mamfs-provider` at the root | hidden (ENOENT / left out)                   |
/// | list/get/set/removexattr `user.mam.fp.*` | hidden (not listed, ENODATA, EPERM)                   |
/// | getattr / lookup / readdirplus of a placeholder | size = `placeholderInfo(localPath:).size`     |
/// | open / truncate of a placeholder        | `startProvidingItem` under the entry's exclusive content lock, then the entry is repointed (the file was replaced) |
/// | release of a writable handle, fsync     | non-replicated: `itemChanged` (queued; fsync waits for it); replicated: a sync pass is scheduled |
/// | rename                                  | non-replicated: `itemRenamed` (queued): a move of an uploaded item (metadata only), or a new file renamed over an item takes that item's identity and uploads as its next version; a replaced item is deleted only once its replacement is on the remote |
/// | unlink / rmdir                          | non-replicated: `deleteItem` (queued) with the attributes read before unlinking |
/// | every `syncInterval` seconds            | replicated: `syncOnce` on a background thread, stopped at unmount |
///
/// Non-replicated remote work runs on one serial queue, in request order, after the kernel got
/// its reply (a program's close/rm/mv does not wait for the remote; a script that looks at the
/// remote right after `mv` may see the old state for a moment). Every deferred call finds its
/// file by identity (the entry's descriptor for a close, an O_PATH descriptor taken before a
/// rename), never by the path it had when queued, so a close followed at once by a rename
/// (write temp, rename over: the usual editor save) uploads under the final name. The local
/// rename/unlink/rmdir itself runs on the queue too (waiting for uploads queued before it), so
/// the attributes it reads are those the earlier uploads wrote. fsync returns once its upload
/// is done; unmount waits for the queue. Open of a placeholder waits too: it needs the contents.
/// Whatever is still pending at mount time (an upload that failed: remote unreachable, daemon
/// killed) is uploaded by the mount's first pass, before the placeholders are refreshed.
///
/// A file created in the mount (or copied in: a move from another filesystem is a copy) is
/// imported by its first `itemChanged` (the importDocument rule: a protected file is decrypted
/// to a copy and only the plain copy is uploaded, after the domain account's
/// `canReceiveSharedFile`). A refusal keeps the local file as it is, uploads nothing and logs
/// one line (`-o log=FILE`); the close or fsync itself does not fail, because the data is safe
/// locally. Upload errors (remote unreachable) are logged the same way and retried at the next
/// close/fsync/rename of the file, `mamfs provider sync` or mount (non-replicated) or pass
/// (replicated).
final class MountedProvider: @unchecked Sendable {
    let kind: ProviderKind
    let nonReplicated: NonReplicatedProvider?
    let replicated: ReplicatedProvider?
    let rootPath: String
    private let interval: Double
    private let log: @Sendable (String) -> Void

    private let condition = NSCondition()
    private var stopping = false
    private var pending = false
    private var running = false
    private let finished = DispatchSemaphore(value: 0)
    /// Called after a replicated pass that changed the local tree (repoints replaced entries).
    var afterPass: (@Sendable () -> Void)?

    /// Binds `rootPath` to the remote `remote` for `account` (canonical accountId, "" unmanaged).
    /// - Throws: `MAMError` (`.invalidArguments` when the root belongs to another kind, remote or
    ///   account; `.unknownAccount`).
    init(kind: ProviderKind, rootPath: String, remote: String, account: String, syncInterval: Double,
         context: ProtectionContext, log: @escaping @Sendable (String) -> Void) throws {
        self.kind = kind
        self.rootPath = rootPath
        self.interval = syncInterval
        self.log = log
        let store = LocalDirectoryRemote(root: remote, log: { line in log("provider: \(line)") })
        let domain = try FileProviderDomain(account: account, remote: store, context: context)
        switch kind {
        case .nonReplicated:
            nonReplicated = try NonReplicatedProvider(localRoot: rootPath, domain: domain)
            replicated = nil
        case .replicated:
            replicated = try ReplicatedProvider(replicaRoot: rootPath, domain: domain)
            nonReplicated = nil
        }
    }

    /// The first pass, before the mount appears: every remote item is there once `mamfs mount`
    /// returns. Problems are logged; an unreachable remote does not stop the mount (local data
    /// stays usable, the next pass retries).
    func initialPass() {
        if let nonReplicated {
            // Changes a previous mount could not upload (remote unreachable, killed) go first.
            uploadPending()
            do {
                report(try nonReplicated.createPlaceholders(), what: "placeholders")
            } catch {
                log("provider: placeholders: \(error)")
            }
        } else if let replicated {
            report(replicated.syncOnce(), what: "sync")
        }
    }

    private func report(_ report: SyncReport, what: String) {
        for issue in report.errors { log("provider: \(what): \(issue)") }
    }

    // MARK: Names the mount hides

    static let metadataName: [CChar] = Array(ProviderLayout.metadataDirectoryName.utf8CString)

    /// True for `.mamfs-provider` (compared as the kernel's bytes).
    static func isMetadataName(_ name: UnsafePointer<CChar>) -> Bool {
        strcmp(name, metadataName) == 0
    }

    /// True for the provider's own extended attributes (`user.mam.fp.*`).
    static func isProviderAttribute(_ name: UnsafePointer<CChar>) -> Bool {
        strncmp(name, "user.mam.fp.", 12) == 0
    }

    static func isProviderAttribute(_ name: String) -> Bool { name.hasPrefix("user.mam.fp.") }

    // MARK: Placeholders

    /// The size to report for the regular file at `path` when it is a placeholder.
    func placeholderSize(path: String) -> Int64? {
        guard nonReplicated != nil else { return nil }
        return NonReplicatedProvider.placeholderInfo(localPath: path)?.size
    }

    /// Materializes the placeholder at `path` (call with the entry's exclusive content lock).
    /// - Returns: true when the file was replaced.
    /// - Throws: `MAMError` (remote unreachable, deleted remotely, account wiped).
    func materialize(path: String) throws -> Bool {
        guard let nonReplicated, NonReplicatedProvider.placeholderInfo(localPath: path) != nil else { return false }
        try nonReplicated.startProvidingItem(localPath: path)
        return true
    }

    // MARK: Local changes

    /// The provider work of a non-replicated mount, one item at a time in request order.
    private let work = DispatchQueue(label: "mamfs-provider")

    /// Runs `body` (a namespace change: rename, unlink, rmdir) after every provider call
    /// queued before it and before any queued after it; replicated mounts run it at once.
    /// Keeping the local change and the remote calls in one order is what makes a deferred
    /// call see the tree its request saw (an upload queued by a close is done before the
    /// rename that follows it).
    func serialized<T>(_ body: () throws -> T) rethrows -> T {
        guard nonReplicated != nil else { return try body() }
        return try work.sync(execute: body)
    }

    /// Queues remote work (non-replicated); `wait` blocks until it (and everything queued
    /// before it) is done.
    func enqueue(wait: Bool = false, _ body: @escaping @Sendable () -> Void) {
        if wait { work.sync(execute: body) } else { work.async(execute: body) }
    }

    /// Waits for the queued work.
    func drain() {
        if nonReplicated != nil { work.sync {} }
    }

    /// A file written through the mount was closed or fsynced; `path` is where it is now.
    /// Non-replicated: call it on the queue. Replicated: schedules a pass.
    func fileChanged(path: String) {
        if let nonReplicated {
            do {
                try nonReplicated.itemChanged(localPath: path)
            } catch {
                log("provider: \(path): not uploaded: \(error)")
            }
        } else {
            schedulePass()
        }
    }

    /// What an unlink or a rename-over needs to know, read before the local item goes.
    struct RemovedItem: Sendable {
        let identifier: ItemIdentifier
        let baseVersion: String?
        /// The attributes of a file (nil for a directory or an item without them).
        let attributes: LocalItemAttributes?
    }

    /// The remote item of the local object at `path` (nil: not a provider item).
    func itemBeforeRemoval(path: String) -> RemovedItem? {
        guard nonReplicated != nil else { return nil }
        if let attributes = LocalItemAttributes.read(path: path) {
            return RemovedItem(identifier: attributes.identifier, baseVersion: attributes.contentVersion, attributes: attributes)
        }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { lgetxattr(path, LocalItemAttributes.itemAttribute, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        return RemovedItem(identifier: ItemIdentifier(String(decoding: buffer[0..<n], as: UTF8.self)), baseVersion: nil, attributes: nil)
    }

    /// The local object was unlinked or removed through the mount (non-replicated: call it on
    /// the queue).
    func itemRemoved(_ item: RemovedItem?, path: String) {
        if let nonReplicated {
            guard let item else { return }
            do {
                try nonReplicated.deleteItem(withIdentifier: item.identifier, baseVersion: item.baseVersion)
            } catch {
                log("provider: \(path): remote item not deleted: \(error)")
            }
        } else {
            schedulePass()
        }
    }

    /// A local object was renamed or moved through the mount (non-replicated: call it on the
    /// queue). `object` finds it by identity (it may have been renamed again or removed
    /// since); `path` is its name right after the rename, for messages; `replaced` is the
    /// item the rename replaced.
    func itemRenamed(_ object: LocalObject?, path: String, replaced: RemovedItem?) {
        guard let nonReplicated else {
            schedulePass()
            return
        }
        guard let current = object?.currentPath(expecting: object?.identifier) else {
            // Gone since (removed by a later request): so is what it replaced.
            if let replaced { itemRemoved(replaced, path: path) }
            return
        }
        do {
            if let replaced, replaced.attributes == nil {
                // A directory (or an item without file attributes) was replaced.
                try nonReplicated.deleteItem(withIdentifier: replaced.identifier, baseVersion: replaced.baseVersion)
                if LocalItemAttributes.read(path: current) != nil || itemBeforeRemoval(path: current) != nil {
                    try nonReplicated.itemRenamed(localPath: current, replaced: nil)
                }
                return
            }
            let isItem = LocalItemAttributes.read(path: current) != nil || itemBeforeRemoval(path: current) != nil
            var st = stat()
            let isFile = lstat(current, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
            guard isItem || isFile || replaced != nil else { return }
            try nonReplicated.itemRenamed(localPath: current, replaced: replaced?.attributes)
        } catch {
            log("provider: \(current): remote rename not done: \(error)")
        }
    }

    /// Uploads what is still pending locally (a mount's start; `provider sync` does the same).
    func uploadPending() {
        guard let nonReplicated else { return }
        report(nonReplicated.uploadPendingChanges(), what: "pending upload")
    }

    /// A local object found by identity: an O_PATH descriptor taken before a rename, so the
    /// deferred remote work finds it under whatever name it has when the work runs.
    final class LocalObject: @unchecked Sendable {
        private let fd: Int32
        /// Its item identifier when it was taken (nil: not an item then).
        let identifier: String?

        init?(directory: Int32, name: UnsafePointer<CChar>) {
            let opened = openat(directory, name, mamfs_fuse_O_PATH | O_NOFOLLOW | O_CLOEXEC)
            guard opened >= 0 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = buffer.withUnsafeMutableBytes { getxattr("/proc/self/fd/\(opened)", LocalItemAttributes.itemAttribute, $0.baseAddress, $0.count) }
            fd = opened
            identifier = n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
        }

        deinit { close(fd) }

        /// Its current path; nil when it was removed. A placeholder materialized since was
        /// replaced by a new file under the same name: that one is accepted when it carries
        /// `identifier`.
        func currentPath(expecting identifier: String?) -> String? {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let n = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
            guard n > 0 else { return nil }
            var path = buffer.withUnsafeBufferPointer { String(decoding: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer($0)[0..<n]), as: UTF8.self) }
            var st = stat()
            guard fstat(fd, &st) == 0 else { return nil }
            if st.st_nlink > 0 { return path }
            guard let identifier, path.hasSuffix(" (deleted)") else { return nil }
            path.removeLast(" (deleted)".count)
            return LocalItemAttributes.read(path: path)?.identifier.rawValue == identifier ? path : nil
        }
    }

    // MARK: Replicated background passes

    /// Starts the background thread of a replicated mount (a pass every `syncInterval`
    /// seconds and soon after each scheduled one).
    func start() {
        guard replicated != nil else { return }
        condition.lock()
        running = true
        condition.unlock()
        let thread = Thread { [self] in self.loop() }
        thread.name = "mamfs-sync"
        thread.start()
    }

    /// Asks for a pass soon (a close after writing, an unlink, a rename).
    func schedulePass() {
        condition.lock()
        pending = true
        condition.signal()
        condition.unlock()
    }

    /// Stops the background thread, waiting for a pass in progress to end, and finishes the
    /// queued provider work of a non-replicated mount.
    func stop() {
        drain()
        condition.lock()
        let wasRunning = running
        stopping = true
        condition.signal()
        condition.unlock()
        if wasRunning { finished.wait() }
    }

    private func loop() {
        defer { finished.signal() }
        while true {
            condition.lock()
            let deadline = Date(timeIntervalSinceNow: interval)
            while !stopping && !pending {
                if !condition.wait(until: deadline) { break }
            }
            if stopping {
                condition.unlock()
                return
            }
            let scheduled = pending
            pending = false
            condition.unlock()
            if scheduled {
                // Let a burst of closes (cp -r, tar x) finish before the pass looks at the tree.
                usleep(100_000)
            }
            guard let replicated else { return }
            let result = replicated.syncOnce()
            report(result, what: "sync")
            if result.fetched + result.deletedLocally + result.movedLocally + result.conflicts > 0 { afterPass?() }
        }
    }
}
