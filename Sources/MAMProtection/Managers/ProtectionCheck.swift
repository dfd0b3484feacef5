import Foundation

/// The answer of `FileProtectionManager.verifyProtection`: whether a path is protected for an
/// account, and if not, why (one sentence for the user).
public struct ProtectionCheck: Equatable, Sendable {
    /// The path's owner: an accountId, "" for the unmanaged identity, nil when untagged.
    public let owner: String?
    /// The account checked for: the resolved `--account`, else the path's owner.
    public let account: String?
    /// True when the path is protected for `account`.
    public let isProtected: Bool
    /// Why it is not (nil when it is).
    public let reason: String?
}

/// The answer of `FileProtectionManager.receiveCheck`: whether an account may receive a file,
/// and the policy key that refused it.
public struct ReceiveCheck: Equatable, Sendable {
    /// The file's owner: an accountId, "" for the unmanaged identity, nil when untagged.
    public let owner: String?
    /// The receiving account (resolved).
    public let receiver: String
    /// The file's location (`locations` of the receiver's policy; `LocalDrive` when unlisted).
    public let location: StorageLocation
    /// The refusing policy key (`receiveData` or `openFromLocations`); nil when it may.
    public let deniedBy: String?

    public var isAllowed: Bool { deniedBy == nil }
}

extension FileProtectionManager {
    /// Whether `path` is protected for `account`: tagged with that account and, for a file
    /// whose owner's policy requires file encryption, encrypted. Without `account`, whether it
    /// is protected for its own owner (tagged with an account, not untagged or unmanaged, and
    /// encrypted when that owner's policy requires it). The verify half of `verifyAndProtect:`.
    /// - Parameter account: an accountId, UPN or homeAccountId `OID.TID`; nil for the owner.
    /// An encrypted file counts only when every block authenticates (`authenticateEveryBlock`).
    /// - Throws: `.fileNotFound`; `.authenticationFailed` for a malformed header or a block
    ///   that does not authenticate; `.keyUnavailable`; `.unknownAccount` for an unregistered
    ///   UPN; `.invalidArguments` for a malformed name.
    public func verifyProtection(path: String, account: String?) throws -> ProtectionCheck {
        let info = try info(path: path)
        let expected = try account.map { try context.resolveOwner($0) } ?? info.owner
        func refused(_ reason: String) -> ProtectionCheck {
            ProtectionCheck(owner: info.owner, account: expected, isProtected: false, reason: reason)
        }
        guard let owner = info.owner else { return refused("not protected (untagged)") }
        guard let expected, !expected.isEmpty else {
            return refused(owner.isEmpty ? "not protected (tagged unmanaged)" : "owned by \(owner), not by the unmanaged identity")
        }
        if owner != expected {
            return refused(owner.isEmpty ? "not protected for \(expected) (tagged unmanaged)" : "not protected for \(expected) (owned by \(owner))")
        }
        if !info.isDirectory, !info.encrypted, context.policyEvaluator.isFileEncryptionRequired(accountId: owner) {
            return refused("owned by \(owner) but not encrypted, although its policy requires file encryption")
        }
        if !info.isDirectory, info.encrypted { try authenticateEveryBlock(path: path) }
        return ProtectionCheck(owner: owner, account: expected, isProtected: true, reason: nil)
    }

    /// Opens every block of the encrypted file at `path` and drops the plaintext (wiped): the
    /// header's file key unwraps under the owner's key and every block authenticates, so a
    /// well-formed header in front of a plaintext (or damaged) body is not taken for protection.
    /// - Throws: `.authenticationFailed` naming the first block that does not authenticate, or
    ///   a body of a length no encrypted file has; `.keyUnavailable` when the key is gone.
    func authenticateEveryBlock(path: String) throws {
        let file = try openRegularFile(path)
        guard let header = try readHeader(file.rawValue, path: path), header.isEncrypted else { return }
        let content = try ProtectedFileContent(fd: file.rawValue, header: header, fileKey: try context.fileKey(for: header))
        let size = try content.plaintextSize()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: FileProtectionManager.chunkSize, alignment: 16)
        defer {
            SecureWipe.bytes(buffer.baseAddress, count: buffer.count)
            buffer.deallocate()
        }
        var offset: Int64 = 0
        while offset < size {
            let count = try content.read(into: buffer, at: offset)
            guard count > 0 else { throw MAMError.authenticationFailed("\(path): the body ends at \(offset) of \(size) bytes") }
            offset += Int64(count)
        }
    }

    /// Whether `receiver` may receive the file at `path`: `canReceiveSharedFile` for the file's
    /// owner, then `isOpenFromAllowed` for the file's location (the receiver's policy
    /// `locations`, `LocalDrive` for an unlisted path). An unmanaged receiver may receive anything, an account
    /// its own files.
    /// - Parameter path: the file; its absolute, standardized form is looked up in `locations`.
    /// - Throws: `.fileNotFound`; `.authenticationFailed` for a malformed header;
    ///   `.unknownAccount` for an unregistered UPN; `.invalidArguments` for a malformed name.
    public func receiveCheck(path: String, receiver: String) throws -> ReceiveCheck {
        let owner = try protectionInfo(path: path)
        let account = try context.resolveOwner(receiver)
        let evaluator = context.policyEvaluator
        let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
        let location = evaluator.policy(forAccountId: account)?.locations.location(ofPath: absolute) ?? .localDrive
        var deniedBy: String?
        if owner == account {
            deniedBy = nil
        } else if !evaluator.canReceiveSharedFile(fileOwner: owner, receiver: account) {
            deniedBy = "receiveData"
        } else if !evaluator.isOpenFromAllowed(location: location.open, receiver: account) {
            deniedBy = "openFromLocations"
        }
        return ReceiveCheck(owner: owner, receiver: account, location: location, deniedBy: deniedBy)
    }
}
