import COpenSSL
import Foundation

/// AES-256-GCM with a 96-bit nonce and a 128-bit tag, through OpenSSL EVP.
///
/// One instance holds one cipher context with its key schedule set once; each call only
/// re-initialises the nonce. An instance is NOT thread-safe: use one per thread or per call.
public final class AESGCM {
    /// Nonce length in bytes.
    public static let nonceSize = 12
    /// Authentication tag length in bytes.
    public static let tagSize = 16

    private let context: OpaquePointer

    /// The cipher, fetched from the default provider once per process. Passing the constant
    /// `EVP_aes_256_gcm()` instead makes OpenSSL 3 fetch it (name lookup, locks) on every
    /// context: a few microseconds that each FUSE read and write paid (docs/PERFORMANCE.md).
    private static let fetched = FetchedCipher()

    /// Creates a context for `key`.
    /// - Throws: `MAMError.internalError` if OpenSSL cannot set up the cipher.
    public init(key: SymmetricKey) throws {
        guard let context = EVP_CIPHER_CTX_new() else {
            throw MAMError.internalError("cannot allocate a cipher context")
        }
        self.context = context
        let ok = key.withUnsafeBytes { keyBytes in
            EVP_CipherInit_ex(context, AESGCM.fetched.cipher, nil,
                              keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), nil, 1)
        }
        guard ok == 1 else {
            throw MAMError.internalError("cannot initialise AES-256-GCM")
        }
    }

    deinit { EVP_CIPHER_CTX_free(context) }

    /// Encrypts `plaintext` into `ciphertext` (same length) and writes the 16-byte tag to `tag`.
    /// - Parameters:
    ///   - nonce: 12 bytes, never reused with the same key.
    ///   - aad: additional authenticated data (may be empty).
    /// - Throws: `MAMError.failedToEncrypt` if OpenSSL fails.
    public func seal(nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
                     plaintext: UnsafeRawBufferPointer, ciphertext: UnsafeMutableRawPointer,
                     tag: UnsafeMutableRawPointer) throws {
        precondition(nonce.count == AESGCM.nonceSize)
        var outLength: Int32 = 0
        guard EVP_CipherInit_ex(context, nil, nil, nil, nonce.baseAddress?.assumingMemoryBound(to: UInt8.self), 1) == 1 else {
            throw MAMError.failedToEncrypt("cipher init")
        }
        if aad.count > 0 {
            guard EVP_CipherUpdate(context, nil, &outLength, aad.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(aad.count)) == 1 else {
                throw MAMError.failedToEncrypt("aad")
            }
        }
        if plaintext.count > 0 {
            guard EVP_CipherUpdate(context, ciphertext.assumingMemoryBound(to: UInt8.self), &outLength,
                                   plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(plaintext.count)) == 1,
                  Int(outLength) == plaintext.count else {
                throw MAMError.failedToEncrypt("update")
            }
        }
        guard EVP_CipherFinal_ex(context, nil, &outLength) == 1,
              EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(AESGCM.tagSize), tag) == 1 else {
            throw MAMError.failedToEncrypt("final")
        }
    }

    /// Decrypts and authenticates. Writes plaintext only into `plaintext` (same length as
    /// `ciphertext`); on failure the output must be discarded by the caller.
    /// - Returns: `true` when the tag verifies, `false` when the data or AAD was altered.
    /// - Throws: `MAMError.failedToDecrypt` if OpenSSL itself fails.
    public func open(nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
                     ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer,
                     plaintext: UnsafeMutableRawPointer) throws -> Bool {
        precondition(nonce.count == AESGCM.nonceSize && tag.count == AESGCM.tagSize)
        var outLength: Int32 = 0
        guard EVP_CipherInit_ex(context, nil, nil, nil, nonce.baseAddress?.assumingMemoryBound(to: UInt8.self), 0) == 1 else {
            throw MAMError.failedToDecrypt("cipher init")
        }
        if aad.count > 0 {
            guard EVP_CipherUpdate(context, nil, &outLength, aad.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(aad.count)) == 1 else {
                throw MAMError.failedToDecrypt("aad")
            }
        }
        if ciphertext.count > 0 {
            guard EVP_CipherUpdate(context, plaintext.assumingMemoryBound(to: UInt8.self), &outLength,
                                   ciphertext.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(ciphertext.count)) == 1 else {
                throw MAMError.failedToDecrypt("update")
            }
        }
        guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(AESGCM.tagSize), UnsafeMutableRawPointer(mutating: tag.baseAddress)) == 1 else {
            throw MAMError.failedToDecrypt("set tag")
        }
        return EVP_CipherFinal_ex(context, nil, &outLength) == 1
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

/// An `EVP_CIPHER` fetched once and kept for the life of the process; OpenSSL allows one
/// fetched cipher to be shared by contexts on any thread.
private final class FetchedCipher: @unchecked Sendable {
    let cipher: OpaquePointer?

    init() {
        cipher = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil) ?? EVP_aes_256_gcm()
    }
}
