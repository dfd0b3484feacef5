import CFuse
import Glibc
import MAMFileProvider
import MAMProtection

/// The request handlers. Each answers its request exactly once.
extension OverlayFilesystem {
    /// `path` is only evaluated when the error is logged (a readlink per failed lookup otherwise).
    private func fail(_ req: fuse_req_t?, _ error: Error, _ inode: Inode? = nil, path: @autoclosure () -> String? = nil) {
        fuse_reply_err(req, errnoCode(error, inode, path: path()))
    }

    private func node(_ ino: fuse_ino_t) throws -> Inode {
        guard let inode = table.inode(ino) else { throw FilesystemError(code: ESTALE) }
        return inode
    }

    /// EPERM/ENOENT for the provider's metadata directory at the root of a provider mount
    /// (`.mamfs-provider` is not part of the tree programs see).
    private func checkVisibleName(_ parent: Inode, _ name: UnsafePointer<CChar>, missing: Bool = false) throws {
        guard provider != nil, parent.nodeid == table.root.nodeid, MountedProvider.isMetadataName(name) else { return }
        throw FilesystemError(code: missing ? ENOENT : EPERM)
    }

    /// The backing path of `name` in the directory `dir`.
    private func childPath(_ dir: Inode, _ name: UnsafePointer<CChar>) throws -> String {
        let parent = try backingPath(dir)
        return (parent == "/" ? "" : parent) + "/" + String(cString: name)
    }

