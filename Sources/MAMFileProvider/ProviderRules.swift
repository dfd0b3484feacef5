import COpenSSL
import Foundation
import MAMSystem
import MAMProtection

/// The file-provider rules (encrypt on providing, decrypt to a copy and ask canReceiveSharedFile
/// on import, plain copies only to the remote), each enforced here and
/// nowhere else. Both providers and the commands call these; none of them decides on its own.
///
/// | rule                                                                  | function                      |
/// |-----------------------------------------------------------------------|-------------------------------|
/// | providing / fetchContents: encrypt the copy handed out when the owner's policy says `shouldFileProviderEncryptFiles`; the cloud copy stays plain | `writeProvidedCopy` (decision: `shouldEncryptProvidedCopy`) |
/// | importing / createItem / modifyItem: encrypted contents are decrypted to a copy path and the plain copy is uploaded | `plainCopyForUpload` |
/// | importing / createItem / modifyItem: ask the target owner's `canReceiveSharedFile` first and refuse if it says no | `checkCanReceive` |
public enum ProviderRules {
    // MARK: Rule: encrypt on provide

    /// Whether the copy of an item handed to the local side is encrypted: exactly when the
    /// owner's policy says `shouldFileProviderEncryptFiles` (false for unmanaged owners).
    ///
    /// Rule: "providing an item (on first open): if the owner's policy says
    /// `shouldFileProviderEncryptFiles`, encrypt the local copy it hands out for the owner's
    /// account" — and the same for the replicated `fetchContents`.
    /// Mirrors `IntuneMAMPolicy shouldFileProviderEncryptFiles`.
    public static func shouldEncryptProvidedCopy(owner: String, context: ProtectionContext) -> Bool {
        context.policyEvaluator.shouldFileProviderEncryptFiles(accountId: owner)
    }

    /// Makes the local copy of an item from its plain remote bytes: encrypted for `owner` when
    /// `shouldEncryptProvidedCopy` says so (`ProvidedCopyEncryption`, the bytes
    /// `encryptFile(path:forAccountId:output:)` writes), else tagged plain with `owner` (header +
    /// the bytes unchanged). The plain download is only read; the remote is never touched.
    ///
    /// - Parameters:
    ///   - plain: the downloaded plain bytes, in memory (never on the local disk).
    ///   - owner: canonical accountId ("" = unmanaged).
    ///   - output: an open read-write descriptor of an empty temp file in the local root's
    ///     filesystem (0600), written from offset 0. Encrypted as it is written when the policy
    ///     encrypts, so no plaintext reaches it. Not synced: the caller makes it durable (fsync,
    ///     or a batch's syncfs: `ProvidedCopyBatch`) before renaming it into place, and sets the
    ///     final mode.
    /// - Throws: `.keyUnavailable` when the owner was wiped (nothing is handed out for it any
    ///   more); what `ProvidedCopyEncryption.encrypt` throws; `.system` on I/O errors. `output`
    ///   may then hold a partial copy, which the caller removes.
    static func writeProvidedCopy(plain: PlainBuffer, owner: String, into output: Int32, context: ProtectionContext) throws {
        if context.isWiped(owner: owner) {
            throw MAMError.keyUnavailable("account \(owner) was wiped; its provider items are not provided any more")
        }
        if shouldEncryptProvidedCopy(owner: owner, context: context) {
            try ProvidedCopyEncryption.encrypt(plain, forAccountId: owner, into: output, context: context)
            return
        }
        let header = try ProtectedFileHeader(plainOwner: owner)
        let bytes = header.encoded()
        let written = bytes.withUnsafeBytes { pwrite(output, $0.baseAddress, $0.count, 0) }
        guard written == bytes.count else { throw MAMError.fromErrno("write the header of a provided copy") }
        HeaderHint.store(header, fd: output)
        try FileSystem.copyBytes(from: plain.fd, to: output, at: Int64(bytes.count))
    }

    // MARK: Rule: canReceiveSharedFile before upload

    /// Refuses an incoming file the receiving account may not receive.
    ///
    /// Rule: "importing a document ... ask the target owner's `canReceiveSharedFile`
    /// first and refuse if it says no", and for the replicated `createItem`/`modifyItem`:
    /// "check the target owner's `canReceiveSharedFile`". Mirrors
    /// `IntuneMAMPolicy canReceiveSharedFile:` (owner from `protectionInfo`).
    ///
    /// - Parameters:
    ///   - fileOwner: the file's owner (nil untagged, "" unmanaged-tagged).
    ///   - receiver: the domain's account.
    ///   - path: for the message.
    /// - Throws: `MAMError.policyDenied` (errno EACCES, `ExitCode.noPerm`) when refused.
    public static func checkCanReceive(fileOwner: String?, receiver: String, path: String, context: ProtectionContext) throws {
        guard context.policyEvaluator.canReceiveSharedFile(fileOwner: fileOwner, receiver: receiver) else {
            let owner = fileOwner.map { $0.isEmpty ? "unmanaged" : $0 } ?? "untagged"
            throw MAMError.policyDenied("\(path) (owner: \(owner)) may not be received by \(receiver) (receiveData policy)")
        }
    }

