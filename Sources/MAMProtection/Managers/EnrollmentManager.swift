import CSystem
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
    /// Directories tagged with the account that were removed (empty) or untagged (not empty).
    public var removedDirectories = 0
    /// Account keys destroyed.
    public var keysDestroyed = 0
    /// Roots that were walked.
    public var roots: [String] = []
}

/// Registration, enrollment, policy and selective wipe of accounts.
///
/// Mirrors `IntuneMAMEnrollmentManager` (registerAndEnrollAccountId:, deRegisterAndUnenrollAccountId:withWipe:,
/// registeredAccounts, enrolledAccountId) and the selective-wipe notification of the SDK. As in
/// the reference SDK, one account is managed at a time.
public struct EnrollmentManager: Sendable {
    let context: ProtectionContext

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
    /// (mounted backing directories and protected paths) and `roots`. Personal and other
    /// accounts' files are untouched. The account stays registered, unmanaged, marked wiped.
    /// - Throws: `.unknownAccount`; `.system` when a file cannot be removed (the keys are
    ///   already destroyed then, so its contents are unreadable).
    @discardableResult
    public func wipe(_ name: String, roots: [String], progress: ((WipeProgress) -> Void)? = nil) throws -> WipeReport {
        let identity = try context.resolveAccount(name)
        var report = WipeReport()
        report.keysDestroyed = try context.keys.destroyKeys(accountId: identity.accountId)
        try context.state.markWiped(identity.accountId)
        try context.state.setManaged(identity.accountId, managed: false)
        try context.state.setPolicy(identity.accountId, json: nil)
        context.stateDidChange()
        var walked = Set<String>()
        let known = try context.state.knownRoots().map(\.path)
        var examined = 0
        for root in roots + known {
            let path = PathName.normalized(root)
            guard !walked.contains(path) else { continue }
            walked.insert(path)
            var st = stat()
            guard lstat(path, &st) == 0 else { continue }
            report.roots.append(path)
            if (st.st_mode & S_IFMT) == S_IFDIR {
                try wipeTree(path, owner: identity.accountId, report: &report, examined: &examined, progress: progress)
            } else if (st.st_mode & S_IFMT) == S_IFREG {
                examined += 1
                try wipeFile(path, owner: identity.accountId, report: &report)
            }
        }
        progress?(WipeProgress(examined: examined, removed: report.removedFiles))
        return report
    }

    private func wipeTree(_ directory: String, owner: String, report: inout WipeReport, examined: inout Int,
                          progress: ((WipeProgress) -> Void)?) throws {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        for name in entries {
            let child = directory + "/" + name
            var st = stat()
            guard lstat(child, &st) == 0 else { continue }
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                try wipeTree(child, owner: owner, report: &report, examined: &examined, progress: progress)
                if DirectoryOwner.read(path: child) == owner {
                    if rmdir(child) != 0 { removexattr(child, DirectoryOwner.attributeName) }
                    report.removedDirectories += 1
                }
            case S_IFREG:
                examined += 1
                try wipeFile(child, owner: owner, report: &report)
                if examined % 200 == 0 { progress?(WipeProgress(examined: examined, removed: report.removedFiles)) }
            default:
                continue
            }
        }
        if DirectoryOwner.read(path: directory) == owner { removexattr(directory, DirectoryOwner.attributeName) }
    }

    private func wipeFile(_ path: String, owner: String, report: inout WipeReport) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return }
        let header = try? ProtectedFileHeader.read(fd: fd)
        close(fd)
        guard let header, header.owner == owner else { return }
        guard unlink(path) == 0 else { throw MAMError.fromErrno("remove \(path)") }
        report.removedFiles += 1
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
