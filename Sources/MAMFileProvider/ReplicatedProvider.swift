import Foundation
import MAMProtection

/// A file provider with `NSFileProviderReplicatedExtension` semantics: a full local replica
/// of the remote tree, kept in sync with versions recorded in the item database
/// (`ROOT/.mamfs-provider/provider.db`: items with their remote versions and the local stat
/// they were reconciled with, and the sync anchor).
///
/// One `syncOnce` is one pass in both directions (see `ReplicatedSyncPass` for the order and
/// the decision table). Remote contents enter the replica through `fetchContents` (the
/// provided copy, encrypted for the domain's account when its policy says so, moved in
/// atomically and made durable a batch at a time: `ProvidedCopyBatch`); local contents leave
/// through `createItem`/`modifyItem` (plain copy after the receive check). Local renames and
/// moves are metadata changes (`RemoteStore.move`), found by inode, never re-uploads. When both
/// sides changed, both are kept. Every item belongs to the domain's account.
///
/// Safety: a pass whose remote listing fails changes nothing locally; a remote that turns
/// unreachable mid-pass stops the pass (what was done stays done and recorded, the rest is
/// retried next pass); a wiped account or a remote on another volume is refused before
/// anything is compared, so neither can turn into mass deletions.
///
/// Thread-safe: passes are serialized, across processes too (`flock` on
/// `.mamfs-provider/sync.lock`).
public final class ReplicatedProvider: Sendable {
    let binding: ProviderBinding
    private let passLock = NSLock()
    /// Held by a pass while it reads the local tree and by `renamingLocally`.
    private let scanLock = NSLock()
    /// How many fetched items a pass makes durable at once (`ProvidedCopyBatch`).
    let batchLimits: ProvidedCopyBatch<ReplicatedSyncPass.Placement>.Limits
    /// The passes' syncfs calls (counted).
    let durability: ReplicaSync

    /// The domain (remote + account).
    public var domain: FileProviderDomain { binding.domain }
    /// The replica root.
    public var layout: ProviderLayout { binding.layout }

    /// Opens the replica at `replicaRoot` (created if missing) for `domain`.
    /// - Throws: `.invalidArguments` when the root belongs to another kind, account or remote;
    ///   `.cannotCreateOutput`.
    public init(replicaRoot: String, domain: FileProviderDomain) throws {
        binding = try ProviderBinding(localRoot: replicaRoot, domain: domain, kind: .replicated)
        batchLimits = .standard
        durability = ReplicaSync()
    }

    /// `init(replicaRoot:domain:)` with other batch limits or another `ReplicaSync` (tests).
    init(replicaRoot: String, domain: FileProviderDomain,
         batchLimits: ProvidedCopyBatch<ReplicatedSyncPass.Placement>.Limits, durability: ReplicaSync = ReplicaSync()) throws {
        binding = try ProviderBinding(localRoot: replicaRoot, domain: domain, kind: .replicated)
        self.batchLimits = batchLimits
        self.durability = durability
    }

    /// Runs one sync pass: remote changes into the replica, local changes to the remote.
    /// - Parameter progress: called after each item handled.
    /// - Returns: the report. Problems are in `report.errors` (path + message + errno), never
    ///   thrown: an unreachable or read-only remote, a refused upload (`EACCES`), a conflict
    ///   that could not be resolved. `report.complete` is false when the pass stopped early.
    @discardableResult
    public func syncOnce(progress: ((SyncProgress) -> Void)? = nil) -> SyncReport {
        exclusively {
            do {
                return try ReplicatedSyncPass(binding: binding, scanLock: scanLock, batchLimits: batchLimits,
                                              durability: durability, progress: progress).run()
            } catch {
                var report = SyncReport()
                report.errors.append(SyncIssue(path: "", error: error))
                report.complete = false
                return report
            }
        }
    }

    /// Runs `body` as a pass runs: alone, in this process and across processes (a mount and
    /// the CLI may work on the same replica: `flock` on `.mamfs-provider/sync.lock`).
    func exclusively<R>(_ body: () throws -> R) rethrows -> R {
        passLock.lock()
        defer { passLock.unlock() }
        let lockPath = layout.metadataDirectory + "/sync.lock"
        let lockFD = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o600)
        if lockFD >= 0 {
            while flock(lockFD, LOCK_EX) != 0 && errno == EINTR {}
        }
        defer { if lockFD >= 0 { flock(lockFD, LOCK_UN); close(lockFD) } }
        return try body()
    }

    /// Re-binds the replica to its remote after the remote was replaced (see `ProviderReattach`).
    /// - Throws: `MAMError` (`.keyUnavailable`, remote errors mapped).
    public func reattach() throws -> ReattachReport {
        try exclusively { try ProviderReattach.run(binding: binding, provider: nil) }
    }

    /// Runs `rename` (one rename(2) of names in the replica, made by the mount) between two
    /// reads of the local tree by a pass, never during one: a scan that saw one directory before
    /// the rename and another after it would find the item at neither path (and delete it on the
    /// remote, to upload it anew later) or at both (and upload a copy), instead of moving it.
    /// Renames made by other processes are not covered.
    /// - Throws: what `rename` throws.
    public func renamingLocally<R>(_ rename: () throws -> R) rethrows -> R {
        scanLock.lock()
        defer { scanLock.unlock() }
        return try rename()
    }

    /// The status of a path in the replica (see `ProviderItemStatus`).
    /// - Throws: `.fileNotFound`, `.invalidArguments` (outside the replica).
    public func status(localPath: String) throws -> ProviderItemStatus {
        try ProviderItemStatus.replicated(localPath: localPath, layout: layout, database: binding.database,
                                          accountId: binding.accountId)
    }
}
