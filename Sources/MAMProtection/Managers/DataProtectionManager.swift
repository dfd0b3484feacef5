import Foundation
import MAMSystem

/// Per-buffer protection. A protected buffer has exactly the protected-file format
/// (docs/FORMAT.md): a managed owner's buffer is encrypted, an unmanaged owner's buffer gets a
/// plain header naming the identity.
///
/// Mirrors `IntuneMAMDataProtectionManager` (protect:forAccountId:, unprotect:,
/// protectionInfo:, and the base64 string variants).
public struct DataProtectionManager: Sendable {
    let context: ProtectionContext

    /// Protects `data` for `accountId` ("" = unmanaged identity).
    /// - Throws: `.unknownAccount`, `.keyUnavailable`, `.invalidArguments`.
    public func protect(_ data: Data, accountId: String) throws -> Data {
        let owner = try context.resolveOwner(accountId)
        let header: ProtectedFileHeader
        let fileKey: SymmetricKey?
        if context.policyEvaluator.isManaged(accountId: owner) {
            (header, fileKey) = try context.newEncryptedHeader(owner: owner)
        } else {
            header = try ProtectedFileHeader(plainOwner: owner)
            fileKey = nil
        }
        return try withMemoryFile { fd in
            let content = try ProtectedFileContent(fd: fd, header: header, fileKey: fileKey)
            try content.writeHeaderIfMissing()
            try data.withUnsafeBytes { try content.write($0, at: 0) }
            return try readAll(fd)
        }
    }

    /// The plaintext of a protected buffer; input that was never protected comes back unchanged.
    /// - Throws: `.authenticationFailed` (corrupt or tampered, or a plain-tagged buffer that
    ///   claims a managed account: such buffers are always encrypted), `.keyUnavailable`.
    public func unprotect(_ data: Data) throws -> Data {
        let header: ProtectedFileHeader? = try data.withUnsafeBytes { try ProtectedFileHeader.decode($0) }
        guard let header else { return data }
        if !header.isEncrypted, context.policyEvaluator.isManaged(accountId: header.owner) {
            // protect() encrypts every buffer of a managed account, and a plain header is not
            // authenticated: this one was forged (or edited) to pass data off as managed.
            throw MAMError.authenticationFailed("plain-tagged data claims the managed account \(header.owner); data of a managed account is always encrypted, so the header is forged")
        }
        let fileKey = try context.fileKey(for: header)
        return try withMemoryFile { fd in
            try data.withUnsafeBytes { try FileIO.pwriteFully(fd, $0, at: 0) }
            let content = try ProtectedFileContent(fd: fd, header: header, fileKey: fileKey)
            let size = try content.plaintextSize()
            var out = Data(count: Int(size))
            let n = try out.withUnsafeMutableBytes { try content.read(into: $0, at: 0) }
            guard n == Int(size) else { throw MAMError.authenticationFailed("protected data is truncated") }
            return out
        }
    }

    /// The owner of a protected buffer; nil when it was never protected.
    /// - Throws: `.authenticationFailed` for a malformed header.
    public func protectionInfo(_ data: Data) throws -> String? {
        try data.withUnsafeBytes { try ProtectedFileHeader.decode($0) }?.owner
    }

    /// `protect` for strings: UTF-8 in, base64 out.
    public func protect(string: String, accountId: String) throws -> String {
        try protect(Data(string.utf8), accountId: accountId).base64EncodedString()
    }

    /// `unprotect` for base64 strings produced by `protect(string:accountId:)`.
    /// - Throws: `.invalidArguments` for text that is not base64 or not UTF-8 after unprotecting.
    public func unprotect(string: String) throws -> String {
        guard let data = Data(base64Encoded: string.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw MAMError.invalidArguments("input is not base64")
        }
        guard let text = String(data: try unprotect(data), encoding: .utf8) else {
            throw MAMError.invalidArguments("unprotected data is not UTF-8 text")
        }
        return text
    }

    private func withMemoryFile<T>(_ body: (Int32) throws -> T) throws -> T {
        let memory = try FileIO.memoryFile(name: "mamfs-data")
        let fd = memory.rawValue
        return try body(fd)
    }

    private func readAll(_ fd: Int32) throws -> Data {
        let size = try FileIO.size(fd)
        var out = Data(count: Int(size))
        _ = try out.withUnsafeMutableBytes { try FileIO.preadFully(fd, $0, at: 0) }
        return out
    }
}
