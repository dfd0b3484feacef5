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
        let kept = try keptCipher.withLock { $0.take() } ?? KeptCipher(try AESGCM(key: self))
        defer { keptCipher.withLock { slot in if slot == nil { slot = kept } } }
        return try body(kept.cipher)
    }

    /// Whether an AES-GCM context is kept with this key (for tests).
    var keepsCipher: Bool { keptCipher.withLock { $0 != nil } }
}

/// An AES-GCM context while it is kept with its key (`SymmetricKey.withCipher`). Unchecked
/// `Sendable`: the key's mutex hands it to one thread at a time, which has it to itself until
/// it gives it back.
final class KeptCipher: @unchecked Sendable {
    let cipher: AESGCM

    init(_ cipher: AESGCM) { self.cipher = cipher }
}
