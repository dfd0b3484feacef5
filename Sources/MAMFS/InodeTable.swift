import CFuse
import Glibc
import MAMProtection

/// Identity of a backing object: (st_dev, st_ino).
struct BackingKey: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }

    init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }
}

/// One backing object known to the kernel (a FUSE nodeid). Hard links share one entry, so
/// they share the content lock and the cached header (gocryptfs' openfiletable, passthrough_hp's
/// Inode).
final class Inode: @unchecked Sendable {
    /// The FUSE node id (1 = root).
    let nodeid: UInt64
    /// S_IFMT bits of the backing object.
    let fileType: mode_t
    /// Shared for reads and attribute reads, exclusive for writes, truncation and header changes.
    let content = ReadWriteLock()

    private let mutex = Mutex()
    private var _key: BackingKey
    /// The bounded cache that holds (or re-opens) this entry's O_PATH descriptor.
    let descriptors: DescriptorCache
    /// Descriptor, recorded name and pins; guarded by `descriptors`' mutex.
    var slot: DescriptorSlot
    /// Kernel lookup count; guarded by the table's lock.
    var lookupCount: UInt64 = 0

    // Cached header state; changed only under the exclusive content lock (plus the mutex).
    private var headerKnown = false
    private var cachedHeader: ProtectedFileHeader?
    private var headerStamp = timespec()
    private var cachedKey: SymmetricKey?
    private var keyGeneration: UInt64 = 0
    private var _openCount = 0

    init(nodeid: UInt64, key: BackingKey, fileType: mode_t, descriptors: DescriptorCache) {
        self.nodeid = nodeid
        self._key = key
        self.descriptors = descriptors
        self.slot = DescriptorSlot(fd: -1)
        self.fileType = fileType
    }

    deinit {
        descriptors.entryGone(holding: slot.fd)
        if slot.fd >= 0 { close(slot.fd) }
        for fd in slot.retired { close(fd) }
        if let (pending, directory) = evictionMark { pending.remove(directory: directory) }
    }

    /// Set when the last link went away while no handle was open: the close in deinit frees
    /// the backing inode, and rmdir of `directory` waits for it (PendingEvictions).
    private var evictionMark: (PendingEvictions, BackingKey)?

    func markAwaitingEviction(_ pending: PendingEvictions, directory: BackingKey) {
        mutex.withLock {
            guard evictionMark == nil, _openCount == 0 else { return }
            evictionMark = (pending, directory)
            pending.add(directory: directory)
        }
    }

    var isRegular: Bool { fileType == S_IFREG }
    var isDirectory: Bool { fileType == S_IFDIR }
    var isSymlink: Bool { fileType == S_IFLNK }

    /// The O_PATH descriptor of the backing object, opened again by name if the cache closed
    /// it; valid until the request (`DescriptorCache.withPins`) ends. -1 when the object cannot
    /// be found again (then `procPath` names nothing and calls on it fail).
    var fd: Int32 { (try? descriptors.descriptor(of: self)) ?? -1 }

    /// `fd`, with the reason when there is none (ESTALE: the object is gone or was replaced).
    func descriptor() throws -> Int32 { try descriptors.descriptor(of: self) }

    var key: BackingKey { mutex.withLock { _key } }

    /// "/proc/self/fd/N": the backing object itself, usable with path-only calls.
    var procPath: String { "/proc/self/fd/\(fd)" }

    /// Points the entry at another backing object (after protect replaced the file).
    func replaceBacking(key: BackingKey, fd: Int32) {
        mutex.withLock { _key = key }
        descriptors.replace(self, with: fd)
        mutex.withLock {
            headerKnown = false
            cachedHeader = nil
            cachedKey = nil
            keyGeneration = 0
        }
    }

    /// Drops the cached header and key (the backing file was rewritten in place).
    func invalidateCachedHeader() {
        mutex.withLock {
            headerKnown = false
            cachedHeader = nil
            cachedKey = nil
            keyGeneration = 0
        }
    }

    var openCount: Int { mutex.withLock { _openCount } }

    /// True once a header (or its absence) was read and not invalidated since.
    var hasCachedHeader: Bool { mutex.withLock { headerKnown } }
    func adjustOpenCount(_ delta: Int) {
        let now = mutex.withLock { () -> Int in
            _openCount += delta
            return _openCount
        }
        if now == 0 { descriptors.handlesClosed(self) }
    }

    /// The cached header when it can be trusted: while a handle is open (every change then
    /// comes through us), or when the backing ctime still equals the one seen when it was read.
    func cachedHeader(ctime: timespec?) -> ProtectedFileHeader?? {
        mutex.withLock {
            guard headerKnown else { return nil }
            if _openCount > 0 { return .some(cachedHeader) }
            guard let ctime, ctime.tv_sec == headerStamp.tv_sec, ctime.tv_nsec == headerStamp.tv_nsec else { return nil }
            return .some(cachedHeader)
        }
    }

    /// Header and file key as one consistent pair (call under the content lock); `known` is
    /// false when no header was loaded since the last invalidation.
    var headerAndKey: (known: Bool, header: ProtectedFileHeader?, key: SymmetricKey?) {
        mutex.withLock { (headerKnown, cachedHeader, cachedKey) }
    }

