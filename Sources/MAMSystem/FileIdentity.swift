import CSystem
import Glibc

/// Which file a name leads to, from one statx(2): the (device, inode) with the size and
/// modification time that tell a rewritten file from the old one, the mount it was reached
/// through and its link count.
public struct FileIdentity: Equatable, Hashable, Sendable {
    /// Encoded as `st_dev` is, so it compares with stat(2)'s.
    public let device: UInt64
    public let inode: UInt64
    /// Bytes.
    public let size: Int64
    public let modifiedSeconds: Int
    public let modifiedNanoseconds: Int
    /// The kernel's mount id (0 when the kernel gives none; statx STATX_MNT_ID, Linux 5.8).
    public let mountID: UInt64
    /// Hard links to the file (more than one: the same file has several paths).
    public let links: UInt32

    /// The identity of what `path` below the directory `directoryFD` names, symlinks followed
    /// (as stat(2); /proc/PID/exe is such a link).
    /// - Throws: statx's `Errno` (ENOENT for a process that exited, EACCES, ...).
    public static func of(_ path: String, in directoryFD: Int32) throws(Errno) -> FileIdentity {
        var raw = mamfs_file_identity()
        guard mamfs_file_identity_at(directoryFD, path, &raw) == 0 else { throw Errno.current }
        return FileIdentity(device: raw.device, inode: raw.inode, size: raw.size,
                            modifiedSeconds: Int(raw.mtime_seconds), modifiedNanoseconds: Int(raw.mtime_nanoseconds),
                            mountID: raw.mount_id, links: raw.links)
    }

    public init(device: UInt64, inode: UInt64, size: Int64, modifiedSeconds: Int, modifiedNanoseconds: Int,
                mountID: UInt64, links: UInt32) {
        self.device = device
        self.inode = inode
        self.size = size
        self.modifiedSeconds = modifiedSeconds
        self.modifiedNanoseconds = modifiedNanoseconds
        self.mountID = mountID
        self.links = links
    }

    /// The birth time of `name` below the directory `directoryFD`, a final symlink not
    /// followed (statx STATX_BTIME), as "SECONDS.NANOSECONDS"; nil when the filesystem records
    /// none or it cannot be read. A file made anew has another, also one that got a freed inode
    /// number at once (ext4 hands them out again); a rename keeps it.
    public static func birthTime(of name: String, in directoryFD: Int32) -> String? {
        var seconds: Int64 = 0
        var nanoseconds: UInt32 = 0
        return mamfs_birth_time_at(directoryFD, name, &seconds, &nanoseconds) == 0 ? "\(seconds).\(nanoseconds)" : nil
    }
}
