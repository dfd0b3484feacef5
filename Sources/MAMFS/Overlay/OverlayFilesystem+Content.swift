import CFuse
import Glibc
import MAMProtection
import MAMSystem

/// Paths, headers, keys and attributes of backing objects, and the owner a new file inherits.
extension OverlayFilesystem {

    /// The current backing path of an object (follows renames made through the mount): the
    /// path of the entry's descriptor, used only once `lstat` of it finds the entry's own
    /// (st_dev, st_ino). When the name the descriptor was opened by is gone (the path may
    /// name another object by then), the entry's descriptor is opened again by another name of
    /// the file, a hard link (`DescriptorCache.reopenByAnotherName`).
    /// - Throws: EILSEQ when the path is not valid UTF-8 (it cannot be passed on as a `String`
    ///   without naming another file); ENOENT when the object has no name mamfs can find
    ///   (unlinked, or linked only in another directory the mount did not look it up in);
    ///   ESTALE and the like from the descriptor.
    func backingPath(_ inode: Inode) throws -> String {
        if inode.nodeid == table.root.nodeid { return rootPath }
        if let path = try verifiedPath(of: try inode.descriptor(), key: inode.key) { return path }
        guard let fd = table.descriptors.reopenByAnotherName(inode),
              let path = try verifiedPath(of: fd, key: inode.key) else { throw FilesystemError(code: ENOENT) }
        return path
    }

    /// The path /proc/self/fd gives for `fd` when it names the object `key` (nil when it does
    /// not: a removed name, or one ending in " (deleted)" that another object has now).
    /// - Throws: EILSEQ for a path that is not valid UTF-8; readlink's errno.
    private func verifiedPath(of fd: Int32, key: BackingKey) throws -> String? {
        let bytes = try SymbolicLink.readLink(ProcessDescriptorPath.path(of: fd))
        guard let target = String(validating: bytes, as: UTF8.self) else { throw FilesystemError(code: EILSEQ) }
        var st = stat()
        // The name as it is (a live name may end in " (deleted)"), else without the kernel's mark.
        for candidate in [target, ProcessDescriptorPath.currentPath(readLinkTarget: target).path] {
            if lstat(candidate, &st) == 0, BackingKey(st) == key { return candidate }
        }
        return nil
    }

    /// The owner a new file in `directory` gets: the tag of the nearest tagged backing
    /// directory up to the backing root, else the mount's account.
    ///
    /// Walks by descriptors (the directory's own O_PATH descriptor, then "..") rather than by
    /// path: no readlink and no path walk per level, on the create path of every file. The
    /// levels above are opened for reading where the daemon may read them, so their tags are
    /// read from the descriptor (fgetxattr) instead of through a /proc/self/fd path, whose
    /// lookup is most of the walk's cost. The answer is kept per directory while no level it
    /// read changes (`InheritedOwnerCache`), so a directory's next creates skip the walk.
    /// - Throws: `Errno` (EMFILE, EACCES, ESTALE) when a level cannot be opened: the
    ///   walk never falls back to the mount's account because a tagged level was out of reach.
    func inheritedOwner(of directory: Inode) throws -> String {
        guard let cache = ownerCache else { return try inheritedOwner(directoryFD: try directory.descriptor()).owner }
        let (kept, generation) = cache.lookup(directory.key)
        if let kept { return kept }
        var start: BackingKey?
        var watched = true
        let walk = try inheritedOwner(directoryFD: try directory.descriptor()) { fd, pathOnly, st in
            if start == nil { start = BackingKey(st) }
            if watched { watched = cache.watch(levelFD: fd, pathOnly: pathOnly, status: st) }
        }
        if walk.settled, watched, let start { cache.store(walk.owner, for: start, generation: generation) }
        return walk.owner
    }

