import CFuse
import Glibc
import MAMProtection
import MAMSystem

/// Extended attributes: the virtual user.mam.* attributes and pass-through of the rest.
extension OverlayFilesystem {
    static let ownerAttribute = "user.mam.owner"
    static let encryptedAttribute = "user.mam.encrypted"

    /// Whether the attribute name the kernel sent (raw bytes) is `attribute`.
    private func isNamed(_ name: UnsafePointer<CChar>, _ attribute: String) -> Bool {
        strcmp(name, attribute) == 0
    }

    /// Whether mamfs keeps the attribute `name` to itself: the header hint of every file
    /// (`HeaderHint`) and the mount kind's own (`MountHooks.isReservedAttribute`).
    private func isReserved(_ name: UnsafePointer<CChar>) -> Bool {
        isReserved(UnsafeRawBufferPointer(start: name, count: strlen(name)))
    }

    private func isReserved(_ name: UnsafeRawBufferPointer) -> Bool {
        HeaderHint.isAttribute(name) || hooks.isReservedAttribute(name)
    }

    /// The size alone (`size` 0) or `bytes`; ERANGE when they do not fit in `size`.
    private func reply(_ bytes: [UInt8], size: Int) throws -> XattrReply {
        if size == 0 { return .size(bytes.count) }
        guard bytes.count <= size else { throw FilesystemError(code: ERANGE) }
        return .value(bytes)
    }

