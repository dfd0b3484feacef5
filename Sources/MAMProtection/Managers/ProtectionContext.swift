import Foundation
import MAMSystem
import Synchronization

/// An opened state directory: the master key, account keys, accounts and their policies.
///
/// The entry point of the library. The CLI opens one per command; a mount keeps one for its
/// lifetime and calls `refreshIfChanged()` so changes made by other processes (enroll, wipe,
/// policy set) take effect. Thread-safe.
public final class ProtectionContext: @unchecked Sendable {
    /// Where the state lives.
    public let stateDirectory: StateDirectory
    /// The SQLite state database.
    public let state: StateStore
    let keys: AccountKeyStore
    private let lock = NSLock()
    /// Held through a whole `reload`: two reloads that overlapped could finish in the other
    /// order, the one that read the state before a commit storing its accounts and policies
    /// over those of the one that read them after.
    private let reloadLock = NSLock()
    private var accountsById: [String: AccountRecord] = [:]
    /// Built once per reload (asked on every file created through a mount).
    private var evaluator = PolicyEvaluator(policies: [:])
    private var lastDataVersion: Int64 = -1
    /// The state's commit marker when a check last found this context current, and when
    /// (`MonotonicClock` seconds): `refreshIfChanged` trusts an unmoved marker for
    /// `markerTrustSeconds` before it asks the database again.
    private var checkedMarker: SQLiteCommitMarker?
    private var checkedAt = 0.0
    /// How long an unmoved commit marker stands for the database. The header is what SQLite
    /// itself compares to notice a commit, so no known change escapes it; this bound is
    /// defensive: the database is still asked at least once a second.
    static let markerTrustSeconds = 1.0
    /// How many times `refreshIfChanged` asked the database (for tests of the marker).
    let databaseChecks = Atomic<Int>(0)
    private var audit: AuditLog?
    /// Guards the compliance members below (ProtectionContext+Compliance).
    let complianceLock = NSLock()
    /// Last compliance result per canonical accountId, read with the accounts.
    var complianceResults: [String: ComplianceResult] = [:]
    var site: String?
    /// The device check of `site`, made once per site.
    var siteDevice: ComplianceOutcome?
    var events: ComplianceEventSink?
    var flushesGateRefusals = true
    private var sink: ProtectionEventSink?
    /// The state's scrub list, read with the accounts (what published events never show).
    private var scrubList = Scrubber(values: [])

    private init(stateDirectory: StateDirectory, state: StateStore, masterKey: SymmetricKey) throws {
        self.stateDirectory = stateDirectory
        self.state = state
        self.keys = AccountKeyStore(state: state, masterKey: masterKey)
        try reload()
        keys.setGate { [unowned self] accountId in try self.requireKeyAccess(accountId: accountId) }
    }

    /// Creates a new state directory (`mamfs init`): the directory (0700), the database, and the
    /// master key (random key file, or scrypt from `passphraseFile`). An existing directory must
    /// belong to this user; a group- or world-accessible one is set to 0700.
    /// - Throws: `.cannotCreateOutput` when the state already exists or cannot be created;
    ///   `.system(errno: EPERM)` when the directory is owned by another user.
    @discardableResult
    public static func initialize(stateDirectory: StateDirectory, passphraseFile: String?) throws -> ProtectionContext {
        if stateDirectory.databaseExists {
            throw MAMError.cannotCreateOutput("\(stateDirectory) already holds a mamfs state")
        }
        if FileManager.default.fileExists(atPath: stateDirectory.masterKeyURL.path) {
            throw MAMError.cannotCreateOutput("\(stateDirectory.masterKeyURL.path) already exists")
        }
        try stateDirectory.makePrivateForInit()
        try stateDirectory.create()
        let state = try StateStore.open(directory: stateDirectory, create: true)
        do {
            let key = try MasterKey.create(in: stateDirectory, state: state, passphraseFile: passphraseFile)
            return try ProtectionContext(stateDirectory: stateDirectory, state: state, masterKey: key)
        } catch {
            state.close()
            try? FileManager.default.removeItem(at: stateDirectory.databaseURL)
            try? FileManager.default.removeItem(atPath: stateDirectory.databaseURL.path + "-wal")
            try? FileManager.default.removeItem(atPath: stateDirectory.databaseURL.path + "-shm")
            throw error
        }
    }

    /// Opens an existing state.
    /// - Parameter passphraseFile: needed when the state was initialised with a passphrase.
    /// - Throws: `.fileNotFound` when there is no state; `.system(errno: EACCES)` when this user
    ///   cannot read it; `.system(errno: EPERM)` when the directory or key file belongs to
    ///   another user or others can write it (`StateDirectory.requireSafeToOpen`);
    ///   `.keyUnavailable` for a wrong passphrase or master key file.
    public static func open(stateDirectory: StateDirectory, passphraseFile: String?) throws -> ProtectionContext {
        try stateDirectory.requireSafeToOpen()
        let state = try StateStore.open(directory: stateDirectory, create: false)
        let key = try MasterKey.load(from: stateDirectory, state: state, passphraseFile: passphraseFile)
        return try ProtectionContext(stateDirectory: stateDirectory, state: state, masterKey: key)
    }

