import CFuse
import Glibc
import MAMProtection
import MAMSystem

/// Names and attributes: lookup, forget, access, getattr, setattr.
extension OverlayFilesystem {
    /// Finds `name` in the directory `parent` (lookup count + 1).
    /// - Throws: ENOENT (also for a wiped owner's file or a reserved name), ESTALE, the
    ///   header's errors.
    func lookup(parent: UInt64, name: UnsafePointer<CChar>, caller: Caller) throws -> Entry {
        refresh(force: false)
        let dir = try node(parent, for: .lookup, by: caller)
        try checkVisibleName(dir, name, missing: true)
        let (inode, st) = try lookupEntry(parent: dir, name: name)
        return entry(inode, st)
    }

    /// Drops `count` kernel references to `nodeid`.
    func forget(_ nodeid: UInt64, count: UInt64) {
        table.forget(nodeid, count: count)
    }

    /// access(2) and chdir (sent when the mount has no default_permissions): the backing
    /// object's own check, with the daemon's credentials, which are the caller's then.
    func access(_ nodeid: UInt64, mask: Int32, caller: Caller) throws {
        let inode = try node(nodeid, for: .checkAccess, by: caller)
        guard Glibc.access(inode.procPath, mask) == 0 else { throw FilesystemError.current() }
    }

    /// The attributes of `nodeid`, with the plaintext size.
    func getattr(_ nodeid: UInt64, caller: Caller) throws -> stat {
        refresh(force: false)
        return try attributes(try node(nodeid, for: .readAttributes, by: caller))
    }

    /// Applies `changes` (through `handle` when the request came with one) and returns the new
    /// attributes. A size change goes through the protected-file format (re-encrypting the new
    /// last block); on a provider mount, truncating by path materializes a placeholder first
    /// and counts as a change of the file.
    /// - Throws: EISDIR/EINVAL for a size change on a non-file; the backing calls' errno.
    func setattr(_ nodeid: UInt64, _ changes: AttributeChanges, handle: OpenFile?, caller: Caller) throws -> stat {
        let inode = try node(nodeid, for: .changeAttributes, by: caller)
        guard let size = changes.size else {
            guard inode.isRegular else {
                try applyMetadata(inode, handle, changes)
                return try attributes(inode, hideWiped: false)
            }
            return try inode.contentLock.writing { try changeMetadataKeepingHeader(inode, handle, changes) }
        }
        guard inode.isRegular else {
            try applyMetadata(inode, handle, changes)
            throw FilesystemError(code: inode.isDirectory ? EISDIR : EINVAL)
        }
        // truncate(2) by name changes the content as an open for writing would: admitted the
        // same way, on the file a placeholder becomes (a handle was admitted when it was opened).
        if handle == nil {
            try hooks.materializeIfPlaceholder(inode, in: self)
            try admit(.open(flags: O_WRONLY, owner: .unread), on: inode, by: caller)
        }
        // Through a handle opened before its owner was wiped: EACCES, as for its reads and
        // writes (the entry may still hold the file key), before anything changes.
        if let handle { try requireOwnerNotWiped(handle) }
        try applyMetadata(inode, handle, changes)
        try clearSetIDBits(fd: handle?.fd ?? inode.fd, nodeid: nodeid, for: caller)
        try truncate(inode, to: size, handle: handle)
        if handle == nil { hooks.fileChanged(inode, in: self, wait: false) }
        return try attributes(inode, hideWiped: false)
    }

    /// Owner, mode and times leave the header as it is: a header known before the change is
    /// carried over to the new ctime (a daemon without root cannot read the header of a file
    /// it just made write-only, chmod 0200, and must still report its size). Call with the
    /// exclusive content lock.
    private func changeMetadataKeepingHeader(_ inode: Inode, _ handle: OpenFile?, _ changes: AttributeChanges) throws -> stat {
        var before = stat()
        let statted = fstatat(inode.fd, "", &before, SystemConstants.emptyPath | AT_SYMLINK_NOFOLLOW) == 0
        // What the entry does not hold yet is read while the daemon still may: the header
        // summary (from the hint, else the header) of a file whose header is not current.
        if statted && inode.isRegular { _ = try? headerSummary(inode, ctime: before.st_ctim) }
        let known = statted ? inode.currentContent(ctime: before.st_ctim) : .unknown
        let hinted = statted ? inode.hint(ctime: before.st_ctim) : nil
        try applyMetadata(inode, handle, changes)
        var after = stat()
        guard statted, fstatat(inode.fd, "", &after, SystemConstants.emptyPath | AT_SYMLINK_NOFOLLOW) == 0 else {
            return try attributes(inode, locked: true, hideWiped: false)
        }
        if case .known(let header, _, _, _) = known {
            inode.storeHeader(header, stamp: after.st_ctim)
        } else if let hinted {
            inode.storeHint(hinted, stamp: after.st_ctim)
        }
        // The reply's attributes come from this stat: a third one would find the same.
        return try attributes(inode, locked: true, hideWiped: false, statted: after)
    }