    /// `inheritedOwner(of:)` for a directory known by its backing path (a file's parent),
    /// opened below the backing root without crossing a symlink (`openConfined`): a name
    /// swapped meanwhile never lends the tag of a directory elsewhere.
    func inheritedOwner(directoryPath: String) throws -> String {
        guard PathName.normalized(directoryPath) != PathName.normalized(rootPath) else {
            return try inheritedOwner(directoryFD: try table.root.descriptor()).owner
        }
        let directory = try openConfined(directoryPath, SystemConstants.pathOnly | O_DIRECTORY | O_CLOEXEC)
        return try inheritedOwner(directoryFD: directory.rawValue).owner
    }

    /// The walk itself, from a descriptor of the starting directory (not closed here).
    /// `level` is called with each level's descriptor (whether it is O_PATH) and status before
    /// its tag is read. A level on a filesystem without user attributes counts as untagged.
    /// A level whose tag cannot be read ends the walk with an error: the daemon may not read
    /// the directory (user attributes need read permission, which a daemon run by a user
    /// lacks on a 0311 directory, its own included) or the read failed (EIO). Taking such a
    /// level as untagged could give a new file below a work directory a personal owner, and
    /// its bytes would reach the backing disk in plaintext.
    /// - Returns: the owner, and whether it is settled: the walk ended at a tag or at the
    ///   backing root (not when it reached the filesystem's root, from a directory moved out
    ///   of the backing tree behind the mount's back). Only a settled answer is kept.
    /// - Throws: `Errno` of a level's open or tag read (EACCES, EIO, EMFILE, ESTALE).
    private func inheritedOwner(directoryFD: Int32, level: ((Int32, Bool, stat) -> Void)? = nil) throws
        -> (owner: String, settled: Bool) {
        let rootKey = table.root.key
        var st = try SystemCall.stat(fd: directoryFD)
        level?(directoryFD, true, st)
        if let tag = try ownTag(of: directoryFD) { return (tag, true) }
        guard BackingKey(st) != rootKey else { return (options.account, true) }
        var current = try openParent(of: directoryFD)
        while true {
            let parentStat = try current.stat()
            // The filesystem root ends the walk (a directory moved out of the backing tree
            // behind the mount's back); so does the backing root.
            guard BackingKey(parentStat) != BackingKey(st) else { return (options.account, false) }
            st = parentStat
            level?(current.rawValue, false, st)
            let fd = current.rawValue
            if let tag = try Self.levelTag({ () throws(Errno) in try DirectoryOwner.tag(fd: fd) }) { return (tag, true) }
            if BackingKey(st) == rootKey { return (options.account, true) }
            current = try openParent(of: current.rawValue)
        }
    }

    /// The tag of the directory open as `fd` (an O_PATH descriptor, which fgetxattr refuses):
    /// read from a readable descriptor of the same directory (openat of "."), else through its
    /// /proc/self/fd path (which fails too when the daemon may not read the directory). The
    /// readable open skips procfs's walk of /proc/self/fd/N, the costlier part of the read on
    /// every create.
    /// - Throws: `Errno` as `levelTag`.
    private func ownTag(of fd: Int32) throws(Errno) -> String? {
        let readable = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard readable >= 0 else {
            return try Self.levelTag { () throws(Errno) in try DirectoryOwner.tag(path: ProcessDescriptorPath.path(of: fd)) }
        }
        defer { close(readable) }
        return try Self.levelTag { () throws(Errno) in try DirectoryOwner.tag(fd: readable) }
    }

    /// A level's tag as the walk takes it: nil when untagged or on a filesystem without user
    /// attributes (ENOTSUP: nothing there can be tagged).
    /// - Throws: `Errno` of any other failed read (EACCES, EPERM, EIO): the level's owner is
    ///   unknown.
    private static func levelTag(_ read: () throws(Errno) -> String?) throws(Errno) -> String? {
        do { return try read() } catch where error.rawValue == EOPNOTSUPP { return nil }
    }

