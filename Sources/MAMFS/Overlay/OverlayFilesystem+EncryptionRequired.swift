import Glibc
import MAMProtection
import MAMSystem

/// Files of a managed owner that are plain-tagged while the owner's policy requires file
/// encryption (written before the policy said so): the next write encrypts them.
extension OverlayFilesystem {
    /// Before a write or fallocate through `handle`: when its file is plain-tagged and the
    /// owner's policy requires file encryption (as the mount knows the policy: state changes
    /// are picked up within 200 ms), the whole file is encrypted first, atomically
    /// (`FileProtectionManager.encryptIfRequired`: an encrypted copy in an unnamed temp file
    /// of the same directory, fsynced, renamed over the file; no plaintext temp on disk). The
    /// entry is pointed at the encrypted file and every handle open on the old one follows it
    /// (`OpenFile.follow`), so this write and later ones go to the encrypted file.
    ///
    /// A file that cannot be replaced by name without leaving plaintext behind is refused
    /// instead, with EACCES and nothing written: one with other hard links (their names would
    /// keep the plain bytes) or none (unlinked while open).
    /// - Throws: `FilesystemError(EACCES)` as above; the rewrite's errors (ENOSPC, ...), the
    ///   file unchanged then.
    func encryptIfRequired(before handle: OpenFile) throws {
        guard let owner = try plainTaggedOwner(handle), context.policyEvaluator.isFileEncryptionRequired(accountId: owner) else { return }
        // The order protect takes them: no rename or link through the mount meanwhile.
        try namespaceLock.writing {
            try handle.inode.contentLock.writing {
                // Another writer may have encrypted it while this one waited.
                guard let header = try content(handle).header, !header.isEncrypted, !header.owner.isEmpty,
                      context.policyEvaluator.isFileEncryptionRequired(accountId: header.owner) else { return }
                let st = try SystemCall.stat(fd: handle.fd)
                guard st.st_nlink == 1 else { throw FilesystemError(code: EACCES) }
                let inode = handle.inode
                let (path, deleted) = try ProcessDescriptorPath.currentPath(of: try inode.descriptor())
                guard !deleted else { throw FilesystemError(code: EACCES) }
                let replaced = inode.key
                do {
                    let rewritten = try withConfinedParent(of: path) { parent, name in
                        try context.files.encryptIfRequired(file: name, in: parent, path: path) { _, st in
                            guard BackingKey(st) == replaced else { throw FilesystemError(code: ESTALE) }
                        }
                    }
                    guard rewritten else { return }
                } catch let error as MAMError {
                    if case .system(_, let code) = error, code == EMLINK { throw FilesystemError(code: EACCES) }
                    throw error
                }
                repoint(inode, toPath: path, handles: .follow)
                guard inode.key != replaced else {
                    // The entry could not be moved: nothing may write the old plain file now.
                    throw FilesystemError(code: EACCES)
                }
                try followReplacement(handle)
            }
        }
    }

    /// The owner of `handle`'s file when it is plain-tagged with a non-empty owner; nil for
    /// untagged and encrypted files (from the entry's cached header when it has one).
    private func plainTaggedOwner(_ handle: OpenFile) throws -> String? {
        let inode = handle.inode
        if handle.backingKey == inode.key, let view = inode.view(for: handle) { return view.plainTaggedOwner }
        var header: ProtectedFileHeader?
        if handle.backingKey == inode.key, case .known(let known, _, _, _) = inode.contentState {
            header = known
        } else {
            header = try inode.contentLock.reading { try content(handle).header }
        }
        guard let header, !header.isEncrypted, !header.owner.isEmpty else { return nil }
        return header.owner
    }
}
