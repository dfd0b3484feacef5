import CFuse
import Glibc
import MAMProtection
import MAMSystem

/// Directory listings: opendir and the entries of readdir/readdirplus.
extension OverlayFilesystem {
    /// Opens the directory `nodeid`: a snapshot of its entries (see `OpenDirectory`).
    func opendir(_ nodeid: UInt64, caller: Caller) throws -> OpenDirectory {
        refresh(force: false)
        let inode = try node(nodeid, for: .listDirectory, by: caller)
        let dir = OpenDirectory(inode: inode)
        let entries = try listing(inode)
        dir.snapshot.withLock { $0.entries = entries }
        return dir
    }

    /// The entries of `dir` from index `offset` (the listing is taken again at 0), for
    /// readdirplus (`plus`) with the headers of the next entries prefetched.
    func readdir(_ dir: OpenDirectory, offset: Int, plus: Bool, caller: Caller) throws -> DirectoryPage {
        try admit(.listDirectory, on: dir.inode, by: caller)
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
        return DirectoryPage(fs: self, directory: dir.inode, entries: entries, start: max(0, offset), plus: plus)
    }

    /// The entries of a backing directory, without files of wiped owners.
    func listing(_ inode: Inode) throws -> [DirectoryEntry] {
        // A stream of its own ("." and ".." included, as the backing directory lists them).
        let directory = try FileDescriptor.open(in: inode.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard let stream = fdopendir(directory.rawValue) else { throw Errno.current }
        _ = directory.take()
        defer { closedir(stream) }
        let checkOwners = hasWipedOwners
        let atRoot = inode.nodeid == table.root.nodeid
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
            if atRoot && hooks.isReservedRootName(name) { continue }
            if checkOwners && type == UInt8(DT_REG) && ownerIsWiped(dirFD: Glibc.dirfd(stream), name: name) { continue }
            entries.append(DirectoryEntry(name: name, ino: UInt64(entry.pointee.d_ino), type: type))
        }
        return entries
    }
    private func ownerIsWiped(dirFD: Int32, name: UnsafePointer<CChar>) -> Bool {
        // A hint that names no wiped owner is enough to keep the file; one that does is checked
        // against the header (a hint left behind or forged must not hide a file).
        if let hinted = HeaderHint.read(directoryFD: dirFD, name: name), !isHidden(owner: hinted.owner) { return false }
        guard let file = try? FileDescriptor.open(in: dirFD, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC) else { return false }
        return isHidden((try? ProtectedFileHeader.read(fd: file.rawValue)) ?? nil)
    }
    /// Starts reading the headers of the regular files among `entries` (one page each,
    /// POSIX_FADV_WILLNEED: asynchronous), so the lookups of a readdirplus reply find them in
    /// the page cache instead of waiting for one disk read after another. Files whose entry
    /// already holds a header are skipped, and so are files with a header hint, whose
    /// lookups read no header (`headerSummary`): each advice is a disk request of its own.
    /// Whether a hint is there is all that is asked here (its length); the lookup reads it.
    private func prefetchHeaders(_ dir: Inode, _ entries: ArraySlice<DirectoryEntry>) {
        let device = dir.key.device
        for entry in entries where entry.type == UInt8(DT_REG) {
            if let known = table.existing(BackingKey(device: device, inode: entry.ino)), known.hasCachedHeader { continue }
            if HeaderHint.isPresent(directoryFD: dir.fd, name: entry.name) { continue }
            guard let file = try? FileDescriptor.open(in: dir.fd, entry.name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC) else { continue }
            _ = posix_fadvise(file.rawValue, 0, off_t(ProtectedFileHeader.maximumLength), POSIX_FADV_WILLNEED)
        }
    }
}