    /// Materializes `inode` when it is a placeholder of a non-replicated provider mount:
    /// `startProvidingItem` under the exclusive content lock, then the entry is pointed at the
    /// provided file (it replaced the placeholder by rename).
    private func materializeIfPlaceholder(_ inode: Inode) throws {
        guard let provider, provider.nonReplicated != nil, inode.isRegular else { return }
        var st = stat()
        guard fstatat(inode.fd, "", &st, mamfs_fuse_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0, st.st_size == 0 else { return }
        try inode.content.writing {
            let path = try backingPath(inode)
            if try provider.materialize(path: path) { rekey(inode, toPath: path) }
        }
    }

    /// A file written through a provider mount was closed, fsynced or truncated. Non-replicated:
    /// the upload is queued behind earlier provider work and finds the file by its entry (the
    /// path it has when the upload runs, after any rename; nothing when it was removed), so a
    /// close followed at once by a rename never uploads under a stale name. `wait` (fsync)
    /// returns once it is done.
    private func providerFileChanged(_ inode: Inode, wait: Bool = false) {
        guard let provider else { return }
        guard provider.nonReplicated != nil else {
            provider.fileChanged(path: "")
            return
        }
        provider.enqueue(wait: wait) { [self] in
            DescriptorCache.withPins {
                inode.content.reading {
                    var st = stat()
                    guard fstatat(inode.fd, "", &st, mamfs_fuse_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0, st.st_nlink > 0,
                          let path = try? backingPath(inode) else { return }
                    provider.fileChanged(path: path)
                }
            }
        }
    }

    private func replyEntry(_ req: fuse_req_t?, _ inode: Inode, _ st: stat) {
        var e = entryParameters(inode, st)
        if fuse_reply_entry(req, &e) != 0 { table.forget(inode.nodeid, count: 1) }
    }

    // MARK: Lifecycle

    func initialize(_ conn: UnsafeMutablePointer<fuse_conn_info>) {
        // Requests of up to 1 MiB. libfuse 3.14 has no FUSE_CAP_MAX_PAGES to ask for: it answers
        // the kernel's FUSE_MAX_PAGES with max_pages = max_write / page size (at most its 1 MiB
        // buffer), so max_write sets the size of direct-I/O reads too. max_read is left as
        // libfuse set it (0 = no limit, or the -o max_read mount option, which it must match);
        // a smaller -o max_write still wins.
        conn.pointee.max_write = 1 << 20
        if let connectionOptions { fuse_apply_conn_info_opts(connectionOptions, conn) }
        // Writes go through to us (no writeback cache), so O_APPEND and sizes stay ours.
        conn.pointee.want &= ~UInt32(FUSE_CAP_WRITEBACK_CACHE)
    }

    // MARK: Names

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
                st = try inode.content.writing {
                    var before = stat()
                    let known = fstatat(inode.fd, "", &before, mamfs_fuse_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0
                        ? inode.cachedHeader(ctime: before.st_ctim) : nil
                    try applyMetadata(inode, handle, attr, toSet)
                    var after = stat()
                    if let known, fstatat(inode.fd, "", &after, mamfs_fuse_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0 {
                        inode.storeHeader(known, stamp: after.st_ctim)
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
        try inode.content.writing {
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

    // MARK: Directories and special files

    func mkdir(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>, _ mode: mode_t) {
        var made: MadeObject?
        do {
            let dir = try node(parent)
            try checkVisibleName(dir, name)
            let dirFD = try dir.descriptor()
            guard mkdirat(dirFD, name, mode & 0o7777) == 0 else { throw FilesystemError.current() }
            made = MadeObject(directoryFD: dirFD, name: name)
            chownToCaller(req, dirFD: dirFD, name: name)
            let (inode, st) = try lookupEntry(parent: dir, name: name)
            replyMade(req, inode, st, made, dir: dir, name: name)
        } catch {
            made?.remove()
            fail(req, error, path: table.inode(parent).flatMap { try? childPath($0, name) })
        }
    }

    func mknod(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>, _ mode: mode_t, _ rdev: dev_t) {
        var made: MadeObject?
        do {
            let dir = try node(parent)
            try checkVisibleName(dir, name)
            if (mode & S_IFMT) == S_IFREG {
                // Regular files made by mknod are tagged like created ones.
                let created = try createTagged(req, dir: dir, name: name, mode: mode)
                made = created.made
                close(created.fd)
            } else {
                let dirFD = try dir.descriptor()
                guard mknodat(dirFD, name, mode, rdev) == 0 else { throw FilesystemError.current() }
                made = MadeObject(directoryFD: dirFD, name: name)
                chownToCaller(req, dirFD: dirFD, name: name)
            }
            let (inode, st) = try lookupEntry(parent: dir, name: name)
            replyMade(req, inode, st, made, dir: dir, name: name)
        } catch {
            made?.remove()
            fail(req, error, path: table.inode(parent).flatMap { try? childPath($0, name) })
        }
    }

    func symlink(_ req: fuse_req_t?, _ target: UnsafePointer<CChar>, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>) {
        var made: MadeObject?
        do {
            let dir = try node(parent)
            try checkVisibleName(dir, name)
            let dirFD = try dir.descriptor()
            guard symlinkat(target, dirFD, name) == 0 else { throw FilesystemError.current() }
            made = MadeObject(directoryFD: dirFD, name: name)
            chownToCaller(req, dirFD: dirFD, name: name)
            let (inode, st) = try lookupEntry(parent: dir, name: name)
            replyMade(req, inode, st, made, dir: dir, name: name)
        } catch {
            made?.remove()
            fail(req, error, path: table.inode(parent).flatMap { try? childPath($0, name) })
        }
    }

    func readlink(_ req: fuse_req_t?, _ ino: fuse_ino_t) {
        do {
            let inode = try node(ino)
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let n = readlinkat(inode.fd, "", &buffer, buffer.count - 1)
            guard n >= 0 else { throw FilesystemError.current() }
            buffer[n] = 0
            fuse_reply_readlink(req, buffer)
        } catch { fail(req, error) }
    }

    func link(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ newParent: fuse_ino_t, _ newName: UnsafePointer<CChar>) {
        var made: MadeObject?
        do {
            let inode = try node(ino)
            let dir = try node(newParent)
            try checkVisibleName(dir, newName)
            let source = "/proc/self/fd/\(try inode.descriptor())"
            let dirFD = try dir.descriptor()
            guard linkat(AT_FDCWD, source, dirFD, newName, AT_SYMLINK_FOLLOW) == 0 else { throw FilesystemError.current() }
            made = MadeObject(directoryFD: dirFD, name: newName)
            let (linked, st) = try lookupEntry(parent: dir, name: newName)
            replyMade(req, linked, st, made, dir: dir, name: newName)
        } catch {
            made?.remove()
            fail(req, error)
        }
    }

    func unlink(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>, directory: Bool) {
        do {
            let dir = try node(parent)
            try checkVisibleName(dir, name, missing: true)
            guard let provider else {
                let victim = prepareUnlink(dir, name, directory: directory)
                let named = entryBeforeRemoval(dir, name)
                guard unlinkat(dir.fd, name, directory ? AT_REMOVEDIR : 0) == 0 else { throw FilesystemError.current() }
                recordRemoval(named, dir: dir, name: name)
                victim?.markAwaitingEviction(table.pendingEvictions, directory: dir.key)
                fuse_reply_err(req, 0)
                return
            }
            // The remote item is read before the local one goes (its attributes go with it);
            // a file that keeps other hard links keeps its remote item.
            // Done in order with the queued provider work (an upload queued by a close before
            // this unlink has written its attributes, so the item is known here).
            let path = try childPath(dir, name)
            let (lastLink, item) = try provider.serialized { () throws -> (Bool, MountedProvider.RemovedItem?) in
                var st = stat()
                let lastLink = fstatat(dir.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && (directory || st.st_nlink <= 1)
                let item = lastLink ? provider.itemBeforeRemoval(path: path) : nil
                let victim = prepareUnlink(dir, name, directory: directory)
                let named = entryBeforeRemoval(dir, name)
                guard unlinkat(dir.fd, name, directory ? AT_REMOVEDIR : 0) == 0 else { throw FilesystemError.current() }
                recordRemoval(named, dir: dir, name: name)
                victim?.markAwaitingEviction(table.pendingEvictions, directory: dir.key)
                return (lastLink, item)
            }
            fuse_reply_err(req, 0)
            if lastLink {
                if provider.nonReplicated != nil {
                    provider.enqueue { provider.itemRemoved(item, path: path) }
                } else {
                    provider.itemRemoved(item, path: path)
                }
            }
        } catch { fail(req, error) }
    }

    /// Before unlink/rmdir of `name` in `dir`: for rmdir, waits (briefly) until files unlinked
    /// from that directory have been freed by their entries' closes; for unlink, returns the
    /// entry of a file whose last link this is, to be marked once the unlink succeeded.
    private func prepareUnlink(_ dir: Inode, _ name: UnsafePointer<CChar>, directory: Bool) -> Inode? {
        var st = stat()
        guard fstatat(dir.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        if directory {
            table.pendingEvictions.wait(directory: BackingKey(st), milliseconds: 100)
            return nil
        }
        guard st.st_nlink <= 1 else { return nil }
        return table.existing(BackingKey(st))
    }

    func rename(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>, _ newParent: fuse_ino_t, _ newName: UnsafePointer<CChar>, _ flags: UInt32) {
        do {
            let from = try node(parent)
            let to = try node(newParent)
            guard flags & ~(mamfs_fuse_RENAME_NOREPLACE | mamfs_fuse_RENAME_EXCHANGE) == 0 else { throw FilesystemError(code: EINVAL) }
            let exchange = flags & mamfs_fuse_RENAME_EXCHANGE != 0
            guard let provider else {
                let entries = entriesBeforeRename(from, name, to, newName, exchange: exchange)
                let rc = flags == 0 ? renameat(from.fd, name, to.fd, newName) : mamfs_fuse_renameat2(from.fd, name, to.fd, newName, flags)
                guard rc == 0 else { throw FilesystemError.current() }
                recordRename(entries, from: from, name: name, to: to, newName: newName, exchange: exchange)
                fuse_reply_err(req, 0)
                return
            }
            try checkVisibleName(from, name, missing: true)
            try checkVisibleName(to, newName)
            let oldPath = try childPath(from, name)
            let newPath = try childPath(to, newName)
            // The local rename runs in order with the queued provider work (the upload queued
            // by the close of a temp file is done before it is renamed over its target). The
            // replaced target's item is read before it goes, unless it is the same item (a
            // rename onto itself or onto another hard link of it); the renamed objects are
            // held by identity so the queued remote work finds them wherever they are then.
            let (source, target, replaced) = try provider.serialized {
                () throws -> (MountedProvider.LocalObject?, MountedProvider.LocalObject?, MountedProvider.RemovedItem?) in
                var replaced = exchange ? nil : provider.itemBeforeRemoval(path: newPath)
                if let target = replaced, provider.itemBeforeRemoval(path: oldPath)?.identifier == target.identifier { replaced = nil }
                let source = MountedProvider.LocalObject(directory: from.fd, name: name)
                let target = exchange ? MountedProvider.LocalObject(directory: to.fd, name: newName) : nil
                let entries = entriesBeforeRename(from, name, to, newName, exchange: exchange)
                let rc = flags == 0 ? renameat(from.fd, name, to.fd, newName) : mamfs_fuse_renameat2(from.fd, name, to.fd, newName, flags)
                guard rc == 0 else { throw FilesystemError.current() }
                recordRename(entries, from: from, name: name, to: to, newName: newName, exchange: exchange)
                return (source, target, replaced)
            }
            fuse_reply_err(req, 0)
            if provider.nonReplicated != nil {
                provider.enqueue {
                    provider.itemRenamed(source, path: newPath, replaced: replaced)
                    if exchange { provider.itemRenamed(target, path: oldPath, replaced: nil) }
                }
            } else {
                provider.itemRenamed(nil, path: newPath, replaced: nil)
            }
        } catch { fail(req, error) }
    }

    func opendir(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        refresh(force: false)
        do {
            let inode = try node(ino)
            let dir = OpenDirectory(inode: inode)
            dir.entries = try listing(inode)
            fi.pointee.fh = dir.retainedHandle()
            fi.pointee.cache_readdir = 0
            if fuse_reply_open(req, fi) != 0 { _ = OpenDirectory.release(fi.pointee.fh) }
        } catch { fail(req, error) }
    }

    /// The entries of a backing directory, without files of wiped owners.
    private func listing(_ inode: Inode) throws -> [DirectoryEntry] {
        let fd = openat(inode.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw FilesystemError.current() }
        guard let stream = fdopendir(fd) else {
            let error = FilesystemError.current()
            close(fd)
            throw error
        }
        defer { closedir(stream) }
        let checkOwners = hasWipedOwners
        let hideMetadata = provider != nil && inode.nodeid == table.root.nodeid
        var entries: [DirectoryEntry] = []
        while true {
            errno = 0
            guard let entry = Glibc.readdir(stream) else {
                if errno != 0 { throw FilesystemError.current() }
                break
            }
            // The name's bytes as they are (with the terminating NUL): names need not be UTF-8.
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: entry.pointee.d_name)) {
                    Array(UnsafeBufferPointer(start: $0, count: strlen($0) + 1))
                }
            }
            let type = entry.pointee.d_type
            if hideMetadata && MountedProvider.isMetadataName(name) { continue }
            if checkOwners && type == UInt8(DT_REG) && ownerIsWiped(dirFD: Glibc.dirfd(stream), name: name) { continue }
            entries.append(DirectoryEntry(name: name, ino: UInt64(entry.pointee.d_ino), type: type))
        }
        return entries
    }

    private func ownerIsWiped(dirFD: Int32, name: UnsafePointer<CChar>) -> Bool {
        let fd = openat(dirFD, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return isHidden((try? ProtectedFileHeader.read(fd: fd)) ?? nil)
    }

    func readdir(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ size: Int, _ offset: Int, _ fi: UnsafeMutablePointer<fuse_file_info>, plus: Bool) {
        guard let dir = OpenDirectory.borrow(fi.pointee.fh) else {
            fuse_reply_err(req, EBADF)
            return
        }
        do {
            let (entries, prefetch) = try dir.mutex.withLock { () throws -> ([DirectoryEntry], Range<Int>) in
                if offset == 0 {
                    dir.entries = try listing(dir.inode)
                    dir.prefetchedUpTo = 0
                }
                guard plus else { return (dir.entries, 0..<0) }
                // The entries of this reply and the next (about 24 fit in a 4 KiB reply). The
                // offset is the caller's (lseek on the directory): clamped before any arithmetic.
                let from = min(max(offset, 0), dir.entries.count)
                let start = max(dir.prefetchedUpTo, from)
                let end = min(dir.entries.count, from + 2 * OverlayFilesystem.headerPrefetchWindow)
                if start < end { dir.prefetchedUpTo = end }
                return (dir.entries, start..<max(start, end))
            }
            if !prefetch.isEmpty { prefetchHeaders(dir.inode, entries[prefetch]) }
            let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: max(size, 1))
            defer { buffer.deallocate() }
            var used = 0
            var index = max(0, offset)
            // Entries whose lookup count went up for this reply (readdirplus).
            var counted: [Inode] = []
            while index < entries.count {
                let entry = entries[index]
                let next = off_t(index + 1)
                let needed: Int
                if plus {
                    var e = fuse_entry_param()
                    var looked: Inode?
                    if entry.isDotOrDotDot {
                        e.attr.st_ino = ino_t(entry.ino)
                        e.attr.st_mode = mode_t(entry.type) << 12
                    } else {
                        do {
                            // Each entry's descriptor is released once looked up (not held for the reply).
                            let (inode, st) = try DescriptorCache.withPins { try lookupEntry(parent: dir.inode, name: entry.name) }
                            looked = inode
                            e = entryParameters(inode, st)
                        } catch {
                            // Hidden entries (a wiped owner's files) stay out of the listing; an
                            // entry that cannot be looked up (a damaged header) is listed without
                            // attributes (nodeid 0), so its stat reports the error instead.
                            if errnoCode(error, nil, path: try? childPath(dir.inode, entry.name)) == ENOENT {
                                index += 1
                                continue
                            }
                            e.attr.st_ino = ino_t(entry.ino)
                            e.attr.st_mode = mode_t(entry.type) << 12
                        }
                    }
                    needed = fuse_add_direntry_plus(req, buffer + used, size - used, entry.name, &e, next)
                    if needed > size - used {
                        if let looked { table.forget(looked.nodeid, count: 1) }
                        break
                    }
                    if let looked { counted.append(looked) }
                } else {
                    var st = stat()
                    st.st_ino = ino_t(entry.ino)
                    st.st_mode = mode_t(entry.type) << 12
                    needed = fuse_add_direntry(req, buffer + used, size - used, entry.name, &st, next)
                    if needed > size - used { break }
                }
                used += needed
                index += 1
            }
            if fuse_reply_buf(req, buffer, used) != 0 {
                // The kernel dropped the request (interrupted): it will never forget these.
                for inode in counted { table.forget(inode.nodeid, count: 1) }
            }
        } catch { fail(req, error) }
    }

    /// Starts reading the headers of the regular files among `entries` (one page each,
    /// POSIX_FADV_WILLNEED: asynchronous), so the lookups of a readdirplus reply find them in
    /// the page cache instead of waiting for one disk read after another. Files whose entry
    /// already holds a header are skipped.
    private func prefetchHeaders(_ dir: Inode, _ entries: ArraySlice<DirectoryEntry>) {
        let device = dir.key.device
        for entry in entries where entry.type == UInt8(DT_REG) {
            if let known = table.existing(BackingKey(device: device, inode: entry.ino)), known.hasCachedHeader { continue }
            let fd = openat(dir.fd, entry.name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { continue }
            _ = posix_fadvise(fd, 0, off_t(ProtectedFileHeader.maximumLength), POSIX_FADV_WILLNEED)
            close(fd)
        }
    }

    func releasedir(_ req: fuse_req_t?, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        _ = OpenDirectory.release(fi.pointee.fh)
        fuse_reply_err(req, 0)
    }

    func fsyncdir(_ req: fuse_req_t?, _ ino: fuse_ino_t) {
        do {
            let inode = try node(ino)
            let fd = openat(inode.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else { throw FilesystemError.current() }
            defer { close(fd) }
            guard SwiftGlibc.fsync(fd) == 0 else { throw FilesystemError.current() }
            fuse_reply_err(req, 0)
        } catch { fail(req, error) }
    }

    func statfs(_ req: fuse_req_t?) {
        var st = statvfs()
        guard statvfs(rootPath, &st) == 0 else {
            fuse_reply_err(req, errno)
            return
        }
        fuse_reply_statfs(req, &st)
    }

    // MARK: Files

    /// Creates `name` exclusively and writes its header (owner inherited from the nearest tagged
    /// directory, else the mount's account). Returns the O_RDWR backing descriptor.
    /// Creates `name` in `dir` with the inherited owner's header written; returns the read-write
    /// descriptor with the header and file key it was written with.
    /// `made` is what the caller removes when it fails later.
    private func createTagged(_ req: fuse_req_t?, dir: Inode, name: UnsafePointer<CChar>, mode: mode_t) throws
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
                inode.content.writing {
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
            try inode.content.writing {
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
                let count = try handle.inode.content.reading {
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
            try handle.inode.content.writing {
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
            try handle.inode.content.writing {
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
            let result: Int64 = try handle.inode.content.reading {
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

    // MARK: Extended attributes

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
        let header = try inode.content.reading { () throws -> ProtectedFileHeader? in
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
