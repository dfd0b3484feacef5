import COpenSSL
import Foundation

/// SHA-256 through OpenSSL EVP, in one call or streamed from a descriptor.
///
/// Used for executable digests (the `sha256` of a `managedApps` rule) and anywhere else a
/// plain digest is needed. Mirrors `EVP_Digest` / `sha256sum`.
public enum SHA256 {
    /// Digest length in bytes.
    public static let size = 32

    /// The digest of `bytes` (32 bytes).
    /// - Throws: `MAMError.internalError` if OpenSSL fails.
    public static func digest(_ bytes: UnsafeRawBufferPointer) throws -> [UInt8] {
        try streaming { update in try update(bytes) }
    }

    /// The digest of every byte of the open descriptor `fd` from offset 0 (read with pread
    /// in 64 KiB chunks; the descriptor's offset is not moved).
    /// - Throws: `MAMError.system` when a read fails, `MAMError.internalError` if OpenSSL fails.
    public static func digest(fileDescriptor fd: Int32) throws -> [UInt8] {
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
        defer { chunk.deallocate() }
        return try streaming { update in
            var offset: Int64 = 0
            while true {
                let n = try FileIO.preadFully(fd, chunk, at: offset)
                if n == 0 { return }
                try update(UnsafeRawBufferPointer(rebasing: chunk[0..<n]))
                offset += Int64(n)
            }
        }
    }

    /// 64 lowercase hex digits of `digest`.
    public static func hex(_ digest: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(digest.count * 2)
        for byte in digest {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xf)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Runs `body` with an update function over one digest context and returns the digest.
    private static func streaming(_ body: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void) throws -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw MAMError.internalError("cannot allocate a digest context") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else { throw MAMError.internalError("cannot initialise SHA-256") }
        try body { bytes in
            guard bytes.count == 0 || EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1 else {
                throw MAMError.internalError("SHA-256 update")
            }
        }
        var out = [UInt8](repeating: 0, count: size)
        var length: UInt32 = 0
        let ok = out.withUnsafeMutableBytes { EVP_DigestFinal_ex(context, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), &length) }
        guard ok == 1, length == UInt32(size) else { throw MAMError.internalError("SHA-256 final") }
        return out
    }
}
