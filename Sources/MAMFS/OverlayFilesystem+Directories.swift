import CFuse
import Glibc
import MAMFileProvider
import MAMProtection

/// Request handlers for directories and special files: mkdir, mknod, symlink, readlink, link, unlink, rename, directory listing, statfs. Each answers its request exactly once.
extension OverlayFilesystem {
    func mkdir(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>, _ mode: mode_t) {
        makeObject(req, parent, name) { dirFD in mkdirat(dirFD, name, mode & 0o7777) }
    }

    func mknod(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>, _ mode: mode_t, _ rdev: dev_t) {
        guard (mode & S_IFMT) == S_IFREG else {
            makeObject(req, parent, name) { dirFD in mknodat(dirFD, name, mode, rdev) }
            return
        }
        // Regular files made by mknod are tagged like created ones.
        var made: MadeObject?
        do {
            let dir = try node(parent)
            try checkVisibleName(dir, name)
            let created = try createTagged(req, dir: dir, name: name, mode: mode)
            made = created.made
            close(created.fd)
            let (inode, st) = try lookupEntry(parent: dir, name: name)
            replyMade(req, inode, st, made, dir: dir, name: name)
        } catch {
            made?.remove()
            fail(req, error, path: table.inode(parent).flatMap { try? childPath($0, name) })
        }
    }

    func symlink(_ req: fuse_req_t?, _ target: UnsafePointer<CChar>, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>) {
        makeObject(req, parent, name) { dirFD in symlinkat(target, dirFD, name) }
    }

    /// mkdir, mknod (not regular) and symlink: `make` creates `name` in the directory open as
    /// its argument and returns 0 or -1 with errno; the object is given to the caller, looked
    /// up and replied. On any failure after it was made, it is removed again (MadeObject).
    private func makeObject(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>,
                            _ make: (Int32) -> Int32) {
        var made: MadeObject?
        do {
            let dir = try node(parent)
            try checkVisibleName(dir, name)
            let dirFD = try dir.descriptor()
            guard make(dirFD) == 0 else { throw FilesystemError.current() }
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
            let entries = try listing(inode)
            dir.snapshot.withLock { $0.entries = entries }
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
            let (entries, prefetch) = try dir.snapshot.withLock { snapshot throws -> ([DirectoryEntry], Range<Int>) in
                if offset == 0 {
                    snapshot.entries = try listing(dir.inode)
                    snapshot.prefetchedUpTo = 0
                }
                guard plus else { return (snapshot.entries, 0..<0) }
                // The entries of this reply and the next (about 24 fit in a 4 KiB reply). The
                // offset is the caller's (lseek on the directory): clamped before any arithmetic.
                let from = min(max(offset, 0), snapshot.entries.count)
                let start = max(snapshot.prefetchedUpTo, from)
                let end = min(snapshot.entries.count, from + 2 * OverlayFilesystem.headerPrefetchWindow)
                if start < end { snapshot.prefetchedUpTo = end }
                return (snapshot.entries, start..<max(start, end))
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
}
