import CFuse
import Glibc
import MAMFileProvider
import MAMProtection
import MAMSystem

/// Regular files: create, open, read, write, fsync, release, fallocate, lseek.
extension OverlayFilesystem {
    /// Creates `name` in `dir` exclusively with the inherited owner's header written (owner of
    /// the nearest tagged directory, else the mount's account); returns the read-write
    /// descriptor with the header and file key it was written with, and what removes the file
    /// again when the request fails later.
    ///
    /// The owner is decided first (`admit(.createFile)`: by the writer's identity while
    /// caller-aware rules are on); a denied create makes nothing. `writeOnly`: the descriptor
    /// serves a write-only handle, so its reads are the daemon's own (O_NOATIME, as
    /// `reopenBacking`; the daemon owns the file it creates, so the flag is allowed).
    func createTagged(_ caller: Caller, dir: Inode, name: UnsafePointer<CChar>, mode: mode_t, writeOnly: Bool = false) throws -> NewFile {
        let decidedOwner = try admit(.createFile(name: name), on: dir, by: caller).newOwner
        let dirFD = try dir.descriptor()
        let file: FileDescriptor
        do {
            let flags = O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW | (writeOnly ? SystemConstants.noAccessTime : 0)
            file = try asCaller(caller, mode: mode) { () throws(Errno) in try FileDescriptor.open(in: dirFD, name, flags, mode: mode & 0o7777) }
        } catch {
            throw FilesystemError(code: error.rawValue)
        }
        let made = (try? file.stat()).map { MadeObject(directoryFD: dirFD, name: name, stat: $0) } ?? MadeObject(directoryFD: dirFD, name: name)
        do {
            guard let made else { throw FilesystemError.current() }
            let owner = try decidedOwner ?? inheritedOwner(of: dir)
            let (header, key) = try newFileHeader(owner: owner)
            // A just-created file: on a failed (short) header write it is removed below.
            if let header { try ProtectedFileContent(fd: file.rawValue, header: header, fileKey: key).writeHeaderIfMissing(reserve: false) }
            return NewFile(file: file, header: header, key: key, made: made)
        } catch {
            made?.remove()
            throw error
        }
    }

    /// Creates and opens `name` in `parent` (O_CREAT); when the name exists although the kernel
    /// thought it free and `flags` has no O_EXCL, opens the existing file instead.
    /// - Throws: EEXIST (with O_EXCL), EPERM for a reserved name, the backing calls' errno;
    ///   nothing is left registered or made then.
    func create(parent: UInt64, name: UnsafePointer<CChar>, mode: mode_t, flags: Int32, caller: Caller) throws -> CreatedFile {
        refresh(force: true)
        let dir = try node(parent, for: .makeEntry, by: caller)
        try checkVisibleName(dir, name)
        let created: NewFile
        do {
            created = try createTagged(caller, dir: dir, name: name, mode: mode, writeOnly: flags & O_ACCMODE == O_WRONLY)
        } catch let error as FilesystemError where error.code == EEXIST && flags & O_EXCL == 0 {
            return try openExisting(dir, name, flags: flags, caller: caller)
        }
        let made = created.made
        var registered: Inode?
        do {
            let handle = try register(created, dir: dir, name: name, flags: flags, registered: &registered)
            return CreatedFile(entry: try entryOfOpen(handle), handle: handle, made: made)
        } catch {
            if let registered { table.forget(registered.nodeid, count: 1) }
            made.remove()
            throw error
        }
    }

    /// create's fallback: the existing `name` looked up and opened.
    private func openExisting(_ dir: Inode, _ name: UnsafePointer<CChar>, flags: Int32, caller: Caller) throws -> CreatedFile {
        let (inode, _) = try lookupEntry(parent: dir, name: name)
        do {
            try hooks.materializeIfPlaceholder(inode, in: self)
            let handle = try openHandle(inode, flags: flags, by: caller)
            return CreatedFile(entry: try entryOfOpen(handle), handle: handle, made: nil)
        } catch {
            table.forget(inode.nodeid, count: 1)
            throw error
        }
    }

