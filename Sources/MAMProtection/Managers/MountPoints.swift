import Foundation
import MAMSystem

/// The mount points of this process's mount namespace, from /proc/self/mountinfo.
struct MountPoints {
    private let paths: Set<String>

    /// The current mount points; empty when /proc is not mounted (the st_dev check of the
    /// wipe still applies then).
    static func current() -> MountPoints {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else {
            return MountPoints(paths: [])
        }
        var paths = Set<String>()
        for line in text.split(separator: "\n") {
            // Fields: mount id, parent id, major:minor, root, mount point, ...
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count > 4 else { continue }
            paths.insert(unescape(fields[4]))
        }
        return MountPoints(paths: paths)
    }

    /// True when `path` (a kernel path, see `kernelPath(of:)`) is a mount point.
    func contains(_ path: String?) -> Bool {
        guard let path else { return false }
        return paths.contains(path)
    }

    /// The path the kernel has for the open directory `fd` (/proc/self/fd/N), nil when /proc
    /// is missing or the directory was removed.
    static func kernelPath(of fd: Int32) -> String? {
        guard let current = try? ProcessDescriptorPath.currentPath(of: fd),
              current.path.hasPrefix("/"), !current.deleted else { return nil }
        return current.path
    }

    /// mountinfo writes space, tab, newline and backslash as \ooo octal escapes.
    private static func unescape(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        let raw = Array(field.utf8)
        var index = 0
        while index < raw.count {
            if raw[index] == UInt8(ascii: "\\"), index + 3 < raw.count,
               let value = UInt8(String(decoding: raw[(index + 1)...(index + 3)], as: UTF8.self), radix: 8) {
                bytes.append(value)
                index += 4
            } else {
                bytes.append(raw[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
