import Foundation
import MAMSystem

/// The mount points of this process's mount namespace, from /proc/self/mountinfo.
struct MountPoints {
    private let paths: Set<String>

    /// The current mount points; empty when /proc is not mounted (the st_dev check of the
    /// wipe still applies then).
    static func current() -> MountPoints {
        MountPoints(paths: Set(MountInfo.current()?.entries.map(\.mountPoint) ?? []))
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
}
