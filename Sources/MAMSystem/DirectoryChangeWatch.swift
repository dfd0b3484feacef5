import CSystem
import Glibc

/// A fanotify group that tells whether any directory it watches changed in a way that can
/// change what is inherited from it: an attribute of the directory itself (an extended
/// attribute such as an owner tag, a mode), the directory moved to another place, or removed;
/// and whether this mount namespace's mount table changed (a mount on a directory changes
/// where ".." leads below it, with no event on any directory).
/// Mirrors fanotify(7) with inode marks and FAN_REPORT_FID (allowed to unprivileged users
/// since Linux 5.13), and poll(2) of /proc/thread-self/mountinfo, opened by `init()` and so
/// naming the mount namespace of the thread that made the watch (POLLPRI after a change, proc(5)):
/// the kernel queues an event, or counts the mount table's change, before the call that made
/// the change returns, so a `drainChanges()` after that call sees it, whichever process made
/// the change. Unlike an inotify watch, a mark without FAN_EVENT_ON_CHILD reports nothing about
/// the files inside.
///
/// Not thread-safe: callers serialize its calls (the owner cache holds a lock).
public final class DirectoryChangeWatch {
    /// FAN_ATTRIB | FAN_MOVE_SELF | FAN_DELETE_SELF of the marked directory itself (FAN_ONDIR).
    static let mask = UInt64(FAN_ATTRIB) | UInt64(FAN_MOVE_SELF) | UInt64(FAN_DELETE_SELF) | UInt64(FAN_ONDIR)

    private let fd: Int32
    /// /proc/thread-self/mountinfo, polled for POLLPRI.
    private let mountTable: Int32
    /// Reads of the queue per `drainChanges` at most: a process that keeps changing a marked
    /// directory cannot hold the caller there (what is left is read next time, a change again).
    static let readsPerDrain = 8
    /// The group and the mount table, as poll(2) takes them (kept: no allocation per drain).
    private var pollSet: [pollfd]
    /// Marks placed since the group started or was last emptied (a directory marked twice
    /// counts twice; the kernel drops the mark of a removed directory by itself).
    public private(set) var marksPlaced = 0
    /// Room for a burst of events per read (an event with its file identifier is about 40 bytes).
    private var buffer = [UInt8](repeating: 0, count: 4096)

    /// What a drain found.
    public struct Changes: OptionSet, Sendable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// A marked directory changed, or the queue overflowed.
        public static let directories = Changes(rawValue: 1)
        /// The mount table of the watch's namespace changed.
        public static let mountTable = Changes(rawValue: 2)
    }

    /// Starts a notification group (non-blocking, close-on-exec, events naming the object by
    /// file identifier: no descriptor is opened per event), and watches the mount table of the
    /// calling thread's mount namespace.
    /// - Throws: `Errno` from fanotify_init (EMFILE when the user's groups are used up, EPERM or
    ///   EINVAL on a kernel without unprivileged fanotify), or from opening
    ///   /proc/thread-self/mountinfo (ENOENT when /proc is not mounted).
    public init() throws(Errno) {
        let mountTable = open("/proc/thread-self/mountinfo", O_RDONLY | O_CLOEXEC)
        guard mountTable >= 0 else { throw Errno.current }
        let fd = fanotify_init(UInt32(FAN_CLASS_NOTIF) | UInt32(FAN_CLOEXEC) | UInt32(FAN_NONBLOCK) | UInt32(FAN_REPORT_FID),
                               UInt32(O_RDONLY | O_CLOEXEC))
        guard fd >= 0 else {
            let error = Errno.current
            close(mountTable)
            throw error
        }
        self.fd = fd
        self.mountTable = mountTable
        pollSet = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: mountTable, events: Int16(POLLPRI), revents: 0)]
    }

    deinit {
        close(fd)
        close(mountTable)
    }

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

    /// Reads the queued events without waiting (at most `readsPerDrain` reads), and whether the
    /// mount table changed since the last call: one poll(2) when nothing did.
    /// - Returns: true when anything changed (an event, the queue's overflow, the mount table);
    ///   an error of poll or read other than EAGAIN counts as a change too, so a caller never
    ///   trusts what it cannot check.
    public func drainChanges() -> Bool { !drain().isEmpty }

    /// `drainChanges()`, telling what changed: a poll(2) error reports both kinds.
    public func drain() -> Changes {
        pollSet[0].revents = 0
        pollSet[1].revents = 0
        var n: Int32
        repeat { n = poll(&pollSet, 2, 0) } while n < 0 && errno == EINTR
        guard n != 0 else { return [] }
        guard n > 0 else { return [.directories, .mountTable] }
        var changes: Changes = pollSet[1].revents != 0 ? .mountTable : []
        guard pollSet[0].revents != 0 else { return changes }
        changes.insert(.directories)
        for _ in 0..<Self.readsPerDrain {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EAGAIN { break }
        }
        return changes
    }
}
