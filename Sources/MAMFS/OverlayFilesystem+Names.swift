import CFuse
import Glibc
import MAMFileProvider
import MAMProtection

/// Request handlers for names and attributes: lookup, forget, access, getattr, setattr. Each answers its request exactly once.
extension OverlayFilesystem {
    func lookup(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>) {
        refresh(force: false)
        do {
            let dir = try node(parent)
            try checkVisibleName(dir, name, missing: true)
            let (inode, st) = try lookupEntry(parent: dir, name: name)
            replyEntry(req, inode, st)
        } catch {
            fail(req, error, path: table.inode(parent).flatMap { try? childPath($0, name) })
        }
    }

    func forget(_ ino: fuse_ino_t, _ count: UInt64) {
        table.forget(ino, count: count)
    }

    /// access(2) and chdir (sent when the mount has no default_permissions): the backing
    /// object's own check, with the daemon's credentials, which are the caller's then.
    func access(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ mask: Int32) {
        do {
            let inode = try node(ino)
            guard Glibc.access(inode.procPath, mask) == 0 else { throw FilesystemError.current() }
            fuse_reply_err(req, 0)
        } catch { fail(req, error, table.inode(ino)) }
    }

    func getattr(_ req: fuse_req_t?, _ ino: fuse_ino_t) {
        refresh(force: false)
        do {
            let inode = try node(ino)
            var st = try attributes(inode)
            fuse_reply_attr(req, &st, options.attributeTimeout)
        } catch { fail(req, error, table.inode(ino)) }
    }

    func setattr(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ attr: stat, _ toSet: Int32, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        do {
            let inode = try node(ino)
            let handle = fi.flatMap { OpenFile.borrow($0.pointee.fh) }
            var st: stat
            if inode.isRegular && toSet & FUSE_SET_ATTR_SIZE == 0 {
                // Owner, mode and times leave the header as it is: a header known before the change
                // is carried over to the new ctime (a daemon without root cannot read the header of
                // a file it just made write-only, chmod 0200, and must still report its size).
                st = try inode.contentLock.writing {
                    var before = stat()
                    let known = fstatat(inode.fd, "", &before, mamfs_fuse_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0
                        ? inode.currentContent(ctime: before.st_ctim) : .unknown
                    try applyMetadata(inode, handle, attr, toSet)
                    var after = stat()
                    if case .known(let header, _, _, _) = known,
                       fstatat(inode.fd, "", &after, mamfs_fuse_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0 {
                        inode.storeHeader(header, stamp: after.st_ctim)
                    }
                    return try attributes(inode, locked: true, hideWiped: false)
                }
            } else {
                try applyMetadata(inode, handle, attr, toSet)
                if toSet & FUSE_SET_ATTR_SIZE != 0 {
                    guard inode.isRegular else { throw FilesystemError(code: inode.isDirectory ? EISDIR : EINVAL) }
                    if provider != nil && handle == nil { try materializeIfPlaceholder(inode) }
                    try truncate(inode, to: Int64(attr.st_size), handle: handle)
                    if provider != nil && handle == nil { providerFileChanged(inode) }
                }
                st = try attributes(inode, hideWiped: false)
            }
            fuse_reply_attr(req, &st, options.attributeTimeout)
        } catch { fail(req, error, table.inode(ino)) }
    }

    /// The owner, mode and time parts of a setattr, on the backing object.
    private func applyMetadata(_ inode: Inode, _ handle: OpenFile?, _ attr: stat, _ toSet: Int32) throws {
        if toSet & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID) != 0 {
            let uid = toSet & FUSE_SET_ATTR_UID != 0 ? attr.st_uid : uid_t.max
            let gid = toSet & FUSE_SET_ATTR_GID != 0 ? attr.st_gid : gid_t.max
            guard fchownat(inode.fd, "", uid, gid, mamfs_fuse_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0 else { throw FilesystemError.current() }
        }
        if toSet & FUSE_SET_ATTR_MODE != 0 {
            let rc = handle.map { fchmod($0.fd, attr.st_mode & 0o7777) } ?? chmod(inode.procPath, attr.st_mode & 0o7777)
            guard rc == 0 else { throw FilesystemError.current() }
        }
        let timeBits = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW
        if toSet & timeBits != 0 {
            // A side the caller did not set stays as it is (UTIME_OMIT): tar sets only mtime (F14).
            func time(_ set: Int32, _ now: Int32, _ value: timespec) -> timespec {
                if toSet & now != 0 { return timespec(tv_sec: 0, tv_nsec: mamfs_fuse_UTIME_NOW) }
                if toSet & set != 0 { return value }
                return timespec(tv_sec: 0, tv_nsec: mamfs_fuse_UTIME_OMIT)
            }
            var times = [time(FUSE_SET_ATTR_ATIME, FUSE_SET_ATTR_ATIME_NOW, attr.st_atim),
                         time(FUSE_SET_ATTR_MTIME, FUSE_SET_ATTR_MTIME_NOW, attr.st_mtim)]
            let rc: Int32
            if let handle {
                rc = futimens(handle.fd, &times)
            } else if inode.isSymlink {
                rc = utimensat(AT_FDCWD, try backingPath(inode), &times, AT_SYMLINK_NOFOLLOW)
            } else {
                rc = utimensat(AT_FDCWD, inode.procPath, &times, 0)
            }
            guard rc == 0 else { throw FilesystemError.current() }
        }
    }

    /// Sets the plaintext size under the exclusive content lock (re-encrypting the new last block).
    private func truncate(_ inode: Inode, to size: Int64, handle: OpenFile?) throws {
        try inode.contentLock.writing {
            var ownFD: Int32 = -1
            defer { if ownFD >= 0 { close(ownFD) } }
            let fd: Int32
            if let handle, handle.writable {
                fd = handle.fd
            } else {
                ownFD = Glibc.open(inode.procPath, O_RDWR | O_CLOEXEC)
                guard ownFD >= 0 else { throw FilesystemError.current() }
                fd = ownFD
            }
            let content: ProtectedFileContent
            if let handle, handle.writable {
                content = try self.content(handle)
            } else {
                var st = stat()
                guard fstat(fd, &st) == 0 else { throw FilesystemError.current() }
                let header = try self.header(inode, ctime: st.st_ctim)
                content = try ProtectedFileContent(fd: fd, header: header, fileKey: try fileKey(inode, header: header))
            }
            try content.truncate(to: size)
        }
    }
}
