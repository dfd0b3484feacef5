import CSystem
import Glibc

/// What kind of filesystem a descriptor lives on (statfs(2)'s `f_type`).
public enum FilesystemType {
    /// ext4 (and ext2/3), XFS, Btrfs, tmpfs, F2FS: local filesystems whose every change, by
    /// any process of this machine, reaches fanotify and inotify. A network or FUSE filesystem changed from
    /// elsewhere, or an overlayfs whose lower layer changed, does not tell.
    static let locallyNotified: Set<Int> = [0xEF53, 0x5846_5342, 0x9123_683E, 0x0102_1994, 0xF2F5_2010]

    /// The magic number of the filesystem holding `fd` (any descriptor, O_PATH included).
    /// - Throws: `Errno` from fstatfs.
    public static func magic(of fd: Int32) throws(Errno) -> Int {
        var info = statfs()
        guard fstatfs(fd, &info) == 0 else { throw Errno.current }
        return Int(info.f_type)
    }

    /// Whether inotify sees every change of the filesystem holding `fd` (false when unknown).
    public static func changesAreNotified(on fd: Int32) -> Bool {
        guard let magic = try? magic(of: fd) else { return false }
        return locallyNotified.contains(magic)
    }
}