    /// The entry for a file just created on `created.fd`, holding the header and key just
    /// written (no read back, no second unwrap), with one handle open.
    private func register(_ created: consuming NewFile, dir: Inode, name: UnsafePointer<CChar>, flags: Int32,
                          registered: inout Inode?) throws -> OpenFile {
        let st = try created.file.stat()
        let path = try FileDescriptor.pathDescriptor(of: created.file.rawValue, named: name, in: try dir.descriptor(), statted: st)
        let inode = table.acquire(st, fd: path.take(), parent: dir, name: name)
        registered = inode
        let generation = self.generation
        let (header, key) = (created.header, created.key)
        inode.contentLock.writing {
            inode.storeHeader(header, key: key, generation: generation, stamp: st.st_ctim)
            inode.sawHeader(at: st.st_ctim, rewritten: false)
            inode.adjustOpenCount(1)
        }
        return OpenFile(inode: inode, fd: created.file.take(), key: BackingKey(st), append: flags & O_APPEND != 0, writable: true,
                        pin: pin(header, key: key), rewrites: inode.rewrites)
    }

    /// The entry of a just-opened handle's file; the handle's open count is given back when
    /// its attributes cannot be read.
    private func entryOfOpen(_ handle: OpenFile) throws -> Entry {
        do {
            return entry(handle.inode, try attributes(handle.inode, hideWiped: false))
        } catch {
            handle.inode.handleGone(handle)
            throw error
        }
    }

    /// The kernel did not take a create reply: the handle's open count, the lookup and the
    /// file made go again (the caller has released the handle itself).
    func abandon(_ created: CreatedFile) {
        created.handle.inode.handleGone(created.handle)
        table.forget(created.entry.nodeid, count: 1)
        created.made?.remove()
    }

    /// Opens `nodeid` with the open(2) `flags` (a placeholder is materialized first, so that
    /// admission decides on the file it becomes).
    /// - Throws: EISDIR/EINVAL for a non-file, EACCES when the key is gone or the session
    ///   lock withholds it or admission denies, EIO for a tampered header, the backing open's errno.
    func open(_ nodeid: UInt64, flags: Int32, caller: Caller) throws -> OpenFile {
        refresh(force: true)
        guard let inode = table.inode(nodeid) else { throw FilesystemError(code: ESTALE) }
        try requireCurrent(inode)
        try hooks.materializeIfPlaceholder(inode, in: self)
        let handle = try openHandle(inode, flags: flags, by: caller)
        if flags & O_TRUNC != 0 {
            do { try clearSetIDBits(fd: handle.fd, nodeid: nodeid, for: caller) } catch {
                abandon(handle)
                throw error
            }
        }
        return handle
    }

    /// The kernel did not take an open reply: the handle's open count goes again (the caller
    /// has released the handle itself).
    func abandon(_ handle: OpenFile) {
        handle.inode.handleGone(handle)
    }

    /// Whether a handle opened with `flags` bypasses the kernel's page cache (FOPEN_DIRECT_IO):
    /// read-only handles unless the mount has `-o page_cache`. Their reads then get exactly
    /// what mamfs answers, which the page cache cannot promise while a truncation is in flight
    /// (see `MountOptions.pageCache`). Writable handles keep the page cache: a shared
    /// read-write map writes through it, and writes stay coherent with it. (Direct I/O on
    /// write-only handles, which would save the GETXATTR of `security.capability` before a new
    /// file's first write, loses writes that race a shared map's stores to the same page: the
    /// kernel writes the re-dirtied page back whole over them. Test "O_WRONLY writes racing a
    /// shared map's stores to the same pages are all kept".)
    func directIO(flags: Int32) -> Bool {
        !options.pageCache && flags & O_ACCMODE == O_RDONLY
    }

