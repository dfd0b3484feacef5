import CFuse
import Glibc
import MAMProtection
import MAMSystem

/// State changes made by other processes (the CLI's wipe, policy set, protect on backing
/// paths) and entries pointed at files that replaced theirs.
extension OverlayFilesystem {

    /// Bumped whenever the state database changed (keys, policies, accounts): cached file keys
    /// of an older generation are fetched again.
    var generation: UInt64 { refreshState.withLock { $0.generation } }

    static func loadWipedOwners(_ context: ProtectionContext) -> Set<String> {
        guard let accounts = try? context.state.allAccounts() else { return [] }
        return Set(accounts.filter { $0.wipedAt != nil }.map(\.accountId))
    }

    /// Whether a managed account's policy has a `protectionLevel` other than off.
    static func anyPolicyEnforces(_ context: ProtectionContext) -> Bool {
        guard let accounts = try? context.state.allAccounts() else { return false }
        let evaluator = context.policyEvaluator
        return accounts.contains { evaluator.policy(forAccountId: $0.accountId).map { $0.protectionLevel != .off } ?? false }
    }

    /// Picks up CLI changes (wipe, policy set, protect on backing paths). `force` for requests
    /// that open or create; otherwise at most every 200 ms.
    func refresh(force: Bool) {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nanos = UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
        let due = refreshState.withLock { state in
            if !force && nanos &- state.lastRefresh < 200_000_000 { return false }
            state.lastRefresh = nanos
            return true
        }
        guard due else { return }
        // A request that finds the context current while another one is still deriving from
        // its reload waits here for it.
        refreshUpdate.withLock { _ in
            guard context.refreshIfChanged() else { return }
            stateReloaded?()
            let wiped = OverlayFilesystem.loadWipedOwners(context)
            refreshState.withLock { state in
                state.generation += 1
                state.wipedOwners = wiped
            }
            enforcing.store(OverlayFilesystem.anyPolicyEnforces(context), ordering: .relaxed)
            fileProtectionInUse.store(OverlayFilesystem.anyFileProtectionLevel(context), ordering: .relaxed)
            daemonLog.update(from: context)
            supersedeReplacedEntries()
        }
    }

    func isHidden(_ header: ProtectedFileHeader?) -> Bool {
        isHidden(owner: header?.owner)
    }

    /// `isHidden` for a file owned by `owner` (nil: untagged).
    func isHidden(owner: String?) -> Bool {
        guard let owner, !owner.isEmpty else { return false }
        let anyWiped = refreshState.withLock { !$0.wipedOwners.isEmpty }
        return anyWiped && context.isWiped(owner: owner)
    }

    var hasWipedOwners: Bool { refreshState.withLock { !$0.wipedOwners.isEmpty } }

    /// Before a read, write, fsync or fallocate on an open handle: EACCES once the owner of
    /// its file was wiped, although the handle was opened before (its file key may still be
    /// cached in the entry). The wipe is noticed within 200 ms (`refresh`).
    /// - Throws: `FilesystemError(EACCES)`; the header's errors when it must be read.
    func requireOwnerNotWiped(_ handle: OpenFile) throws {
        // Untagged and unmanaged files (known from the entry's header) have no owner to wipe.
        if handle.backingKey == handle.inode.key {
            if let view = handle.inode.view(for: handle) {
                if !view.hasOwner { return }
            } else if case .known(let header, _, _, _) = handle.inode.contentState, header?.owner.isEmpty ?? true {
                return
            }
        }
        refresh(force: false)
        guard hasWipedOwners else { return }
        let header = try handle.inode.contentLock.reading { try content(handle).header }
        if isHidden(header) { throw FilesystemError(code: EACCES) }
    }

    /// The header and file key for a new file (create, O_TRUNC of an untagged file) of
    /// `owner`: `ProtectionContext.newFileHeader`, refused for an owner that was wiped, whose
    /// files would otherwise be stored plain with its tag.
    /// - Throws: `FilesystemError(EACCES)` for a wiped owner or one whose keys the session
    ///   lock withholds; `.keyUnavailable`.
    func newFileHeader(owner: String) throws -> (ProtectedFileHeader?, SymmetricKey?) {
        try requireNotWithheld(owner: owner)
        if hasWipedOwners && context.isWiped(owner: owner) { throw FilesystemError(code: EACCES) }
        return try context.newFileHeader(owner: owner)
    }
}
