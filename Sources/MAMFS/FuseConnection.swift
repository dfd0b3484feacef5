import Foundation
import Glibc
import CSystem
import MAMSystem

/// The processes that serve a FUSE connection: those holding a descriptor of /dev/fuse whose
/// fdinfo names the connection (`fuse_connection:` line, Linux 6.x). The connection's number is
/// the minor device number of the mount (`MountInfo.Entry.minorDevice`).
///
/// Found from /proc, without touching the mount itself, so a hung daemon cannot block the
/// lookup. The kernel frees a connection's number when its mount goes and hands it to the next
/// mount at once, so a daemon of an earlier mount that still holds its descriptor (exiting,
/// stopped, or slow to notice) names the new mount's number in its fdinfo too. Such a
/// descriptor belongs to a connection the kernel aborted when the mount went: a duplicate of
/// it (pidfd_getfd(2)) polls POLLERR, and its process is not counted. Where no duplicate can
/// be had (pidfd_getfd needs ptrace access: a process of another user, for a non-root caller)
/// the process is counted. Processes whose descriptors this one may not read at all are not
/// seen; neither is any daemon on a kernel whose fdinfo lacks the line.
enum FuseConnection {
    /// The path every FUSE daemon's device descriptor reads back as.
    static let devicePath = "/dev/fuse"

    /// PIDs (other than this process) holding a /dev/fuse descriptor of `connection`, ascending.
    static func holders(of connection: UInt32) -> [pid_t] {
        let me = getpid()
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        var pids: [pid_t] = []
        for entry in entries {
            guard let pid = pid_t(entry), pid != me, serves(pid, connection) else { continue }
            pids.append(pid)
        }
        return pids.sorted()
    }

    private static func serves(_ pid: pid_t, _ connection: UInt32) -> Bool {
        guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return false }
        for fd in descriptors {
            guard (try? SymbolicLink.readLinkString("/proc/\(pid)/fd/\(fd)")) == devicePath,
                  let info = try? String(contentsOfFile: "/proc/\(pid)/fdinfo/\(fd)", encoding: .utf8) else { continue }
            if connectionNumber(fdinfo: info) == connection, let number = Int32(fd),
               mamfs_fuse_descriptor_aborted(pid, number) != 1 {
                return true
            }
        }
        return false
    }

    /// The `fuse_connection:` value of a /dev/fuse descriptor's fdinfo text; nil without one.
    static func connectionNumber(fdinfo: String) -> UInt32? {
        for line in fdinfo.split(separator: "\n") where line.hasPrefix("fuse_connection:") {
            return UInt32(line.dropFirst("fuse_connection:".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}
