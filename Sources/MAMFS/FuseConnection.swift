import Foundation
import Glibc
import MAMSystem

/// The processes that serve a FUSE connection: those holding a descriptor of /dev/fuse whose
/// fdinfo names the connection (`fuse_connection:` line, Linux 6.x). The connection's number is
/// the minor device number of the mount (`MountInfo.Entry.minorDevice`).
///
/// Found from /proc, without touching the mount itself, so a hung daemon cannot block the
/// lookup. The kernel frees a connection's number when its mount goes and hands it to the next
/// mount at once, so a daemon of an earlier mount that still holds its descriptor while it
/// exits is counted with the new mount's (fdinfo tells the two apart no further). Processes
/// whose descriptors this one may not read (other users', for a non-root caller) are not seen;
/// neither is any daemon on a kernel whose fdinfo lacks the line.
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
            if connectionNumber(fdinfo: info) == connection { return true }
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
