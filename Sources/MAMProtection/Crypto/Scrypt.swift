import COpenSSL
import Foundation

/// Passphrase-based key derivation with scrypt (OpenSSL `EVP_PBE_scrypt`).
public struct ScryptParameters: Equatable, Sendable, Codable {
    /// CPU/memory cost (power of two).
    public var n: UInt64
    public var r: UInt64
    public var p: UInt64
    /// Random salt, 32 bytes.
    public var salt: [UInt8]

    /// Defaults for a new state directory: N=2^17, r=8, p=1 (128 MiB, ~0.4 s here), the OWASP
    /// minimum. States made with other parameters keep them: they are stored with the state.
    public static func fresh() throws -> ScryptParameters {
        ScryptParameters(n: 1 << 17, r: 8, p: 1, salt: try SecureRandom.bytes(32))
    }

    /// Derives a 256-bit key from `passphrase` (bytes as read from the passphrase file).
    /// - Throws: `MAMError.internalError` when OpenSSL rejects the parameters.
    public func deriveKey(passphrase: [UInt8]) throws -> SymmetricKey {
        try passphrase.withUnsafeBytes { try deriveKey(passphraseBytes: $0) }
    }

    /// `deriveKey(passphrase:)` for a passphrase held in memory the caller wipes; the key is
    /// derived straight into the buffer the returned key keeps.
    func deriveKey(passphraseBytes pass: UnsafeRawBufferPointer) throws -> SymmetricKey {
        let out = SecretBuffer(count: SymmetricKey.byteCount)
        // An empty passphrase has no buffer: OpenSSL wants a pointer, valid for the whole call.
        var empty: CChar = 0
        let ok = salt.withUnsafeBufferPointer { s in
            withUnsafePointer(to: &empty) { fallback in
                EVP_PBE_scrypt(pass.baseAddress?.assumingMemoryBound(to: CChar.self) ?? fallback, pass.count,
                               s.baseAddress, s.count, n, r, p, 1 << 30,
                               out.bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), out.count)
            }
        }
        guard ok == 1 else { throw MAMError.internalError("scrypt key derivation failed") }
        return try SymmetricKey(adopting: out)
    }
}
