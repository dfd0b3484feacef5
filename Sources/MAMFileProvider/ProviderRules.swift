import CSystem
import Foundation
import MAMProtection

/// The file-provider rules of MISSION.md ("File provider rules"), each enforced here and
/// nowhere else. Both providers and the commands call these; none of them decides on its own.
///
/// | MISSION rule                                                          | function                      |
/// |-----------------------------------------------------------------------|-------------------------------|
/// | providing / fetchContents: encrypt the copy handed out when the owner's policy says `shouldFileProviderEncryptFiles`; the cloud copy stays plain | `writeProvidedCopy` (decision: `shouldEncryptProvidedCopy`) |
/// | importing / createItem / modifyItem: encrypted contents are decrypted to a copy path and the plain copy is uploaded | `plainCopyForUpload` |
/// | importing / createItem / modifyItem: ask the target owner's `canReceiveSharedFile` first and refuse if it says no | `checkCanReceive` |
public enum ProviderRules {
    // MARK: Rule: encrypt on provide

    /// Whether the copy of an item handed to the local side is encrypted: exactly when the
    /// owner's policy says `shouldFileProviderEncryptFiles` (false for unmanaged owners).
    ///
    /// MISSION rule: "providing an item (on first open): if the owner's policy says
    /// `shouldFileProviderEncryptFiles`, encrypt the local copy it hands out for the owner's
    /// account" — and the same for the replicated `fetchContents`.
    /// Mirrors `IntuneMAMPolicy shouldFileProviderEncryptFiles`.
    public static func shouldEncryptProvidedCopy(owner: String, context: ProtectionContext) -> Bool {
        context.policyEvaluator.shouldFileProviderEncryptFiles(accountId: owner)
    }

    /// Makes the local copy of an item from its plain remote bytes: encrypted for `owner` when
    /// `shouldEncryptProvidedCopy` says so (`encryptFile(path:forAccountId:output:)`), else
    /// tagged plain with `owner` (header + the bytes unchanged). The plain download is only
    /// read; the remote is never touched.
    ///
    /// - Parameters:
    ///   - plainFile: the downloaded plain bytes (a temp file).
    ///   - owner: canonical accountId ("" = unmanaged).
    ///   - destination: an existing temp file in the local root's filesystem; replaced by the
    ///     provided copy (mode 0600; the caller sets the final mode and renames it into place).
    /// - Throws: `.keyUnavailable` when the owner was wiped (nothing is handed out for it any
    ///   more); what `encryptFile` throws; `.system` on I/O errors.
    static func writeProvidedCopy(plainFile: String, owner: String, destination: String, context: ProtectionContext) throws {
        if context.isWiped(owner: owner) {
            throw MAMError.keyUnavailable("account \(owner) was wiped; its provider items are not provided any more")
        }
        if shouldEncryptProvidedCopy(owner: owner, context: context) {
            try context.files.encryptFile(path: plainFile, forAccountId: owner, output: destination)
            return
        }
        let header = try ProtectedFileHeader(plainOwner: owner).encoded()
        let source = open(plainFile, O_RDONLY | O_CLOEXEC)
        guard source >= 0 else { throw MAMError.fromErrno("open \(plainFile)") }
        defer { close(source) }
        let out = open(destination, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW)
        guard out >= 0 else { throw MAMError.fromErrno("open \(destination)") }
        defer { close(out) }
        let written = header.withUnsafeBytes { pwrite(out, $0.baseAddress, $0.count, 0) }
        guard written == header.count else { throw MAMError.fromErrno("write header of \(destination)") }
        try FileSystem.copyBytes(from: source, to: out, at: Int64(header.count))
        guard fsync(out) == 0 else { throw MAMError.fromErrno("fsync \(destination)") }
    }

    // MARK: Rule: canReceiveSharedFile before upload

    /// Refuses an incoming file the receiving account may not receive.
    ///
    /// MISSION rule: "importing a document ... ask the target owner's `canReceiveSharedFile`
    /// first and refuse if it says no", and for the replicated `createItem`/`modifyItem`:
    /// "check the target owner's `canReceiveSharedFile`". Mirrors
    /// `IntuneMAMPolicy canReceiveSharedFile:` (owner from `protectionInfo`).
    ///
    /// - Parameters:
    ///   - fileOwner: the file's owner (nil untagged, "" unmanaged-tagged).
    ///   - receiver: the domain's account.
    ///   - path: for the message.
    /// - Throws: `MAMError.policyDenied` (errno EACCES, exit 77) when refused.
    public static func checkCanReceive(fileOwner: String?, receiver: String, path: String, context: ProtectionContext) throws {
        guard context.policyEvaluator.canReceiveSharedFile(fileOwner: fileOwner, receiver: receiver) else {
            let owner = fileOwner.map { $0.isEmpty ? "unmanaged" : $0 } ?? "untagged"
            throw MAMError.policyDenied("\(path) (owner: \(owner)) may not be received by \(receiver) (receiveData policy)")
        }
    }

    // MARK: Rule: decrypt before upload

    /// The plain bytes to upload for a local file, in a new temp file: the receive check
    /// (`checkCanReceive`) first, then a protected file (encrypted or plain-tagged) is
    /// decrypted to the copy path with `decryptFile(path:toCopyPath:)`, an untagged one copied.
    /// The local file is never changed. The copy is verified not to start with the
    /// protected-file magic, so ciphertext or a header can never reach the remote.
    ///
    /// MISSION rule: "importing a document: if it is encrypted, decrypt it to a copy path and
    /// upload the copy" and "creating an item ... with contents (and modifying one): if the
    /// contents are encrypted, decrypt to a copy; ... upload the plain copy".
    ///
    /// - Returns: the plain copy and the file's owner (nil untagged).
    /// - Throws: `.policyDenied` (refused: nothing was copied), `.fileNotFound`,
    ///   `.keyUnavailable` / `.authenticationFailed` (cannot decrypt), `.failedToDecrypt` for a
    ///   file protected twice, `.cannotCreateOutput`.
    static func plainCopyForUpload(localPath: String, receiver: String, layout: ProviderLayout,
                                   context: ProtectionContext) throws -> (copy: TemporaryFile, owner: String?) {
        let fd = open(localPath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { throw MAMError.fileNotFound(localPath) }
            throw MAMError.fromErrno("open \(localPath)")
        }
        defer { close(fd) }
        let header = try ProtectedFileHeader.read(fd: fd)
        try checkCanReceive(fileOwner: header?.owner, receiver: receiver, path: localPath, context: context)
        let copy = try layout.makeTemporaryFile(name: PathName.lastComponent(of: localPath))
        if header != nil {
            try context.files.decryptFile(path: localPath, toCopyPath: copy.path)
        } else {
            let out = open(copy.path, O_WRONLY | O_CLOEXEC)
            guard out >= 0 else { throw MAMError.fromErrno("open \(copy.path)") }
            defer { close(out) }
            try FileSystem.copyBytes(from: fd, to: out)
        }
        chmod(copy.path, 0o600)
        if FileSystem.startsWithMagic(copy.path) {
            throw MAMError.failedToDecrypt("\(localPath) is protected twice; refusing to upload it")
        }
        return (copy, header?.owner)
    }
}
