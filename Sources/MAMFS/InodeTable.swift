import CFuse
import Glibc
import MAMProtection
import Synchronization

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
    let contentLock = ReadWriteLock()

    /// What the entry's own mutex guards.
    private struct State {
        var key: BackingKey
        /// Changed only under the exclusive content lock (reads need the shared one).
        var content: ContentState = .unknown
        var openCount = 0
        /// Set when the last link went away while no handle was open: the close in deinit
        /// frees the backing inode, and rmdir of `directory` waits for it (PendingEvictions).
        var evictionMark: (pending: PendingEvictions, directory: BackingKey)?
    }
    private let state: Mutex<State>
    /// The bounded cache that holds (or re-opens) this entry's O_PATH descriptor.
    let descriptors: DescriptorCache
    /// Descriptor, recorded name and pins; guarded by `descriptors`' mutex.
    var slot: DescriptorSlot
    /// Kernel lookup count; guarded by the table's lock.
    var lookupCount: UInt64 = 0

    init(nodeid: UInt64, key: BackingKey, fileType: mode_t, descriptors: DescriptorCache) {
        self.nodeid = nodeid
        self.state = Mutex(State(key: key))
        self.descriptors = descriptors
        self.slot = DescriptorSlot(fd: -1)
        self.fileType = fileType
    }

    deinit {
        descriptors.entryGone(holding: slot.fd)
        if slot.fd >= 0 { close(slot.fd) }
        for fd in slot.retired { close(fd) }
        if let mark = state.withLock({ $0.evictionMark }) { mark.pending.remove(directory: mark.directory) }
    }

    /// Marks the entry as the last link of an unlinked file in `directory` (no effect while a
    /// handle is open or when marked already).
    func markAwaitingEviction(_ pending: PendingEvictions, directory: BackingKey) {
        state.withLock { state in
            guard state.evictionMark == nil, state.openCount == 0 else { return }
            state.evictionMark = (pending, directory)
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

    var key: BackingKey { state.withLock { $0.key } }

    /// "/proc/self/fd/N": the backing object itself, usable with path-only calls.
    var procPath: String { "/proc/self/fd/\(fd)" }

    /// Points the entry at another backing object (after protect replaced the file).
    func replaceBacking(key: BackingKey, fd: Int32) {
        state.withLock { $0.key = key }
        descriptors.replace(self, with: fd)
        invalidateCachedHeader()
    }

    /// Drops the cached header and key (the backing file was rewritten in place).
    func invalidateCachedHeader() {
        state.withLock { $0.content = .unknown }
    }

    var openCount: Int { state.withLock { $0.openCount } }

    /// True once a header (or its absence) was read and not invalidated since.
    var hasCachedHeader: Bool { state.withLock { $0.content.isKnown } }

    func adjustOpenCount(_ delta: Int) {
        let now = state.withLock { state in
            state.openCount += delta
            return state.openCount
        }
        if now == 0 { descriptors.handlesClosed(self) }
    }

    /// The cached header and key as one consistent pair (call under the content lock).
    var contentState: ContentState { state.withLock { $0.content } }

    /// The cached state when its header can be trusted for a backing file with `ctime` (see
    /// `ContentState.isCurrent`), else `.unknown`.
    func currentContent(ctime: timespec?) -> ContentState {
        state.withLock { state in
            state.content.isCurrent(ctime: ctime, handlesOpen: state.openCount > 0) ? state.content : .unknown
        }
    }

    /// Records `header` as read at ctime `stamp` (the key stays if the header is unchanged).
    func storeHeader(_ header: ProtectedFileHeader?, stamp: timespec) {
        state.withLock { $0.content = $0.content.storing(header: header, stamp: stamp) }
    }

    /// Records a header together with the key it was written with, loaded in `generation`.
    func storeHeader(_ header: ProtectedFileHeader?, key: SymmetricKey?, generation: UInt64, stamp: timespec) {
        state.withLock { $0.content = .known(header: header, stamp: stamp, key: key, keyGeneration: generation) }
    }

    /// Records the file key of the known header, loaded in `generation`.
    func storeFileKey(_ key: SymmetricKey?, generation: UInt64) {
        state.withLock { $0.content = $0.content.storing(key: key, generation: generation) }
    }
}

/// nodeid -> entry and backing (dev, ino) -> entry, with honest lookup counts.
final class InodeTable: @unchecked Sendable {
    /// The two maps and the next nodeid to hand out (nodeids are never reused).
    private struct Maps {
        var byNode: [UInt64: Inode] = [:]
        var byKey: [BackingKey: Inode] = [:]
        var nextNodeid: UInt64 = 2
    }
    private let maps = Mutex(Maps())
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
        let root = self.root
        maps.withLock { maps in
            maps.byNode[root.nodeid] = root
            maps.byKey[root.key] = root
        }
    }

    func inode(_ nodeid: UInt64) -> Inode? {
        maps.withLock { $0.byNode[nodeid] }
    }

    func existing(_ key: BackingKey) -> Inode? {
        maps.withLock { $0.byKey[key] }
    }

    /// The entry for the backing object with `st`, found as `name` in `parent`; its lookup
    /// count goes up by one. A new entry records `name` as where it is (an existing one keeps
    /// its record: the caller sets the name once its request succeeded). `fd` (an O_PATH
    /// descriptor of the object, or -1) is adopted by an entry without one, else closed.
    func acquire(_ st: stat, fd: Int32, parent: Inode, name: UnsafePointer<CChar>) -> Inode {
        let key = BackingKey(st)
        // Name and descriptor are set before another thread can find a new entry.
        return maps.withLock { maps in
            if let inode = maps.byKey[key] {
                inode.lookupCount += 1
                if fd >= 0 { descriptors.adopt(fd, for: inode) }
                return inode
            }
            let inode = Inode(nodeid: maps.nextNodeid, key: key, fileType: st.st_mode & S_IFMT, descriptors: descriptors)
            descriptors.setName(inode, parent: parent, name: name)
            if fd >= 0 { descriptors.adopt(fd, for: inode) }
            maps.nextNodeid += 1
            inode.lookupCount = 1
            maps.byNode[inode.nodeid] = inode
            maps.byKey[key] = inode
            return inode
        }
    }

    /// `acquire` for an object that already has an entry (its record unchanged); nil (nothing
    /// counted) otherwise.
    func acquireExisting(_ st: stat) -> Inode? {
        maps.withLock { maps in
            guard let inode = maps.byKey[BackingKey(st)] else { return nil }
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
        let removed: Inode? = maps.withLock { maps in
            guard nodeid != root.nodeid, let inode = maps.byNode[nodeid] else { return nil }
            inode.lookupCount = inode.lookupCount > count ? inode.lookupCount - count : 0
            guard inode.lookupCount == 0 else { return nil }
            maps.byNode[nodeid] = nil
            if maps.byKey[inode.key] === inode { maps.byKey[inode.key] = nil }
            return inode
        }
        if let removed { descriptors.drop(removed) }
        withExtendedLifetime(removed) {}
    }

    /// Moves `inode` to a new backing object; false when another entry already has that key.
    func repoint(_ inode: Inode, to st: stat, fd: Int32) -> Bool {
        let key = BackingKey(st)
        return maps.withLock { maps in
            if maps.byKey[key] != nil { return false }
            if maps.byKey[inode.key] === inode { maps.byKey[inode.key] = nil }
            inode.replaceBacking(key: key, fd: fd)
            maps.byKey[key] = inode
            return true
        }
    }

    var all: [Inode] { maps.withLock { Array($0.byNode.values) } }
}
