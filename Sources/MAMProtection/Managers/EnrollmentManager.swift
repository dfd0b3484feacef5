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
    /// Entries of provider temp areas (`.mamfs-provider/tmp`) and rewrites' temp files left by
    /// a killed writer (`WriterTemporaryName`) that were removed.
    public var removedTemporaries = 0
    /// Files and directories the walk could not examine (one the wipe's user may not read, a
    /// file whose header is damaged): whatever of the account's data they hold is still there.
    /// Each has a line in `notes`.
    public var unexamined = 0
    /// What the walk skipped and why (a mount point, a root that became a symbolic link, an
    /// entry it could not examine), one line each, for the user.
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
    ///
    /// `accountId` is a GUID or a homeAccountId `OID.TID` (the TID is recorded as the tenant);
    /// without it the account is enrolled by `upn` alone and keyed by that UPN (its files carry
    /// the UPN as owner) until a later enroll names both, which records the accountId on the
    /// same account. An existing account found by either name is updated in place.
    /// - Returns: the identity as stored (`accountId` is the UPN for a UPN-keyed account).
    /// - Throws: `.invalidArguments` for a malformed accountId/UPN, neither given, another
    ///   account already managed (one at a time), the UPN or accountId belonging to another
    ///   account, or a tenant other than the one recorded; `.policyDenied` when the state's
    ///   allowed-accounts list is set and names neither the accountId nor the UPN.
    /// Reports `.enrolled` with the status (100, or the failure's code) to the context's sink.
    @discardableResult
    public func enroll(accountId: String?, upn: String?, policy: Policy) throws -> AccountIdentity {
        do {
            let identity = try performEnroll(accountId: accountId, upn: upn, policy: policy)
            context.report(.enrolled(.succeeded(.enroll, identity)))
            return identity
        } catch {
            let named = try? context.state.account(named: accountId ?? upn ?? "")
            let another = ((try? context.state.managedAccounts()) ?? []).contains { $0.accountId != named?.accountId }
            context.report(.enrolled(.failed(.enroll, accountId: accountId ?? named?.accountId, upn: upn ?? named?.upn,
                                             error: error, anotherManaged: another)))
            throw error
        }
    }

    private func performEnroll(accountId: String?, upn: String?, policy: Policy) throws -> AccountIdentity {
        let name = try accountId.map(AccountIdentity.parseName)
        if let accountId, let name, !name.isAccountId {
            throw MAMError.invalidArguments("'\(InputQuote.short(accountId))' is not an accountId (expected a GUID such as 8c7f3e1a-0000-4000-8000-000000000001, or OID.TID)")
        }
        if let upn, !AccountIdentity.isUPN(upn) {
            throw MAMError.invalidArguments("'\(InputQuote.short(upn))' is not a UPN (expected name@domain)")
        }
        let guid = name?.key
        let upnName = upn.map(AccountIdentity.canonical)
        guard guid != nil || upnName != nil else {
            throw MAMError.invalidArguments("an accountId or a UPN (--upn) is needed")
        }
        let byId = try guid.flatMap { try context.state.account(named: $0) }
        let byUPN = try upnName.flatMap { try context.state.account(named: $0) }
        if let byUPN, let guid, byUPN.accountId != byId?.accountId,
           byId != nil || byUPN.knownAccountId.map({ $0 != guid }) ?? false {
            throw MAMError.invalidArguments("UPN \(byUPN.upn ?? "") already belongs to account \(byUPN.knownAccountId ?? byUPN.accountId)")
        }
        let existing = byId ?? byUPN
        if let existing, existing.isKeyedByUPN, let upnName, upnName != existing.accountId {
            throw MAMError.invalidArguments("account \(existing.accountId) was enrolled by its UPN, which cannot change to \(upnName)")
        }
        if let tenant = name?.tenantId, let known = existing?.tenantId, tenant != known {
            throw MAMError.invalidArguments("account \(guid ?? "") is registered in tenant \(known), not \(tenant)")
        }
        try requireAllowed([upnName, guid] + (existing.map { Array($0.names) } ?? []))
        let key = existing?.accountId ?? guid ?? upnName ?? ""
        let managed = try context.state.managedAccounts()
        if let other = managed.first(where: { $0.accountId != key }) {
            throw MAMError.invalidArguments("account \(other.upn ?? other.accountId) is already enrolled; one managed account at a time (unenroll it first)")
        }
        let json = String(decoding: policy.jsonData(), as: UTF8.self)
        let stored = try context.state.upsertAccount(AccountRecord(
            accountId: key, upn: upnName ?? existing?.upn, managed: true, policyJSON: json, wipedAt: nil,
            tenantId: name?.tenantId ?? existing?.tenantId,
            objectId: AccountIdentity.isAccountId(key) ? nil : (guid ?? existing?.objectId)))
        let hasKey = try context.state.latestAccountKeyId(key) != nil
        if existing == nil || existing?.wipedAt != nil || !hasKey {
            try context.keys.createKey(accountId: key)
        }
        context.stateDidChange()
        return stored.identity
    }

    /// Whether the state's allowed-accounts list lets the account named by `names` in (its
    /// accountId or `OID.TID`, its UPN; nil entries are skipped).
    ///
    /// Each name is resolved as everywhere: a registered account is allowed when the list
    /// names any of its accountId, UPN or learned accountId; an unregistered one when the list
    /// names one of the names given. The empty (unmanaged) identity and an empty list allow everything.
    /// - Throws: `.invalidArguments` for a malformed homeAccountId; `.unknownAccount` for a tenant mismatch.
    public func isAllowed(_ names: [String?]) throws -> Bool {
        let allowed = try context.state.allowedAccounts()
        guard !allowed.isEmpty else { return true }
        var known = Set<String>()
        for name in names.compactMap({ $0 }) {
            let parsed = try AccountIdentity.parseName(name)
            if parsed.key.isEmpty { continue }
            known.insert(parsed.key)
            known.formUnion(try context.state.account(named: name)?.names ?? [])
        }
        if known.isEmpty { return true }
        return allowed.contains(where: known.contains)
    }

    /// Refuses an account the allowed-accounts list does not let in (see `isAllowed`).
    /// - Throws: `.policyDenied` naming the account; what `isAllowed` throws.
    public func requireAllowed(_ names: [String?]) throws {
        guard try !isAllowed(names) else { return }
        let shown = names.compactMap { $0 }.first { !$0.isEmpty } ?? ""
        throw MAMError.policyDenied("account \(InputQuote.short(shown)) is not in the allowed accounts (see 'mamfs accounts allowed')")
    }

    /// Unenrolls an account: it is no longer managed and, unless `keepRegistered`, no longer
    /// registered (mirrors deRegisterAndUnenrollAccount). Without `wipe` its keys are kept, so
    /// existing encrypted files stay readable, but no policy applies any more; with `wipe` a
    /// selective wipe runs first. The account's row stays, so a later wipe still finds it.
    /// - Returns: the wipe report when `wipe` was asked.
    /// - Throws: `.unknownAccount`; what `wipe` throws.
    ///
    /// Reports `.unenrolled` (104, or the failure's code) to the context's sink, after the
    /// wipe's own `.wiped`.
    @discardableResult
    public func unenroll(_ name: String, wipe: Bool, keepRegistered: Bool = false, roots: [String],
                         progress: ((WipeProgress) -> Void)? = nil) throws -> WipeReport? {
        do {
            let (identity, report) = try performUnenroll(name, wipe: wipe, keepRegistered: keepRegistered, roots: roots, progress: progress)
            context.report(.unenrolled(.succeeded(.unenroll, identity)))
            return report
        } catch {
            context.report(.unenrolled(failure(.unenroll, name, error, wiping: wipe)))
            throw error
        }
    }

    /// The failure status of `operation` on the account `name` (resolved when registered).
    private func failure(_ operation: EnrollmentStatus.Operation, _ name: String, _ error: Error, wiping: Bool = false) -> EnrollmentStatus {
        let identity = try? context.resolveAccount(name)
        return .failed(operation, accountId: identity?.accountId ?? name, upn: identity?.upn, error: error, wiping: wiping)
    }

    private func performUnenroll(_ name: String, wipe: Bool, keepRegistered: Bool, roots: [String],
                                 progress: ((WipeProgress) -> Void)?) throws -> (AccountIdentity, WipeReport?) {
        let identity = try context.resolveAccount(name)
        var report: WipeReport?
        if wipe {
            report = try self.wipe(identity.accountId, roots: roots, progress: progress)
        }
        try context.state.setManaged(identity.accountId, managed: false)
        try context.state.setPolicy(identity.accountId, json: nil)
        if !keepRegistered { try context.state.setRegistered(identity.accountId, registered: false) }
        context.stateDidChange()
        return (identity, report)
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
    ///
    /// Reports `.wiped` (102 with the counts, or the failure's code) to the context's sink.
    @discardableResult
    public func wipe(_ name: String, roots: [String], progress: ((WipeProgress) -> Void)? = nil,
                     removed: ((String) -> Void)? = nil) throws -> WipeReport {
        do {
            let (identity, report) = try performWipe(name, roots: roots, progress: progress, removed: removed)
            context.report(.wiped(.succeeded(.wipe, identity), removedFiles: report.removedFiles, keysDestroyed: report.keysDestroyed))
            return report
        } catch {
            context.report(.wiped(failure(.wipe, name, error), removedFiles: 0, keysDestroyed: 0))
            throw error
        }
    }

    private func performWipe(_ name: String, roots: [String], progress: ((WipeProgress) -> Void)?,
                             removed: ((String) -> Void)?) throws -> (AccountIdentity, WipeReport) {
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
        return (identity, walker.report)
    }

    /// Every account the state knows (registered or not; see `AccountRecord.registered`).
    public func accounts() throws -> [AccountRecord] { try context.state.allAccounts() }

    /// The enrolled (managed) accounts. Mirrors `enrolledAccountId`.
    public func enrolledAccounts() throws -> [AccountRecord] { try context.state.managedAccounts() }

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
    /// Reports `.policyChanged` (100, 101 when the policy is the one stored, or the failure's
    /// code) to the context's sink.
    /// - Throws: `.unknownAccount`; `.applicationNotManaged` when the account is not enrolled.
    public func setPolicy(_ name: String, _ policy: Policy) throws {
        do {
            let identity = try context.resolveAccount(name)
            guard let record = try context.state.account(named: identity.accountId), record.managed else {
                throw MAMError.applicationNotManaged("account \(identity.accountId) is not enrolled")
            }
            let json = String(decoding: policy.jsonData(), as: UTF8.self)
            try context.state.setPolicy(identity.accountId, json: json)
            context.stateDidChange()
            context.report(.policyChanged(.succeeded(.policy, identity, unchanged: record.policyJSON == json)))
        } catch {
            context.report(.policyChanged(failure(.policy, name, error)))
            throw error
        }
    }
}
