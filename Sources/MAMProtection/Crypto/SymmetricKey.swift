import COpenSSL
import Foundation

/// A 256-bit secret key (KEK, account key or file key).
///
/// The bytes live in a buffer of our own that is wiped with `OPENSSL_cleanse` when the key
/// goes away; they are never printed (`description` shows only the length).
public final class SymmetricKey: @unchecked Sendable, CustomStringConvertible {
    /// Key length in bytes (AES-256).
    public static let byteCount = 32
    private let storage: UnsafeMutableRawBufferPointer

    /// Copies `bytes` (exactly 32) into a new key.
    /// - Throws: `MAMError.invalidArguments` for a wrong length.
    public init<Bytes: Collection>(bytes: Bytes) throws where Bytes.Element == UInt8 {
        guard bytes.count == SymmetricKey.byteCount else {
            throw MAMError.invalidArguments("a key is \(SymmetricKey.byteCount) bytes, got \(bytes.count)")
        }
        storage = UnsafeMutableRawBufferPointer.allocate(byteCount: SymmetricKey.byteCount, alignment: 16)
        storage.copyBytes(from: bytes)
    }

    /// A fresh random key from OpenSSL's CSPRNG.
    /// - Throws: `MAMError.internalError` when the CSPRNG fails.
    public static func random() throws -> SymmetricKey {
        var bytes = try SecureRandom.bytes(SymmetricKey.byteCount)
        defer { bytes.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) } }
        return try SymmetricKey(bytes: bytes)
    }

    /// Runs `body` with read access to the raw key bytes (32 bytes). Do not let them escape.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(storage))
    }

    /// The key bytes as an array, for wrapping. Callers should wipe the copy after use.
    func copyBytes() -> [UInt8] { Array(storage) }

    public var description: String { "SymmetricKey(\(SymmetricKey.byteCount * 8) bits)" }

    deinit {
        OPENSSL_cleanse(storage.baseAddress, storage.count)
        storage.deallocate()
    }
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
