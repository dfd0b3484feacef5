import Glibc
import MAMProtection

/// What is mounted on a directory, as far as mounting and unmounting care: nothing FUSE, a FUSE
/// mount with a daemon, or a dead FUSE mount whose daemon has exited (every access answers
/// ENOTCONN, "Transport endpoint is not connected").
///
/// Decided from /proc/self/mountinfo and the daemons' /dev/fuse descriptors (`FuseConnection`);
/// the mountpoint itself is only looked at (one statvfs) when no daemon was found, so a daemon
/// that hangs cannot block the answer.
public enum MountpointState: Sendable, Equatable {
    /// No FUSE filesystem is on top at the path.
    case notMounted
    /// A FUSE mount (entry nil when the mount table could not be read) and the processes
    /// serving it (empty when they could not be found).
    case live(MountInfo.Entry?, daemons: [pid_t])
    /// A FUSE mount whose daemon is gone.
    case dead(MountInfo.Entry)

    /// The state of `path` (absolute, as the kernel lists mount points: see
    /// `MountTable.mountPointPath`); `table` nil = the table could not be read.
    public static func of(_ path: String, table: MountInfo? = MountInfo.current()) -> MountpointState {
        guard let table else { return .live(nil, daemons: []) }
        guard let entry = table.entries.last(where: { MountTable.same($0.mountPoint, path) }), entry.isFuse else {
            return .notMounted
        }
        let daemons = entry.minorDevice.map(FuseConnection.holders(of:)) ?? []
        if !daemons.isEmpty { return .live(entry, daemons: daemons) }
        // statvfs (a statfs(2)), not stat: the kernel answers a stat of the mount's root from
        // the attributes it cached (for the mount's attr_timeout) even after the daemon died,
        // while a STATFS is always asked of the daemon, and a dead connection answers ENOTCONN.
        var fs = statvfs()
        if statvfs(path, &fs) != 0 && errno == ENOTCONN { return .dead(entry) }
        return .live(entry, daemons: [])
    }

    /// The mountpoint `given` (as the user typed it) as the kernel lists it, and its state:
    /// `MountTable.mountPointPath`, else, when nothing is mounted there, the path with a
    /// symbolic link in its last component resolved too (`MountTable.resolvedPath`).
    public static func find(_ given: String) -> (path: String, state: MountpointState) {
        let table = MountInfo.current()
        let path = MountTable.mountPointPath(given)
        let state = of(path, table: table)
        guard state == .notMounted else { return (path, state) }
        let resolved = MountTable.resolvedPath(given)
        return resolved == path ? (path, state) : (resolved, of(resolved, table: table))
    }

    /// Names what a mount table entry is, for messages: "a mamfs mount of BACKING", "a FUSE
    /// filesystem (TYPE from SOURCE)".
    static func describe(_ entry: MountInfo.Entry?) -> String {
        guard let entry else { return "a FUSE filesystem" }
        if entry.filesystemType == MountTable.filesystemType, let backing = MountTable.backingDirectory(source: entry.source) {
            return "a mamfs mount of \(backing)"
        }
        return "a FUSE filesystem (\(entry.filesystemType) from \(entry.source))"
    }
}