    // MARK: Accounts and policy

    private func reload() throws {
        reloadLock.lock()
        defer { reloadLock.unlock() }
        let version = try state.dataVersion()
        var byId: [String: AccountRecord] = [:]
        var table: [String: Policy] = [:]
        let results = try state.complianceResults()
        for record in try state.allAccounts() {
            byId[record.accountId] = record
            if record.managed, let json = record.policyJSON,
               let policy = try? Policy.parse(Data(json.utf8), source: "state of \(record.accountId)") {
                table[record.accountId] = policy
            }
        }
        let scrub = Scrubber(values: (try? state.scrubValues()) ?? [])
        lock.lock()
        accountsById = byId
        evaluator = PolicyEvaluator(policies: table)
        scrubList = scrub
        lastDataVersion = version
        lock.unlock()
        withLock { complianceResults = results }
    }

    /// Re-reads accounts, policies and keys when another process changed the state. Cheap:
    /// while the state's commit marker (`StateStore.commitMarker`: the wal-index header, copied
    /// from SQLite's own mapping) is the one a check last found current, and for at most
    /// `markerTrustSeconds`, nothing else; otherwise one `PRAGMA data_version`, and the reload
    /// when it moved.
    /// - Returns: true when something changed.
    @discardableResult
    public func refreshIfChanged() -> Bool {
        // Read before the database is asked: a commit after it moves the marker again.
        let marker = state.commitMarker()
        let now = MonotonicClock.seconds()
        if let marker {
            lock.lock()
            let current = checkedMarker == marker && now - checkedAt < Self.markerTrustSeconds
            lock.unlock()
            if current { return false }
        }
        databaseChecks.add(1, ordering: .relaxed)
        guard let version = try? state.dataVersion() else { return false }
        lock.lock()
        let changed = version != lastDataVersion
        if !changed { (checkedMarker, checkedAt) = (marker, now) }
        lock.unlock()
        guard changed else { return false }
        keys.invalidate()
        // Until a reload succeeds, every call asks the database again.
        guard (try? reload()) != nil else { return true }
        lock.lock()
        (checkedMarker, checkedAt) = (marker, now)
        lock.unlock()
        return true
    }

    /// Forces a reload after this process changed the state.
    func stateDidChange() {
        keys.invalidate()
        try? reload()
    }

    /// The account named by an accountId, UPN or homeAccountId `OID.TID` (case-insensitive).
    /// - Throws: `.unknownAccount` when no such account is registered.
    public func resolveAccount(_ name: String) throws -> AccountIdentity {
        guard let record = try state.account(named: name) else {
            throw MAMError.unknownAccount("'\(InputQuote.short(name))' is not registered (see 'mamfs accounts')")
        }
        return AccountIdentity(uncheckedAccountId: record.accountId, upn: record.upn)
    }

    /// Resolves the owner to tag files with: "" stays unmanaged, a registered accountId, UPN or
    /// homeAccountId `OID.TID` becomes its accountId (the UPN for an account enrolled by UPN
    /// alone), an unregistered GUID (or OID) is accepted as an unmanaged identity.
    /// - Throws: `.unknownAccount` for an unregistered UPN; `.keyUnavailable` for a wiped
    ///   account; `.invalidArguments` for a name that is neither.
    public func resolveOwner(_ name: String) throws -> String {
        let canonical = try AccountIdentity.parseName(name).key
        if canonical.isEmpty { return "" }
        if let record = try state.account(named: name) {
            guard record.wipedAt == nil else {
                throw MAMError.keyUnavailable("account \(record.upn ?? record.accountId) was wiped; nothing can be protected for it until it is enrolled again")
            }
            return record.accountId
        }
        if AccountIdentity.isAccountId(canonical) { return canonical }
        if AccountIdentity.isUPN(canonical) {
            throw MAMError.unknownAccount("'\(InputQuote.short(name))' is not registered (see 'mamfs accounts')")
        }
        throw MAMError.invalidArguments("'\(InputQuote.short(name))' is neither an accountId (GUID) nor a UPN")
    }

    /// Registered accounts, from the cache.
    public func accountRecord(_ accountId: String) -> AccountRecord? {
        lock.lock(); defer { lock.unlock() }
        return accountsById[AccountIdentity.canonical(accountId)]
    }

    /// The policy decisions over the currently managed accounts.
    public var policyEvaluator: PolicyEvaluator {
        lock.lock()
        defer { lock.unlock() }
        return evaluator
    }

    /// True when the owner's keys were destroyed by a selective wipe (its files are hidden by
    /// a mount and unreadable everywhere).
    public func isWiped(owner: String) -> Bool {
        guard !owner.isEmpty, let record = accountRecord(owner) else { return false }
        return record.wipedAt != nil
    }