    /// The directory above the one open as `fd`, open for reading (its tag is read from the
    /// descriptor). A directory the daemon may not read cannot have its tag read either, so
    /// its EACCES ends the walk here.
    /// - Throws: `Errno` (EACCES, ENOENT, ESTALE, EMFILE).
    private func openParent(of fd: Int32) throws -> FileDescriptor {
        let parent = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard parent >= 0 else { throw Errno.current }
        return FileDescriptor(adopting: parent)
    }

    /// The backing path of `name` in the directory `dir`.
    func childPath(_ dir: Inode, _ name: UnsafePointer<CChar>) throws -> String {
        let parent = try backingPath(dir)
        return (parent == "/" ? "" : parent) + "/" + String(cString: name)
    }

    /// The directory part of the absolute backing path `path` (the backing root for a bare name).
    func parentPath(_ path: String) -> String {
        let parent = PathName.parent(of: path)
        return parent.isEmpty ? rootPath : parent
    }

    /// The header of the backing file, whose ctime is `ctime`: the cached one while it is
    /// current, else read. Call with the content lock held (shared is enough).
    func header(_ inode: Inode, ctime: timespec) throws -> ProtectedFileHeader? {
        if case .known(let cached, _, _, _) = inode.currentContent(ctime: ctime) { return cached }
        // The daemon's own read (for attributes or a check), not the caller's: no access time.
        let file = try reopenBacking(inode, O_RDONLY | O_NONBLOCK | O_CLOEXEC, noAccessTime: true)
        let header = try ProtectedFileHeader.read(fd: file.rawValue)
        recordHeader(header, of: inode, fd: file.rawValue, stamp: ctime)
        return header
    }

    /// What an attribute reply needs of the header of the backing file whose ctime is
    /// `ctime`: from the cached header while it is current, else from the file's header hint
    /// (`HeaderHint`: an extended attribute, no read of the file's first block), else from
    /// the header itself. Call with the content lock held (shared is enough).
    func headerSummary(_ inode: Inode, ctime: timespec) throws -> HeaderSummary? {
        if case .known(let cached, _, _, _) = inode.currentContent(ctime: ctime) { return cached?.summary }
        if let hinted = inode.hint(ctime: ctime) { return hinted }
        if let hinted = HeaderHint.read(path: ProcessDescriptorPath.path(of: try inode.descriptor())) {
            inode.storeHint(hinted, stamp: ctime)
            return hinted
        }
        return try header(inode, ctime: ctime)?.summary
    }

    /// Keeps `header`, read from the backing file open as `fd` at ctime `stamp`, as the
    /// entry's, and checks the hints against it. A header hint the file carries that says
    /// otherwise (the file was rewritten in place by another program) is rewritten from the
    /// header (removed when the file is untagged; a file without a hint is left without one,
    /// a read does not change its ctime). When the hint an attribute reply last used, read at
    /// any ctime, says otherwise, or the file's was rewritten, the kernel's attributes of the
    /// entry are dropped: it may hold a size from the hint, which bounds page-cache reads and
    /// SEEK_END of writable handles.
    ///
    /// A hint the entry read at this very ctime is what the file carries (changing the
    /// attribute changes the ctime): it is compared without reading the attribute again.
    func recordHeader(_ header: ProtectedFileHeader?, of inode: Inode, fd: Int32, stamp: timespec) {
        let readAtStamp = inode.hint(ctime: stamp)
        inode.storeHeader(header, stamp: stamp)
        let truth = header?.summary
        let used = inode.takeHint()
        var rewritten = false
        if let carried = readAtStamp ?? HeaderHint.read(fd: fd), carried != truth {
            HeaderHint.store(header, fd: fd)
            rewritten = true
            var after = stat()
            if fstat(fd, &after) == 0 { inode.storeHeader(header, stamp: after.st_ctim) }
            log("header hint of node \(inode.nodeid) did not match its header; rewritten", limitedBy: "hint \(inode.nodeid)")
        }
        if rewritten || (used != nil && used != truth) { attributesChanged?(inode.nodeid) }
    }

