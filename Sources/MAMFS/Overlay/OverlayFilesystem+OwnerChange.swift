import CFuse
import Glibc
import MAMProtection
import MAMSystem

/// Owner changes through the mount (writing `user.mam.owner`), checked with the caller's
/// credentials on every object they rewrite.
///
/// The daemon may run as root for an `allow_other` mount: its own access(2) says nothing about
/// the caller, and the kernel (default_permissions) checks only the object named in the
/// setxattr, not the files a recursive protect of a directory rewrites below it. Every one of
/// them is checked here before anything changes; one the caller could not write fails the
/// whole request with EACCES (as the kernel answers a write-permission failure) and nothing
/// is changed.
extension OverlayFilesystem {
    /// Writing `user.mam.owner` = `mamfs protect` on the backing path (recursive for a directory).
    /// - Parameter encrypted: true (writing `user.mam.encrypted` = 1 on a regular file): the
    ///   file is left encrypted for `owner` (a managed account) also when `owner`'s policy does
    ///   not require it: protected, then encrypted in place (`mamfs encrypt`) when still plain.
    /// - Throws: `FilesystemError(EACCES)` when `caller` may not write `inode` or, for a
    ///   directory, a file or tagged directory below it (or may not search a directory below it);
    ///   EPERM for other kinds of objects; the protect's own errors (EMLINK: a file with other
    ///   hard links is not encrypted in place).
    ///
    /// Renames and links through the mount wait until it is done (`namespaceLock`). Other
    /// changes of the tree (a directory removed and a symlink put in its place) may race the
    /// walk, so the protect itself goes by descriptors from the backing root, never follows a
    /// symlink, and checks each object again on the descriptor it rewrites.
    func protect(_ inode: Inode, owner: String, caller: CallerCredentials, encrypted: Bool = false) throws {
        try namespaceLock.writing { try protectChecked(inode, owner: owner, caller: caller, encrypted: encrypted) }
    }

