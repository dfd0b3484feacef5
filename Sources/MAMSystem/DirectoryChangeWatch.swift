import CSystem
import Glibc

/// A fanotify group that tells whether any directory it watches changed in a way that can
/// change what is inherited from it: an attribute of the directory itself (an extended
/// attribute such as an owner tag, a mode), the directory moved to another place, or removed.
/// Mirrors fanotify(7) with inode marks and FAN_REPORT_FID (allowed to unprivileged users
/// since Linux 5.13): the kernel queues an event before the call that made the change returns,
/// so a `drainChanges()` after that call sees it, whichever process made the change. Unlike an
/// inotify watch, a mark without FAN_EVENT_ON_CHILD reports nothing about the files inside.
///
/// Not thread-safe: callers serialize its calls (the owner cache holds a lock).
public final class DirectoryChangeWatch {
    /// FAN_ATTRIB | FAN_MOVE_SELF | FAN_DELETE_SELF of the marked directory itself (FAN_ONDIR).
    static let mask = UInt64(FAN_ATTRIB) | UInt64(FAN_MOVE_SELF) | UInt64(FAN_DELETE_SELF) | UInt64(FAN_ONDIR)

    private let fd: Int32
    /// Marks placed since the group started or was last emptied (a directory marked twice
    /// counts twice; the kernel drops the mark of a removed directory by itself).
    public private(set) var marksPlaced = 0
    /// Room for a burst of events per read (an event with its file identifier is about 40 bytes).
    private var buffer = [UInt8](repeating: 0, count: 4096)

    /// Starts a notification group (non-blocking, close-on-exec, events naming the object by
    /// file identifier: no descriptor is opened per event).
    /// - Throws: `Errno` from fanotify_init (EMFILE when the user's groups are used up, EPERM or
    ///   EINVAL on a kernel without unprivileged fanotify).
    public init() throws(Errno) {
        let fd = fanotify_init(UInt32(FAN_CLASS_NOTIF) | UInt32(FAN_CLOEXEC) | UInt32(FAN_NONBLOCK) | UInt32(FAN_REPORT_FID),
                               UInt32(O_RDONLY | O_CLOEXEC))
        guard fd >= 0 else { throw Errno.current }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Watches the directory open as `directoryFD` (a readable descriptor, or an O_PATH one,
    /// which is marked through its /proc/self/fd path). Marking a directory already marked
    /// changes nothing.
    /// - Throws: `Errno`: EACCES (the caller may not read the directory), ENOSPC (the group's
    ///   marks are used up), ENOTDIR, EBADF, ENOENT (/proc not mounted).
    public func watch(_ directoryFD: Int32, pathOnly: Bool) throws(Errno) {
        let flags = UInt32(FAN_MARK_ADD) | UInt32(FAN_MARK_ONLYDIR)
        let result = pathOnly ? fanotify_mark(fd, flags, Self.mask, AT_FDCWD, ProcessDescriptorPath.path(of: directoryFD))
                              : fanotify_mark(fd, flags, Self.mask, directoryFD, nil)
        guard result == 0 else { throw Errno.current }
        marksPlaced += 1
    }

    /// Removes every mark (the kernel then keeps no directory in memory for this group).
    public func unwatchAll() {
        _ = fanotify_mark(fd, UInt32(FAN_MARK_FLUSH), 0, AT_FDCWD, nil)
        marksPlaced = 0
    }

    /// Reads every queued event without waiting.
    /// - Returns: true when any was queued (a change, or the queue's overflow: each means
    ///   "something may have changed"); a read error other than EAGAIN counts as a change too,
    ///   so a caller never trusts what it cannot check.
    public func drainChanges() -> Bool {
        var changed = false
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                changed = true
                continue
            }
            if n < 0, errno == EINTR { continue }
            return changed || n == 0 || errno != EAGAIN
        }
    }
}
