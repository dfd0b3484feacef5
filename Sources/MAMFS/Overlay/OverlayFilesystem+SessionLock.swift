import Glibc
import MAMProtection

/// The file-protection levels (policy key `fileProtectionLevel`) on a running mount: which
/// accounts' keys the session lock takes out of the daemon's memory, and the checks that keep
/// their files closed until the session is unlocked.
///
/// Mirrors the SDK's maximum file protection level (iOS data-protection classes); the device
/// lock is the desktop session lock, reported by `SessionLockMonitor` (logind, the
/// screensaver) or `mamfs lock|unlock MOUNTPOINT` (`DaemonControlServer`).
extension OverlayFilesystem {
    /// The accounts (managed, not wiped) whose policy sets a file-protection level other than
    /// `none`, with their UPNs.
    func fileProtectionLevels() -> [(accountId: String, upn: String, level: FileProtectionLevel)] {
        guard let accounts = try? context.state.allAccounts() else { return [] }
        let evaluator = context.policyEvaluator
        return accounts.compactMap { account in
            guard account.managed, account.wipedAt == nil,
                  let level = evaluator.policy(forAccountId: account.accountId)?.fileProtectionLevel, level != .none else { return nil }
            return (AccountIdentity.canonical(account.accountId), account.upn ?? "", level)
        }
    }

    /// Whether any account sets a file-protection level (`fileProtectionLevels` not empty).
    static func anyFileProtectionLevel(_ context: ProtectionContext) -> Bool {
        guard let accounts = try? context.state.allAccounts() else { return false }
        let evaluator = context.policyEvaluator
        return accounts.contains { evaluator.policy(forAccountId: $0.accountId).map { $0.fileProtectionLevel != .none } ?? false }
    }

    /// At the mount's start: the keys of every `untilFirstUserAuth` account are withheld until
    /// the first unlock (a session that has not authenticated since the mount began).
    func withholdUntilFirstUnlock() {
        lockTransitions.writing {
            let accounts = fileProtectionLevels().filter { $0.level == .untilFirstUserAuth }
            withhold(accounts.map { ($0.accountId, $0.upn) }, reason: "untilFirstUserAuth: not unlocked since the mount started")
        }
    }

    /// The daemon runs in an authenticated session (`how`): `untilFirstUserAuth` is satisfied
    /// from the start.
    func untilFirstUnlockSatisfied(by how: String) {
        sessionLock.withLock { $0.unlockedOnce = true }
        if fileProtectionLevels().contains(where: { $0.level == .untilFirstUserAuth }) {
            log("untilFirstUserAuth: the mount runs in \(how), a login since boot: keys are not withheld")
        }
    }

    /// The session was locked (`source` names who said so): the keys of every `complete` and
    /// `completeUnlessOpen` account leave memory. Dirty pages of their files are written back
    /// first, while the keys are still there.
    func sessionLocked(source: String) {
        // The levels of the policies as they are now: a `policy set` just before the lock counts.
        refresh(force: true)
        lockTransitions.writing {
            sessionLock.withLock { $0.locked = true }
            let accounts = fileProtectionLevels().filter { $0.level.dropsKeysOnLock }
            withhold(accounts.map { ($0.accountId, $0.upn) }, reason: "session locked (\(source))")
        }
    }

