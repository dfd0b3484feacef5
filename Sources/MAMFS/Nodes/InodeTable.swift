import CFuse
import Glibc
import Synchronization

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
