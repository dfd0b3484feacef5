import Foundation

/// Per-account 256-bit keys, stored in the state database wrapped under the master key
/// (AES-256-GCM; AAD binds the accountId and key id, so a wrapped key cannot be moved to another
/// account or id). Unwrapped keys are cached in memory until `invalidate()`.
///
/// Keys can be withheld (`withhold(accounts:)`): the master key and the withheld accounts'
/// unwrapped keys are dropped from memory (their buffers wiped), the other accounts' keys are
/// unwrapped beforehand and kept, and until `restore(masterKey:)` every request for a
/// withheld account's key fails with `.keyUnavailable`.
final class AccountKeyStore: @unchecked Sendable {
    private let state: StateStore
    /// nil while keys are withheld.
    private var masterKey: SymmetricKey?
    private let lock = NSLock()
    /// Unwrapped keys by canonical accountId and key id, with the wrapped bytes they came from
    /// (so a cache kept while the master key is dropped can tell a key destroyed or replaced since).
    private var cache: [KeyName: (key: SymmetricKey, wrapped: [UInt8])] = [:]
    /// Canonical accountIds whose keys are withheld.
    private var withheld: Set<String> = []
    /// Newest key id per canonical accountId (asked on every file created through a mount).
    private var currentKeyIds: [String: UInt32] = [:]
    /// Asked with the canonical accountId before every key is handed out (cached or not):
    /// throws to refuse it (the compliance gate, `ProtectionContext.requireKeyAccess`).
    private var gate: (@Sendable (String) throws -> Void)?

    /// Names a cached key: the canonical accountId and the key id.
    private struct KeyName: Hashable {
        let account: String
        let keyId: UInt32
    }

    init(state: StateStore, masterKey: SymmetricKey) {
        self.state = state
        self.masterKey = masterKey
    }

    /// Sets the check every key hand-out goes through (set once, when the context opens).
    func setGate(_ gate: @escaping @Sendable (String) throws -> Void) {
        lock.lock(); self.gate = gate; lock.unlock()
    }

    static func wrapAAD(accountId: String, keyId: UInt32) -> [UInt8] {
        Array("mamfs account key v1|\(AccountIdentity.canonical(accountId))|\(keyId)".utf8)
    }

    /// Creates a new random key for the account and stores it wrapped.
    /// - Returns: the new key id.
    @discardableResult
    /// - Throws: `.keyUnavailable` while keys are withheld (the master key is not in memory).
    func createKey(accountId: String) throws -> UInt32 {
        let key = try SymmetricKey.random()
        let cipher = try AESGCM(key: try requireMasterKey())
        defer { invalidate() }
        return try state.addAccountKey(accountId) { keyId in
            Data(try cipher.seal(key: key, aad: AccountKeyStore.wrapAAD(accountId: accountId, keyId: keyId)))
        }
    }

    /// The account's key with `keyId`.
    /// - Throws: `.keyUnavailable` when the key was destroyed (selective wipe) or never existed;
    ///   `.authenticationFailed` when the stored wrapped key does not authenticate;
    ///   `.policyDenied` when the gate refuses it (compliance).
    func key(accountId: String, keyId: UInt32) throws -> SymmetricKey {
        let id = AccountIdentity.canonical(accountId)
        let cacheKey = KeyName(account: id, keyId: keyId)
        lock.lock()
        let gate = self.gate
        lock.unlock()
        try gate?(id)
        lock.lock()
        if withheld.contains(id) {
            lock.unlock()
            throw MAMError.keyUnavailable("the keys of account \(id) are withheld until the session is unlocked")
        }
        if let cached = cache[cacheKey] { lock.unlock(); return cached.key }
        lock.unlock()
        guard let wrapped = try state.accountKey(id, keyId: keyId) else {
            throw MAMError.keyUnavailable("no key \(keyId) for account \(id) (the account was wiped or is not registered here)")
        }
        let key = try unwrap(wrapped, accountId: id, keyId: keyId, masterKey: try requireMasterKey())
        lock.lock(); cache[cacheKey] = (key, Array(wrapped)); lock.unlock()
        return key
    }

    /// Unwraps straight into the buffer the key keeps (no array copy left in the heap).
    private func unwrap(_ wrapped: Data, accountId id: String, keyId: UInt32, masterKey: SymmetricKey) throws -> SymmetricKey {
        guard let secret = try AESGCM(key: masterKey).openSecret(Array(wrapped), aad: AccountKeyStore.wrapAAD(accountId: id, keyId: keyId)),
              secret.count == SymmetricKey.byteCount else {
            throw MAMError.authenticationFailed("the stored key \(keyId) of account \(id) does not authenticate")
        }
        return try SymmetricKey(adopting: secret)
    }