    // MARK: Files

    /// The header and file key for a new file owned by `owner`: encrypted when the owner is
    /// managed and its policy requires file encryption, plain-tagged otherwise.
    /// - Throws: `.keyUnavailable` when a managed owner has no usable key.
    public func newFileHeader(owner: String) throws -> (ProtectedFileHeader?, SymmetricKey?) {
        let owner = AccountIdentity.canonical(owner)
        if policyEvaluator.isFileEncryptionRequired(accountId: owner) {
            let (keyId, accountKey) = try keys.currentKey(accountId: owner)
            let (header, fileKey) = try ProtectedFileHeader.makeEncrypted(owner: owner, keyId: keyId, accountKey: accountKey)
            return (header, fileKey)
        }
        return (try ProtectedFileHeader(plainOwner: owner), nil)
    }

    /// An encrypted header for `owner` regardless of policy (encryptFile).
    /// - Throws: `.unmanagedIdentity` when the owner is not a managed account.
    func newEncryptedHeader(owner: String) throws -> (ProtectedFileHeader, SymmetricKey) {
        let owner = AccountIdentity.canonical(owner)
        guard policyEvaluator.isManaged(accountId: owner) else {
            throw MAMError.unmanagedIdentity("'\(owner.isEmpty ? "(empty)" : InputQuote.short(owner))' is not a managed (enrolled) account")
        }
        let (keyId, accountKey) = try keys.currentKey(accountId: owner)
        return try ProtectedFileHeader.makeEncrypted(owner: owner, keyId: keyId, accountKey: accountKey)
    }

    /// The unwrapped file key of an encrypted header, nil for a plain one.
    /// - Throws: `.keyUnavailable` (wiped or unknown owner), `.authenticationFailed` (tampered header).
    public func fileKey(for header: ProtectedFileHeader) throws -> SymmetricKey? {
        guard let encryption = header.encryption else { return nil }
        let accountKey = try keys.key(accountId: header.owner, keyId: encryption.keyId)
        return try header.unwrapFileKey(accountKey: accountKey)
    }

    /// `header` with the sparse flag set, wrapped again under the same account key (what an
    /// encrypted file's header becomes the first time the file gets a hole).
    /// - Throws: `.keyUnavailable` (wiped or unknown owner), `.authenticationFailed` (tampered
    ///   header), `.invalidArguments` for a plain header.
    public func sparseHeader(for header: ProtectedFileHeader) throws -> ProtectedFileHeader {
        guard let encryption = header.encryption else { throw MAMError.invalidArguments("the file is not encrypted") }
        return try header.markedSparse(accountKey: try keys.key(accountId: header.owner, keyId: encryption.keyId))
    }

    /// Reads the header of an open backing file and returns its plaintext view.
    public func openContent(fd: Int32) throws -> ProtectedFileContent {
        let header = try ProtectedFileHeader.read(fd: fd)
        return try ProtectedFileContent(fd: fd, header: header, fileKey: try header.flatMap { try fileKey(for: $0) },
                                        sparseHeader: { [self] in try sparseHeader(for: $0) })
    }

    /// The inherited-owner tag of a backing directory (`user.mam.owner`), nil when untagged.
    public func directoryOwner(backingDirectoryFD fd: Int32) -> String? {
        DirectoryOwner.read(fd: fd)
    }

    /// The audit log of this state directory (`audit.log`): one per context, created on first use.
    public var auditLog: AuditLog {
        lock.lock()
        defer { lock.unlock() }
        if let audit { return audit }
        let log = AuditLog(stateDirectory: stateDirectory, state: state)
        audit = log
        return log
    }

    /// Where this context's `ProtectionEvent`s go (nil: nowhere). The component that owns the
    /// context sets it once, before the events it wants to hear about.
    public var eventSink: ProtectionEventSink? {
        get { lock.lock(); defer { lock.unlock() }; return sink }
        set { lock.lock(); sink = newValue; lock.unlock() }
    }

    /// Hands `event` to the sink, its path and executable scrubbed by the state's scrub list
    /// (as of the last reload). Never throws.
    public func report(_ event: ProtectionEvent) {
        lock.lock()
        let sink = self.sink
        let scrubber = scrubList
        lock.unlock()
        sink?.deliver(event.scrubbed(by: scrubber))
    }

    /// The caller-aware rules over the currently managed accounts' policies.
    public var accessRules: AccessRules { AccessRules(evaluator: policyEvaluator) }

    /// File protection (per path).
    public var files: FileProtectionManager { FileProtectionManager(context: self) }
    /// Data protection (per buffer).
    public var data: DataProtectionManager { DataProtectionManager(context: self) }
    /// Enrollment, policy and selective wipe.
    public var enrollment: EnrollmentManager { EnrollmentManager(context: self) }
}
