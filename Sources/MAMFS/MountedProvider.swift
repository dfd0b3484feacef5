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
/// | open / truncate of a placeholder        | `startProvidingItem` under the entry's exclusive content lock, then the entry is re-keyed (the file was replaced) |
/// | release of a writable handle, fsync     | non-replicated: `itemChanged`; replicated: a sync pass is scheduled |
/// | rename                                  | non-replicated: `itemMoved` (metadata only), a replaced target's item deleted |
/// | unlink / rmdir                          | non-replicated: `deleteItem` with the attributes read before unlinking |
/// | every `syncInterval` seconds            | replicated: `syncOnce` on a background thread, stopped at unmount |
///
/// Remote calls for unlink, rename and release are made after the kernel got its reply, so a
/// program's rm/mv/close does not wait for the remote (a script that looks at the remote right
/// after `mv` may see the old state for a moment). Open of a placeholder does wait: it needs
/// the contents.
///
/// A file created in the mount (or copied in: a move from another filesystem is a copy) is
/// imported by its first `itemChanged` (the importDocument rule: a protected file is decrypted
/// to a copy and only the plain copy is uploaded, after the domain account's
/// `canReceiveSharedFile`). A refusal keeps the local file as it is, uploads nothing and logs
/// one line (`-o log=FILE`); the close or fsync itself does not fail, because the data is safe
/// locally. Upload errors (remote unreachable) are logged the same way and retried at the next
/// close/fsync (non-replicated) or pass (replicated).
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
    /// Called after a replicated pass that changed the local tree (re-keys replaced entries).
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
        let domain = try FileProviderDomain(account: account, remote: LocalDirectoryRemote(root: remote), context: context)
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

    /// A file written through the mount was closed or fsynced.
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

    /// What an unlink needs to know, read before unlinking.
    struct RemovedItem {
        let identifier: ItemIdentifier
        let baseVersion: String?
    }

    /// The remote item of the local object at `path` (nil: not a provider item).
    func itemBeforeRemoval(path: String) -> RemovedItem? {
        guard nonReplicated != nil else { return nil }
        if let attributes = LocalItemAttributes.read(path: path) {
            return RemovedItem(identifier: attributes.identifier, baseVersion: attributes.contentVersion)
        }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { lgetxattr(path, LocalItemAttributes.itemAttribute, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        return RemovedItem(identifier: ItemIdentifier(String(decoding: buffer[0..<n], as: UTF8.self)), baseVersion: nil)
    }

    /// The local object was unlinked or removed through the mount.
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

    /// A local object was renamed or moved through the mount to `path`.
    func itemMoved(path: String, replaced: RemovedItem?) {
        if let nonReplicated {
            if let replaced { itemRemoved(replaced, path: path) }
            guard LocalItemAttributes.read(path: path) != nil || itemBeforeRemoval(path: path) != nil else { return }
            do {
                try nonReplicated.itemMoved(localPath: path)
            } catch {
                log("provider: \(path): remote item not moved: \(error)")
            }
        } else {
            schedulePass()
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

    /// Stops the background thread, waiting for a pass in progress to end.
    func stop() {
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
