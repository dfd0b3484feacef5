import CFuse
import Glibc
import MAMFileProvider
import MAMProtection

/// Request handlers for regular files: create, open, read, write, flush, fsync, release, fallocate, lseek. Each answers its request exactly once.
extension OverlayFilesystem {
    /// Creates `name` exclusively and writes its header (owner inherited from the nearest tagged
    /// directory, else the mount's account). Returns the O_RDWR backing descriptor.
    /// Creates `name` in `dir` with the inherited owner's header written; returns the read-write
    /// descriptor with the header and file key it was written with.
    /// `made` is what the caller removes when it fails later.
    func createTagged(_ req: fuse_req_t?, dir: Inode, name: UnsafePointer<CChar>, mode: mode_t) throws
        -> (fd: Int32, header: ProtectedFileHeader?, key: SymmetricKey?, made: MadeObject) {
        let dirFD = try dir.descriptor()
        let fd = openat(dirFD, name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, mode & 0o7777)
        guard fd >= 0 else { throw FilesystemError.current() }
        var st = stat()
        let made = fstat(fd, &st) == 0 ? MadeObject(directoryFD: dirFD, name: name, stat: st) : MadeObject(directoryFD: dirFD, name: name)
        do {
            guard let made else { throw FilesystemError.current() }
            chownToCaller(req, dirFD: dirFD, name: name)
            let owner = try inheritedOwner(of: dir)
            let (header, key) = try context.newFileHeader(owner: owner)
            // A just-created file: on a failed (short) header write it is removed below.
            if let header { try ProtectedFileContent(fd: fd, header: header, fileKey: key).writeHeaderIfMissing(reserve: false) }
            return (fd, header, key, made)
        } catch {
            close(fd)
            made?.remove()
            throw error
        }
    }

    func create(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>, _ mode: mode_t, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        refresh(force: true)
        var registered: Inode?
        var made: MadeObject?
        do {
            let dir = try node(parent)
            try checkVisibleName(dir, name)
            let fd: Int32
            let header: ProtectedFileHeader?
            let key: SymmetricKey?
            do {
                let created = try createTagged(req, dir: dir, name: name, mode: mode)
                (fd, header, key, made) = (created.fd, created.header, created.key, created.made)
            } catch let error as FilesystemError where error.code == EEXIST && fi.pointee.flags & O_EXCL == 0 {
                // The kernel thought the name was free, but it exists: open it instead.
                let (inode, _) = try lookupEntry(parent: dir, name: name)
                registered = inode
                try materializeIfPlaceholder(inode)
                let handle = try openHandle(inode, flags: fi.pointee.flags)
                try replyCreate(req, inode, handle, fi)
                return
            }
            let handle: OpenFile
            do {
                var st = stat()
                guard fstat(fd, &st) == 0 else { throw FilesystemError.current() }
                let pathFD = Glibc.open("/proc/self/fd/\(fd)", mamfs_fuse_O_PATH | O_CLOEXEC)
                guard pathFD >= 0 else { throw FilesystemError.current() }
                let inode = table.acquire(st, fd: pathFD, parent: dir, name: name)
                registered = inode
                // The header and key just written (no read back, no second unwrap).
                let generation = self.generation
                inode.contentLock.writing {
                    inode.storeHeader(header, key: key, generation: generation, stamp: st.st_ctim)
                    inode.adjustOpenCount(1)
                }
                handle = OpenFile(inode: inode, fd: fd, append: fi.pointee.flags & O_APPEND != 0, writable: true)
            } catch {
                close(fd)
                throw error
            }
            try replyCreate(req, handle.inode, handle, fi, made: made)
        } catch {
            if let registered { table.forget(registered.nodeid, count: 1) }
            made?.remove()
            fail(req, error)
        }
    }

