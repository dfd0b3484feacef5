import CFuse
import Glibc
import MAMProtection
import MAMSystem

/// Directories and special files: mkdir, mknod, symlink, readlink, link, unlink, rmdir,
/// rename, fsyncdir, statfs.
extension OverlayFilesystem {
    /// Makes the directory `name` in `parent` (mode bits of `mode`), owned by the caller.
    func mkdir(parent: UInt64, name: UnsafePointer<CChar>, mode: mode_t, caller: Caller) throws -> MadeEntry {
        let made = try makeObject(parent, name, caller, mode: mode) { dirFD in mkdirat(dirFD, name, mode & 0o7777) }
        hooks.made(made, kind: .directory, fs: self)
        return made
    }

    /// Makes a special file, or a regular file tagged like a created one.
    func mknod(parent: UInt64, name: UnsafePointer<CChar>, mode: mode_t, rdev: dev_t, caller: Caller) throws -> MadeEntry {
        guard (mode & S_IFMT) == S_IFREG else {
            return try makeObject(parent, name, caller, mode: mode, special: true) { dirFD in mknodat(dirFD, name, mode, rdev) }
        }
        var made: MadeObject?
        do {
            let dir = try node(parent, for: .makeEntry, by: caller)
            try checkVisibleName(dir, name)
            let created = try createTagged(caller, dir: dir, name: name, mode: mode)
            made = created.made
            _ = consume created
            let (inode, st) = try lookupEntry(parent: dir, name: name)
            return MadeEntry(entry: entry(inode, st), made: made, directory: dir, name: nameBytes(name))
        } catch {
            made?.remove()
            throw error
        }
    }

    /// Makes the symlink `name` in `parent` pointing at `target` (the kernel's bytes).
    func symlink(target: UnsafePointer<CChar>, parent: UInt64, name: UnsafePointer<CChar>, caller: Caller) throws -> MadeEntry {
        try makeObject(parent, name, caller, special: true) { dirFD in symlinkat(target, dirFD, name) }
    }

    /// mkdir, mknod (not regular) and symlink (`special`: admitted as `.makeSpecial`): `make`
    /// creates `name` in the directory open as
    /// its argument and returns 0 or -1 with errno; it runs as the caller (`asCaller`: the
    /// object is born the caller's, with the set-id bits of `mode` the kernel lets the caller
    /// keep) and the object is looked up. On any failure after it was
    /// made, it is removed again (MadeObject).
    private func makeObject(_ parent: UInt64, _ name: UnsafePointer<CChar>, _ caller: Caller, mode: mode_t = 0,
                            special: Bool = false, _ make: (Int32) -> Int32) throws -> MadeEntry {
        var made: MadeObject?
        do {
            let dir = try node(parent, for: .makeEntry, by: caller)
            try checkVisibleName(dir, name)
            if special { try admit(.makeSpecial(name: name), on: dir, by: caller) }
            let dirFD = try dir.descriptor()
            do {
                try asCaller(caller, mode: mode) { () throws(Errno) in guard make(dirFD) == 0 else { throw Errno.current } }
            } catch {
                throw FilesystemError(code: error.rawValue)
            }
            made = MadeObject(directoryFD: dirFD, name: name)
            let (inode, st) = try lookupEntry(parent: dir, name: name)
            return MadeEntry(entry: entry(inode, st), made: made, directory: dir, name: nameBytes(name))
        } catch {
            made?.remove()
            throw error
        }
    }

    /// The symlink's target bytes (without a terminating NUL).
    func readlink(_ nodeid: UInt64, caller: Caller) throws -> [CChar] {
        let inode = try node(nodeid, for: .readLink, by: caller)
        return try SymbolicLink.readLink(atFD: inode.fd, name: "").map { CChar(bitPattern: $0) }
    }

