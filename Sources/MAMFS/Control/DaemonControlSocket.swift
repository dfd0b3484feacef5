import Foundation
import Glibc
import MAMProtection
import MAMSystem

/// Where a mount daemon's control socket is: its abstract name, found among the listening unix
/// sockets of the network namespace (/proc/net/unix) by the daemon's pid prefix and by inode,
/// which must be one of the daemon's own descriptors (/proc/PID/fd), so a socket another
/// process bound under a look-alike name is never taken for it.
enum DaemonControlSocket {
    /// The abstract name (without the leading NUL) of the control socket of daemon `pid`.
    /// - Returns: nil when the daemon has none, or its descriptors cannot be read (another
    ///   user's daemon).
    static func find(daemon pid: pid_t) -> String? {
        let inodes = socketInodes(of: pid)
        // Other programs' abstract names may hold any bytes: decoded leniently, as ours are ASCII.
        guard !inodes.isEmpty else { return nil }
        let fd = open("/proc/net/unix", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        let table = String(decoding: MountDaemon.readToEnd(fd), as: UTF8.self)
        close(fd)
        let prefix = "@" + DaemonControlRequest.socketPrefix(daemon: pid)
        for line in table.split(separator: "\n").dropFirst() {
            // Num RefCount Protocol Flags Type St Inode Path
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 8, let inode = UInt64(fields[6]), inodes.contains(inode) else { continue }
            let path = String(fields[7])
            if path.hasPrefix(prefix) { return String(path.dropFirst()) }
        }
        return nil
    }

    /// The inodes of the sockets `pid` has open ("socket:[N]" links in /proc/PID/fd).
    static func socketInodes(of pid: pid_t) -> Set<UInt64> {
        guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return [] }
        var inodes: Set<UInt64> = []
        for fd in descriptors {
            guard let target = try? SymbolicLink.readLinkString("/proc/\(pid)/fd/\(fd)"),
                  target.hasPrefix("socket:["), target.hasSuffix("]"),
                  let inode = UInt64(target.dropFirst("socket:[".count).dropLast()) else { continue }
            inodes.insert(inode)
        }
        return inodes
    }

    /// A fresh name for daemon `pid`: its prefix and 16 random hex digits.
    /// - Throws: `MAMError` when the system's random source fails.
    static func freshName(daemon pid: pid_t) throws -> String {
        let random = try SecureRandom.bytes(8)
        return DaemonControlRequest.socketPrefix(daemon: pid) + random.map { byte in
            let hex = String(byte, radix: 16)
            return hex.count == 1 ? "0" + hex : hex
        }.joined()
    }
}