    /// Opens a handle on `inode` for `caller`, admitted (`.open`) on the owner of the header
    /// the handle is opened on, read under the entry's exclusive content lock; with O_TRUNC the
    /// content starts again, owned by the owner admission decided (else a tagged file keeps
    /// its owner, an untagged one gets the inherited owner).
    func openHandle(_ inode: Inode, flags: Int32, by caller: Caller) throws -> OpenFile {
        guard inode.isRegular else { throw FilesystemError(code: inode.isDirectory ? EISDIR : EINVAL) }
        let writable = flags & O_ACCMODE != O_RDONLY
        // Linux truncates on O_RDONLY|O_TRUNC too (the kernel has checked write permission).
        let truncating = flags & O_TRUNC != 0
        let passed = flags & (O_SYNC | O_DSYNC)
        var attempts = 0
        while true {
            let file = try reopenBacking(inode, (writable || truncating ? O_RDWR : O_RDONLY) | passed | O_CLOEXEC,
                                         noAccessTime: flags & O_ACCMODE == O_WRONLY)
            if let handle = try openHandle(inode, file: file, flags: flags, caller: caller) { return handle }
            // The entry was moved to another file between the reopen and the content lock.
            attempts += 1
            if attempts == 3 { throw FilesystemError(code: ESTALE) }
        }
    }

    /// A descriptor of `inode`'s backing file opened with `flags`, plus O_NOATIME for
    /// `noAccessTime` where the file allows it. A write-only handle asks for it: its reads of
    /// the backing file are the daemon's own (the header at open, the stored block an unaligned
    /// write merges into), never the caller's, and must leave the access time as write(2)
    /// leaves it (on a relatime filesystem every append updated it, an inode change of its
    /// own). O_NOATIME needs the file's owner or CAP_FOWNER; on EPERM the file is opened
    /// without it.
    func reopenBacking(_ inode: Inode, _ flags: Int32, noAccessTime: Bool) throws -> FileDescriptor {
        if noAccessTime {
            do {
                return try FileDescriptor.reopen(try inode.descriptor(), flags | SystemConstants.noAccessTime)
            } catch let error as Errno where error.rawValue == EPERM {}
        }
        return try FileDescriptor.reopen(try inode.descriptor(), flags)
    }

    /// `openHandle`'s work on `file`, a descriptor opened on the entry's file; nil (nothing
    /// counted, `file` closed) when the entry is on another file by the time its content lock
    /// is taken: a handle must not be counted on one file while its entry reads another's header.
    private func openHandle(_ inode: Inode, file: consuming FileDescriptor, flags: Int32, caller: Caller) throws -> OpenFile? {
        let writable = flags & O_ACCMODE != O_RDONLY
        let truncating = flags & O_TRUNC != 0
        let fd = file.rawValue
        var opened: (header: ProtectedFileHeader?, key: SymmetricKey?, rewrites: UInt64) = (nil, nil, 0)
        var openedKey: BackingKey?
        do {
            try inode.contentLock.writing {
                var st = stat()
                guard fstat(fd, &st) == 0 else { throw FilesystemError.current() }
                guard BackingKey(st) == inode.key else { return }
                openedKey = BackingKey(st)
                // Read at every open, also while other handles are open (when the cached header
                // is trusted between requests): another program may have rewritten the backing
                // file in place since, and a new handle must see the file as it is. The
                // exclusive content lock keeps the mount's own header writes out meanwhile; an
                // unchanged header keeps the cached key. Another header than the cached one
                // while handles are open is a rewrite behind the mount: those handles are stale.
                var header = try ProtectedFileHeader.read(fd: fd)
                inode.sawHeader(at: st.st_ctim, rewritten: inode.openCount > 0 && inode.contentState.isKnown(other: header))
                recordHeader(header, of: inode, fd: fd, stamp: st.st_ctim)
                // Decided before the key is unwrapped or anything truncated.
                let newOwner = try admit(.open(flags: flags, owner: .tag(header?.owner)), on: inode, by: caller).newOwner
                try requireNotWithheld(owner: header?.owner)
                var key = try fileKey(inode, header: header)
                if truncating {
                    // A plain-tagged file whose owner now requires encryption starts again encrypted.
                    let encrypting = header.map { !$0.isEncrypted && !$0.owner.isEmpty
                        && context.policyEvaluator.isFileEncryptionRequired(accountId: $0.owner) } ?? false
                    let reowning = newOwner.map { $0 != header?.owner } ?? false
                    if header == nil || encrypting || reowning {
                        let owner = try newOwner ?? header?.owner ?? inheritedOwner(directoryPath: parentPath(try backingPath(inode)))
                        let (newHeader, newKey) = try newFileHeader(owner: owner)
                        // A handle left on this file by another entry decides by the header
                        // under the same lock (`untaggedPrefixLock`).
                        try untaggedPrefixLock.writing {
                            guard ftruncate(fd, 0) == 0 else { throw FilesystemError.current() }
                            if let newHeader {
                                try ProtectedFileContent(fd: fd, header: newHeader, fileKey: newKey).writeHeaderIfMissing()
                            } else {
                                HeaderHint.store(nil, fd: fd)
                            }
                        }
                        header = newHeader
                        key = newKey
                    } else {
                        try ProtectedFileContent(fd: fd, header: header, fileKey: key).truncate(to: 0)
                    }
                    var now = stat()
                    fstat(fd, &now)
                    inode.storeHeader(header, key: key, generation: generation, stamp: now.st_ctim)
                    inode.sawHeader(at: now.st_ctim, rewritten: false)
                }
                opened = (header, key, inode.rewrites)
                inode.adjustOpenCount(1)
            }
        }
        guard let openedKey else { return nil }
        return OpenFile(inode: inode, fd: file.take(), key: openedKey, append: flags & O_APPEND != 0, writable: writable,
                        pin: pin(opened.header, key: opened.key), rewrites: opened.rewrites)
    }

