import CFuse
import Glibc
import MAMFileProvider
import MAMProtection
import Synchronization

/// An errno to answer a FUSE request with.
struct FilesystemError: Error {
    let code: Int32
    static func current() -> FilesystemError { FilesystemError(code: errno) }
}

/// The overlay: every FUSE request of the mount, answered from the backing directory through
/// the protected-file format. One object per mount, shared by the session's worker threads.
///
/// Offsets and sizes the kernel sees are plaintext; the backing files hold the header and, for
/// encrypted owners, the encrypted blocks (docs/FORMAT.md).
final class OverlayFilesystem: @unchecked Sendable {
    let context: ProtectionContext
    let options: MountOptions
    /// Absolute, symlink-free path of the backing directory.
    let rootPath: String
    let table: InodeTable
    /// Connection options (max_write=...) parsed from -o, applied in init.
    var connectionOptions: OpaquePointer?
    /// The file provider of a `--remote/--provider` mount; nil for a plain overlay (every
    /// provider hook is then one branch).
    let provider: MountedProvider?

    /// What `refresh` last saw of the state database.
    private struct RefreshState {
        var generation: UInt64 = 1
        var lastRefresh: UInt64 = 0
        var wipedOwners: Set<String> = []
    }
    private let refreshState = Mutex(RefreshState())
    private let daemonUID = geteuid()

    /// Entries per readdirplus reply whose headers are prefetched ahead (a 4 KiB reply holds
    /// about 24 entries with attributes).
    static let headerPrefetchWindow = 32

    /// Buffers for read replies, reused across requests.
    let buffers = BufferPool(capacity: 1 << 20)

    /// Shared by rename and link, exclusive for an owner change: nothing moves into or within
    /// the tree between the caller's permission check and the rewrite of what was checked.
    let namespaceLock = ReadWriteLock()

