import CCipher
import Foundation

/// AES-256-GCM with a 96-bit nonce and a 128-bit tag, through OpenSSL.
///
/// One instance holds one cipher context with its key schedule set once; each call only sets
/// the nonce. The context is OpenSSL's (CCipher: the default provider's AES-256-GCM called
/// through its provider interface, or EVP where that is not on offer). An instance is NOT
/// thread-safe: use one per thread or per call.
public final class AESGCM {
    /// Nonce length in bytes.
    public static let nonceSize = 12
    /// Authentication tag length in bytes.
    public static let tagSize = 16

    private let context: OpaquePointer

    /// Whether contexts call OpenSSL's provider functions directly (`true`) or go through EVP.
    /// Both give the same bytes; the direct route skips EVP's per-message parameter lookups.
    public static var callsProviderDirectly: Bool { mamfs_gcm_is_direct() == 1 }

    /// Creates a context for `key`.
    /// - Throws: `MAMError.internalError` if OpenSSL cannot set up the cipher.
    public convenience init(key: SymmetricKey) throws {
        try self.init(key: key, throughEVP: false)
    }

    /// `throughEVP`: EVP whatever the provider offers (to check one route against the other).
    init(key: SymmetricKey, throughEVP: Bool) throws {
        let made = key.withUnsafeBytes { keyBytes in
            let key = keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
            return throughEVP ? mamfs_gcm_new_evp(key) : mamfs_gcm_new(key)
        }
        guard let made else {
            throw MAMError.internalError("cannot initialise AES-256-GCM")
        }
        context = made
    }

    deinit { mamfs_gcm_free(context) }

    /// Encrypts `plaintext` into `ciphertext` (same length) and writes the 16-byte tag to `tag`.
    /// - Parameters:
    ///   - nonce: 12 bytes, never reused with the same key.
    ///   - aad: additional authenticated data (may be empty).
    /// - Throws: `MAMError.failedToEncrypt` if OpenSSL fails.
    public func seal(nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
                     plaintext: UnsafeRawBufferPointer, ciphertext: UnsafeMutableRawPointer,
                     tag: UnsafeMutableRawPointer) throws {
        precondition(nonce.count == AESGCM.nonceSize)
        guard mamfs_gcm_seal(context, nonce.baseAddress?.assumingMemoryBound(to: UInt8.self),
                             aad.baseAddress?.assumingMemoryBound(to: UInt8.self), aad.count,
                             plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), plaintext.count,
                             ciphertext.assumingMemoryBound(to: UInt8.self),
                             tag.assumingMemoryBound(to: UInt8.self)) == 1 else {
            throw MAMError.failedToEncrypt("AES-256-GCM seal")
        }
    }

    /// Decrypts and authenticates. Writes plaintext only into `plaintext` (same length as
    /// `ciphertext`); on failure (false or a throw) those bytes are wiped (zeros).
    /// - Returns: `true` when the tag verifies, `false` when the data or AAD was altered.
    /// - Throws: `MAMError.failedToDecrypt` if OpenSSL itself fails.
    public func open(nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
                     ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer,
                     plaintext: UnsafeMutableRawPointer) throws -> Bool {
        precondition(nonce.count == AESGCM.nonceSize && tag.count == AESGCM.tagSize)
        let result = mamfs_gcm_open(context, nonce.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                    aad.baseAddress?.assumingMemoryBound(to: UInt8.self), aad.count,
                                    ciphertext.baseAddress?.assumingMemoryBound(to: UInt8.self), ciphertext.count,
                                    plaintext.assumingMemoryBound(to: UInt8.self),
                                    tag.baseAddress?.assumingMemoryBound(to: UInt8.self))
        guard result >= 0 else {
            throw MAMError.failedToDecrypt("AES-256-GCM open")
        }
        return result == 1
    }

    /// Convenience for small buffers: returns nonce || ciphertext || tag.
    public func seal(_ plaintext: [UInt8], aad: [UInt8]) throws -> [UInt8] {
        try plaintext.withUnsafeBytes { try seal(bytes: $0, aad: aad) }
    }

    /// Wraps `key` (its 32 bytes are read in place, never copied): nonce || ciphertext || tag.
    func seal(key: SymmetricKey, aad: [UInt8]) throws -> [UInt8] {
        try key.withUnsafeBytes { try seal(bytes: $0, aad: aad) }
    }

    private func seal(bytes plaintext: UnsafeRawBufferPointer, aad: [UInt8]) throws -> [UInt8] {
        let nonce = try PublicRandom.bytes(AESGCM.nonceSize)
        var out = [UInt8](repeating: 0, count: AESGCM.nonceSize + plaintext.count + AESGCM.tagSize)
        try out.withUnsafeMutableBytes { outBytes in
            outBytes.copyBytes(from: nonce)
            try nonce.withUnsafeBytes { n in
                try aad.withUnsafeBytes { a in
                    try seal(nonce: n, aad: a, plaintext: plaintext,
                             ciphertext: outBytes.baseAddress! + AESGCM.nonceSize,
                             tag: outBytes.baseAddress! + AESGCM.nonceSize + plaintext.count)
                }
            }
        }
        return out
    }

    /// Inverse of `seal(_:aad:)`: input is nonce || ciphertext || tag.
    /// - Returns: the plaintext, or nil when authentication fails or the input is too short.
    public func open(_ sealed: [UInt8], aad: [UInt8]) throws -> [UInt8]? {
        guard let secret = try openSecret(sealed, aad: aad) else { return nil }
        return Array(secret.bytes)
    }

    /// `open(_:aad:)` into a `SecretBuffer` (for unwrapping keys: the plaintext never sits in
    /// an array). On failure the buffer is wiped and dropped.
    /// - Returns: the plaintext, or nil when authentication fails or the input is too short.
    func openSecret(_ sealed: [UInt8], aad: [UInt8]) throws -> SecretBuffer? {
        let overhead = AESGCM.nonceSize + AESGCM.tagSize
        guard sealed.count >= overhead else { return nil }
        let length = sealed.count - overhead
        let out = SecretBuffer(count: length)
        // An empty secret has no buffer: OpenSSL still wants a pointer, valid for the whole
        // call (it writes nothing there).
        var scratch: UInt8 = 0
        let ok = try sealed.withUnsafeBytes { s in
            try aad.withUnsafeBytes { a in
                try withUnsafeMutableBytes(of: &scratch) { fallback in
                    try open(nonce: UnsafeRawBufferPointer(rebasing: s[0..<AESGCM.nonceSize]), aad: a,
                             ciphertext: UnsafeRawBufferPointer(rebasing: s[AESGCM.nonceSize..<(AESGCM.nonceSize + length)]),
                             tag: UnsafeRawBufferPointer(rebasing: s[(AESGCM.nonceSize + length)...]),
                             plaintext: out.bytes.baseAddress ?? fallback.baseAddress!)
                }
            }
        }
        return ok ? out : nil
    }
}
