import Foundation

extension SymmetricKey {
    /// Runs `body` with an AES-256-GCM context for this key: the one kept with the key since an
    /// earlier call unless another thread has it, else a new one, which is then kept (unless
    /// another is kept already). `body` has the context to itself while it runs.
    ///
    /// What wraps and unwraps file keys under an account key (`ProtectedFileHeader`): before,
    /// every file created or opened through a mount made and freed a context (OpenSSL's
    /// provider set-up and the key schedule), about 2,000 instructions and two allocations.
    /// The context is freed, its key schedule cleansed, when the key goes.
    /// - Throws: what `body` throws; `MAMError.internalError` when OpenSSL cannot set up a new
    ///   context.
    func withCipher<R>(_ body: (AESGCM) throws -> R) throws -> R {
        let cipher = try keptCipher.withLock { $0.take() } ?? AESGCM(key: self)
        defer { keptCipher.withLock { slot in if slot == nil { slot = cipher } } }
        return try body(cipher)
    }

    /// Whether an AES-GCM context is kept with this key (for tests).
    var keepsCipher: Bool { keptCipher.withLock { $0 != nil } }
}
