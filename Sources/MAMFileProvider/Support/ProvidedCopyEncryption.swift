import COpenSSL
import Foundation
import MAMProtection
import MAMSystem

/// Encrypts a provided copy straight into an open, empty file: the bytes
/// `FileProtectionManager.encryptFile(path:forAccountId:output:)` writes, without its own temp
/// file, fsync and rename, so the caller decides when the copy is made durable (the replicated
/// pass makes a whole batch durable at once: `ProvidedCopyBatch`).
///
/// Only the encryption is here; whether a provided copy is encrypted at all is
/// `ProviderRules.shouldEncryptProvidedCopy`'s decision, and `ProviderRules.writeProvidedCopy`
/// is the one caller.
enum ProvidedCopyEncryption {
    /// Plaintext bytes encrypted per write (a multiple of the 4 KiB block, so every write but the
    /// last fills whole blocks and nothing is read back).
    static let chunkSize = 1 << 20

    /// Writes the plaintext of `plain` into `output`, encrypted for `owner` (a new file id and
    /// file key, wrapped under the account's current key). As with `encryptFile`, bytes that
    /// are themselves a protected file are read as their plaintext (decrypted with the state's
    /// keys, or refused).
    ///
    /// Mirrors `IntuneMAMFileProtectionManager encryptFile:forAccountId:` for a destination the
    /// caller already holds open.
    ///
    /// - Parameters:
    ///   - plain: the plain bytes (an in-memory `PlainBuffer`); only read.
    ///   - owner: the canonical accountId of a managed account that is not wiped (as
    ///     `ProtectionContext.resolveOwner` returns it; the caller checks `isWiped`).
    ///   - output: an open read-write descriptor of an empty regular file; written from offset 0
    ///     (header, then the encrypted blocks); neither synced nor closed here.
    ///   - context: the protection state.
    /// - Throws: `.keyUnavailable` (no key), `.unmanagedIdentity`, `.authenticationFailed` (a protected source that fails to decrypt),
    ///   `.system` on I/O errors (ENOSPC, EIO). `output` then holds a partial copy the caller
    ///   removes.
    static func encrypt(_ plain: PlainBuffer, forAccountId owner: String, into output: Int32,
                        context: ProtectionContext) throws {
        let (header, fileKey) = try context.newFileHeader(owner: owner)
        guard let header, let fileKey, header.isEncrypted else {
            // A policy that encrypts provided copies but not the account's own new files: the
            // only public way to an encrypted header then is encryptFile, here through memory
            // (ciphertext only; the plain bytes are in memory already).
            try context.files.encryptFile(path: plain.path, forAccountId: owner, toStream: output)
            return
        }
        let sourceHeader = try ProtectedFileHeader.read(fd: plain.fd)
        let source = try ProtectedFileContent(fd: plain.fd, header: sourceHeader,
                                              fileKey: try sourceHeader.flatMap { try context.fileKey(for: $0) })
        let destination = try ProtectedFileContent(fd: output, header: header, fileKey: fileKey)
        let size = try source.plaintextSize()
        // No bigger than the file: the buffer is wiped afterwards, and most files are small.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(min(Int64(chunkSize), max(size, 1))), alignment: 16)
        defer {
            SecureWipe.bytes(buffer.baseAddress, count: buffer.count)
            buffer.deallocate()
        }
        try destination.writeHeaderIfMissing(reserve: false)
        var offset: Int64 = 0
        while offset < size {
            let n = try source.read(into: buffer, at: offset)
            if n == 0 { break }
            try destination.write(UnsafeRawBufferPointer(rebasing: buffer[0..<n]), at: offset)
            offset += Int64(n)
        }
    }
}