    func storeHeader(_ header: ProtectedFileHeader?, stamp: timespec) {
        mutex.withLock {
            if headerKnown, cachedHeader != header {
                cachedKey = nil
                keyGeneration = 0
            }
            headerKnown = true
            cachedHeader = header
            headerStamp = stamp
        }
    }

    func storeHeader(_ header: ProtectedFileHeader?, key: SymmetricKey?, generation: UInt64, stamp: timespec) {
        mutex.withLock {
            headerKnown = true
            cachedHeader = header
            headerStamp = stamp
            cachedKey = key
            keyGeneration = generation
        }
    }

    /// The cached file key when it was loaded in `generation` (no state change since).
    func cachedFileKey(generation: UInt64) -> SymmetricKey?? {
        mutex.withLock {
            guard keyGeneration == generation, keyGeneration != 0 else { return nil }
            return .some(cachedKey)
        }
    }

    func storeFileKey(_ key: SymmetricKey?, generation: UInt64) {
        mutex.withLock {
            cachedKey = key
            keyGeneration = generation
        }
    }
}

/// nodeid -> entry and backing (dev, ino) -> entry, with honest lookup counts.
final class InodeTable: @unchecked Sendable {
    private let mutex = Mutex()
    private var byNode: [UInt64: Inode] = [:]
    private var byKey: [BackingKey: Inode] = [:]
    private var nextNodeid: UInt64 = 2
    let root: Inode
    /// Unlinked files whose backing inode is freed when their entry goes (see PendingEvictions).
    let pendingEvictions = PendingEvictions()

    /// The bounded O_PATH descriptors of the entries.
    let descriptors: DescriptorCache

    init(rootFD: Int32, rootStat: stat, descriptorBudget: Int = DescriptorCache.defaultBudget()) {
        descriptors = DescriptorCache(budget: descriptorBudget)
        root = Inode(nodeid: UInt64(mamfs_FUSE_ROOT_ID), key: BackingKey(rootStat), fileType: rootStat.st_mode & S_IFMT, descriptors: descriptors)
        // The root has no recorded name: its descriptor is never closed.
        descriptors.adopt(rootFD, for: root, scope: nil)
        root.lookupCount = 1
        byNode[root.nodeid] = root
        byKey[root.key] = root
    }

    func inode(_ nodeid: UInt64) -> Inode? {
        mutex.withLock { byNode[nodeid] }
    }

    func existing(_ key: BackingKey) -> Inode? {
        mutex.withLock { byKey[key] }
    }

    /// The entry for the backing object with `st`, found as `name` in `parent`; its lookup
    /// count goes up by one. A new entry records `name` as where it is (an existing one keeps
    /// its record: the caller sets the name once its request succeeded). `fd` (an O_PATH
    /// descriptor of the object, or -1) is adopted by an entry without one, else closed.
    func acquire(_ st: stat, fd: Int32, parent: Inode, name: UnsafePointer<CChar>) -> Inode {
        let key = BackingKey(st)
        // Name and descriptor are set before another thread can find a new entry.
        return mutex.withLock {
            if let inode = byKey[key] {
                inode.lookupCount += 1
                if fd >= 0 { descriptors.adopt(fd, for: inode) }
                return inode
            }
            let inode = Inode(nodeid: nextNodeid, key: key, fileType: st.st_mode & S_IFMT, descriptors: descriptors)
            descriptors.setName(inode, parent: parent, name: name)
            if fd >= 0 { descriptors.adopt(fd, for: inode) }
            nextNodeid += 1
            inode.lookupCount = 1
            byNode[inode.nodeid] = inode
            byKey[key] = inode
            return inode
        }
    }

    /// `acquire` for an object that already has an entry (its record unchanged); nil (nothing
    /// counted) otherwise.
    func acquireExisting(_ st: stat) -> Inode? {
        mutex.withLock {
            guard let inode = byKey[BackingKey(st)] else { return nil }
            inode.lookupCount += 1
            return inode
        }
    }

    /// Drops `count` kernel references; the entry goes away at zero (never the root).
    ///
    /// The entry is released after the table lock is dropped: its deinit closes the O_PATH
    /// descriptor, and for a file that was unlinked that close is where the backing filesystem
    /// frees the inode and its blocks (hundreds of microseconds on ext4 with discard), which
    /// must not hold up every lookup and create waiting for the table.
    func forget(_ nodeid: UInt64, count: UInt64) {
        let removed: Inode? = mutex.withLock {
            guard nodeid != root.nodeid, let inode = byNode[nodeid] else { return nil }
            inode.lookupCount = inode.lookupCount > count ? inode.lookupCount - count : 0
            guard inode.lookupCount == 0 else { return nil }
            byNode[nodeid] = nil
            if byKey[inode.key] === inode { byKey[inode.key] = nil }
            return inode
        }
        if let removed { descriptors.drop(removed) }
        withExtendedLifetime(removed) {}
    }

    /// Moves `inode` to a new backing object; false when another entry already has that key.
    func rekey(_ inode: Inode, to st: stat, fd: Int32) -> Bool {
        let key = BackingKey(st)
        return mutex.withLock {
            if byKey[key] != nil { return false }
            if byKey[inode.key] === inode { byKey[inode.key] = nil }
            inode.replaceBacking(key: key, fd: fd)
            byKey[key] = inode
            return true
        }
    }

    var all: [Inode] { mutex.withLock { Array(byNode.values) } }
}
