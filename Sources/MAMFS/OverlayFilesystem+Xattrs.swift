import CFuse
import Glibc
import MAMFileProvider
import MAMProtection

/// Request handlers for extended attributes: the virtual user.mam.* attributes and pass-through of the rest. Each answers its request exactly once.
extension OverlayFilesystem {
    static let ownerAttribute = "user.mam.owner"
    static let encryptedAttribute = "user.mam.encrypted"

    /// Whether the attribute name the kernel sent (raw bytes) is `attribute`.
    private func isNamed(_ name: UnsafePointer<CChar>, _ attribute: String) -> Bool {
        strcmp(name, attribute) == 0
    }

    /// The value of a mamfs attribute; nil = ENODATA.
    private func virtualAttribute(_ inode: Inode, _ name: UnsafePointer<CChar>) throws -> String? {
        if inode.isDirectory {
            guard isNamed(name, OverlayFilesystem.ownerAttribute) else { return "0" }
            let fd = openat(inode.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else { throw FilesystemError.current() }
            defer { close(fd) }
            return context.directoryOwner(backingDirectoryFD: fd)
        }
        guard inode.isRegular else { return nil }
        let header = try inode.contentLock.reading { () throws -> ProtectedFileHeader? in
            var st = stat()
            guard fstatat(inode.fd, "", &st, mamfs_fuse_AT_EMPTY_PATH) == 0 else { throw FilesystemError.current() }
            return try self.header(inode, ctime: st.st_ctim)
        }
        if isNamed(name, OverlayFilesystem.encryptedAttribute) { return header?.isEncrypted == true ? "1" : "0" }
        return header?.owner
    }

    func getxattr(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ name: UnsafePointer<CChar>, _ size: Int) {
        do {
            let inode = try node(ino)
            if provider != nil && MountedProvider.isProviderAttribute(name) { throw FilesystemError(code: ENODATA) }
            if isNamed(name, OverlayFilesystem.ownerAttribute) || isNamed(name, OverlayFilesystem.encryptedAttribute) {
                guard let value = try virtualAttribute(inode, name) else { throw FilesystemError(code: ENODATA) }
                let bytes = Array(value.utf8)
                if size == 0 {
                    fuse_reply_xattr(req, bytes.count)
                } else if bytes.count > size {
                    throw FilesystemError(code: ERANGE)
                } else {
                    _ = bytes.withUnsafeBytes { fuse_reply_buf(req, $0.baseAddress?.assumingMemoryBound(to: CChar.self), $0.count) }
                }
                return
            }
            if size == 0 {
                let n = CFuse.getxattr(inode.procPath, name, nil, 0)
                guard n >= 0 else { throw FilesystemError.current() }
                fuse_reply_xattr(req, n)
                return
            }
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
            defer { buffer.deallocate() }
            let n = CFuse.getxattr(inode.procPath, name, buffer, size)
            guard n >= 0 else { throw FilesystemError.current() }
            fuse_reply_buf(req, buffer.assumingMemoryBound(to: CChar.self), n)
        } catch { fail(req, error, table.inode(ino)) }
    }

    /// Backing xattr names without the ones mamfs owns (a directory's raw owner tag); the
    /// virtual mamfs attributes are readable by name but not listed, so copying tools
    /// (cp --preserve=all, rsync -X) neither copy nor fail on them.
    func listxattr(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ size: Int) {
        do {
            let inode = try node(ino)
            var names: [UInt8] = []
            while true {
                let needed = CFuse.listxattr(inode.procPath, nil, 0)
                guard needed >= 0 else { throw FilesystemError.current() }
                if needed == 0 { break }
                var raw = [UInt8](repeating: 0, count: needed)
                let n = raw.withUnsafeMutableBytes { CFuse.listxattr(inode.procPath, $0.baseAddress?.assumingMemoryBound(to: CChar.self), needed) }
                if n < 0 && errno == ERANGE { continue }
                guard n >= 0 else { throw FilesystemError.current() }
                for name in raw[0..<n].split(separator: 0, omittingEmptySubsequences: true) {
                    let text = String(decoding: name, as: UTF8.self)
                    if text == OverlayFilesystem.ownerAttribute || text == OverlayFilesystem.encryptedAttribute { continue }
                    if provider != nil && MountedProvider.isProviderAttribute(text) { continue }
                    names += name
                    names.append(0)
                }
                break
            }
            if size == 0 {
                fuse_reply_xattr(req, names.count)
            } else if names.count > size {
                throw FilesystemError(code: ERANGE)
            } else {
                _ = names.withUnsafeBytes { fuse_reply_buf(req, $0.baseAddress?.assumingMemoryBound(to: CChar.self), $0.count) }
            }
        } catch { fail(req, error) }
    }

    func setxattr(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ name: UnsafePointer<CChar>, _ value: UnsafePointer<CChar>?, _ size: Int, _ flags: Int32) {
        do {
            let inode = try node(ino)
            if isNamed(name, OverlayFilesystem.encryptedAttribute) { throw FilesystemError(code: EPERM) }
            if provider != nil && MountedProvider.isProviderAttribute(name) { throw FilesystemError(code: EPERM) }
            if isNamed(name, OverlayFilesystem.ownerAttribute) {
                var bytes = value.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
                while bytes.last == 0 { bytes.removeLast() }
                try protect(inode, owner: String(decoding: bytes, as: UTF8.self), caller: CallerCredentials(req))
                fuse_reply_err(req, 0)
                return
            }
            guard CFuse.setxattr(inode.procPath, name, value, size, flags) == 0 else { throw FilesystemError.current() }
            fuse_reply_err(req, 0)
        } catch { fail(req, error, table.inode(ino)) }
    }

    func removexattr(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ name: UnsafePointer<CChar>) {
        do {
            let inode = try node(ino)
            if isNamed(name, OverlayFilesystem.ownerAttribute) || isNamed(name, OverlayFilesystem.encryptedAttribute) {
                throw FilesystemError(code: EPERM)
            }
            if provider != nil && MountedProvider.isProviderAttribute(name) { throw FilesystemError(code: EPERM) }
            guard CFuse.removexattr(inode.procPath, name) == 0 else { throw FilesystemError.current() }
            fuse_reply_err(req, 0)
        } catch { fail(req, error) }
    }
}