    init(context: ProtectionContext, options: MountOptions, rootPath: String) throws {
        self.context = context
        self.options = options
        self.rootPath = rootPath
        let fd = Glibc.open(rootPath, mamfs_fuse_O_PATH | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw MAMError.fromErrno("open \(rootPath)") }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            close(fd)
            throw MAMError.fromErrno("stat \(rootPath)")
        }
        table = InodeTable(rootFD: fd, rootStat: st)
        if let kind = options.provider, let remote = options.remote {
            provider = try MountedProvider(kind: kind, rootPath: rootPath, remote: remote, account: options.account,
                                           syncInterval: options.syncInterval, context: context,
                                           log: { mamfs_log_line("mamfs: \($0)\n") })
        } else {
            provider = nil
        }
        _ = context.refreshIfChanged()
        let wiped = OverlayFilesystem.loadWipedOwners(context)
        refreshState.withLock { $0.wipedOwners = wiped }
        if let provider {
            provider.initialPass()
            provider.afterPass = { [weak self] in self?.repointReplacedEntries() }
        }
    }

    // MARK: State changes made by other processes

    /// Bumped whenever the state database changed (keys, policies, accounts): cached file keys
    /// of an older generation are fetched again.
    var generation: UInt64 { refreshState.withLock { $0.generation } }

    private static func loadWipedOwners(_ context: ProtectionContext) -> Set<String> {
        guard let accounts = try? context.state.allAccounts() else { return [] }
        return Set(accounts.filter { $0.wipedAt != nil }.map(\.accountId))
    }

    /// Picks up CLI changes (wipe, policy set, protect on backing paths). `force` for requests
    /// that open or create; otherwise at most every 200 ms.
    func refresh(force: Bool) {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nanos = UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
        let due = refreshState.withLock { state in
            if !force && nanos &- state.lastRefresh < 200_000_000 { return false }
            state.lastRefresh = nanos
            return true
        }
        guard due, context.refreshIfChanged() else { return }
        let wiped = OverlayFilesystem.loadWipedOwners(context)
        refreshState.withLock { state in
            state.generation += 1
            state.wipedOwners = wiped
        }
        repointReplacedEntries()
    }

    func isHidden(_ header: ProtectedFileHeader?) -> Bool {
        guard let owner = header?.owner, !owner.isEmpty else { return false }
        let anyWiped = refreshState.withLock { !$0.wipedOwners.isEmpty }
        return anyWiped && context.isWiped(owner: owner)
    }

    var hasWipedOwners: Bool { refreshState.withLock { !$0.wipedOwners.isEmpty } }

    /// Entries whose backing file was replaced under its name (protect rewrites through a temp
    /// file and rename) are pointed at the new file, so the kernel's node keeps working.
    /// Entries whose descriptor is closed are not opened for this: they find their object
    /// again by name, and one replaced under its name answers ESTALE until looked up again.
    func repointReplacedEntries() {
        for inode in table.all where inode.isRegular {
            DescriptorCache.withPins {
                guard let fd = table.descriptors.openDescriptor(of: inode) else { return }
                var st = stat()
                guard fstatat(fd, "", &st, mamfs_fuse_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0, st.st_nlink == 0 else { return }
                guard let link = readLink("/proc/self/fd/\(fd)"), link.hasSuffix(" (deleted)") else { return }
                repoint(inode, toPath: String(link.dropLast(" (deleted)".count)))
            }
        }
    }

    /// Points `inode` at whatever regular file is now at `path`.
    func repoint(_ inode: Inode, toPath path: String) {
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return }
        guard BackingKey(st) != inode.key else {
            // Rewritten in place: same descriptor, new header (no dup: that kept one more
            // descriptor per protect until the entry went away).
            inode.invalidateCachedHeader()
            return
        }
        let fd = Glibc.open(path, mamfs_fuse_O_PATH | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return }
        var opened = stat()
        guard fstat(fd, &opened) == 0, table.repoint(inode, to: opened, fd: fd) else {
            close(fd)
            return
        }
    }

    // MARK: Paths, headers, attributes

    /// The current backing path of an object (follows renames made through the mount).
    func backingPath(_ inode: Inode) throws -> String {
        if inode.nodeid == table.root.nodeid { return rootPath }
        guard var link = readLink("/proc/self/fd/\(try inode.descriptor())") else { throw FilesystemError.current() }
        if link.hasSuffix(" (deleted)") { link.removeLast(" (deleted)".count) }
        return link
    }

    func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = SwiftGlibc.readlink(path, &buffer, buffer.count - 1)
        guard n >= 0 else { return nil }
        return buffer.withUnsafeBufferPointer { String(decoding: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer($0)[0..<n]), as: UTF8.self) }
    }

    /// The owner a new file in `directory` gets: the tag of the nearest tagged backing
    /// directory up to the backing root, else the mount's account.
    ///
    /// Walks by descriptors (the directory's own O_PATH descriptor, then "..") rather than by
    /// path: no readlink and no path walk per level, on the create path of every file.
    /// - Throws: `FilesystemError` (EMFILE, EACCES, ESTALE) when a level cannot be opened: the
    ///   walk never falls back to the mount's account because a tagged level was out of reach.
    func inheritedOwner(of directory: Inode) throws -> String {
        try inheritedOwner(directoryFD: try directory.descriptor())
    }

    /// `inheritedOwner(of:)` for a directory known by its backing path (a file's parent).
    func inheritedOwner(directoryPath: String) throws -> String {
        let fd = Glibc.open(directoryPath, mamfs_fuse_O_PATH | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw FilesystemError.current() }
        defer { close(fd) }
        return try inheritedOwner(directoryFD: fd)
    }

    /// The walk itself, from a descriptor of the starting directory (not closed here).
    private func inheritedOwner(directoryFD: Int32) throws -> String {
        let rootKey = table.root.key
        var current = directoryFD
        defer { if current != directoryFD { close(current) } }
        var st = stat()
        guard fstat(current, &st) == 0 else { throw FilesystemError.current() }
        while true {
            if let owner = DirectoryOwner.read(path: "/proc/self/fd/\(current)") { return owner }
            // The backing root ends the walk; so does the filesystem root (a directory moved
            // out of the backing tree behind the mount's back).
            if BackingKey(st) == rootKey { break }
            let parent = openat(current, "..", mamfs_fuse_O_PATH | O_DIRECTORY | O_CLOEXEC)
            guard parent >= 0 else { throw FilesystemError.current() }
            var parentStat = stat()
            guard fstat(parent, &parentStat) == 0 else {
                let error = FilesystemError.current()
                close(parent)
                throw error
            }
            if current != directoryFD { close(current) }
            current = parent
            guard BackingKey(parentStat) != BackingKey(st) else { break }
            st = parentStat
        }
        return options.account
    }

    func parentPath(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return rootPath }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The header for attribute replies. Call with the content lock held (shared is enough).
    func header(_ inode: Inode, ctime: timespec) throws -> ProtectedFileHeader? {
        if case .known(let cached, _, _, _) = inode.currentContent(ctime: ctime) { return cached }
        let fd = Glibc.open("/proc/self/fd/\(try inode.descriptor())", O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw FilesystemError.current() }
        defer { close(fd) }
        let header = try ProtectedFileHeader.read(fd: fd)
        inode.storeHeader(header, stamp: ctime)
        return header
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
    func attributes(_ inode: Inode, locked: Bool = false, hideWiped: Bool = true) throws -> stat {
        var st = stat()
        let body = {
            guard fstatat(try inode.descriptor(), "", &st, mamfs_fuse_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0 else {
                throw FilesystemError.current()
            }
            guard (st.st_mode & S_IFMT) == S_IFREG else { return }
            let header = try self.header(inode, ctime: st.st_ctim)
            if hideWiped && self.isHidden(header) { throw FilesystemError(code: ENOENT) }
            self.applyPlaintextSize(&st, header: header)
            if header == nil, st.st_size == 0, let provider = self.provider,
               let size = provider.placeholderSize(path: try self.backingPath(inode)) {
                // A placeholder: the remote size; nothing is stored locally yet.
                st.st_size = Int(size)
                st.st_blocks = 0
            }
        }
        if locked || !inode.isRegular { try body() } else { try inode.contentLock.reading(body) }
        return st
    }

    func applyPlaintextSize(_ st: inout stat, header: ProtectedFileHeader?) {
        guard let header else { return }
        let stored = Int64(st.st_size)
        let size: Int64
        if let exact = try? ProtectedFileContent.plaintextSize(storedSize: stored, header: header) {
            size = exact
        } else {
            // Cut short by someone else: count the blocks that are whole.
            let body = max(0, stored - Int64(header.length))
            let full = body / Int64(BlockLayout.storedBlockSize)
            let rest = body % Int64(BlockLayout.storedBlockSize)
            size = full * Int64(BlockLayout.plaintextBlockSize) + max(0, rest - Int64(BlockLayout.overhead))
        }
        st.st_size = Int(size)
        if header.isEncrypted { st.st_blocks = Int((size + 511) / 512) }
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
        if let known = table.acquireExisting(st) {
            inode = known
            if table.descriptors.openDescriptor(of: known) == nil {
                // Closed by the cache: opened from the name just found, not the old record.
                let fd = openat(parentFD, name, mamfs_fuse_O_PATH | O_NOFOLLOW | O_CLOEXEC)
                var opened = stat()
                if fd >= 0, fstat(fd, &opened) == 0, BackingKey(opened) == known.key {
                    table.descriptors.adopt(fd, for: known)
                } else if fd >= 0 {
                    close(fd)
                }
            }
        } else {
            let fd = openat(parentFD, name, mamfs_fuse_O_PATH | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { throw FilesystemError.current() }
            guard fstat(fd, &st) == 0 else {
                let error = FilesystemError.current()
                close(fd)
                throw error
            }
            inode = table.acquire(st, fd: fd, parent: parent, name: name)
        }
        do {
            let attributes = try attributes(inode)
            // Recorded only now: a failed lookup (whose name may be removed again) keeps the old.
            table.descriptors.setName(inode, parent: parent, name: name)
            return (inode, attributes)
        } catch {
            table.forget(inode.nodeid, count: 1)
            throw error
        }
    }

    func entryParameters(_ inode: Inode, _ st: stat) -> fuse_entry_param {
        var e = fuse_entry_param()
        e.ino = inode.nodeid
        e.generation = 0
        e.attr = st
        e.attr_timeout = options.attributeTimeout
        e.entry_timeout = options.entryTimeout
        return e
    }

    /// Gives a new object the caller's uid/gid (the daemon creates as root).
    func chownToCaller(_ req: fuse_req_t?, dirFD: Int32, name: UnsafePointer<CChar>) {
        guard daemonUID == 0, let ctx = fuse_req_ctx(req)?.pointee, ctx.uid != 0 || ctx.gid != 0 else { return }
        _ = fchownat(dirFD, name, ctx.uid, ctx.gid, AT_SYMLINK_NOFOLLOW)
    }

    /// errno for a thrown error; authentication failures are logged with the path (never keys).
    /// The errno for `error`, logging corrupt data and unavailable keys with the backing path
    /// (from `inode`, or `path` when the entry is not in the table yet, as in lookup).
    func errnoCode(_ error: Error, _ inode: Inode?, path: @autoclosure () -> String? = nil) -> Int32 {
        if let error = error as? FilesystemError { return error.code }
        if let error = error as? MAMError {
            switch error {
            case .authenticationFailed, .keyUnavailable:
                let where_ = path() ?? inode.flatMap { try? backingPath($0) } ?? "(unknown path)"
                log("\(where_): \(error)")
            default:
                break
            }
            return error.errno
        }
        return EIO
    }

    func log(_ message: String) {
        mamfs_log_line("mamfs: \(message)\n")
    }

    /// A plaintext view of an open file: the entry's header and key, or, when the entry was
    /// repointed to a replacement file after this handle was opened, the handle's own.
    func content(_ handle: OpenFile) throws -> ProtectedFileContent {
        if handle.backingKey == handle.inode.key {
            let inode = handle.inode
            var header: ProtectedFileHeader?
            var key: SymmetricKey?
            if case .known(let known, _, let knownKey, _) = inode.contentState {
                (header, key) = (known, knownKey)
            } else {
                // Invalidated while this handle was open (protect rewrote the file in place).
                var st = stat()
                guard fstat(handle.fd, &st) == 0 else { throw FilesystemError.current() }
                header = try ProtectedFileHeader.read(fd: handle.fd)
                inode.storeHeader(header, stamp: st.st_ctim)
            }
            if header?.isEncrypted == true && key == nil { key = try fileKey(inode, header: header) }
            return try ProtectedFileContent(fd: handle.fd, header: header, fileKey: key)
        }
        return try handle.detachedContent { header in try context.fileKey(for: header) }
    }
}