    /// The session was unlocked: the master key is loaded again (the key file; for a
    /// passphrase-protected state `passphrase`, which only `mamfs unlock` can give) and every
    /// withheld account works again.
    /// - Returns: the accountIds whose keys came back (empty when none were withheld).
    /// - Throws: `MAMError.keyUnavailable` when the master key cannot be loaded (no or a wrong
    ///   passphrase); the keys stay withheld then.
    @discardableResult
    func sessionUnlocked(source: String, passphrase: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0)) throws -> Set<String> {
        // One transition at a time: a lock that arrives while the master key is being derived
        // runs after this unlock, not against a withheld set the unlock is about to clear.
        try lockTransitions.writing {
            let withheld = sessionLock.withLock { state -> Set<String> in
                state.locked = false
                state.unlockedOnce = true
                return state.withheld
            }
            guard !withheld.isEmpty else { return [] }
            do {
                try context.restoreKeys(passphrase: passphrase)
            } catch {
                log("unlock (\(source)) refused, the keys stay withheld: \(error)")
                throw error
            }
            sessionLock.withLock { $0.withheld.removeAll() }
            keysWithheld.store(false, ordering: .releasing)
            refreshState.withLock { $0.generation += 1 }
            log("session unlocked (\(source)): the keys of \(withheld.sorted().joined(separator: ", ")) are back")
            return withheld
        }
    }

    /// The canonical accountIds whose keys are withheld now.
    var withheldAccounts: Set<String> {
        guard keysWithheld.load(ordering: .acquiring) else { return [] }
        return sessionLock.withLock { $0.withheld }
    }

    /// Whether the files of `owner` are closed by the session lock.
    func isWithheld(owner: String?) -> Bool {
        guard keysWithheld.load(ordering: .acquiring), let owner, !owner.isEmpty else { return false }
        let id = AccountIdentity.canonical(owner)
        return sessionLock.withLock { $0.withheld.contains(id) }
    }

    /// EACCES when the session lock closed the files of `owner`.
    func requireNotWithheld(owner: String?) throws {
        if isWithheld(owner: owner) { throw FilesystemError(code: EACCES) }
    }

    /// Whether handles of `owner` keep their file key over a lock (`completeUnlessOpen`).
    func pinsOpenFiles(owner: String?) -> Bool {
        guard fileProtectionInUse.load(ordering: .relaxed), let owner, !owner.isEmpty else { return false }
        return context.policyEvaluator.policy(forAccountId: owner)?.fileProtectionLevel == .completeUnlessOpen
    }

    /// Takes the keys of `accounts` out of memory; each account gets a `KeysDropped`. Accounts
    /// already withheld are skipped. Call inside `lockTransitions.writing`.
    ///
    /// The kernel's cached pages of their files are dropped twice: before the files are closed,
    /// so dirty pages of shared maps are written back while the keys are still there, and after,
    /// so a page a read brought back in between is gone too (a read in flight holds its pages
    /// locked in the cache, and the invalidation waits for them). Then the context's keys and
    /// the entries' cached file keys go.
    private func withhold(_ accounts: [(accountId: String, upn: String)], reason: String) {
        let already = sessionLock.withLock { $0.withheld }
        let fresh = accounts.filter { !already.contains($0.accountId) }
        guard !fresh.isEmpty else { return }
        let ids = Set(fresh.map(\.accountId))
        let regular = table.all.filter(\.isRegular)
        let affected = regular.filter { inode in
            guard case .known(let header, _, _, _) = inode.contentState else { return true }
            guard let owner = header?.owner else { return false }
            return ids.contains(AccountIdentity.canonical(owner))
        }
        for inode in affected { contentInvalidated?(inode.nodeid) }
        // The mount's own checks close the files even if the context could not drop its keys.
        sessionLock.withLock { $0.withheld.formUnion(ids) }
        keysWithheld.store(true, ordering: .releasing)
        for inode in affected { contentInvalidated?(inode.nodeid) }
        do {
            try context.withholdKeys(of: ids)
        } catch {
            log("could not drop the keys of \(ids.sorted().joined(separator: ", ")) from memory: \(error); their files stay closed until unlock")
        }
        for inode in regular {
            guard case .known(let header, _, let key, _) = inode.contentState, key != nil,
                  let owner = header?.owner, ids.contains(AccountIdentity.canonical(owner)) else { continue }
            inode.storeFileKey(nil, generation: 0)
        }
        for account in fresh {
            log("keys of \(account.accountId) dropped: \(reason)")
            context.report(.keysDropped(accountId: account.accountId, upn: account.upn, reason: reason))
        }
    }
}

/// What the session lock has done to a mount.
struct SessionLockState: Sendable {
    /// The last event said locked.
    var locked = false
    /// An unlock was seen since the mount started (ends `untilFirstUserAuth`).
    var unlockedOnce = false
    /// Canonical accountIds whose keys are withheld.
    var withheld: Set<String> = []
}
