import Foundation

/// Progress of a selective wipe: files examined and removed so far.
public struct WipeProgress: Sendable {
    public let examined: Int
    public let removed: Int
}

/// What a selective wipe did.
public struct WipeReport: Equatable, Sendable {
    /// Files owned by the account that were removed.
    public var removedFiles = 0
    /// Directories of the account (tagged with it, or untagged below one that is) that were
    /// removed because nothing was left in them.
    public var removedDirectories = 0
    /// Account keys destroyed.
    public var keysDestroyed = 0
    /// Roots that were walked.
    public var roots: [String] = []
    /// Entries of provider temp areas (`.mamfs-provider/tmp`) that were removed.
    public var removedTemporaries = 0
    /// What the walk skipped and why (a mount point, a root that became a symbolic link), one
    /// line each, for the user.
    public var notes: [String] = []
}

/// Registration, enrollment, policy and selective wipe of accounts.
///
/// Mirrors `IntuneMAMEnrollmentManager` (registerAndEnrollAccountId:, deRegisterAndUnenrollAccountId:withWipe:,
/// registeredAccounts, enrolledAccountId) and the selective-wipe notification of the SDK. As in
/// the reference SDK, one account is managed at a time.
public struct EnrollmentManager: Sendable {
    let context: ProtectionContext

    /// Test seam: called with a file's name after its header was read and before it is
    /// removed, so a test can swap a parent directory in that window.
    nonisolated(unsafe) static var beforeRemovingFile: ((String) -> Void)?

    /// Registers and enrolls an account: it becomes managed, gets `policy` and a fresh account key.
    /// - Throws: `.invalidArguments` for a malformed accountId/UPN or when another account is
    ///   already managed (one at a time) or the UPN belongs to another account.
    @discardableResult
    public func enroll(accountId: String, upn: String?, policy: Policy) throws -> AccountIdentity {
        let identity = try AccountIdentity(accountId: accountId, upn: upn)
        let managed = try context.state.managedAccounts()
        if let other = managed.first(where: { $0.accountId != identity.accountId }) {
            throw MAMError.invalidArguments("account \(other.upn ?? other.accountId) is already enrolled; one managed account at a time (unenroll it first)")
        }
        if let upn = identity.upn, let holder = try context.state.account(named: upn), holder.accountId != identity.accountId {
            throw MAMError.invalidArguments("UPN \(upn) already belongs to account \(holder.accountId)")
        }
        let existing = try context.state.account(named: identity.accountId)
        let json = String(decoding: policy.jsonData(), as: UTF8.self)
        _ = try context.state.upsertAccount(AccountRecord(accountId: identity.accountId, upn: identity.upn ?? existing?.upn,
                                                          managed: true, policyJSON: json, wipedAt: nil))
        let hasKey = try context.state.latestAccountKeyId(identity.accountId) != nil
        if existing == nil || existing?.wipedAt != nil || !hasKey {
            try context.keys.createKey(accountId: identity.accountId)
        }
        context.stateDidChange()
        return identity
    }

    /// Unenrolls (and deregisters as managed) an account. Without `wipe` its keys are kept, so
    /// existing encrypted files stay readable, but no policy applies any more; with `wipe` a
    /// selective wipe runs first.
    /// - Returns: the wipe report when `wipe` was asked.
    /// - Throws: `.unknownAccount`; what `wipe` throws.
    @discardableResult
    public func unenroll(_ name: String, wipe: Bool, roots: [String], progress: ((WipeProgress) -> Void)? = nil) throws -> WipeReport? {
        let identity = try context.resolveAccount(name)
        var report: WipeReport?
        if wipe {
            report = try self.wipe(identity.accountId, roots: roots, progress: progress)
        }
        try context.state.setManaged(identity.accountId, managed: false)
        try context.state.setPolicy(identity.accountId, json: nil)
        context.stateDidChange()
        return report
    }

    /// Selective wipe: destroys the account's keys first (so every copy anywhere becomes
    /// unreadable at once), then removes every file the account owns under the known roots
    /// (mounted backing directories and protected paths) and `roots`, and the account's
    /// directories that are left empty (the roots themselves stay). Personal and other
    /// accounts' files and directories are untouched. The account stays registered, unmanaged,
    /// marked wiped.
    ///
    /// The walk uses directory descriptors and never follows a symbolic link or enters another
    /// filesystem (see `WipeWalker`); what it skipped is listed in `WipeReport.notes`. Provider
    /// temp areas (`.mamfs-provider/tmp`) met under a root are emptied.
    /// - Throws: `.unknownAccount`; `.fileNotFound` or `.invalidArguments` for a `roots` entry
    ///   that is missing or a symbolic link (checked before anything is destroyed); `.system`
    ///   when a file cannot be removed (the keys are already destroyed then, so its contents
    ///   are unreadable); `.system(errno: EBUSY)` after the walk when the deleted key bytes may
    ///   remain in the state files because another connection holds a read transaction.
    /// - Parameter removed: told the path of every file and directory removed, as it goes.
    @discardableResult
    public func wipe(_ name: String, roots: [String], progress: ((WipeProgress) -> Void)? = nil,
                     removed: ((String) -> Void)? = nil) throws -> WipeReport {
        let identity = try context.resolveAccount(name)
        var given: [WipeRoot] = []
        defer { given.forEach { $0.close() } }
        for root in roots { given.append(try WipeRoot.given(root)) }
        let destroyed = try context.keys.destroyKeys(accountId: identity.accountId)
        try context.state.markWiped(identity.accountId)
        try context.state.setManaged(identity.accountId, managed: false)
        try context.state.setPolicy(identity.accountId, json: nil)
        context.stateDidChange()
        var walker = WipeWalker(owner: identity.accountId, progress: progress, removed: removed)
        walker.report.keysDestroyed = destroyed.count
        var walked = Set<String>()
        for root in given where walked.insert(root.path).inserted {
            try walker.wipe(root)
        }
        for known in try context.state.knownRoots() where walked.insert(PathName.normalized(known.path)).inserted {
            guard let root = WipeRoot.known(known.path, kind: known.kind, notes: &walker.report.notes) else { continue }
            defer { root.close() }
            try walker.wipe(root)
        }
        progress?(WipeProgress(examined: walker.examined, removed: walker.report.removedFiles))
        try context.state.requireKeyBytesGone(destroyed.wrapped)
        return walker.report
    }

    /// All registered accounts.
    public func accounts() throws -> [AccountRecord] { try context.state.allAccounts() }

    /// The policy of a managed account.
    /// - Throws: `.unknownAccount`; `.applicationNotManaged` when the account is not enrolled.
    public func policy(of name: String) throws -> Policy {
        let identity = try context.resolveAccount(name)
        guard let record = try context.state.account(named: identity.accountId), record.managed,
              let json = record.policyJSON else {
            throw MAMError.applicationNotManaged("account \(identity.accountId) is not enrolled")
        }
        return try Policy.parse(Data(json.utf8), source: "state")
    }

    /// Replaces the policy of a managed account; running mounts pick it up (data_version poll).
    /// - Throws: `.unknownAccount`; `.applicationNotManaged` when the account is not enrolled.
    public func setPolicy(_ name: String, _ policy: Policy) throws {
        let identity = try context.resolveAccount(name)
        guard let record = try context.state.account(named: identity.accountId), record.managed else {
            throw MAMError.applicationNotManaged("account \(identity.accountId) is not enrolled")
        }
        try context.state.setPolicy(identity.accountId, json: String(decoding: policy.jsonData(), as: UTF8.self))
        context.stateDidChange()
    }
}
