import COpenSSL
import Foundation
import Synchronization

/// A 256-bit secret key (KEK, account key or file key).
///
/// The bytes live in a `SecretBuffer` of our own that is wiped (`SecureWipe`) when the
/// key goes away; they are never printed (`description` shows only the length).
public final class SymmetricKey: @unchecked Sendable, CustomStringConvertible {
    /// Key length in bytes (AES-256).
    public static let byteCount = 32
    private let storage: SecretBuffer
    /// The block cipher of the file this key encrypts, kept between calls
    /// (`BlockCipher.take`/`keep`); its key schedule goes with the key.
    let blockCiphers = Mutex<BlockCipher?>(nil)
    /// The AES-GCM context of an account key, which wraps and unwraps file keys, kept between
    /// calls (`withCipher`); its key schedule goes with the key.
    let keptCipher = Mutex<KeptCipher?>(nil)

    /// Copies `bytes` (exactly 32) into a new key.
    /// - Throws: `MAMError.invalidArguments` for a wrong length.
    public init<Bytes: Collection>(bytes: Bytes) throws where Bytes.Element == UInt8 {
        guard bytes.count == SymmetricKey.byteCount else {
            throw MAMError.invalidArguments("a key is \(SymmetricKey.byteCount) bytes, got \(bytes.count)")
        }
        storage = SecretBuffer(count: SymmetricKey.byteCount)
        storage.bytes.copyBytes(from: bytes)
    }

    /// A key whose bytes are `secret` itself (exactly 32 bytes), without a copy: unwrapping
    /// and key derivation write straight into the buffer the key then keeps.
    /// - Throws: `MAMError.invalidArguments` for a wrong length.
    init(adopting secret: SecretBuffer) throws {
        guard secret.count == SymmetricKey.byteCount else {
            throw MAMError.invalidArguments("a key is \(SymmetricKey.byteCount) bytes, got \(secret.count)")
        }
        storage = secret
    }

    /// A fresh random key from OpenSSL's CSPRNG.
    /// - Throws: `MAMError.internalError` when the CSPRNG fails.
    public static func random() throws -> SymmetricKey {
        let secret = SecretBuffer(count: SymmetricKey.byteCount)
        try SecureRandom.fill(secret.bytes)
        return try SymmetricKey(adopting: secret)
    }

    /// Runs `body` with read access to the raw key bytes (32 bytes). Do not let them escape.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(storage.bytes))
    }

    /// Drops the block cipher kept with this key since its last read or write
    /// (`BlockCipher.take`/`keep`), freeing its OpenSSL context and nonce pool: what an entry
    /// whose last handle closed gives back. The next read or write sets a new one up.
    public func forgetBlockCipher() {
        // Taken out under the lock, freed after it.
        _ = blockCiphers.withLock { $0.take() }
    }

    /// Whether a block cipher is kept with this key (for tests).
    var keepsBlockCipher: Bool { blockCiphers.withLock { $0 != nil } }

    /// A copy of the key bytes, for tests that compare keys; wipe it after use.
    func copyBytes() -> [UInt8] { Array(storage.bytes) }

    public var description: String { "SymmetricKey(\(SymmetricKey.byteCount * 8) bits)" }
}

/// Random bytes from OpenSSL's CSPRNG (`RAND_bytes`).
public enum SecureRandom {
    /// `count` random bytes.
    /// - Throws: `MAMError.internalError` when `RAND_bytes` fails.
    public static func bytes(_ count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        try bytes.withUnsafeMutableBytes { try fill($0) }
        return bytes
    }

    /// Fills `buffer` with random bytes.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws {
        guard buffer.count > 0 else { return }
        guard RAND_bytes(buffer.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(buffer.count)) == 1 else {
            throw MAMError.internalError("the random number generator failed")
        }
    }
}