    /// A new hard link `newName` in `newParent` to `nodeid`.
    func link(_ nodeid: UInt64, newParent: UInt64, newName: UnsafePointer<CChar>, caller: Caller) throws -> MadeEntry {
        try namespaceLock.reading {
            var made: MadeObject?
            do {
                let inode = try node(nodeid, for: .link, by: caller)
                let dir = try node(newParent, for: .makeEntry, by: caller)
                try checkVisibleName(dir, newName)
                try admit(.linkInto(dir, name: newName), on: inode, by: caller)
                let source = ProcessDescriptorPath.path(of: try inode.descriptor())
                let dirFD = try dir.descriptor()
                guard linkat(AT_FDCWD, source, dirFD, newName, AT_SYMLINK_FOLLOW) == 0 else { throw FilesystemError.current() }
                made = MadeObject(directoryFD: dirFD, name: newName)
                let (linked, st) = try lookupEntry(parent: dir, name: newName)
                let result = MadeEntry(entry: entry(linked, st), made: made, directory: dir, name: nameBytes(newName))
                hooks.made(result, kind: .hardLink, fs: self)
                return result
            } catch {
                made?.remove()
                throw error
            }
        }
    }

    /// unlink (`directory` false) or rmdir of `name` in `parent`: one unlinkat, with the mount
    /// kind's work around it.
    func unlink(parent: UInt64, name: UnsafePointer<CChar>, directory: Bool, caller: Caller) throws {
        let dir = try node(parent, for: .removeEntry, by: caller)
        try checkVisibleName(dir, name, missing: true)
        try hooks.removing(name, in: dir, directory: directory, fs: self) {
            let victim = prepareUnlink(dir, name, directory: directory)
            let named = entryBeforeRemoval(dir, name)
            guard unlinkat(dir.fd, name, directory ? AT_REMOVEDIR : 0) == 0 else { throw FilesystemError.current() }
            recordRemoval(named, dir: dir, name: name)
            victim?.markAwaitingEviction(table.pendingEvictions, directory: dir.key)
        }
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

    /// rename(2)/renameat2 of `name` in `parent` to `newName` in `newParent` (flags 0,
    /// RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT, as the backing renameat2 takes
    /// them): one rename, with the mount kind's work around it. The whiteout RENAME_WHITEOUT
    /// leaves at the old name (a character device 0:0, what overlayfs on top of the mount
    /// needs) is made by the backing filesystem and given to the caller.
    /// - Throws: EINVAL for other flags, the backing rename's errno (EEXIST, ENOTEMPTY, EPERM
    ///   for a whiteout the daemon may not make, ...).
    func rename(parent: UInt64, name: UnsafePointer<CChar>, newParent: UInt64, newName: UnsafePointer<CChar>,
                flags: UInt32, caller: Caller) throws {
        try namespaceLock.reading {
            let from = try node(parent, for: .rename, by: caller)
            let to = try node(newParent, for: .rename, by: caller)
            let known = SystemConstants.renameNoReplace | SystemConstants.renameExchange | SystemConstants.renameWhiteout
            guard flags & ~known == 0 else { throw FilesystemError(code: EINVAL) }
            let exchange = flags & SystemConstants.renameExchange != 0
            try checkVisibleName(from, name, missing: true)
            try checkVisibleName(to, newName)
            try admit(.moveEntry(name: name, into: to, newName: newName), on: from, by: caller)
            if exchange { try admit(.moveEntry(name: newName, into: from, newName: name), on: to, by: caller) }
            let move = RenameRequest(from: from, name: name, to: to, newName: newName, exchange: exchange)
            try hooks.renaming(move, fs: self) {
                let entries = entriesBeforeRename(from, name, to, newName, exchange: exchange)
                try SystemCall.rename(from: from.fd, name, to: to.fd, newName, flags: flags)
                recordRename(entries, from: from, name: name, to: to, newName: newName, exchange: exchange)
                if flags & SystemConstants.renameWhiteout != 0 { giveWhiteoutToCaller(caller, dirFD: from.fd, name: name) }
            }
        }
    }

    /// fsync of the backing directory.
    func fsyncdir(_ nodeid: UInt64, caller: Caller) throws {
        let inode = try node(nodeid, for: .sync, by: caller)
        let directory = try FileDescriptor.open(in: inode.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        try directory.sync()
    }

    /// statvfs of the backing directory (about the whole mount: nothing to admit).
    func statfs(caller: Caller) throws -> statvfs {
        var st = statvfs()
        guard statvfs(rootPath, &st) == 0 else { throw FilesystemError.current() }
        return st
    }

    /// The kernel's name bytes with the terminating NUL.
    func nameBytes(_ name: UnsafePointer<CChar>) -> [CChar] {
        Array(UnsafeBufferPointer(start: name, count: strlen(name) + 1))
    }
}