    /// The owner, mode and time parts of a setattr, on the backing object.
    private func applyMetadata(_ inode: Inode, _ handle: OpenFile?, _ changes: AttributeChanges) throws {
        if changes.uid != nil || changes.gid != nil {
            let uid = changes.uid ?? uid_t.max
            let gid = changes.gid ?? gid_t.max
            guard fchownat(inode.fd, "", uid, gid, SystemConstants.emptyPath | AT_SYMLINK_NOFOLLOW) == 0 else { throw FilesystemError.current() }
        }
        if let mode = changes.mode {
            if let handle {
                guard fchmod(handle.fd, mode & 0o7777) == 0 else { throw FilesystemError.current() }
            } else {
                let fd = try inode.descriptor()
                do { try SystemCall.chmod(fd: fd, mode: mode & 0o7777) } catch {
                    throw FilesystemError(code: error.rawValue)
                }
            }
        }
        if case .omit = changes.accessTime, case .omit = changes.modificationTime { return }
        // A side the caller did not set stays as it is (UTIME_OMIT): tar sets only mtime.
        func time(_ change: AttributeChanges.Time) -> timespec {
            switch change {
            case .now: timespec(tv_sec: 0, tv_nsec: SystemConstants.utimeNow)
            case .set(let value): value
            case .omit: timespec(tv_sec: 0, tv_nsec: SystemConstants.utimeOmit)
            }
        }
        var times = [time(changes.accessTime), time(changes.modificationTime)]
        if let handle {
            guard futimens(handle.fd, &times) == 0 else { throw FilesystemError.current() }
        } else if inode.isSymlink {
            // The link itself through its O_PATH descriptor, as the chown above: a path would
            // be resolved again, through whatever another user put on the way meanwhile.
            guard utimensat(try inode.descriptor(), "", &times, SystemConstants.emptyPath | AT_SYMLINK_NOFOLLOW) == 0 else {
                throw FilesystemError.current()
            }
        } else {
            let fd = try inode.descriptor()
            do { try SystemCall.setTimes(fd: fd, (times[0], times[1])) } catch {
                throw FilesystemError(code: error.rawValue)
            }
        }
    }

