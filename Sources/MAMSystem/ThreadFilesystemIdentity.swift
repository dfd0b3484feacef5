import CSystem
import Glibc

/// Runs calls that create filesystem objects as another user, on the calling thread alone:
/// its fsuid, fsgid and supplementary groups are set for the call and put back after.
///
/// The kernel then checks the caller's permissions (the thread's filesystem capabilities are
/// off while its fsuid is not 0: no DAC override, no CAP_MKNOD) and makes the new object the
/// caller's from the start: owner `uid`, group `gid` (or, in a S_ISGID directory, the
/// directory's), set-group-ID stripped where the caller may not keep it. So a daemon that runs
/// as root never has to chown an object by name after making it, which a process renaming
/// entries in the backing directory could turn into a chown of another object.
///
/// setfsuid(2), setfsgid(2) and setgroups(2) as raw system calls: glibc's setgroups changes
/// every thread of the process, and the others report no error.
public enum ThreadFilesystemIdentity {
    /// Runs `body` with the thread's fsuid `uid`, fsgid `gid` and supplementary groups
    /// `groups`, then puts the thread's own back (also when `body` throws).
    /// - Throws: EPERM when the switch does not take (the process lacks CAP_SETUID or
    ///   CAP_SETGID; nothing is run then), or `body`'s `Errno`.
    public static func acting<T: ~Copyable>(uid: uid_t, gid: gid_t, groups: [gid_t], _ body: () throws(Errno) -> T) throws(Errno) -> T {
        let ownCount = getgroups(0, nil)
        guard ownCount >= 0 else { throw Errno.current }
        var own = [gid_t](repeating: 0, count: Int(ownCount))
        guard getgroups(ownCount, &own) == ownCount else { throw Errno.current }
        guard groups.withUnsafeBufferPointer({ mamfs_thread_setgroups($0.count, $0.baseAddress) }) == 0 else { throw Errno.current }
        let ownGID = mamfs_thread_setfsgid(gid)
        let ownUID = mamfs_thread_setfsuid(uid)
        defer {
            _ = mamfs_thread_setfsuid(ownUID)
            _ = mamfs_thread_setfsgid(ownGID)
            _ = own.withUnsafeBufferPointer { mamfs_thread_setgroups($0.count, $0.baseAddress) }
        }
        guard mamfs_thread_setfsuid(uid_t.max) == uid, mamfs_thread_setfsgid(gid_t.max) == gid else {
            throw Errno.notPermitted
        }
        return try body()
    }
}
