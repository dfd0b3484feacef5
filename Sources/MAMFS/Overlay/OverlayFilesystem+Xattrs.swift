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

    /// Whether the mount kind keeps the attribute `name` to itself.
    private func isReserved(_ name: UnsafePointer<CChar>) -> Bool {
        hooks.isReservedAttribute(UnsafeRawBufferPointer(start: name, count: strlen(name)))
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
    /// - Throws: ENODATA (absent or reserved), ERANGE (larger than `size`).
    func getxattr(_ nodeid: UInt64, name: UnsafePointer<CChar>, size: Int, caller: Caller) throws -> XattrReply {
        let inode = try node(nodeid, for: .readXattr, by: caller)
        if isReserved(name) { throw FilesystemError(code: ENODATA) }
        if isNamed(name, OverlayFilesystem.ownerAttribute) || isNamed(name, OverlayFilesystem.encryptedAttribute) {
            guard let value = try virtualAttribute(inode, name) else { throw FilesystemError(code: ENODATA) }
            return try reply(Array(value.utf8), size: size)
        }
        guard let value = try ExtendedAttributes(path: inode.procPath).get(cName: name) else { throw FilesystemError(code: ENODATA) }
        return try reply(value, size: size)
    }

    /// Backing xattr names without the ones mamfs owns (a directory's raw owner tag); the
    /// virtual mamfs attributes are readable by name but not listed, so copying tools
    /// (cp --preserve=all, rsync -X) neither copy nor fail on them.
    func listxattr(_ nodeid: UInt64, size: Int, caller: Caller) throws -> XattrReply {
        let inode = try node(nodeid, for: .readXattr, by: caller)
        let own = [Array(OverlayFilesystem.ownerAttribute.utf8), Array(OverlayFilesystem.encryptedAttribute.utf8)]
        var names: [UInt8] = []
        for name in try backingAttributeNames(inode.procPath) {
            if own.contains(where: { $0.elementsEqual(name) }) { continue }
            if name.withUnsafeBytes({ hooks.isReservedAttribute($0) }) { continue }
            names += name
            names.append(0)
        }
        return try reply(names, size: size)
    }

    /// The names listxattr gives for `path` (without their NULs).
    private func backingAttributeNames(_ path: String) throws -> [ArraySlice<UInt8>] {
        try ExtendedAttributes(path: path).nameBytes()
    }

    /// Sets `name` to `value`. Writing `user.mam.owner` changes the owner (`protect`).
    /// - Throws: EPERM for `user.mam.encrypted` and reserved names; `protect`'s errors.
    func setxattr(_ nodeid: UInt64, name: UnsafePointer<CChar>, value: UnsafeRawBufferPointer, flags: Int32, caller: Caller) throws {
        let inode = try node(nodeid, for: .changeXattr, by: caller)
        if isNamed(name, OverlayFilesystem.encryptedAttribute) { throw FilesystemError(code: EPERM) }
        if isReserved(name) { throw FilesystemError(code: EPERM) }
        if isNamed(name, OverlayFilesystem.ownerAttribute) {
            var bytes = Array(value)
            while bytes.last == 0 { bytes.removeLast() }
            let owner = String(decoding: bytes, as: UTF8.self)
            try admit(.changeOwner(to: owner), on: inode, by: caller)
            try protect(inode, owner: owner, caller: caller.credentials)
            return
        }
        try ExtendedAttributes(path: inode.procPath).set(cName: name, value, flags: flags)
    }

    /// Removes `name`.
    /// - Throws: EPERM for the virtual and reserved attributes.
    func removexattr(_ nodeid: UInt64, name: UnsafePointer<CChar>, caller: Caller) throws {
        let inode = try node(nodeid, for: .changeXattr, by: caller)
        if isNamed(name, OverlayFilesystem.ownerAttribute) || isNamed(name, OverlayFilesystem.encryptedAttribute) {
            throw FilesystemError(code: EPERM)
        }
        if isReserved(name) { throw FilesystemError(code: EPERM) }
        try ExtendedAttributes(path: inode.procPath).remove(cName: name)
    }
}