    /// `made`: the file this request created, removed again when the kernel does not take the reply.
    private func replyCreate(_ req: fuse_req_t?, _ inode: Inode, _ handle: OpenFile, _ fi: UnsafeMutablePointer<fuse_file_info>,
                             made: MadeObject? = nil) throws {
        let st: stat
        do {
            st = try attributes(inode, hideWiped: false)
        } catch {
            inode.adjustOpenCount(-1)
            throw error
        }
        var e = entryParameters(inode, st)
        fi.pointee.fh = handle.retainedHandle()
        fi.pointee.direct_io = directIO(flags: fi.pointee.flags) ? 1 : 0
        fi.pointee.keep_cache = 0
        if fuse_reply_create(req, &e, fi) != 0 {
            _ = OpenFile.release(fi.pointee.fh)
            inode.adjustOpenCount(-1)
            table.forget(inode.nodeid, count: 1)
            made?.remove()
        }
    }

    func open(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        refresh(force: true)
        do {
            let inode = try node(ino)
            if provider != nil { try materializeIfPlaceholder(inode) }
            let handle = try openHandle(inode, flags: fi.pointee.flags)
            fi.pointee.fh = handle.retainedHandle()
            fi.pointee.direct_io = directIO(flags: fi.pointee.flags) ? 1 : 0
            fi.pointee.keep_cache = 0
            if fuse_reply_open(req, fi) != 0 {
                _ = OpenFile.release(fi.pointee.fh)
                inode.adjustOpenCount(-1)
            }
        } catch { fail(req, error, table.inode(ino)) }
    }

    /// Whether a handle opened with `flags` bypasses the kernel's page cache (FOPEN_DIRECT_IO):
    /// read-only handles unless the mount has `-o page_cache`. Their reads then get exactly
    /// what mamfs answers, which the page cache cannot promise while a truncation is in flight
    /// (F3; see `MountOptions.pageCache`). Writable handles keep the page cache: shared
    /// read-write mmap needs it (libfuse 3.14 cannot ask for FUSE_DIRECT_IO_ALLOW_MMAP).
    func directIO(flags: Int32) -> Bool {
        !options.pageCache && flags & O_ACCMODE == O_RDONLY
    }

    /// Opens the backing file (O_RDWR for any write access; never O_APPEND, O_DIRECT or O_TRUNC),
    /// loads header and key (EACCES when the key is gone, EIO for a tampered header), and
    /// applies O_TRUNC; an untagged file truncated this way is tagged like a new one.
    func openHandle(_ inode: Inode, flags: Int32) throws -> OpenFile {
        guard inode.isRegular else { throw FilesystemError(code: inode.isDirectory ? EISDIR : EINVAL) }
        let writable = flags & O_ACCMODE != O_RDONLY
        // Linux truncates on O_RDONLY|O_TRUNC too (the kernel has checked write permission).
        let truncating = flags & O_TRUNC != 0
        let passed = flags & (O_SYNC | O_DSYNC)
        let fd = Glibc.open(inode.procPath, (writable || truncating ? O_RDWR : O_RDONLY) | passed | O_CLOEXEC)
        guard fd >= 0 else { throw FilesystemError.current() }
        do {
            try inode.contentLock.writing {
                var st = stat()
                guard fstat(fd, &st) == 0 else { throw FilesystemError.current() }
                var header: ProtectedFileHeader?
                if inode.openCount == 0 {
                    header = try ProtectedFileHeader.read(fd: fd)
                    inode.storeHeader(header, stamp: st.st_ctim)
                } else {
                    header = try self.header(inode, ctime: st.st_ctim)
                }
                var key = try fileKey(inode, header: header)
                if truncating {
                    if header == nil {
                        let owner = try inheritedOwner(directoryPath: parentPath(try backingPath(inode)))
                        let (newHeader, newKey) = try context.newFileHeader(owner: owner)
                        guard ftruncate(fd, 0) == 0 else { throw FilesystemError.current() }
                        if let newHeader { try ProtectedFileContent(fd: fd, header: newHeader, fileKey: newKey).writeHeaderIfMissing() }
                        header = newHeader
                        key = newKey
                    } else {
                        try ProtectedFileContent(fd: fd, header: header, fileKey: key).truncate(to: 0)
                    }
                    var now = stat()
                    fstat(fd, &now)
                    inode.storeHeader(header, key: key, generation: generation, stamp: now.st_ctim)
                }
                inode.adjustOpenCount(1)
            }
        } catch {
            close(fd)
            throw error
        }
        return OpenFile(inode: inode, fd: fd, append: flags & O_APPEND != 0, writable: writable)
    }

