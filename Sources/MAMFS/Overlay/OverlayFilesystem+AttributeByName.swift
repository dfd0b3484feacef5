import CSystem
import Glibc
import MAMProtection
import MAMSystem

/// Reading a backing attribute or header hint by the entry's name in its directory rather than
/// through its /proc/self/fd path, taken only when the name still leads to the same object.
extension OverlayFilesystem {
    /// The backing object's extended attribute `name`: nil when it has none (ENODATA).
    ///
    /// An entry's descriptor is O_PATH, which fgetxattr(2) refuses, so the attribute is read
    /// through a path. The /proc/self/fd path of the descriptor costs a walk of /proc that makes
    /// a new proc inode at each call (in the daemon, several times what a getxattr itself
    /// costs); the kernel asks for `security.capability` twice for every file a program writes.
    /// So a regular file or directory whose name is recorded (`DescriptorCache.recordedName`)
    /// is read by that name from its directory (getxattrat(2), Linux 6.13+, no final symlink
    /// followed), and the answer is taken only when the name still leads to the entry's object
    /// at the ctime its descriptor had before the read (fstat before, fstatat of the name
    /// after: another object under the name, or a change of the attributes in between, which
    /// moves the ctime, and the read counts for nothing). Otherwise, and for every error but
    /// ENODATA, the attribute is read through the /proc path as before, with its errors.
    /// - Throws: the errno of getxattr(2) through the /proc path (ENOTSUP, EACCES, ...).
    func backingAttribute(_ inode: Inode, _ name: UnsafePointer<CChar>) throws -> [UInt8]? {
        if inode.isRegular || inode.isDirectory, case .some(let value) = attributeByName(inode, name) { return value }
        return try ExtendedAttributes(path: inode.procPath).get(cName: name)
    }

    /// What `backingAttribute` read by name (`.some(nil)`: ENODATA), nil when that read does
    /// not count.
    private func attributeByName(_ inode: Inode, _ name: UnsafePointer<CChar>) -> [UInt8]?? {
        guard let record = table.descriptors.recordedName(of: inode),
              let fd = try? inode.descriptor(), let directory = try? record.parent.descriptor() else { return nil }
        var before = stat()
        guard fstatat(fd, "", &before, SystemConstants.emptyPath | AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        let value: [UInt8]?? = record.name.withUnsafeBufferPointer { entryName in
            guard let entryName = entryName.baseAddress else { return nil }
            var failure: Int32 = 0
            let first: [UInt8]?? = withUnsafeTemporaryAllocation(byteCount: 256, alignment: 1) { buffer in
                let n = mamfs_getxattrat_nofollow(directory, entryName, name, buffer.baseAddress, UInt32(buffer.count))
                if n >= 0 { return .some(Array(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))) }
                failure = errno
                return failure == ENODATA ? .some(nil) : nil
            }
            if let first { return first }
            guard failure == ERANGE else { return nil }
            // Larger than the first buffer: its size, then the value (it may change between).
            var n = mamfs_getxattrat_nofollow(directory, entryName, name, nil, 0)
            guard n > 0 else { return nil }
            var large = [UInt8](repeating: 0, count: n)
            n = large.withUnsafeMutableBytes {
                mamfs_getxattrat_nofollow(directory, entryName, name, $0.baseAddress, UInt32($0.count))
            }
            return n >= 0 ? .some(Array(large.prefix(n))) : nil
        }
        guard let value, record.name.withUnsafeBufferPointer({ entryName in
            entryName.baseAddress.map { isStill($0, in: directory, before) } ?? false
        }) else { return nil }
        return .some(value)
    }

    /// Keeps the header hint of the regular file `name` in `dirFD` with `inode`, stamped with
    /// the ctime of `statted` (the fstat of the descriptor the entry was made with), so that
    /// `headerSummary` does not read it again through the entry's /proc/self/fd path: a walk
    /// of /proc that makes a new proc inode at each call, about three times the cost of this
    /// getxattrat of one name from the directory, which the lookup of `name` left in the dcache.
    ///
    /// The name is read again after the hint (fstatat, no symlink followed) and the hint kept
    /// only when it still names the same file at the same ctime: a file replaced under the name
    /// or changed in between (its ctime moves with its attributes and its bytes) keeps nothing,
    /// and `headerSummary` reads its hint as before.
    func readHint(of inode: Inode, in dirFD: Int32, _ name: UnsafePointer<CChar>, statted: stat) {
        guard let hinted = HeaderHint.read(directoryFD: dirFD, name: name),
              isStill(name, in: dirFD, statted) else { return }
        inode.storeHint(hinted, stamp: statted.st_ctim)
    }

    /// Whether `name` in `dirFD` (fstatat, no symlink followed) still is the object `statted` describes,
    /// (st_dev, st_ino), at its ctime: what was read by the name in between was that object's.
    private func isStill(_ name: UnsafePointer<CChar>, in dirFD: Int32, _ statted: stat) -> Bool {
        var now = stat()
        return fstatat(dirFD, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == statted.st_dev
            && now.st_ino == statted.st_ino && now.st_ctim.tv_sec == statted.st_ctim.tv_sec
            && now.st_ctim.tv_nsec == statted.st_ctim.tv_nsec
    }
}