    // MARK: Rule: decrypt before upload

    /// The plain bytes to upload for a local file, in a new temp file: the receive check
    /// (`checkCanReceive`) first, then a protected file (encrypted or plain-tagged) is
    /// decrypted into the copy (as `decryptFile(path:toCopyPath:)` would), an untagged one copied.
    /// The local file is never changed. The copy is verified not to start with the
    /// protected-file magic, so ciphertext or a header can never reach the remote.
    ///
    /// Rule: "importing a document: if it is encrypted, decrypt it to a copy path and
    /// upload the copy" and "creating an item ... with contents (and modifying one): if the
    /// contents are encrypted, decrypt to a copy; ... upload the plain copy".
    ///
    /// The copy is in memory (`PlainBuffer`, a memfd): plaintext of a managed file never
    /// reaches the local disk, and a killed run leaves none behind.
    ///
    /// - Returns: the plain copy and the file's owner (nil untagged).
    /// - Throws: `.policyDenied` (refused: nothing was copied), `.fileNotFound`,
    ///   `.keyUnavailable` / `.authenticationFailed` (cannot decrypt), `.failedToDecrypt` for a
    ///   file protected twice, `.cannotCreateOutput`.
    static func plainCopyForUpload(localPath: String, receiver: String, layout: ProviderLayout,
                                   context: ProtectionContext) throws -> (copy: PlainBuffer, owner: String?) {
        if let relative = layout.relativePath(of: localPath), !relative.isEmpty {
            return try plainCopyForUpload(relative: relative, in: try layout.confined(), receiver: receiver, context: context)
        }
        // A source outside the root (import): the caller named it, but a FIFO or device is
        // still refused without blocking.
        let fd = open(localPath, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT { throw MAMError.fileNotFound(localPath) }
            throw MAMError.fromErrno("open \(localPath)")
        }
        defer { close(fd) }
        return try plainCopyForUpload(fd: fd, path: localPath, receiver: receiver, context: context)
    }

    /// `plainCopyForUpload` for the file `relative` below `root` (opened without following a
    /// symlink; a FIFO, socket or device is refused without blocking).
    static func plainCopyForUpload(relative: String, in root: ConfinedDirectory, receiver: String,
                                   context: ProtectionContext) throws -> (copy: PlainBuffer, owner: String?) {
        let fd = root.openExisting(relative, O_RDONLY)
        guard fd >= 0 else {
            if errno == ENOENT { throw MAMError.fileNotFound(relative) }
            throw MAMError.fromErrno("open \(relative)")
        }
        defer { close(fd) }
        return try plainCopyForUpload(fd: fd, path: relative, receiver: receiver, context: context)
    }

    private static func plainCopyForUpload(fd: Int32, path: String, receiver: String,
                                           context: ProtectionContext) throws -> (copy: PlainBuffer, owner: String?) {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw MAMError.fromErrno("stat \(path)") }
        guard FileSystem.isRegular(st) else { throw MAMError.invalidArguments("\(path) is not a regular file") }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        let header = try ProtectedFileHeader.read(fd: fd)
        try checkCanReceive(fileOwner: header?.owner, receiver: receiver, path: path, context: context)
        let copy = try PlainBuffer(name: "mamfs-upload")
        if let header {
            let content = try ProtectedFileContent(fd: fd, header: header, fileKey: try context.fileKey(for: header))
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
            defer {
                SecureWipe.bytes(buffer.baseAddress, count: buffer.count)
                buffer.deallocate()
            }
            let size = try content.plaintextSize()
            var offset: Int64 = 0
            while offset < size {
                let n = try content.read(into: buffer, at: offset)
                if n == 0 { break }
                var done = 0
                while done < n {
                    let w = pwrite(copy.fd, buffer.baseAddress! + done, n - done, off_t(offset) + off_t(done))
                    if w < 0 {
                        if errno == EINTR { continue }
                        throw MAMError.cannotCreateOutput("upload copy of \(path): \(String(cString: strerror(errno)))")
                    }
                    done += w
                }
                offset += Int64(n)
            }
        } else {
            try FileSystem.copyBytes(from: fd, to: copy.fd)
        }
        if FileSystem.startsWithMagic(fd: copy.fd) {
            throw MAMError.failedToDecrypt("\(path) is protected twice; refusing to upload it")
        }
        return (copy, header?.owner)
    }
}