    private func protectChecked(_ inode: Inode, owner: String, caller: CallerCredentials, encrypted: Bool) throws {
        // The daemon's own write access (protect rewrites the file), for mounts run by a user.
        guard Glibc.access(inode.procPath, W_OK) == 0 else { throw FilesystemError.current() }
        try checkOwnerChange(of: inode, by: caller)
        refresh(force: true)
        try requireOwnerChangeUnlocked(inode, to: owner)
        let path = try backingPath(inode)
        let check = ownerChangeCheck(of: inode, by: caller)
        if inode.isRegular {
            // By descriptors from the backing root: the file is rewritten in the directory
            // that holds it now, by name, and only if that name is still this file.
            try withConfinedParent(of: path) { parent, name in
                try inode.contentLock.writing {
                    // Also after a failure: a rewrite may have replaced the file before it.
                    defer { repoint(inode, toPath: path, handles: handlesAfterOwnerChange(inode)) }
                    try context.files.protect(file: name, in: parent, path: path, accountId: owner, encrypted: encrypted, check: check)
                }
            }
        } else if inode.isDirectory {
            // The files below that have entries, by the names they have now: those the protect
            // rewrites are followed by these names (the same plaintext under a new header).
            let before = filesBelow(path)
            // Also after a failure part of the way: the files rewritten until then.
            defer {
                for (file, filePath) in before {
                    file.contentLock.writing { repoint(file, toPath: filePath, handles: handlesAfterOwnerChange(file)) }
                }
            }
            let directory = try FileDescriptor.open(in: inode.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            try context.files.protect(directory: directory.rawValue, path: path, accountId: owner, recursive: true, check: check)
        } else {
            throw FilesystemError(code: EPERM)
        }
    }

    /// The check the protect runs on each object as it opens it (see `ProtectCheck`): the
    /// walk above ran on the tree as it was, and a name may lead elsewhere by the time the
    /// protect gets to it. The target must still be `inode` and writable by the caller; below
    /// it the rules of `checkOwnerChange(of:in:by:)`.
    private func ownerChangeCheck(of inode: Inode, by caller: CallerCredentials) -> ProtectCheck {
        let key = inode.key
        return { object, st in
            switch object {
            case .target:
                guard BackingKey(st) == key else { throw FilesystemError(code: ESTALE) }
                guard caller.permits(.write, on: st) else { throw FilesystemError(code: EACCES) }
            case .file:
                guard caller.permits(.write, on: st) else { throw FilesystemError(code: EACCES) }
            case .directory(let tagged):
                guard caller.permits(.search, on: st), !tagged || caller.permits(.write, on: st) else {
                    throw FilesystemError(code: EACCES)
                }
            }
        }
    }

    /// While the session lock withholds keys: EACCES for an owner change from or to a withheld
    /// account (a plain file of one would otherwise be declassified and readable while locked),
    /// and for any directory's (its files' owners are not known before the walk).
    private func requireOwnerChangeUnlocked(_ inode: Inode, to owner: String) throws {
        guard keysWithheld.load(ordering: .acquiring) else { return }
        try requireNotWithheld(owner: owner)
        if inode.isDirectory { throw FilesystemError(code: EACCES) }
        guard inode.isRegular else { return }
        let current = try inode.contentLock.reading { try header(inode, ctime: try SystemCall.stat(fd: try inode.descriptor()).st_ctim) }
        try requireNotWithheld(owner: current?.owner)
    }

    /// Checks `inode` and, for a directory, everything a recursive protect rewrites below it
    /// (regular files, tagged directories; directories it walks must be searchable).
    private func checkOwnerChange(of inode: Inode, by caller: CallerCredentials) throws {
        var st = stat()
        guard fstatat(inode.fd, "", &st, SystemConstants.emptyPath | AT_SYMLINK_NOFOLLOW) == 0 else { throw FilesystemError.current() }
        guard caller.permits(.write, on: st) else { throw FilesystemError(code: EACCES) }
        // Root may write everything: no walk.
        guard inode.isDirectory, caller.uid != 0 else { return }
        let directory = try FileDescriptor.open(in: inode.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        try checkOwnerChange(below: directory, depth: 0, by: caller)
    }

    /// The walk below the open directory `directory` (`depth` levels below the directory whose
    /// owner changes), by descriptors without following symlinks, as the recursive protect sees
    /// the tree.
    /// - Throws: ENAMETOOLONG for a tree deeper than `TreeDepth.maximum`, as the protect would.
    private func checkOwnerChange(below directory: consuming FileDescriptor, depth: Int, by caller: CallerCredentials) throws {
        guard depth < TreeDepth.maximum else { throw FilesystemError(code: ENAMETOOLONG) }
        let dirFD = directory.rawValue
        var entries = try DirectoryIterator(adopting: directory)
        while let entry = try entries.next() {
            try entry.cName.withUnsafeBufferPointer { buffer in
                guard let name = buffer.baseAddress else { return }
                try checkOwnerChange(of: name, in: dirFD, depth: depth, by: caller)
            }
        }
    }

    /// One entry of the walk: a file must be writable, a directory searchable (and writable
    /// when tagged), and what is below a directory is checked in turn.
    private func checkOwnerChange(of name: UnsafePointer<CChar>, in dirFD: Int32, depth: Int, by caller: CallerCredentials) throws {
        guard let st = try? SystemCall.stat(in: dirFD, name) else { return }
        switch st.st_mode & S_IFMT {
        case S_IFREG:
            guard caller.permits(.write, on: st) else { throw FilesystemError(code: EACCES) }
        case S_IFDIR:
            guard caller.permits(.search, on: st) else { throw FilesystemError(code: EACCES) }
            let child = try FileDescriptor.open(in: dirFD, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if DirectoryOwner.read(path: ProcessDescriptorPath.path(of: child.rawValue)) != nil && !caller.permits(.write, on: st) {
                throw FilesystemError(code: EACCES)
            }
            try checkOwnerChange(below: child, depth: depth + 1, by: caller)
        default:
            return
        }
    }
}