    /// The value of a mamfs attribute; nil = ENODATA.
    private func virtualAttribute(_ inode: Inode, _ name: UnsafePointer<CChar>) throws -> String? {
        if inode.isDirectory {
            guard isNamed(name, OverlayFilesystem.ownerAttribute) else { return "0" }
            let directory = try FileDescriptor.open(in: inode.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            return context.directoryOwner(backingDirectoryFD: directory.rawValue)
        }
        guard inode.isRegular else { return nil }
        let header = try inode.contentLock.reading { () throws -> ProtectedFileHeader? in
            var st = stat()
            guard fstatat(inode.fd, "", &st, SystemConstants.emptyPath) == 0 else { throw FilesystemError.current() }
            return try self.header(inode, ctime: st.st_ctim)
        }
        if isNamed(name, OverlayFilesystem.encryptedAttribute) { return header?.isEncrypted == true ? "1" : "0" }
        return header?.owner
    }

    /// The value of `name` (`size` 0: its size). The virtual attributes answer from the header
    /// or the directory's tag; the rest are the backing object's.
    /// - Throws: ENODATA (absent or reserved), EOPNOTSUPP (an `UnkeptAttribute`: ACLs, security
    ///   labels), ERANGE (larger than `size`).
    func getxattr(_ nodeid: UInt64, name: UnsafePointer<CChar>, size: Int, caller: Caller) throws -> XattrReply {
        let virtual = isNamed(name, OverlayFilesystem.ownerAttribute) || isNamed(name, OverlayFilesystem.encryptedAttribute)
        // An owner read right after `mamfs protect` on the backing path finds the new file.
        refresh(force: virtual)
        let inode = try node(nodeid, for: .readXattr, by: caller)
        if UnkeptAttribute.contains(cName: name) { throw FilesystemError(code: EOPNOTSUPP) }
        if isReserved(name) { throw FilesystemError(code: ENODATA) }
        if virtual {
            guard let value = try virtualAttribute(inode, name) else { throw FilesystemError(code: ENODATA) }
            return try reply(Array(value.utf8), size: size)
        }
        guard let value = try backingAttribute(inode, name) else { throw FilesystemError(code: ENODATA) }
        return try reply(value, size: size)
    }

    /// The attribute names of the object: `user.mam.owner` and `user.mam.encrypted` first when
    /// it is a file or directory with a non-empty owner (a work file, a directory tagged for an
    /// account; so `getfattr -d` and file managers show them, and cp -a / rsync -X copy the
    /// owner with the file), then the backing object's own names without the ones mamfs keeps
    /// to itself (a directory's raw owner tag, the mount kind's reserved names, `UnkeptAttribute`s). An untagged or
    /// unmanaged-tagged object lists no mamfs name, so a copy of a personal file never carries
    /// an owner.
    /// - Throws: ERANGE when the list is larger than `size` (`size` 0 asks for its length).
    func listxattr(_ nodeid: UInt64, size: Int, caller: Caller) throws -> XattrReply {
        refresh(force: false)
        let inode = try node(nodeid, for: .readXattr, by: caller)
        let own = [Array(OverlayFilesystem.ownerAttribute.utf8), Array(OverlayFilesystem.encryptedAttribute.utf8)]
        var names: [UInt8] = []
        if inode.isRegular || inode.isDirectory, let owner = try currentOwner(inode), !owner.isEmpty {
            for name in own { names += name + [0] }
        }
        for name in try backingAttributeNames(inode.procPath) {
            if own.contains(where: { $0.elementsEqual(name) }) { continue }
            if name.withUnsafeBytes({ isReserved($0) || UnkeptAttribute.contains($0) }) { continue }
            names += name
            names.append(0)
        }
        return try reply(names, size: size)
    }

    /// The names listxattr gives for `path` (without their NULs).
    private func backingAttributeNames(_ path: String) throws -> [ArraySlice<UInt8>] {
        try ExtendedAttributes(path: path).nameBytes()
    }

    /// The owner `user.mam.owner` reads: a file's header owner, a directory's own tag; nil when
    /// untagged (or neither a file nor a directory).
    private func currentOwner(_ inode: Inode) throws -> String? {
        try OverlayFilesystem.ownerAttribute.withCString { try virtualAttribute(inode, $0) }
    }

    /// The attribute value as the kernel sent it, without trailing NULs (`setfattr -v` sends none,
    /// some programs send one).
    private func valueText(_ value: UnsafeRawBufferPointer) -> String {
        var bytes = Array(value)
        while bytes.last == 0 { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Sets `name` to `value`. Writing `user.mam.owner` changes the owner (`protect`), except
    /// that the owner the object already has changes nothing (no rewrite, a directory's contents
    /// are not re-protected, an encrypted file stays encrypted); a plain work file whose owner's
    /// policy now requires encryption is still encrypted by it. Writing `user.mam.encrypted`:
    /// see `setEncrypted`.
    /// XATTR_CREATE and XATTR_REPLACE hold for the mamfs attributes as for stored ones
    /// (`requireCreateOrReplace`).
    /// - Throws: EPERM for reserved names; EOPNOTSUPP for an `UnkeptAttribute` (ACLs, security
    ///   labels); EEXIST / ENODATA for the flags; `setEncrypted`'s and `protect`'s errors.
    func setxattr(_ nodeid: UInt64, name: UnsafePointer<CChar>, value: UnsafeRawBufferPointer, flags: Int32, caller: Caller) throws {
        let inode = try node(nodeid, for: .changeXattr, by: caller)
        if isNamed(name, OverlayFilesystem.encryptedAttribute) {
            try requireWriteAccess(inode, caller)
            try requireCreateOrReplace(flags, inode, name)
            try setEncrypted(inode, to: valueText(value), caller: caller)
            return
        }
        if UnkeptAttribute.contains(cName: name) { throw FilesystemError(code: EOPNOTSUPP) }
        if isReserved(name) { throw FilesystemError(code: EPERM) }
        if isNamed(name, OverlayFilesystem.ownerAttribute) {
            if flags & (OverlayFilesystem.xattrCreate | OverlayFilesystem.xattrReplace) != 0 {
                try requireWriteAccess(inode, caller)
                try requireCreateOrReplace(flags, inode, name)
            }
            let owner = valueText(value)
            if try isAlreadyOwned(inode, by: owner) {
                try requireWriteAccess(inode, caller)
                return
            }
            try admit(.changeOwner(to: owner), on: inode, by: caller)
            try protect(inode, owner: owner, caller: caller.credentials)
            settleNameInvalidations()
            return
        }
        try ExtendedAttributes(path: inode.procPath).set(cName: name, value, flags: flags)
    }

    /// setxattr(2)'s flags (linux/xattr.h).
    static let xattrCreate: Int32 = 1
    static let xattrReplace: Int32 = 2

    /// setxattr's XATTR_CREATE and XATTR_REPLACE for a mamfs attribute `name`, as for a stored
    /// one: the attribute exists when getxattr reads a value for it now.
    /// - Throws: EEXIST for XATTR_CREATE of an attribute that exists (a tagged object's
    ///   `user.mam.owner`, any file's or directory's `user.mam.encrypted`); ENODATA for
    ///   XATTR_REPLACE of one that does not (an untagged object's owner); nothing is changed.
    private func requireCreateOrReplace(_ flags: Int32, _ inode: Inode, _ name: UnsafePointer<CChar>) throws {
        guard flags & (OverlayFilesystem.xattrCreate | OverlayFilesystem.xattrReplace) != 0 else { return }
        let exists = try virtualAttribute(inode, name) != nil
        if flags & OverlayFilesystem.xattrCreate != 0, exists { throw FilesystemError(code: EEXIST) }
        if flags & OverlayFilesystem.xattrReplace != 0, !exists { throw FilesystemError(code: ENODATA) }
    }

    /// Writing `user.mam.encrypted` = `value` (the text the caller sent), which can raise a
    /// file's protection but never lower it: the current value ("0" for a directory) changes
    /// nothing; "1" on a plain file encrypts it for `encryptionOwner` (its own managed owner, or
    /// the mount's account for an unowned file), as an owner change does (`admit`
    /// `.changeOwner`, then `protect` with `encrypted`), so copying tools that set the
    /// attributes in name order (rsync -X: `user.mam.encrypted` before `user.mam.owner`) work.
    /// - Throws: EINVAL for a value other than "0" and "1"; EPERM for "0" on an encrypted file
    ///   (decryption goes through the owner and its policy), for "1" on a directory or another
    ///   kind of object, and for "1" on a file without an `encryptionOwner`; the admission's and
    ///   `protect`'s errors (EACCES when the caller may not write the file).
    private func setEncrypted(_ inode: Inode, to value: String, caller: Caller) throws {
        guard value == "0" || value == "1" else { throw FilesystemError(code: EINVAL) }
        guard let current = try encryptionValue(inode) else { throw FilesystemError(code: EPERM) }
        if value == current { return }
        guard value == "1", inode.isRegular, let owner = try encryptionOwner(inode) else { throw FilesystemError(code: EPERM) }
        try admit(.changeOwner(to: owner), on: inode, by: caller)
        try protect(inode, owner: owner, caller: caller.credentials, encrypted: true)
        settleNameInvalidations()
    }

    /// The account a plain file is encrypted for when "1" is written: its owner when that is a
    /// managed account here; for an unowned file (untagged or unmanaged-tagged), the mount's
    /// `--account` when it is managed. Nil when there is none: an owner not managed here has no
    /// key, and a mount without a managed account has no account to give an unowned file.
    private func encryptionOwner(_ inode: Inode) throws -> String? {
        let owner = try currentOwner(inode) ?? ""
        let account = owner.isEmpty ? options.account : owner
        guard !account.isEmpty, context.policyEvaluator.isManaged(accountId: account) else { return nil }
        return account
    }

    /// What `user.mam.encrypted` reads ("1" or "0"); nil for objects other than files and directories.
    private func encryptionValue(_ inode: Inode) throws -> String? {
        try OverlayFilesystem.encryptedAttribute.withCString { try virtualAttribute(inode, $0) }
    }

    /// True when protecting `inode` for `owner` (an accountId or UPN, "" unmanaged) would change
    /// nothing: it has that owner already and, for a file, at least the encryption that owner's
    /// policy gives (a file encrypted although the policy does not require it stays so).
    private func isAlreadyOwned(_ inode: Inode, by owner: String) throws -> Bool {
        guard inode.isRegular || inode.isDirectory, let current = try currentOwner(inode),
              let wanted = try? context.resolveOwner(owner), current == wanted else { return false }
        guard inode.isRegular else { return true }
        return try encryptionValue(inode) == "1" || !context.policyEvaluator.isFileEncryptionRequired(accountId: current)
    }

    /// Removes `name`. The mamfs attributes cannot really be removed (every tagged object has
    /// an owner; `user.mam.owner` = "" makes it personal): removing them succeeds without
    /// changing anything when the object has the owner it would have without a tag of its own
    /// (a file: the owner a new file in its directory gets; a directory: its parent's), so tools
    /// that make a copy's attribute list match the original's (rsync -X) work; otherwise EPERM.
    /// - Throws: ENODATA for the mamfs attributes of an untagged object; EPERM as above and for
    ///   reserved names; EOPNOTSUPP for an `UnkeptAttribute`.
    func removexattr(_ nodeid: UInt64, name: UnsafePointer<CChar>, caller: Caller) throws {
        let inode = try node(nodeid, for: .changeXattr, by: caller)
        if isNamed(name, OverlayFilesystem.ownerAttribute) || isNamed(name, OverlayFilesystem.encryptedAttribute) {
            guard inode.isRegular || inode.isDirectory, let current = try currentOwner(inode) else {
                throw FilesystemError(code: ENODATA)
            }
            try requireWriteAccess(inode, caller)
            guard current == (try ownerWithoutOwnTag(inode)) else { throw FilesystemError(code: EPERM) }
            return
        }
        if UnkeptAttribute.contains(cName: name) { throw FilesystemError(code: EOPNOTSUPP) }
        if isReserved(name) { throw FilesystemError(code: EPERM) }
        try ExtendedAttributes(path: inode.procPath).remove(cName: name)
    }

    /// Changing an attribute needs write access to the object, as for any user.* attribute, also
    /// when the change is a no-op: the daemon's own (a mount run by a user) and the caller's
    /// (mode bits with its uid, gid and groups; the kernel checks them only with default_permissions).
    /// - Throws: EACCES (or the errno access(2) gave).
    private func requireWriteAccess(_ inode: Inode, _ caller: Caller) throws {
        guard Glibc.access(inode.procPath, W_OK) == 0 else { throw FilesystemError.current() }
        var st = stat()
        guard fstatat(inode.fd, "", &st, SystemConstants.emptyPath | AT_SYMLINK_NOFOLLOW) == 0 else { throw FilesystemError.current() }
        guard caller.credentials.permits(.write, on: st) else { throw FilesystemError(code: EACCES) }
    }

    /// The owner `inode` would have from its place alone: the mount's account for the root,
    /// else what a new object in its directory inherits (`inheritedOwner`).
    private func ownerWithoutOwnTag(_ inode: Inode) throws -> String {
        if inode.nodeid == table.root.nodeid { return options.account }
        return try inheritedOwner(directoryPath: parentPath(try backingPath(inode)))
    }
}