    /// Sets the plaintext size under the exclusive content lock (re-encrypting the new last block).
    private func truncate(_ inode: Inode, to size: Int64, handle: OpenFile?) throws {
        try inode.contentLock.writing {
            if let handle, handle.writable {
                try changingContent(handle) { content, _ in try content.truncate(to: size) }
                return
            }
            // truncate(2) changes no access time: the new last block's read is the daemon's own.
            let file = try reopenBacking(inode, O_RDWR | O_CLOEXEC, noAccessTime: true)
            let ctime = try file.stat().st_ctim
            // While handles are open the cached header is trusted: unless the file was
            // rewritten behind the mount (which makes those handles stale).
            if inode.observe(ctime: ctime, changing: true)?.move == .behindMount { noticeRewrite(inode, fd: file.rawValue, ctime: ctime) }
            let header = try self.header(inode, ctime: ctime)
            try requireNotWithheld(owner: header?.owner)
            let key = try fileKey(inode, header: header)
            let content = try ProtectedFileContent(fd: file.rawValue, header: header, fileKey: key, sparseHeader: sparseHeaderSource)
            defer {
                if let after = content.header, after != header { inode.storeSparseHeader(after) }
                sawOwnChange(inode, fd: file.rawValue)
                // Without an open handle no close drops the cipher this truncate kept with the key.
                if inode.openCount == 0 { key?.forgetBlockCipher() }
            }
            try content.truncate(to: size)
        }
    }
    /// Finds `name` in `parent`, registers it (lookup count + 1, `name` recorded as where it
    /// is) and returns its attributes.
    ///
    /// An object that has an entry already is found by fstatat, without a new descriptor: a
    /// missing name answers ENOENT and a known one is found even when the daemon is out of
    /// descriptors.
    func lookupEntry(parent: Inode, name: UnsafePointer<CChar>) throws -> (Inode, stat) {
        let parentFD = try parent.descriptor()
        var st = stat()
        guard fstatat(parentFD, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { throw FilesystemError.current() }
        let inode: Inode
        // A new entry's attributes come from the fstat of the descriptor it was made with.
        var fresh: stat?
        if let known = table.acquireExisting(st) {
            inode = known
            if table.descriptors.openDescriptor(of: known) == nil {
                // Closed by the cache: opened from the name just found, not the old record.
                if let found = try? FileDescriptor.openPath(in: parentFD, name, flags: O_NOFOLLOW),
                   let opened = try? found.stat(), BackingKey(opened) == known.key {
                    table.descriptors.adopt(found.take(), for: known)
                }
            }
        } else {
            let found = try FileDescriptor.openPath(in: parentFD, name, flags: O_NOFOLLOW)
            st = try found.stat()
            inode = table.acquire(st, fd: found.take(), parent: parent, name: name)
            fresh = st
            if (st.st_mode & S_IFMT) == S_IFREG { readHint(of: inode, in: parentFD, name, statted: st) }
        }
        do {
            let attributes = try attributes(inode, statted: fresh)
            // Recorded only now: a failed lookup (whose name may be removed again) keeps the old.
            table.descriptors.setName(inode, parent: parent, name: name)
            return (inode, attributes)
        } catch {
            table.forget(inode.nodeid, count: 1)
            throw error
        }
    }

    /// The entry reply for `inode` with attributes `st` and the mount's timeouts.
    func entry(_ inode: Inode, _ st: stat) -> Entry {
        Entry(inode: inode, attributes: st, attributeTimeout: options.attributeTimeout, entryTimeout: options.entryTimeout)
    }

    /// Runs `make`, a call that creates an object, as the caller where the daemon runs as root
    /// for another user (`ThreadFilesystemIdentity`): the object is born the caller's (uid,
    /// gid or the S_ISGID directory's group, the set-id bits the kernel lets the caller keep),
    /// with no chown by name afterwards, which a process renaming entries in the backing
    /// directory meanwhile could aim at another object. Tried first without supplementary
    /// groups (no /proc read); when the kernel refuses that (EACCES: the caller may write the
    /// directory through a group), again with the caller's groups. A `mode` with S_ISGID
    /// takes the caller's groups at once: whether the kernel keeps the bit depends on them.
    /// - Throws: `make`'s `Errno`; EPERM when the identity cannot be switched.
    func asCaller<T: ~Copyable>(_ caller: Caller, mode: mode_t, _ make: () throws(Errno) -> T) throws(Errno) -> T {
        guard daemonUID == 0, caller.uid != 0 || caller.gid != 0 else { return try make() }
        if mode & S_ISGID != 0 {
            return try ThreadFilesystemIdentity.acting(uid: caller.uid, gid: caller.gid, groups: caller.credentials.groups, make)
        }
        do {
            return try ThreadFilesystemIdentity.acting(uid: caller.uid, gid: caller.gid, groups: [], make)
        } catch where error == .permissionDenied {
            return try ThreadFilesystemIdentity.acting(uid: caller.uid, gid: caller.gid, groups: caller.credentials.groups, make)
        }
    }

    /// Gives the whiteout a RENAME_WHITEOUT left as `name` in `dirFD` (made by the daemon as
    /// root: it needs CAP_MKNOD, which a thread acting as the caller lacks) to the caller,
    /// through one descriptor, and only when the object under that name is such a whiteout
    /// (a 0/0 character device of root's): an object swapped in under the name is left alone.
    func giveWhiteoutToCaller(_ caller: Caller, dirFD: Int32, name: UnsafePointer<CChar>) {
        guard daemonUID == 0, caller.uid != 0 || caller.gid != 0,
              let object = try? FileDescriptor.openPath(in: dirFD, name, flags: O_NOFOLLOW),
              let st = try? object.stat(), st.st_mode & S_IFMT == S_IFCHR, st.st_rdev == 0, st.st_uid == 0 else { return }
        let inheritsGroup = ((try? SystemCall.stat(fd: dirFD))?.st_mode ?? 0) & S_ISGID != 0
        _ = fchownat(object.rawValue, "", caller.uid, inheritsGroup ? gid_t.max : caller.gid, SystemConstants.emptyPath)
    }
}