    /// What a handle on a file with `header` keeps over a session lock: its file and key when
    /// the owner's level is `completeUnlessOpen`, else nothing.
    func pin(_ header: ProtectedFileHeader?, key: SymmetricKey?) -> OpenFile.Pin? {
        guard let header, pinsOpenFiles(owner: header.owner) else { return nil }
        return OpenFile.Pin(owner: header.owner, fileId: header.encryption?.fileId, key: key)
    }

    /// Reads up to `size` plaintext bytes at plaintext `offset` into a pooled buffer and passes
    /// the bytes read (fewer at the end of the file) to `deliver`.
    func read<R>(_ handle: OpenFile, size: Int, offset: Int, caller: Caller,
                 deliver: (UnsafeRawBufferPointer) -> R) throws -> R {
        try admit(.read, on: handle.inode, by: caller)
        try requireOwnerNotWiped(handle)
        return try buffers.withBuffer(size) { buffer in
            let count = try handle.inode.contentLock.reading {
                let content = try content(handle)
                var backing = stat()
                guard fstat(content.fd, &backing) == 0 else { throw FilesystemError.current() }
                try requireNotRewrittenBehind(handle, ctime: backing.st_ctim, changing: false)
                return try content.read(into: buffer, at: Int64(offset), storedSize: Int64(backing.st_size))
            }
            return deliver(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        }
    }

    /// Writes `data` at plaintext `offset`, or at the plaintext end for an O_APPEND handle
    /// (unless it is a page-cache writeback, `writepage`); returns the bytes written.
    /// - Throws: EPERM for a write that would make an untagged file start with the magic
    ///   (`UntaggedPrefix`), nothing written; admission's and the content's errors.
    func write(_ handle: OpenFile, _ data: UnsafeRawBufferPointer, offset: Int, writepage: Bool, caller: Caller) throws -> Int {
        try admit(.write, on: handle.inode, by: caller)
        try requireOwnerNotWiped(handle)
        try encryptIfRequired(before: handle)
        let appendAtEnd = handle.append && !writepage
        var sendToDisk: Range<Int64>?
        try handle.inode.contentLock.writing {
            // One fstat serves the check for a rewrite behind the mount, the set-ID bits, the
            // end of an O_APPEND write and the write.
            try changingContent(handle, touchesPrefix: appendAtEnd || offset < ProtectedFileHeader.magic.count) { content, backing in
                // A page-cache writeback (of a shared map) is no write(2): the kernel keeps set-ID bits then.
                if !writepage { try clearSetIDBits(fd: content.fd, statted: backing, nodeid: handle.inode.nodeid, for: caller) }
                let at = appendAtEnd ? try content.plaintextSize(storedSize: Int64(backing.st_size)) : Int64(offset)
                // Bytes never change an owner: an untagged file does not become tagged by the
                // magic written to its start (the rest would name the owner, unadmitted).
                if !content.shape.isTagged, try UntaggedPrefix.writeWouldTag(fd: handle.fd, writing: data, at: at) {
                    log("refused a write that would make an untagged file start with the mamfs magic (nodeid \(handle.inode.nodeid))",
                        limitedBy: "magic \(handle.inode.nodeid)")
                    throw FilesystemError(code: EPERM)
                }
                try content.write(data, at: at, backing: backing)
                if let run = handle.sequentialWriteback.wrote(at: at, count: Int64(data.count)) {
                    sendToDisk = content.storedRange(ofBlocksFrom: run.lowerBound, before: run.upperBound)
                }
            }
        }
        // A long sequential run goes to the disk while the rest is being written; outside the
        // locks, as the call may wait for the device's queue.
        if let sendToDisk { startWriteback(handle, stored: sendToDisk) }
        return data.count
    }

    /// Starts the writeback of backing bytes `stored` of `handle`'s file without waiting
    /// (`SystemCall.startWriteback`). A hint: pages it does not start are written back by the
    /// kernel later, and the handle's fsync reports a failed writeback as before (the call
    /// consumes no writeback error); a call that fails is logged (once a minute per file).
    func startWriteback(_ handle: OpenFile, stored: Range<Int64>) {
        do {
            try SystemCall.startWriteback(fd: handle.fd, offset: stored.lowerBound, length: Int64(stored.count))
        } catch {
            log("could not start the writeback of node \(handle.inode.nodeid): \(error)", limitedBy: "writeback \(handle.inode.nodeid)")
        }
    }

    /// fsync/fdatasync of the backing file; a written file then counts as changed (a provider
    /// mount uploads it before this returns).
    func fsync(_ handle: OpenFile, datasync: Bool, caller: Caller) throws {
        try admit(.sync, on: handle.inode, by: caller)
        try requireOwnerNotWiped(handle)
        let rc = datasync ? fdatasync(handle.fd) : SwiftGlibc.fsync(handle.fd)
        guard rc == 0 else { throw FilesystemError.current() }
        if handle.writable { hooks.fileChanged(handle.inode, in: self, wait: true) }
    }

    /// The last reference to a handle went (the caller took it from the kernel's fh). Not
    /// admitted: the kernel releases a handle whoever is asking.
    func release(_ handle: OpenFile, caller: Caller) {
        handle.inode.handleGone(handle)
        if handle.writable { hooks.fileChanged(handle.inode, in: self, wait: false) }
    }

    /// fallocate(2) of plaintext `offset..<offset+length` in `mode` (`AllocationMode`: mode 0,
    /// KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE with or without KEEP_SIZE); range-checked
    /// (EINVAL, EFBIG) and released again on failure (ENOSPC).
    /// A caller other than root loses the file's set-ID bits as on ext4 (`clearSetIDBits`).
    /// - Throws: EOPNOTSUPP for other modes (COLLAPSE_RANGE, INSERT_RANGE, ...), before any
    ///   admission or change.
    func fallocate(_ handle: OpenFile, mode: Int32, offset: Int, length: Int, caller: Caller) throws {
        guard let allocation = AllocationMode(flags: mode) else { throw FilesystemError(code: EOPNOTSUPP) }
        try admit(.write, on: handle.inode, by: caller)
        try requireOwnerNotWiped(handle)
        try encryptIfRequired(before: handle)
        try clearSetIDBits(fd: handle.fd, nodeid: handle.inode.nodeid, for: caller)
        try handle.inode.contentLock.writing {
            try changingContent(handle) { content, _ in try content.allocate(allocation, offset: Int64(offset), length: Int64(length)) }
        }
    }

    /// SEEK_DATA / SEEK_HOLE from plaintext `offset` (`ProtectedFileContent.seek`: plain files
    /// ask the backing file, sparse encrypted files report their holes block by block).
    /// - Throws: EINVAL for another `whence`, ENXIO for a negative offset or one at or past the
    ///   end (as ext4).
    func lseek(_ handle: OpenFile, offset: Int, whence: Int32, caller: Caller) throws -> Int64 {
        try admit(.read, on: handle.inode, by: caller)
        let target: ProtectedFileContent.SeekTarget
        switch whence {
        case SystemConstants.seekData: target = .data
        case SystemConstants.seekHole: target = .hole
        default: throw FilesystemError(code: EINVAL)
        }
        return try handle.inode.contentLock.reading {
            try content(handle).seek(target, from: Int64(offset))
        }
    }
}