    /// The file key for `header` (cached per entry and state generation).
    /// - Throws: keyUnavailable (wiped or unknown owner), authenticationFailed.
    func fileKey(_ inode: Inode, header: ProtectedFileHeader?) throws -> SymmetricKey? {
        guard let header else { return nil }
        if isHidden(header) { throw MAMError.keyUnavailable("the owner's keys were wiped") }
        guard header.isEncrypted else { return nil }
        let generation = self.generation
        if case .known(_, _, let cached, let loaded) = inode.contentState, loaded == generation, loaded != 0 { return cached }
        let key = try context.fileKey(for: header)
        inode.storeFileKey(key, generation: generation)
        return key
    }

    /// Backing attributes with the plaintext size. `locked`: the caller holds the content lock.
    /// `statted`: the backing object's stat, taken just before by the caller (a lookup that
    /// made the entry), used instead of a new one.
    func attributes(_ inode: Inode, locked: Bool = false, hideWiped: Bool = true, statted: stat? = nil) throws -> stat {
        var st = statted ?? stat()
        let body = {
            if statted == nil {
                guard fstatat(try inode.descriptor(), "", &st, SystemConstants.emptyPath | AT_SYMLINK_NOFOLLOW) == 0 else {
                    throw FilesystemError.current()
                }
            }
            guard (st.st_mode & S_IFMT) == S_IFREG else { return }
            var summary = try self.headerSummary(inode, ctime: st.st_ctim)
            if hideWiped && self.isHidden(owner: summary?.owner) {
                // A file disappears on its header's word, not on a hint's (which another
                // program may have left behind or forged).
                summary = try self.header(inode, ctime: st.st_ctim)?.summary
                if self.isHidden(owner: summary?.owner) { throw FilesystemError(code: ENOENT) }
            }
            self.applyPlaintextSize(&st, summary: summary)
            if summary == nil, st.st_size == 0, let size = try self.hooks.placeholderSize(path: { try self.backingPath(inode) }) {
                // A placeholder: the remote size; nothing is stored locally yet.
                st.st_size = Int(size)
                st.st_blocks = 0
            }
        }
        if locked || !inode.isRegular { try body() } else { try inode.contentLock.reading(body) }
        return st
    }

    /// Replaces the backing size in `st` by the plaintext size under `header` (a torn tail
    /// shows its whole blocks: `ProtectedFileContent.visiblePlaintextSize`). st_blocks stays
    /// the backing file's allocation, as for any file: holes and space reserved past the end
    /// show in it the way they do on the backing filesystem.
    func applyPlaintextSize(_ st: inout stat, summary: HeaderSummary?) {
        guard let summary else { return }
        st.st_size = Int(ProtectedFileContent.visiblePlaintextSize(storedSize: Int64(st.st_size), summary: summary))
    }

