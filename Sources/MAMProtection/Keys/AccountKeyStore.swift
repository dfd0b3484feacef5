import Foundation

/// Per-account 256-bit keys, stored in the state database wrapped under the master key
/// (AES-256-GCM; AAD binds the accountId and key id, so a wrapped key cannot be moved to another
/// account or id). Unwrapped keys are cached in memory until `invalidate()`.
final class AccountKeyStore: @unchecked Sendable {
    private let state: StateStore
    private let masterKey: SymmetricKey
    private let lock = NSLock()
    private var cache: [String: SymmetricKey] = [:]
    /// Newest key id per canonical accountId (asked on every file created through a mount).
    private var currentKeyIds: [String: UInt32] = [:]
    /// Asked with the canonical accountId before every key is handed out (cached or not):
    /// throws to refuse it (the compliance gate, `ProtectionContext.requireKeyAccess`).
    private var gate: (@Sendable (String) throws -> Void)?

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
    func createKey(accountId: String) throws -> UInt32 {
        let key = try SymmetricKey.random()
        let cipher = try AESGCM(key: masterKey)
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
        let cacheKey = "\(id)#\(keyId)"
        lock.lock()
        let gate = self.gate
        lock.unlock()
        try gate?(id)
        lock.lock()
        if let cached = cache[cacheKey] { lock.unlock(); return cached }
        lock.unlock()
        guard let wrapped = try state.accountKey(id, keyId: keyId) else {
            throw MAMError.keyUnavailable("no key \(keyId) for account \(id) (the account was wiped or is not registered here)")
        }
        // Unwrapped straight into the buffer the key keeps (no array copy left in the heap).
        guard let secret = try AESGCM(key: masterKey).openSecret(Array(wrapped), aad: AccountKeyStore.wrapAAD(accountId: id, keyId: keyId)),
              secret.count == SymmetricKey.byteCount else {
            throw MAMError.authenticationFailed("the stored key \(keyId) of account \(id) does not authenticate")
        }
        let key = try SymmetricKey(adopting: secret)
        lock.lock(); cache[cacheKey] = key; lock.unlock()
        return key
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

    /// Drops the in-memory cache (after another process changed the state).
    func invalidate() {
        lock.lock()
        cache.removeAll()
        currentKeyIds.removeAll()
        lock.unlock()
    }
}
