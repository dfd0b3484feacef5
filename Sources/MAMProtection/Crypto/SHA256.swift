import COpenSSL
import Foundation
import MAMSystem

/// SHA-256 through OpenSSL EVP, as lowercase hex text.
///
/// Used for the audit log's hash chain and for `managedApps` digests of executables
/// (the digest `sha256sum` prints).
public enum SHA256 {
    /// The digest length in bytes.
    public static let byteCount = 32

    /// The SHA-256 of the concatenation of `parts`, as 64 lowercase hex digits.
    /// - Throws: `MAMError.internalError` when OpenSSL cannot compute it.
    public static func hex(of parts: [UInt8]...) throws -> String {
        let hasher = try DigestContext()
        for part in parts { try part.withUnsafeBytes { try hasher.update($0) } }
        return try hasher.finalHex()
    }

    /// The SHA-256 of the file at `path`, read in 1 MiB chunks, as 64 lowercase hex digits
    /// (what `sha256sum` prints for it).
    /// - Throws: `MAMError.system` when the file cannot be opened or read (symbolic links are
    ///   followed); `MAMError.internalError` when OpenSSL fails.
    public static func hex(ofFileAt path: String) throws -> String {
        let file: FileDescriptor
        do { file = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC) } catch {
            throw MAMError.system("open \(path)", errno: error.rawValue)
        }
        return try hex(ofDescriptor: file.rawValue)
    }

    /// The SHA-256 of the bytes of the open file `fd` from offset 0 to its end (pread in
    /// 1 MiB chunks; the descriptor's offset is not moved), as 64 lowercase hex digits.
    /// - Throws: `MAMError.system` when a read fails (ESPIPE for a pipe or socket, EISDIR for a
    ///   directory); `MAMError.internalError` when OpenSSL fails.
    public static func hex(ofDescriptor fd: Int32) throws -> String {
        let hasher = try DigestContext()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while true {
            let count = try buffer.withUnsafeMutableBytes { try FileIO.preadFully(fd, $0, at: offset) }
            if count == 0 { break }
            try buffer.withUnsafeBytes { try hasher.update(UnsafeRawBufferPointer(rebasing: $0.prefix(count))) }
            offset += Int64(count)
        }
        return try hasher.finalHex()
    }

    /// One digest computation (an EVP_MD_CTX).
    private final class DigestContext {
        private let context: OpaquePointer

        init() throws {
            guard let context = EVP_MD_CTX_new() else { throw MAMError.internalError("cannot allocate a digest context") }
            self.context = context
            guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else {
                throw MAMError.internalError("cannot initialise SHA-256")
            }
        }

        deinit { EVP_MD_CTX_free(context) }

        func update(_ bytes: UnsafeRawBufferPointer) throws {
            guard bytes.count > 0 else { return }
            guard EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1 else {
                throw MAMError.internalError("SHA-256 update failed")
            }
        }

        func finalHex() throws -> String {
            var digest = [UInt8](repeating: 0, count: SHA256.byteCount)
            var length: UInt32 = 0
            guard EVP_DigestFinal_ex(context, &digest, &length) == 1, Int(length) == SHA256.byteCount else {
                throw MAMError.internalError("SHA-256 final failed")
            }
            let digits = Array("0123456789abcdef".utf8)
            var text = [UInt8]()
            text.reserveCapacity(2 * SHA256.byteCount)
            for byte in digest {
                text.append(digits[Int(byte >> 4)])
                text.append(digits[Int(byte & 0x0f)])
            }
            return String(decoding: text, as: UTF8.self)
        }
    }
}