    /// A plaintext view of an open file: the entry's header and key, or, when the entry was
    /// repointed to a replacement file after this handle was opened, the handle's own.
    ///
    /// A view made from the entry's cached state is kept in the entry for the handle and used
    /// again until that state changes (`ContentView`): most requests make none.
    func content(_ handle: OpenFile) throws -> ProtectedFileContent {
        if handle.backingKey != handle.inode.key { try followReplacement(handle) }
        if handle.backingKey == handle.inode.key {
            let inode = handle.inode
            if let view = inode.view(for: handle) {
                if keysWithheld.load(ordering: .acquiring) { _ = try requireOpenable(view.content.header, by: handle) }
                return view.content
            }
            var header: ProtectedFileHeader?
            var key: SymmetricKey?
            let (state, version) = inode.versionedContentState
            let fromState: Bool
            if case .known(let known, _, let knownKey, _) = state {
                (header, key, fromState) = (known, knownKey, true)
            } else {
                fromState = false
                // Invalidated while this handle was open (protect rewrote the file in place).
                var st = stat()
                guard fstat(handle.fd, &st) == 0 else { throw FilesystemError.current() }
                header = try ProtectedFileHeader.read(fd: handle.fd)
                recordHeader(header, of: inode, fd: handle.fd, stamp: st.st_ctim)
            }
            let pinned = try requireOpenable(header, by: handle)
            // Kept only when made from the state alone as it was at `version`: not with a key
            // loaded just now (stored in the state, a new version: the next request makes the
            // view from that) nor with a pin's key (which lives only as long as its handle).
            let keep = fromState && (header?.isEncrypted != true || key != nil)
            if header?.isEncrypted == true && key == nil { key = try pinned ?? fileKey(inode, header: header) }
            let content = try ProtectedFileContent(fd: handle.fd, header: header, fileKey: key, sparseHeader: sparseHeaderSource)
            if keep { inode.storeView(ContentView(handleSerial: handle.serial, content: content), madeAt: version) }
            return content
        }
        // The handle's own header is cached in the handle: it is not made sparse from here
        // (a file sparse already still gets holes).
        let content = try handle.detachedContent { header in try context.fileKey(for: header) }
        _ = try requireOpenable(content.header, by: handle)
        return content
    }

    /// EACCES when the session lock withholds the keys of `header`'s owner, unless `handle`
    /// was opened on this very file before (`completeUnlessOpen`'s pin).
    /// - Returns: the pinned file key when the pin let it through.
    private func requireOpenable(_ header: ProtectedFileHeader?, by handle: OpenFile) throws -> SymmetricKey? {
        guard isWithheld(owner: header?.owner) else { return nil }
        guard let pin = handle.pin, pin.matches(header) else { throw FilesystemError(code: EACCES) }
        return pin.key
    }

    /// How a file written through the mount gets the sparse header flag (its first hole).
    var sparseHeaderSource: ProtectedFileContent.SparseHeaderSource {
        { [context] header in try context.sparseHeader(for: header) }
    }

    /// Runs `body` on the plaintext view of `handle` and the backing file's fstat (the caller
    /// holds the exclusive content lock; a handle stale after a rewrite behind the mount gets
    /// EIO first, `requireNotRewrittenBehind`) and, when the body gave the file its first
    /// hole, keeps the new header (the sparse flag set, the same file key) as the entry's
    /// cached one, also when it failed after that.
    /// `touchesPrefix`: the change may write bytes 0 ..< 8 (see `untaggedPrefixLock`, which is
    /// held then unless the entry knows its file is tagged, and for every change through a
    /// handle whose entry names another file now).
    func changingContent<R>(_ handle: OpenFile, touchesPrefix: Bool = false, _ body: (ProtectedFileContent, stat) throws -> R) throws -> R {
        let detached = handle.backingKey != handle.inode.key
        guard detached || (touchesPrefix && !handle.inode.contentState.isKnownTagged) else {
            return try changingContentUnguarded(handle, body)
        }
        return try untaggedPrefixLock.writing { try changingContentUnguarded(handle, body) }
    }

    private func changingContentUnguarded<R>(_ handle: OpenFile, _ body: (ProtectedFileContent, stat) throws -> R) throws -> R {
        let content = try content(handle)
        let backing = try SystemCall.stat(fd: content.fd)
        let checked = try requireNotRewrittenBehind(handle, ctime: backing.st_ctim, changing: true)
        // The header changes only by getting the sparse flag, which changes the shape; the
        // shape is compared because it holds no strings or arrays to copy on every write.
        let before = content.shape
        defer {
            if content.shape != before, let after = content.header, handle.backingKey == handle.inode.key {
                handle.inode.storeSparseHeader(after)
            }
            if checked { sawOwnChange(handle.inode, fd: content.fd) }
        }
        return try body(content, backing)
    }
}
