import CSystem
import Glibc
import MAMSystem

/// Reading a backing attribute by the entry's name in its directory rather than through its
/// /proc/self/fd path.
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
        guard let value else { return nil }
        var after = stat()
        let unchanged = record.name.withUnsafeBufferPointer { entryName in
            entryName.baseAddress.map { fstatat(directory, $0, &after, AT_SYMLINK_NOFOLLOW) == 0 } ?? false
        }
        guard unchanged, after.st_dev == before.st_dev, after.st_ino == before.st_ino,
              after.st_ctim.tv_sec == before.st_ctim.tv_sec, after.st_ctim.tv_nsec == before.st_ctim.tv_nsec else { return nil }
        return .some(value)
    }
}