    func read(_ req: fuse_req_t?, _ size: Int, _ offset: Int, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(fi.pointee.fh) else {
            fuse_reply_err(req, EBADF)
            return
        }
        do {
            try buffers.withBuffer(size) { buffer in
                let count = try handle.inode.contentLock.reading {
                    try content(handle).read(into: buffer, at: Int64(offset))
                }
                fuse_reply_buf(req, buffer.baseAddress?.assumingMemoryBound(to: CChar.self), count)
            }
        } catch { fail(req, error, handle.inode) }
    }

    func write(_ req: fuse_req_t?, _ data: UnsafePointer<CChar>?, _ size: Int, _ offset: Int, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(fi.pointee.fh) else {
            fuse_reply_err(req, EBADF)
            return
        }
        do {
            let appendAtEnd = handle.append && fi.pointee.writepage == 0
            try handle.inode.contentLock.writing {
                let content = try content(handle)
                let at = appendAtEnd ? try content.plaintextSize() : Int64(offset)
                try content.write(UnsafeRawBufferPointer(start: data, count: size), at: at)
            }
            fuse_reply_write(req, size)
        } catch { fail(req, error, handle.inode) }
    }

    func flush(_ req: fuse_req_t?) {
        fuse_reply_err(req, 0)
    }

    func fsync(_ req: fuse_req_t?, _ datasync: Bool, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(fi.pointee.fh) else {
            fuse_reply_err(req, EBADF)
            return
        }
        let rc = datasync ? fdatasync(handle.fd) : SwiftGlibc.fsync(handle.fd)
        let code = rc == 0 ? 0 : errno
        if provider != nil && rc == 0 && handle.writable { providerFileChanged(handle.inode, wait: true) }
        fuse_reply_err(req, code)
    }

    func release(_ req: fuse_req_t?, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.release(fi.pointee.fh) else {
            fuse_reply_err(req, 0)
            return
        }
        handle.inode.adjustOpenCount(-1)
        let inode = handle.inode
        let written = handle.writable
        fuse_reply_err(req, 0)
        if provider != nil && written { providerFileChanged(inode) }
    }

    func fallocate(_ req: fuse_req_t?, _ mode: Int32, _ offset: Int, _ length: Int, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(fi.pointee.fh) else {
            fuse_reply_err(req, EBADF)
            return
        }
        guard mode == 0 else {
            fuse_reply_err(req, EOPNOTSUPP)
            return
        }
        do {
            // Range-checked (EINVAL, EFBIG) and released again on failure (ENOSPC) by allocate.
            try handle.inode.contentLock.writing {
                try content(handle).allocate(offset: Int64(offset), length: Int64(length))
            }
            fuse_reply_err(req, 0)
        } catch { fail(req, error, handle.inode) }
    }

    /// mamfs_fuse_SEEK_DATA / mamfs_fuse_SEEK_HOLE. Encrypted files have no holes (data up to the end); plain ones
    /// ask the backing file, shifted by the header.
    func lseek(_ req: fuse_req_t?, _ offset: Int, _ whence: Int32, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(fi.pointee.fh) else {
            fuse_reply_err(req, EBADF)
            return
        }
        do {
            let result: Int64 = try handle.inode.contentLock.reading {
                let content = try content(handle)
                let size = try content.plaintextSize()
                if whence != mamfs_fuse_SEEK_DATA && whence != mamfs_fuse_SEEK_HOLE { throw FilesystemError(code: EINVAL) }
                // As ext4: ENXIO for a negative offset or one at or past the end.
                guard offset >= 0, Int64(offset) < size else { throw FilesystemError(code: ENXIO) }
                if content.header?.isEncrypted == true {
                    return whence == mamfs_fuse_SEEK_DATA ? Int64(offset) : size
                }
                let position = Glibc.lseek(handle.fd, off_t(content.dataOffset + Int64(offset)), whence)
                guard position >= 0 else { throw FilesystemError.current() }
                return min(size, max(Int64(offset), Int64(position) - content.dataOffset))
            }
            fuse_reply_lseek(req, off_t(result))
        } catch { fail(req, error, handle.inode) }
    }
}