    private func requireMasterKey() throws -> SymmetricKey {
        lock.lock()
        defer { lock.unlock() }
        guard let masterKey else {
            throw MAMError.keyUnavailable("the master key is not in memory while keys are withheld (the session is locked)")
        }
        return masterKey
    }

    /// Whether the master key is in memory (false while keys are withheld).
    var holdsMasterKey: Bool {
        lock.lock(); defer { lock.unlock() }
        return masterKey != nil
    }

    /// The canonical accountIds whose keys are withheld.
    var withheldAccounts: Set<String> {
        lock.lock(); defer { lock.unlock() }
        return withheld
    }

    /// Withholds the keys of `accounts` (accountIds): first every key of every other account
    /// that has keys is unwrapped and cached, so those accounts go on working; then the
    /// master key and the cached keys of `accounts` are dropped (their buffers are wiped when
    /// the last reference goes). Withholding again adds to the set.
    /// - Throws: what unwrapping a kept key throws (`.authenticationFailed`), before anything
    ///   is dropped; `.keyUnavailable` when keys are already withheld and a kept account's key
    ///   is not cached.
    func withhold(accounts: Set<String>) throws {
        let ids = Set(accounts.map { AccountIdentity.canonical($0) })
        guard !ids.isEmpty else { return }
        let kept = try state.accountKeyCounts().keys.filter { !ids.contains($0) && !withheldAccounts.contains($0) }
        for account in kept {
            for keyId in try state.accountKeyIds(account) { _ = try key(accountId: account, keyId: keyId) }
        }
        lock.lock()
        withheld.formUnion(ids)
        masterKey = nil
        cache = cache.filter { entry in !ids.contains(entry.key.account) }
        currentKeyIds = currentKeyIds.filter { !ids.contains($0.key) }
        lock.unlock()
    }

    /// Drops the master key and every cached key without asking the database (a process
    /// that will never use this store again, such as a forked daemon's copy of its parent's
    /// context); every later request fails with `.keyUnavailable`.
    func discardAll() {
        lock.lock()
        masterKey = nil
        cache.removeAll()
        currentKeyIds.removeAll()
        lock.unlock()
    }

    /// Ends withholding with `masterKey` (loaded again by the caller, `MasterKey.load`).
    func restore(masterKey: SymmetricKey) {
        lock.lock()
        self.masterKey = masterKey
        withheld.removeAll()
        lock.unlock()
    }

    /// The account's newest key and its id, used for new files.
    /// - Throws: `.keyUnavailable` when the account has no key.
    func currentKey(accountId: String) throws -> (UInt32, SymmetricKey) {
        let id = AccountIdentity.canonical(accountId)
        lock.lock()
        let known = currentKeyIds[id]
        lock.unlock()
        if let known { return (known, try key(accountId: id, keyId: known)) }
        guard let keyId = try state.latestAccountKeyId(id) else {
            throw MAMError.keyUnavailable("account \(id) has no key")
        }
        let key = try key(accountId: id, keyId: keyId)
        lock.lock(); currentKeyIds[id] = keyId; lock.unlock()
        return (keyId, key)
    }

    /// Destroys every key of the account (crypto-shredding) in the database.
    /// - Returns: the number of keys destroyed and their wrapped bytes; pass those to
    ///   `StateStore.requireKeyBytesGone` to make sure no copy stays on disk.
    @discardableResult
    func destroyKeys(accountId: String) throws -> (count: Int, wrapped: [Data]) {
        invalidate()
        return try state.deleteAccountKeysReturningBlobs(accountId)
    }

    /// Drops the in-memory cache (after another process changed the state). While keys are
    /// withheld the master key is not there to unwrap them again: a cached key then stays only
    /// while its wrapped bytes are still in the database unchanged (a key destroyed by a wipe
    /// or replaced goes).
    func invalidate() {
        lock.lock()
        let holding = masterKey != nil
        let entries = cache
        cache.removeAll()
        currentKeyIds.removeAll()
        lock.unlock()
        guard !holding else { return }
        var still: [KeyName: (key: SymmetricKey, wrapped: [UInt8])] = [:]
        for (name, entry) in entries {
            guard (try? state.accountKey(name.account, keyId: name.keyId)).map(Array.init) == entry.wrapped else { continue }
            still[name] = entry
        }
        lock.lock()
        if masterKey == nil { cache.merge(still) { current, _ in current } }
        lock.unlock()
    }
}
